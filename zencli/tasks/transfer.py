"""How a fine-tuning moves a pretrained encoder to the user's task: the learning rate the rule picks
(`train.lr: auto`), per-layer rates (`train.layer_lr_decay`, `train.head_lr_scale`) and re-initialised top
layers (`model.reinit_top_layers`).

The rule (measured on the grid of docs/results.md, "Fine-tuning for the user's data"):
- an encoder trained from scratch takes `SCRATCH_LR`: a small new model needs large steps;
- a pretrained encoder takes a rate that falls with its width, log-linear between two measured anchors:
  1e-3 at width 128 (the best of 1e-4 / 3e-4 / 1e-3 on every subset of zen's grid, 500 sentences to all of
  PD98 and the reviews) and 5e-5 at BERT-base's 768 (the rate BERT's authors fine-tune base with), so
  3e-4 at 256 and 3e-5 at 1024; never above the from-scratch rate. A wider layer sums more updates of
  the same size, so it needs smaller ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import nn

SCRATCH_LR = 1e-3
ANCHORS = ((128, 1e-3), (768, 5e-5))  # (width, rate) of a pretrained encoder: the rule runs through both


@dataclass(frozen=True)
class LearningRate:
    value: float
    why: str  # for the plan line: "auto: pretrained, width 128"; "" when given


def one_digit(x: float) -> float:
    """x to one significant digit: 3.125e-4 → 3e-4."""
    exponent = math.floor(math.log10(x))
    return round(x / 10**exponent) * 10**exponent


def auto_lr(*, pretrained: bool, hidden_size: int) -> LearningRate:
    """The rule's peak learning rate (module docstring), to one significant digit."""
    if not pretrained:
        return LearningRate(SCRATCH_LR, "auto: from scratch")
    (w0, lr0), (w1, lr1) = ANCHORS
    slope = math.log(lr1 / lr0) / math.log(w1 / w0)  # about -1.67
    rate = min(SCRATCH_LR, one_digit(lr0 * (hidden_size / w0) ** slope))
    return LearningRate(float(f"{rate:.0e}"), f"auto: pretrained, width {hidden_size}")


def lr_scales(model: nn.Module, *, layer_decay: float, head_scale: float) -> dict[str, float]:
    """Parameter name → multiplier of the peak rate, for a TaskModel (`encoder` ZenModel, `chte`, `head`).

    Layer-wise decay (ELECTRA's): the top char layer learns at 1, the one below at `layer_decay`, …, the
    embeddings at `layer_decay` ** num_layers; an n-gram layer learns as the char layer it feeds, the pooler
    as the top layer. The parts a fine-tuning adds on a pretrained encoder (the head, CHTE on top) learn
    at `head_scale`. Only multipliers other than 1 are listed."""
    out: dict[str, float] = {}
    encoder = getattr(model, "encoder", None)
    if encoder is not None and layer_decay != 1.0:
        n = encoder.config.num_hidden_layers
        for name, _ in encoder.named_parameters():
            depth = _depth_from_top(name, n)
            if depth:
                out[f"encoder.{name}"] = layer_decay**depth
    if head_scale != 1.0:
        for part in ("head", "chte") if encoder is not None else ("head",):
            module = getattr(model, part, None)
            if module is not None:
                out.update({f"{part}.{name}": head_scale for name, _ in module.named_parameters()})
    return out


def _depth_from_top(name: str, num_layers: int) -> int:
    """How many char layers lie above the parameter `name` of a ZenModel (0: the top layer, the pooler)."""
    parts = name.split(".")
    if parts[0] == "encoder" and parts[1] in ("layer", "ngram_layers"):
        return num_layers - 1 - int(parts[2])
    if parts[0] in ("embeddings", "ngram_embeddings"):
        return num_layers
    return 0


def reinit_top_layers(model: nn.Module, k: int) -> None:
    """Give the top `k` char layers of a TaskModel's encoder (and the n-gram layers feeding them) a fresh
    initialisation: their pretrained weights were shaped for the pretraining objective, not the task."""
    encoder = getattr(model, "encoder", None)
    if not k or encoder is None:
        return
    layers = encoder.encoder.layer
    ngram_layers = getattr(encoder.encoder, "ngram_layers", None) or []
    for i in range(max(0, len(layers) - k), len(layers)):
        layers[i].apply(encoder.init_weights)
        if i < len(ngram_layers):
            ngram_layers[i].apply(encoder.init_weights)
