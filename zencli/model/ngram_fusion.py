"""N-gram → character fusion: h ← h + P·g after every character layer.

P [B,L,M] says how much of n-gram slot k goes into character i. P[b,i,k] ≠ 0 iff char i lies inside
the n-gram of slot k (start_k ≤ i < start_k + len_k; padding slots have length 0):
- ZEN 1.0 ("binary"): 1.
- ZEN 2.0 ("frequency", paper eq. 2): c_k / (Σ_{k' covering i} c_k' + 1e-10), c = lexicon frequency.

P is built here from the compact slot description (starts, lengths, freqs: [B,M]) in batched tensor
code; the data pipeline never has to ship a dense [L,M] matrix per example.

Numerics: the released code divides in float64 and then casts to float32; zen divides in float32 with
the per-char sums taken exactly (float64 over integer counts). The two differ by at most one float32
ulp (≤ 6e-8 for weights ≤ 1); on the reference fixtures they are identical.
"""

from __future__ import annotations

import torch

from zencli.model.config import NgramWeighting


def covering(starts: torch.Tensor, lengths: torch.Tensor, seq_len: int) -> torch.Tensor:
    """covers[b,i,k] = starts[b,k] ≤ i < starts[b,k] + lengths[b,k]: [B,L,M] bool."""
    i = torch.arange(seq_len, device=starts.device)[None, :, None]  # [1,L,1]
    s = starts[:, None, :]  # [B,1,M]
    return (i >= s) & (i < s + lengths[:, None, :])


def coverage_sums(starts: torch.Tensor, lengths: torch.Tensor, freqs: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Σ_{k covering i} c_k for every char i: [B,L] float64, exact for integer counts.

    A difference array over positions (+c at the start, −c one past the end, cumulative sum), so the
    cost is O(B·(L+M)) with no [B,L,M] temporary.
    """
    B = starts.shape[0]
    c = torch.where(lengths > 0, freqs, 0).to(torch.float64)  # [B,M]
    diff = torch.zeros(B, seq_len + 1, dtype=torch.float64, device=starts.device)
    diff.scatter_add_(1, starts.clamp(0, seq_len), c)
    diff.scatter_add_(1, (starts + lengths).clamp(0, seq_len), -c)
    return diff.cumsum(1)[:, :seq_len]


def ngram_position_matrix(
    starts: torch.Tensor,
    lengths: torch.Tensor,
    freqs: torch.Tensor | None,
    seq_len: int,
    weighting: NgramWeighting = "frequency",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """P [B,L,M] from slot starts / lengths / frequencies [B,M] (starts index the token list including
    [CLS]; padding slots have length 0).

    "int_cast" reproduces the released ZEN 2.0 token-level and MRC scripts, which turn the float64
    frequency matrix into integers: every weight below 1 truncates to 0, so only a char covered by a
    single n-gram whose c/(c+1e-10) rounds up to 1.0 in float64 (c ≳ 2e6) keeps a 1.
    """
    covers = covering(starts, lengths, seq_len)  # [B,L,M]
    if weighting == "binary":
        return covers.to(dtype)
    if freqs is None:
        raise ValueError(f"ngram weighting {weighting!r} needs the n-gram frequencies")
    total = coverage_sums(starts, lengths, freqs, seq_len)  # [B,L] float64
    if weighting == "frequency":
        denom = (total + 1e-10).to(torch.float32)[:, :, None]  # [B,L,1]
        weight = freqs.to(torch.float32)[:, None, :] / denom  # [B,L,M]
        return torch.where(covers, weight, 0.0).to(dtype)
    if weighting == "int_cast":
        c = freqs.to(torch.float64)
        sole = covers & (total[:, :, None] == c[:, None, :])  # this slot is the only (non-zero) cover
        rounds_to_one = (c / (c + 1e-10)) >= 1.0  # [B,M]
        return (sole & rounds_to_one[:, None, :]).to(dtype)
    raise ValueError(f"unknown ngram weighting {weighting!r}")


def ngram_sum(P: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """P [B,L,M] · g [B,M,H] → [B,L,H]: what the n-grams add to each char (h ← h + P·g)."""
    return torch.bmm(P.to(g.dtype), g)
