"""Plain multi-head self-attention (BERT, ZEN 1.0): softmax(Q·Kᵀ/√d + mask)·V per head.

`mask` is additive, [B,1,1,L] with 0 for keys to attend and −10000 for padding, as the released code
builds it. `attend` computes the product for both attention types (see there for how).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from zencli.model.config import ZenConfig


@dataclass
class Packing:
    """The real positions of a padded [B,T] batch, gathered once: a layer runs its position-wise maths
    (linears, LayerNorm, activation) on those rows only ([N,H]) and unpacks them into [B,T,·], zeros at
    the padding, just for attention, which masks the padding anyway."""

    index: torch.Tensor  # [N]: flat indices into B·T of the real positions
    batch: int
    length: int

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(-1, x.shape[-1]).index_select(0, self.index)  # [B,T,H] → [N,H]

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        out = x.new_zeros(self.batch * self.length, x.shape[-1])
        return out.index_copy(0, self.index, x).view(self.batch, self.length, -1)  # [N,H] → [B,T,H]


def padded(x: torch.Tensor, packing: Packing | None) -> torch.Tensor:
    return x if packing is None else packing.unpack(x)


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    # [B,L,H] → [B,A,L,d]
    B, L, H = x.shape
    return x.view(B, L, num_heads, H // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    # [B,A,L,d] → [B,L,H]
    B, A, L, d = x.shape
    return x.transpose(1, 2).reshape(B, L, A * d)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, dropout_p: float, *,
           rel_q: torch.Tensor | None = None, rel_k: torch.Tensor | None = None) -> torch.Tensor:
    """softmax((Q·Kᵀ + Q'·K'ᵀ)/√d + bias)·V per head, dropout on the weights: q, rel_q [B,A,L,d], k, v
    [B,A,S,d], rel_k [S,d] shared by batch and heads (or None), additive bias broadcastable to [B,A,L,S]
    → [B,A,L,d]. `dropout_p` must be 0 in eval mode. d is q's head size (the √d of the scores).

    The optional second product Q'·K'ᵀ is how ZEN 2.0's relative position term enters without a
    [B,A,L,S] bias that needs a gradient (relative_attention.py). The kernels, each the faster one where
    it runs (docs/design.md, "Attention kernels"):
    - GPU: one scaled_dot_product_attention call over concatenated heads, [Q|Q']·[K|K']ᵀ, with only the
      padding mask: SDPA's fused kernels, no score matrix stored for the backward;
    - CPU, training: the scores as two matmuls added in place, the mask broadcast-added, softmax,
      dropout, ·V;
    - CPU, no gradient (inference, evaluation): torch's CPU SDPA kernel, the position term in its additive
      bias (bias None: no padding and no position term).
    """
    if bias is not None:
        bias = bias.to(q.dtype)
    if q.device.type != "cpu":
        return _attend_fused(q, k, v, bias, dropout_p, rel_q, rel_k)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (q, k, v, rel_q, bias)):
        return _attend_unfused(q, k, v, bias, dropout_p, rel_q, rel_k)
    if rel_q is not None:  # the position term as SDPA's additive bias; 1/√d scales the small [S,d] table
        position = torch.matmul(rel_q, (rel_k.to(q.dtype) * q.shape[-1] ** -0.5).transpose(0, 1))  # [B,A,L,S]
        bias = position if bias is None else position.add_(bias)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p)


def _attend_unfused(q, k, v, bias, dropout_p, rel_q, rel_k):
    scale = q.shape[-1] ** -0.5
    scores = torch.matmul(q * scale, k.transpose(-1, -2))  # [B,A,L,S]
    if rel_q is not None:
        scores += torch.matmul(rel_q * scale, rel_k.to(rel_q.dtype).transpose(0, 1))  # [B,A,L,d]·[d,S]
    if bias is not None:
        scores += bias
    probs = torch.softmax(scores, dim=-1)
    if dropout_p > 0:
        probs = F.dropout(probs, dropout_p)
    return torch.matmul(probs, v)


def _attend_fused(q, k, v, bias, dropout_p, rel_q, rel_k):
    scale = q.shape[-1] ** -0.5  # of the content head size d, also when the heads are concatenated to 2d
    if rel_q is not None:
        q = torch.cat([q, rel_q], dim=-1)  # [B,A,L,2d]
        k = torch.cat([k, rel_k.to(k.dtype).expand(*k.shape[:-1], rel_k.shape[-1])], dim=-1)  # [B,A,S,2d]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p, scale=scale)


class SelfAttention(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        H = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.query = nn.Linear(H, H)
        self.key = nn.Linear(H, H)
        self.value = nn.Linear(H, H)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, packing: Packing | None = None) -> torch.Tensor:
        # x: [B,L,H] (or packed [N,H]), mask: [B,1,1,L] additive or None (no padding) → x's shape
        q, k, v = (split_heads(padded(t, packing), self.num_heads) for t in (self.query(x), self.key(x), self.value(x)))
        ctx = merge_heads(attend(q, k, v, mask, self.dropout_p if self.training else 0.0))
        return ctx if packing is None else packing.pack(ctx)
