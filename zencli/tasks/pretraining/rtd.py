"""`objective: rtd` of `zen pretrain`: replaced-token detection (ELECTRA) on the pretraining shards.

The model is `zencli.model.electra.ZenForReplacedTokenDetection` around the ZenForPreTraining that an MLM
run would train (fresh or `init.pretrained`); the shards, the training loop, checkpoints, resume, DDP,
the time budget and the saved model directory are those of MLM (`zencli.tasks.pretraining`). What differs:

- the generator fills the shards' masked positions (whole n-gram or char masking) with samples;
- the discriminator's n-gram slots are matched in the training step on the sequence it reads, after
  sampling (`CorruptedNgramSlots`): the shards' slots, matched on the masked text with the masked
  positions blocked, are not used. The slots are exactly those that `NgramFeaturizer` (the same rules
  and cap as the shards, and as fine-tuning) gives for the corrupted text, so the discriminator learns
  with the kind of n-gram input it gets when fine-tuned, and no slot can carry a replaced character's
  original: a slot spells what the corrupted text holds at its span, and which positions have slots
  depends on the corrupted text alone, not on which positions were masked (blocking masked positions,
  as MLM must, would mark them). Matching is the lexicon's batched double-array matcher on the host;
- the held-out report adds the discriminator's replaced-token detection accuracy and ROC AUC (over every
  real token) and the share of tokens replaced, next to the generator's masked-char accuracy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from zencli.config.pretrain import PretrainConfig
from zencli.data.features import NgramFeaturizer
from zencli.data.pretraining import PretrainDataSettings, random_token_ids, slot_featurizer
from zencli.data.shards import IGNORE_INDEX, PretrainShards
from zencli.metrics.classification import roc_auc
from zencli.model.electra import ZenForReplacedTokenDetection
from zencli.model.pretraining import ZenForPreTraining
from zencli.tasks.pretraining.heldout import add_mlm_sums, mlm_scores
from zencli.text.vocab import Vocab

EVAL_SAMPLING_SEED = 0  # held-out replacements: the same draws at every evaluation
SLOT_INPUTS = ("ngram_ids", "ngram_starts", "ngram_lengths", "ngram_freqs", "ngram_token_type_ids",
               "ngram_attention_mask")  # ZenModel.forward's n-gram slot inputs, each [B,M]


class CorruptedNgramSlots:
    """The n-gram slot inputs of ZenModel for a batch of sequences made in the training step (see the
    module docstring); an `ngram_slots` callable for ZenForReplacedTokenDetection."""

    def __init__(self, featurizer: NgramFeaturizer):
        self.featurizer = featurizer
        # The ZEN 1.0 released rules draw a random subset: seeded from torch's global RNG, which the
        # training loop checkpoints, so a resumed run draws what the uninterrupted one did.
        self.draws = featurizer.rules == "released" and featurizer.released_version == "zen1"

    def __call__(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
                 attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        real = attention_mask.bool()
        n_tok = real.sum(1, keepdim=True)  # [B,1]
        seg_a = (real & (token_type_ids == 0)).sum(1, keepdim=True)  # [B,1] tokens of [CLS] A [SEP]
        host = torch.cat([input_ids, n_tok, seg_a], 1).cpu().numpy()  # one device → host copy: [B,L+2]
        ids, n_tok, seg_a = host[:, :-2], host[:, -2], host[:, -1]
        rng = np.random.default_rng(int(torch.randint(0, 2**62, ()))) if self.draws else None
        slots = self.featurizer.slots_of_padded(ids, n_tok, seg_a - 2, rng).padded()  # [B,M] each
        mask = slots["ngram_mask"]
        types = (slots["ngram_starts"] >= seg_a[:, None]) & (mask == 1)
        # one host → device copy: [6,B,M]
        cols = np.stack([slots["ngram_ids"], slots["ngram_starts"], slots["ngram_lengths"], slots["ngram_freqs"],
                         types, mask]).astype(np.int64)
        out = torch.from_numpy(cols).to(input_ids.device)
        return dict(zip(SLOT_INPUTS, out.unbind(0)))


def corrupted_slots(shards: PretrainShards, vocab: Vocab, lexicon: Any) -> CorruptedNgramSlots:
    """Slots with the rules, cap and n-gram lengths the shards were made with."""
    settings = PretrainDataSettings(**shards.manifest["settings"])
    return CorruptedNgramSlots(slot_featurizer(vocab, lexicon, settings))


def build_rtd_model(cfg: PretrainConfig, discriminator: ZenForPreTraining, vocab: Vocab
                    ) -> ZenForReplacedTokenDetection:
    """The generator and discriminator head around `discriminator` (global torch RNG: seed first).
    Replacements are drawn from the tokens the shards' random replacements use (no special tokens)."""
    samplable = torch.zeros(len(vocab), dtype=torch.bool)
    samplable[torch.from_numpy(random_token_ids(vocab))] = True
    return ZenForReplacedTokenDetection(discriminator, cfg.rtd.generator_size, cfg.rtd.discriminator_weight,
                                        samplable)


