"""One Transformer layer, post-LN as in BERT; the same layer type serves both towers.

    a = LN(x + dropout(W_o · attention(x)))
    y = LN(a + dropout(W_2 · act(W_1 · a)))

The attention is relative (ZEN 2.0) or plain (ZEN 1.0, BERT), chosen by the config. Module names are
the released ones (`attention.self`, `attention.output`, `intermediate`, `output`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from zencli.model.attention import Packing, SelfAttention
from zencli.model.config import ZenConfig
from zencli.model.relative_attention import RelativeSelfAttention


def activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """Built-in fused activations; "gelu" is the erf form the released code writes out by hand."""
    return {
        "gelu": F.gelu,
        "gelu_new": partial(F.gelu, approximate="tanh"),
        "relu": F.relu,
        "swish": F.silu,
        "silu": F.silu,
    }[name]


class ResidualOutput(nn.Module):
    """dense → dropout → LayerNorm(· + residual)."""

    def __init__(self, d_in: int, config: ZenConfig):
        super().__init__()
        self.dense = nn.Linear(d_in, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class AttentionBlock(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        self.self = RelativeSelfAttention(config) if config.relative_positions else SelfAttention(config)
        self.output = ResidualOutput(config.hidden_size, config)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, packing: Packing | None = None) -> torch.Tensor:
        return self.output(self.self(x, mask, packing), x)


class Intermediate(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = activation(config.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(x))


class TransformerLayer(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        self.attention = AttentionBlock(config)
        self.intermediate = Intermediate(config)
        self.output = ResidualOutput(config.intermediate_size, config)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, packing: Packing | None = None) -> torch.Tensor:
        # x: [B,L,H], mask: [B,1,1,L] additive or None → [B,L,H]; with `packing`, x is the real rows [N,H]
        a = self.attention(x, mask, packing)
        return self.output(self.intermediate(a), a)
