"""Held-out evaluation: a fixed subset of held-out examples, the MLM and NSP scores on it, and the best
context-free baseline scored on the same targets (see "Held-out accuracy" in `zencli.tasks.pretraining`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from zencli.data.shards import IGNORE_INDEX, PretrainShards
from zencli.model.pretraining import ZenForPreTraining

BASELINE_MAX_SHARDS = 20  # training shards counted for the unigram baseline (200k examples at the default size)


@dataclass
class HeldoutSet:
    """A fixed subset of held-out examples: `limit` indices spread evenly over the shards, visited in
    order of length (batches of similar length waste no compute on padding; the sums are the same)."""

    shards: PretrainShards
    mask_id: int
    batch_size: int = 64
    limit: int = 2000
    indices: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.shards)
        k = min(self.limit, n)
        chosen = np.unique(np.linspace(0, n - 1, k).round().astype(np.int64))
        self.indices = chosen[np.argsort(self.shards.lengths[chosen], kind="stable")]

    def batches(self):
        for lo in range(0, len(self.indices), self.batch_size):
            yield self.shards.get_batch(self.indices[lo:lo + self.batch_size])


def _on(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in batch.items()}


def add_mlm_sums(sums: dict[str, float], mlm_logits: torch.Tensor, batch: dict[str, torch.Tensor],
                 mask_id: int) -> None:
    """Add a batch's MLM loss and accuracy sums (all targets, and [MASK]-shown targets) to `sums`."""
    labels = batch["mlm_labels"]
    where = labels != IGNORE_INDEX
    targets = labels[where]  # [N]
    shown_mask = batch["input_ids"][where] == mask_id  # [N]
    ok = mlm_logits.argmax(-1) == targets
    for key, value in (("mlm_loss", F.cross_entropy(mlm_logits.float(), targets, reduction="sum").item()),
                       ("mlm_ok", ok.sum().item()), ("mlm_n", targets.numel()),
                       ("masked_ok", (ok & shown_mask).sum().item()), ("masked_n", shown_mask.sum().item())):
        sums[key] = sums.get(key, 0.0) + value


def mlm_scores(sums: dict[str, float]) -> dict[str, float]:
    """mlm_loss, mlm_acc, masked_acc from `add_mlm_sums`'s sums."""
    n = max(sums.get("mlm_n", 0.0), 1.0)
    return {"mlm_loss": sums.get("mlm_loss", 0.0) / n, "mlm_acc": sums.get("mlm_ok", 0.0) / n,
            "masked_acc": sums.get("masked_ok", 0.0) / max(sums.get("masked_n", 0.0), 1.0)}


@torch.no_grad()
def evaluate(model: ZenForPreTraining, heldout: HeldoutSet) -> dict[str, float]:
    """MLM loss and accuracies (all targets, and [MASK]-shown targets), NSP loss and accuracy."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    sums = dict.fromkeys(("nsp_loss", "nsp_ok", "nsp_n"), 0.0)
    try:
        for batch in heldout.batches():
            batch = _on(batch, device)
            out = model(**batch)
            add_mlm_sums(sums, out.mlm_logits, batch, heldout.mask_id)
            nsp = batch["nsp_labels"]
            sums["nsp_loss"] += F.cross_entropy(out.nsp_logits.float(), nsp, reduction="sum").item()
            sums["nsp_ok"] += (out.nsp_logits.argmax(-1) == nsp).sum().item()
            sums["nsp_n"] += nsp.numel()
    finally:
        model.train(was_training)
    return {
        **mlm_scores(sums),
        "nsp_loss": sums["nsp_loss"] / max(sums["nsp_n"], 1),
        "nsp_acc": sums["nsp_ok"] / max(sums["nsp_n"], 1),
    }


def unigram_baseline(train: PretrainShards, heldout: HeldoutSet, vocab_size: int,
                     max_shards: int = BASELINE_MAX_SHARDS) -> dict[str, Any]:
    """The best context-free predictor, scored on the held-out examples `evaluate` uses.

    Unigram of the MLM targets of (up to `max_shards`) training shards: accuracy of always answering its
    most frequent token (over all targets and over [MASK]-shown ones), and the cross-entropy (nats) of
    the add-one smoothed unigram on the held-out targets.
    """
    counts = np.zeros(vocab_size, np.int64)
    for name in train.names[:max_shards]:  # mlm_ids.npy: the documented shard column of MLM targets
        ids = np.load(train.dir / name / "mlm_ids.npy", mmap_mode="r")
        counts += np.bincount(np.asarray(ids, np.int64), minlength=vocab_size)[:vocab_size]
    top = int(counts.argmax())
    logp = np.log((counts + 1) / (counts.sum() + vocab_size))
    ok = n = ok_masked = n_masked = 0
    nll = 0.0
    for batch in heldout.batches():
        labels = batch["mlm_labels"].numpy()
        where = labels != IGNORE_INDEX
        targets = labels[where]
        shown_mask = batch["input_ids"].numpy()[where] == heldout.mask_id
        hit = targets == top
        ok += int(hit.sum())
        n += len(targets)
        ok_masked += int((hit & shown_mask).sum())
        n_masked += int(shown_mask.sum())
        nll -= float(logp[targets].sum())
    return {
        "prediction_id": top,
        "training_targets_counted": int(counts.sum()),
        "mlm_acc": ok / max(n, 1),
        "masked_acc": ok_masked / max(n_masked, 1),
        "mlm_loss": nll / max(n, 1),
        "heldout_targets": n,
    }

