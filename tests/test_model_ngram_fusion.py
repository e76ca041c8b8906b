"""The slot→char matrix P built from compact slot descriptions, against the released construction."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from zencli.model.ngram_fusion import coverage_sums, ngram_position_matrix, ngram_sum


def released_matrix(starts, lengths, freqs, seq_len, cast_to_int=False) -> np.ndarray:
    """The released per-example construction: fill freqs into a float64 [L,M] matrix, divide by row
    sums + 1e-10, cast to float32 (or to int, as the token-level script does)."""
    out = []
    for s_row, l_row, f_row in zip(starts, lengths, freqs):
        m = np.zeros((seq_len, len(s_row)), dtype=np.float64)
        for k, (s, n, c) in enumerate(zip(s_row, l_row, f_row)):
            if n > 0:
                m[s:s + n, k] = c
        m = m / (m.sum(1, keepdims=True) + 1e-10)
        out.append(m.astype(np.int64).astype(np.float32) if cast_to_int else m.astype(np.float32))
    return np.stack(out)


slots = st.integers(1, 3).flatmap(
    lambda B: st.integers(4, 20).flatmap(
        lambda L: st.tuples(
            st.just(L),
            st.lists(
                st.lists(
                    st.tuples(st.integers(0, L - 1), st.integers(0, 7), st.integers(1, 5_000_000)),
                    min_size=1, max_size=10,
                ),
                min_size=B, max_size=B,
            ),
        )
    )
)


def to_tensors(L: int, rows: list) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    M = max(len(r) for r in rows)
    starts = torch.zeros(len(rows), M, dtype=torch.long)
    lengths = torch.zeros_like(starts)
    freqs = torch.zeros_like(starts)
    for b, r in enumerate(rows):
        for k, (s, n, c) in enumerate(r):
            starts[b, k], lengths[b, k], freqs[b, k] = s, min(n, L - s), c
    return starts, lengths, freqs


@settings(max_examples=60, deadline=None)
@given(slots)
def test_frequency_weights_match_released_construction(case) -> None:
    L, rows = case
    starts, lengths, freqs = to_tensors(L, rows)
    P = ngram_position_matrix(starts, lengths, freqs, L, "frequency")
    want = released_matrix(starts.tolist(), lengths.tolist(), freqs.tolist(), L)
    np.testing.assert_allclose(P.numpy(), want, rtol=0, atol=1.2e-7)  # ≤ 1 float32 ulp of a weight ≤ 1


@settings(max_examples=40, deadline=None)
@given(slots)
def test_binary_and_int_cast(case) -> None:
    L, rows = case
    starts, lengths, freqs = to_tensors(L, rows)
    covers = released_matrix(starts.tolist(), lengths.tolist(), np.ones_like(freqs.numpy()).tolist(), L) > 0
    assert torch.equal(ngram_position_matrix(starts, lengths, None, L, "binary"), torch.from_numpy(covers).float())
    int_cast = released_matrix(starts.tolist(), lengths.tolist(), freqs.tolist(), L, cast_to_int=True)
    assert torch.equal(ngram_position_matrix(starts, lengths, freqs, L, "int_cast"), torch.from_numpy(int_cast))


def test_int_cast_keeps_only_large_sole_covers() -> None:
    # c/(c+1e-10) is below 1.0 in float64 for small c (→ 0 after the cast), exactly 1.0 for large c.
    starts = torch.tensor([[1, 1, 5]])
    lengths = torch.tensor([[2, 3, 2]])
    freqs = torch.tensor([[40, 50_000_000, 90_000_000]])
    P = ngram_position_matrix(starts, lengths, freqs, 8, "int_cast")
    assert P[0, :, 0].sum() == 0  # small count: truncated away
    assert P[0, 3, 1] == 1 and P[0, 1, 1] == 0  # sole cover at char 3; shared with slot 0 at chars 1-2
    assert P[0, 5, 2] == 1 and P[0, 6, 2] == 1


def test_coverage_sums_and_padding_slots() -> None:
    starts = torch.tensor([[1, 2, 0, 0]])
    lengths = torch.tensor([[3, 2, 0, 0]])  # two padding slots (length 0) must add nothing
    freqs = torch.tensor([[10, 5, 99, 0]])
    sums = coverage_sums(starts, lengths, freqs, 6)
    assert sums.tolist() == [[0.0, 10.0, 15.0, 15.0, 0.0, 0.0]]
    P = ngram_position_matrix(starts, lengths, freqs, 6)
    assert P[0, :, 2:].abs().sum() == 0 and P[0, 0].abs().sum() == 0
    torch.testing.assert_close(P[0, 2], torch.tensor([10 / 15, 5 / 15, 0.0, 0.0]))


def test_slots_beyond_the_sequence_are_cut_not_wrapped() -> None:
    P = ngram_position_matrix(torch.tensor([[3]]), torch.tensor([[4]]), torch.tensor([[7]]), 5)
    assert P[0, :, 0].tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]


def test_ngram_sum_is_P_g() -> None:
    torch.manual_seed(0)
    P, g = torch.rand(2, 5, 3), torch.randn(2, 3, 4)
    torch.testing.assert_close(ngram_sum(P, g), torch.einsum("blm,bmh->blh", P, g))


def test_frequency_weighting_needs_freqs() -> None:
    with pytest.raises(ValueError):
        ngram_position_matrix(torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 2, dtype=torch.long), None, 4)
