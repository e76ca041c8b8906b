"""The exponential moving average of the weights (`ema_decay`): a copy of the model whose weights are the
average, only ever evaluated, and updated after every optimizer step without host syncs."""

from __future__ import annotations

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


def averaged_model(model: nn.Module, decay: float) -> AveragedModel:
    """The average of `model`'s weights; buffers follow the model's. Its checkpoint format is
    AveragedModel's; `update_ema` does its update."""
    return AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=False)


@torch.no_grad()
def update_ema(ema: AveragedModel, model: nn.Module, decay: float, started: bool) -> None:
    """`AveragedModel.update_parameters` (EMA, buffers copied) without its host syncs: it compares its
    step counter, a CPU tensor, and copies it to the GPU every step. The same foreach ops otherwise.
    `started`: the average holds weights already (False before the first update)."""
    averaged, weights = list(ema.parameters()), list(model.parameters())
    if started:
        torch._foreach_lerp_(averaged, weights, 1 - decay)
    else:
        torch._foreach_copy_(averaged, weights)  # the average starts at the weights after the first step
    for b_avg, b in zip(ema.module.buffers(), model.buffers()):
        b_avg.copy_(b)
    ema.n_averaged += 1  # stays on the CPU: the checkpoint's "ema" state keeps its format