def describe(model: ZenForReplacedTokenDetection) -> str:
    """One line: the generator's size and the loss weight."""
    g = model.generator.config
    shared = {id(p) for p in model.generator.embeddings.parameters()}
    own = sum(p.numel() for p in model.generator.parameters() if id(p) not in shared)
    return (f"rtd: generator {g.num_hidden_layers} × {g.hidden_size} ({g.num_attention_heads} head(s)), "
            f"{own:,} parameters besides the shared embeddings; discriminator loss weight "
            f"{model.discriminator_weight:g}")


def _inputs(batch: dict[str, torch.Tensor], nsp: bool) -> dict[str, Any]:
    return {"mlm_labels": batch["mlm_labels"], "token_type_ids": batch["token_type_ids"],
            "attention_mask": batch["attention_mask"], "nsp_labels": batch["nsp_labels"] if nsp else None}


def rtd_loss_fn(slots: CorruptedNgramSlots, nsp: bool):
    """The training loop's loss_fn: generator MLM + λ · replaced-token detection (+ NSP).

    Metrics: mlm_loss, rtd_loss (means), and as exact (correct, count) pairs: mlm_acc (generator, every
    MLM target), rtd_acc (discriminator, every real token), replaced (share of real tokens replaced);
    nsp_loss / nsp_acc with NSP."""

    def loss_fn(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict, torch.Tensor]:
        out = model(batch["input_ids"], ngram_slots=slots, **_inputs(batch, nsp))
        labels = batch["mlm_labels"]
        targets = labels[labels != IGNORE_INDEX]  # [N], the order of mlm_logits
        real = batch["attention_mask"].bool()
        guess = out.rtd_logits[real] > 0  # [T]
        truth = out.replaced[real]  # [T]
        metrics = {
            "mlm_loss": out.mlm_loss.detach(),
            "rtd_loss": out.rtd_loss.detach(),
            "mlm_acc": ((out.mlm_logits.argmax(-1) == targets).sum(), targets.numel()),
            "rtd_acc": ((guess == truth).sum(), truth.numel()),
            "replaced": (truth.sum(), truth.numel()),
        }
        if nsp:
            metrics["nsp_loss"] = out.nsp_loss.detach()
            metrics["nsp_acc"] = ((out.nsp_logits.argmax(-1) == batch["nsp_labels"]).sum(), batch["nsp_labels"].numel())
        return out.loss, metrics, batch["attention_mask"].sum()

    return loss_fn


@torch.no_grad()
def evaluate_rtd(model: ZenForReplacedTokenDetection, heldout: Any, slots: CorruptedNgramSlots, nsp: bool
                 ) -> dict[str, float]:
    """The generator's MLM scores (`zencli.tasks.pretraining.evaluate`'s keys: mlm_loss, mlm_acc,
    masked_acc), the discriminator's over every real token: rtd_loss, rtd_acc (threshold 0.5), rtd_auc
    (ROC AUC of its replaced-probability), replaced (share of tokens replaced: 1 − replaced is the
    accuracy of always answering "original"); nsp_loss / nsp_acc with NSP. Replacements are drawn with
    a fixed seed, so two evaluations of one model agree."""
    device = next(model.parameters()).device
    draws = torch.Generator(device=device).manual_seed(EVAL_SAMPLING_SEED)
    was_training = model.training
    model.eval()
    sums: dict[str, float] = {}
    scores, truths = [], []
    try:
        for batch in heldout.batches():
            batch = {k: v.to(device) for k, v in batch.items()}
            out = model(batch["input_ids"], ngram_slots=slots, sampling_generator=draws, **_inputs(batch, nsp))
            add_mlm_sums(sums, out.mlm_logits, batch, heldout.mask_id)
            real = batch["attention_mask"].bool()
            logit, truth = out.rtd_logits[real].float(), out.replaced[real]  # [T]
            _add(sums, "rtd_loss", F.binary_cross_entropy_with_logits(logit, truth.float(), reduction="sum").item())
            _add(sums, "rtd_ok", ((logit > 0) == truth).sum().item())
            _add(sums, "rtd_n", truth.numel())
            _add(sums, "replaced", truth.sum().item())
            scores.append(logit.cpu())
            truths.append(truth.cpu())
            if nsp:
                labels = batch["nsp_labels"]
                _add(sums, "nsp_loss", F.cross_entropy(out.nsp_logits.float(), labels, reduction="sum").item())
                _add(sums, "nsp_ok", (out.nsp_logits.argmax(-1) == labels).sum().item())
                _add(sums, "nsp_n", labels.numel())
    finally:
        model.train(was_training)
    n = max(sums.get("rtd_n", 0.0), 1.0)
    auc = roc_auc(torch.cat(scores).numpy(), torch.cat(truths).numpy()) if scores else None
    result = {**mlm_scores(sums), "rtd_loss": sums.get("rtd_loss", 0.0) / n, "rtd_acc": sums.get("rtd_ok", 0.0) / n,
              "rtd_auc": float("nan") if auc is None else auc, "replaced": sums.get("replaced", 0.0) / n}
    if nsp:
        result["nsp_loss"] = sums["nsp_loss"] / max(sums["nsp_n"], 1.0)
        result["nsp_acc"] = sums["nsp_ok"] / max(sums["nsp_n"], 1.0)
    return result


def _add(sums: dict[str, float], key: str, value: float) -> None:
    sums[key] = sums.get(key, 0.0) + value
