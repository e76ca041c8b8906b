"""The MLM + NSP objective the training loop minimises, and the watch that says so loudly when its MLM
loss stays at the unigram plateau (see `zencli.tasks.pretraining`)."""

from __future__ import annotations

from typing import Any

import torch

from zencli.data.shards import IGNORE_INDEX
from zencli.train.progress import BaselineWatch

# How far (nats) below the unigram MLM loss the train MLM loss must be to count as learning: runs stuck at the
# plateau sit within ~0.1 of it (docs/design.md, "Pretraining").
PLATEAU_MARGIN = 0.2


def pretraining_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict, torch.Tensor]:
    """MLM + NSP loss of a batch from `PretrainShards.get_batch` (the training loop's loss_fn).

    Metrics: mlm_loss, nsp_loss (means), mlm_acc and nsp_acc as (correct, count) pairs, so the loop sums
    them exactly over micro-batches and processes. `model` may be a DDP wrapper of ZenForPreTraining.
    """
    out = model(**batch)  # MLM logits only at the labelled positions: [N,V]
    labels = batch["mlm_labels"]
    targets = labels[labels != IGNORE_INDEX]  # [N] row-major, the order of mlm_logits
    nsp = batch["nsp_labels"]
    metrics = {
        "mlm_loss": out.mlm_loss.detach(),
        "nsp_loss": out.nsp_loss.detach(),
        "mlm_acc": ((out.mlm_logits.argmax(-1) == targets).sum(), targets.numel()),
        "nsp_acc": ((out.nsp_logits.argmax(-1) == nsp).sum(), nsp.numel()),
    }
    return out.loss, metrics, batch["attention_mask"].sum()


def plateau_watch(baseline: dict[str, Any]) -> BaselineWatch:
    """The training loop's check that the train MLM loss leaves the unigram plateau (see the package doc)."""
    return BaselineWatch(metric="mlm_loss", baseline=baseline["mlm_loss"], label="the unigram MLM loss",
                         mode="min", margin=PLATEAU_MARGIN)
