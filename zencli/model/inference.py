"""Inference-only preparation: an encoder's matrix weights held in the autocast dtype.

Under `torch.autocast` every nn.Linear casts its fp32 weight matrix to bf16 on every call, because a
training step changes it. A model that only predicts never changes it, so it is cast once here: autocast
then finds it already in its dtype and casts only the activations (and the small bias). Outputs are
bit-identical to plain autocast (the same round-to-nearest cast, done earlier); biases, embeddings and
LayerNorms keep fp32, as autocast leaves them. The cast weights only work under autocast: a prepared
encoder must always run inside it.
"""

from __future__ import annotations

import torch
from torch import nn


def hold_linear_weights_in(encoder: nn.Module, dtype: torch.dtype) -> nn.Module:
    """Cast the weight matrix of every nn.Linear in `encoder` to `dtype` (frozen), in place; returns it."""
    for module in encoder.modules():
        if isinstance(module, nn.Linear) and module.weight.dtype != dtype:
            module.weight = nn.Parameter(module.weight.detach().to(dtype), requires_grad=False)
    return encoder
