"""Inference-only preparation: an encoder's matrix weights held in the autocast dtype.

Under `torch.autocast` every nn.Linear casts its fp32 weight and bias to bf16 on every call, because a
training step changes them. A model that only predicts never changes them, so they are cast once here:
autocast then finds them already in its dtype and casts only the activations. Outputs are bit-identical
to plain autocast (the same round-to-nearest cast, done earlier); embeddings and LayerNorms keep fp32, as
autocast leaves them. The cast weights only work under autocast: a prepared model must always run
inside it.
"""

from __future__ import annotations

import torch
from torch import nn


def hold_linear_weights_in(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """Cast the weight and bias of every nn.Linear in `model` to `dtype` (frozen), in place; returns it."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            for name in ("weight", "bias"):
                p = getattr(module, name)
                if p is not None and p.dtype != dtype:
                    setattr(module, name, nn.Parameter(p.detach().to(dtype), requires_grad=False))
    return model
