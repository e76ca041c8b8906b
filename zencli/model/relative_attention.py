"""ZEN 2.0 self-attention with relative positions (paper eq. 4–6; Transformer-XL without memory).

Per head (d = H/A), for query position q and key position k:

    score[q,k] = ((Q_q + u)·K_k + (Q_q + v)·R_{k−q}) / √d + mask_k

R_p is a fixed sinusoid shared by all heads, `[sin(p·ω_0 … p·ω_{d/2−1}) | cos(…)]` (halves, not
interleaved) with ω_j = 10000^(−j/(d/2−1)), exactly as the released code builds it. u and v are per-head
biases; the released state dict calls u `r_r_bias` and v `r_w_bias` (swapped w.r.t. Transformer-XL's
names) and zen keeps those names. The released model has no W_r: `relative_projection=True` adds the
paper's trainable W_r (eq. 4) the Transformer-XL way — the sinusoid then has the model width H and
W_r [H,H] maps it to one d-vector per head.

How it is computed (released form, no W_r): the position term is a sum of sinusoids of the offset, and
each splits into a query part times a key part by the angle-difference identities. With ω_j as above,
x = Q_q + v split into halves a, b (the sin and cos halves of R), and c_i = cos(i·ω), s_i = sin(i·ω):

    x·R_{k−q} = Σ_j a_j sin((k−q)ω_j) + b_j cos((k−q)ω_j)
              = Σ_j (a_j c_q + b_j s_q)_j s_k,j + (b_j c_q − a_j s_q)_j c_k,j  =  Q'_q · K'_k

with Q'_q = [a∘c_q + b∘s_q | b∘c_q − a∘s_q] (a rotation of x by its own position) and K'_k = [s_k | c_k]
(the same for every head and batch row). So the whole score is one product of width 2d,
[Q+u | Q']·[K | K']ᵀ/√d + mask, with no [B,A,L,L] position matrix (`attention.attend` picks the kernel).
With W_r, R_p = W_r·sinusoid_p has no such split, so (Q+v)·R is taken against the 2L−1 offsets
([B,A,L,2L−1]) and skewed into a [B,A,L,L] additive bias as a strided view.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

from zencli.model.attention import Packing, attend, merge_heads, padded, split_heads
from zencli.model.config import ZenConfig
from zencli.model.export_mode import export_max_length, is_exporting


def relative_sinusoid(length: int, dim: int, device: torch.device | None = None) -> torch.Tensor:
    """R_p for p = −(L−1) … L−1, row p + L − 1: [2L−1, dim] float32.

    Same float32 operations as the released table, so the values are the released ones bit for bit.
    """
    half = dim // 2
    omega = torch.exp(torch.arange(half, dtype=torch.float32, device=device) * -(math.log(10000.0) / (half - 1)))
    p = torch.arange(-(length - 1), length, dtype=torch.float32, device=device)
    angles = p[:, None] * omega[None, :]  # [2L−1, d/2]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


def skew(by_offset: torch.Tensor) -> torch.Tensor:
    """[..., L, 2L−1] indexed by offset k−q+L−1 → [..., L, L] indexed by key k, without a copy.

    In a contiguous row-major [L, 2L−1] block, element (q, k−q+L−1) sits at q·(2L−1) + k − q + L − 1
    = q·(2L−2) + k + (L−1): a strided view with row stride 2L−2 starting at offset L−1 (half the cost
    of a gather, forward and backward).
    """
    t = by_offset.contiguous()
    L, W = t.shape[-2], t.shape[-1]
    return t.as_strided((*t.shape[:-1], L), (*t.stride()[:-2], W - 1, 1), t.storage_offset() + L - 1)


@functools.lru_cache(maxsize=64)
def rotation_tables(length: int, dim: int, device: torch.device | None = None, dtype: torch.dtype = torch.float32
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """C = [cos | cos], S = [sin | −sin] of i·ω_j for positions i = 0 … L−1 and the released ω_j (float32
    values, as in `relative_sinusoid`), so that `rotate(x, C, S)` = x∘C + swap(x)∘S; and the key sinusoid
    K' = [sin | cos]: three [L, dim] tables in `dtype`. The angles are computed in float64, so the result
    equals the released table's (which rounds each angle p·ω to float32 first) to within that rounding.

    Cached per (length, dtype): every layer of every step asks for the same few, so no layer casts or
    rebuilds a table (read only)."""
    with torch.inference_mode(False):  # normal tensors: a cached table made in inference mode may serve training
        half = dim // 2
        omega = torch.exp(torch.arange(half, dtype=torch.float32, device=device) * -(math.log(10000.0) / (half - 1)))
        angles = torch.arange(length, dtype=torch.float64, device=device)[:, None] * omega.double()[None, :]
        cos, sin = angles.cos().float(), angles.sin().float()
        tables = torch.cat([cos, cos], 1), torch.cat([sin, -sin], 1), torch.cat([sin, cos], 1)
        return tuple(t.to(dtype) for t in tables)


def position_tables(length: int, dim: int, device: torch.device | None = None, dtype: torch.dtype = torch.float32
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`rotation_tables(length, …)`; while exporting a graph, the first `length` rows of the tables for the
    graph's longest sequence (the same values: each row depends on its position only), so the graph
    holds one constant table and slices it for any length (zencli.model.export_mode)."""
    longest = export_max_length()
    if longest is None:
        return rotation_tables(length, dim, device, dtype)
    return tuple(t[:length] for t in rotation_tables(longest, dim, device, dtype))


