"""Windows over long inputs: coverage, overlap, most-context merging, MRC doc-stride spans."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zencli.data.windows import (
    best_windows,
    char_span_to_tokens,
    context_scores,
    context_to_window,
    max_context_masks,
    merge_token_predictions,
    mrc_windows,
    plan_windows,
    tokens_to_char_span,
    window_to_context,
)
from zencli.errors import ZenError


@st.composite
def plans(draw):
    max_tokens = draw(st.integers(1, 40))
    stride = draw(st.integers(1, max_tokens))
    n = draw(st.integers(0, 200))
    return n, max_tokens, stride


@settings(max_examples=300, deadline=None)
@given(plans())
def test_windows_cover_every_position_within_bounds_with_the_stated_overlap(plan):
    n, max_tokens, stride = plan
    ws = plan_windows(n, max_tokens, stride)
    covered = np.zeros(n, int)
    for s, e in ws:
        assert 0 <= s <= e <= n and e - s <= max_tokens
        covered[s:e] += 1
    assert (covered >= 1).all()
    for (s0, e0), (s1, _) in zip(ws, ws[1:]):
        assert s1 - s0 == stride
        assert e0 - s1 == max_tokens - stride  # a full window followed by another one
    assert ws[-1][1] == n
    assert all(e < n for _, e in ws[:-1])  # no window after the one that reaches the end


@given(st.integers(0, 50), st.integers(0, 60), st.integers(1, 200))
def test_identity_when_it_fits(n, extra, stride):
    max_tokens = max(n, 1) + extra
    stride = min(stride, max_tokens)
    assert plan_windows(n, max_tokens, stride) == [(0, n)]
    assert plan_windows(n, max_tokens, max_tokens) == [(0, n)]
    preds = np.arange(n) * 3
    np.testing.assert_array_equal(merge_token_predictions([(0, n)], [preds], n), preds)
    np.testing.assert_array_equal(merge_token_predictions([(0, n)], [preds], n, reduce="mean"), preds)


def brute_best(ws, n):
    """For each position: the window maximising min(left, right) context, a text edge counting as
    unlimited; the earliest on ties."""
    out = []
    for p in range(n):
        best, score = None, None
        for w, (s, e) in enumerate(ws):
            if not s <= p < e:
                continue
            left = p - s if s > 0 else float("inf")
            right = e - 1 - p if e < n else float("inf")
            if score is None or min(left, right) > score:
                best, score = w, min(left, right)
        out.append(best)
    return out


@settings(max_examples=300, deadline=None)
@given(plans())
def test_merge_takes_each_position_from_its_most_central_window(plan):
    n, max_tokens, stride = plan
    ws = plan_windows(n, max_tokens, stride)
    want = brute_best(ws, n)
    assert best_windows(ws, n).tolist() == want
    # Predictions tagged with their window: the merge must pick exactly the wanted window per position.
    preds = [np.stack([np.full(e - s, w), np.arange(s, e)], axis=1) for w, (s, e) in enumerate(ws)]
    merged = merge_token_predictions(ws, preds, n)
    assert merged[:, 0].tolist() == want
    assert merged[:, 1].tolist() == list(range(n))  # and each position's own prediction
    masks = max_context_masks(ws, n)
    assert sum(int(m.sum()) for m in masks) == n


def test_context_counts_text_edges_as_unlimited():
    ws = plan_windows(10, 6, 4)  # (0,6), (4,10)
    assert ws == [(0, 6), (4, 10)]
    assert context_scores((4, 10), 10).tolist()[:2] == [0, 1]
    # Position 4: window 0 has it 1 from its cut right edge, window 1 at its cut left edge → window 0.
    # Position 5: 0 right of it in window 0, 1 left of it in window 1 → window 1.
    assert best_windows(ws, 10).tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    # Position 3 of (0,5), (2,7) has 1 position of context on its cut side in both: the earlier wins.
    ws = [(0, 5), (2, 7)]
    assert best_windows(ws, 7).tolist() == [0, 0, 0, 0, 1, 1, 1]


def test_merge_mean_averages_every_covering_window():
    ws = [(0, 4), (2, 6)]
    a = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    b = np.array([[0.0, 3.0], [0.0, 3.0], [0.0, 3.0], [0.0, 3.0]])
    got = merge_token_predictions(ws, [a, b], 6, reduce="mean")
    np.testing.assert_allclose(got[:, 0], [1, 1, 0.5, 0.5, 0, 0])
    np.testing.assert_allclose(got[:, 1], [0, 0, 1.5, 1.5, 3, 3])


def test_merge_keeps_label_strings_and_checks_shapes():
    ws = plan_windows(5, 3, 2)  # (0,3), (2,5)
    got = merge_token_predictions(ws, [["B", "E", "S"], ["B", "M", "E"]], 5)
    assert got.tolist() == ["B", "E", "S", "M", "E"]
    with pytest.raises(ValueError, match="window 1 spans 3 positions but has 2"):
        merge_token_predictions(ws, [[1, 2, 3], [1, 2]], 5)
    with pytest.raises(ValueError, match="position 4"):
        best_windows([(0, 4)], 5)
    with pytest.raises(ValueError, match="stride"):
        plan_windows(5, 3, 4)


# ---------------------------------------------------------------------------------------------- MRC


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 30), st.integers(0, 300), st.integers(8, 64), st.integers(1, 80))
def test_mrc_windows_fit_and_cover_the_context(q, c, max_seq_len, doc_stride):
    if q + 3 >= max_seq_len:
        with pytest.raises(ZenError, match="question"):
            mrc_windows(q, c, max_seq_len, doc_stride)
        return
    ws = mrc_windows(q, c, max_seq_len, doc_stride)
    covered = np.zeros(c, bool)
    for s, e in ws:
        assert q + 3 + (e - s) <= max_seq_len
        covered[s:e] = True
    assert covered.all()
    for (s0, _), (s1, _) in zip(ws, ws[1:]):
        assert s1 - s0 == min(doc_stride, max_seq_len - q - 3)


def test_mrc_span_mapping_round_trips():
    q = 4  # [CLS] q q q q [SEP] → the context starts at window position 6
    ws = mrc_windows(q, 30, 16, 5)  # room 9: (0,9), (5,14), ...
    assert ws[:2] == [(0, 9), (5, 14)]
    w = ws[1]
    assert context_to_window(w, q, 7, 9) == (8, 10)
    assert window_to_context(w, q, 8, 10) == (7, 9)
    assert context_to_window(w, q, 3, 6) is None  # starts before the window
    assert context_to_window(w, q, 12, 14) is None  # ends after it
    assert window_to_context(w, q, 0, 0) is None  # [CLS]
    assert window_to_context(w, q, 2, 7) is None  # starts in the question
    assert window_to_context(w, q, 14, 15) is None  # the final [SEP]
    assert window_to_context(w, q, 9, 8) is None  # end before start
    for s in range(w[0], w[1]):
        for e in range(s, w[1]):
            assert window_to_context(w, q, *context_to_window(w, q, s, e)) == (s, e)


def test_char_and_token_spans():
    offsets = np.array([[0, 1], [1, 2], [3, 8], [8, 9], [10, 11]])  # 北 京 _Hello s _,
    assert char_span_to_tokens(offsets, 1, 2) == (1, 1)
    assert char_span_to_tokens(offsets, 0, 9) == (0, 3)
    assert char_span_to_tokens(offsets, 4, 6) == (2, 2)  # inside one token
    assert char_span_to_tokens(offsets, 9, 10) is None  # only a space
    assert tokens_to_char_span(offsets, 2, 3) == (3, 9)
