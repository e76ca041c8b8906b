"""How a fine-tuning moves a pretrained encoder to the user's task: the learning rate the rule picks
(`train.lr: auto`), per-layer rates (`train.layer_lr_decay`, `train.head_lr_scale`) and re-initialised top
layers (`model.reinit_top_layers`).

The rule (measured on the grid of docs/results.md, "Fine-tuning for the user's data"):
- an encoder trained from scratch takes `SCRATCH_LR`: a small new model needs large steps;
- a pretrained encoder takes `WIDTH_LR / hidden_size`, to one significant digit: 3e-4 at width 128, 5e-5
  at BERT-base's 768, the rate BERT's authors fine-tune base with. Wider encoders move further per step
  at the same rate, so the rate falls with the width; a pretrained encoder needs small steps, or its
  pretraining is overwritten before the head has learned anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import nn

SCRATCH_LR = 1e-3
WIDTH_LR = 0.04  # pretrained: lr = WIDTH_LR / hidden_size


@dataclass(frozen=True)
class LearningRate:
    value: float
    why: str  # for the plan line: "auto: pretrained, width 128"; "" when given


def one_digit(x: float) -> float:
    """x to one significant digit: 3.125e-4 → 3e-4."""
    exponent = math.floor(math.log10(x))
    return round(x / 10**exponent) * 10**exponent


def auto_lr(*, pretrained: bool, hidden_size: int) -> LearningRate:
    """The rule's peak learning rate (module docstring)."""
    if not pretrained:
        return LearningRate(SCRATCH_LR, "auto: from scratch")
    return LearningRate(float(f"{one_digit(WIDTH_LR / hidden_size):.0e}"),
                        f"auto: pretrained, {WIDTH_LR:g} / width {hidden_size}")


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
    if parts[0] == "encoder" and parts[1] in ("layer", "word_layers"):
        return num_layers - 1 - int(parts[2])
    if parts[0] in ("embeddings", "word_embeddings"):
        return num_layers
    return 0


def reinit_top_layers(model: nn.Module, k: int) -> None:
    """Give the top `k` char layers of a TaskModel's encoder (and the n-gram layers feeding them) a fresh
    initialisation: their pretrained weights were shaped for the pretraining objective, not the task."""
    encoder = getattr(model, "encoder", None)
    if not k or encoder is None:
        return
    layers = encoder.encoder.layer
    word_layers = getattr(encoder.encoder, "word_layers", None) or []
    for i in range(max(0, len(layers) - k), len(layers)):
        layers[i].apply(encoder.init_weights)
        if i < len(word_layers):
            word_layers[i].apply(encoder.init_weights)