def skew_by_gather(by_offset: torch.Tensor) -> torch.Tensor:
    """`skew` as a gather (index k − q + L − 1): the same values, for graphs that have no strided views."""
    L = by_offset.shape[-2]
    q = torch.arange(L, device=by_offset.device)
    index = (q[None, :] - q[:, None] + L - 1).expand(*by_offset.shape[:-1], L)  # [..., L(q), L(k)]
    return by_offset.gather(-1, index)


def rotate(x: torch.Tensor, C: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """Q' = [a∘c + b∘s | b∘c − a∘s] for x = [a | b], as x∘C + [b | a]∘S: [..., L, d] with C, S [L, d]."""
    a, b = x.chunk(2, dim=-1)
    return torch.addcmul(x * C, torch.cat([b, a], dim=-1), S)


class RelativeSelfAttention(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        H, A = config.hidden_size, config.num_attention_heads
        self.num_heads = A
        self.head_size = H // A
        self.query = nn.Linear(H, H)
        self.key = nn.Linear(H, H)
        self.value = nn.Linear(H, H)
        self.r_r_bias = nn.Parameter(torch.zeros(A, self.head_size))  # u: content bias
        self.r_w_bias = nn.Parameter(torch.zeros(A, self.head_size))  # v: position bias
        self.r_proj = nn.Linear(H, H, bias=False) if config.relative_projection else None  # W_r
        self.dropout_p = config.attention_probs_dropout_prob

    def position_table(self, length: int, device: torch.device) -> torch.Tensor:
        """R for this layer with W_r: [A, 2L−1, d]."""
        R = self.r_proj(relative_sinusoid(length, self.num_heads * self.head_size, device))  # [2L−1,H]
        return R.view(2 * length - 1, self.num_heads, self.head_size).transpose(0, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, packing: Packing | None = None) -> torch.Tensor:
        # x: [B,L,H] (or packed [N,H]), mask: [B,1,1,L] additive or None (no padding) → x's shape
        q = split_heads(padded(self.query(x), packing), self.num_heads)  # [B,A,L,d]
        content = q + self.r_r_bias.to(q.dtype)[:, None, :]  # Q+u
        k = split_heads(padded(self.key(x), packing), self.num_heads)
        v = split_heads(padded(self.value(x), packing), self.num_heads)
        L = content.shape[2]
        # Q+v, made contiguous: the heads are a strided view of [B,L,H], and the rotation and the position
        # product run faster on dense [B,A,L,d] memory than on that view.
        positional = (content + (self.r_w_bias - self.r_r_bias).to(content.dtype)[:, None, :]).contiguous()
        dropout_p = self.dropout_p if self.training else 0.0
        if self.r_proj is None:
            C, S, key = position_tables(L, self.head_size, x.device, content.dtype)  # [L,d] each
            ctx = attend(content, k, v, mask, dropout_p, rel_q=rotate(positional, C, S), rel_k=key)
        else:
            R = self.position_table(L, x.device).to(content.dtype)  # [A,2L−1,d]
            by_offset = torch.matmul(positional * (1.0 / math.sqrt(self.head_size)),
                                     R.transpose(-1, -2))  # [B,A,L,2L−1]
            bias = skew_by_gather(by_offset) if is_exporting() else skew(by_offset)  # [B,A,L,L]
            ctx = attend(content, k, v, bias if mask is None else bias + mask.to(bias.dtype), dropout_p)
        ctx = merge_heads(ctx)
        return ctx if packing is None else packing.pack(ctx)
