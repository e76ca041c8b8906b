"""Long inputs are cut into overlapping windows, never truncated; predictions are merged back.

`plan_windows(n, max_tokens, stride)`: windows [start, end) start at 0, stride, 2·stride, … and hold
max_tokens positions each (the last one may be shorter), until one reaches n; consecutive windows
overlap by max_tokens − stride. Every position lies in at least one window.

A position near a window's edge sees little context on that side, so its prediction is taken from the
window where it has the most context: the largest min(left, right), where left/right count the
positions of the window on either side of it. An edge that is the edge of the whole input cuts off
nothing, so it counts as unlimited context (a position near the start of the text is best predicted by
the first window, whatever its distance to the window start). Ties go to the earliest window. Scores
or logits may be averaged over all windows covering a position instead.

MRC (BERT's doc_stride): a window is `[CLS] question [SEP] context[start:end] [SEP]`; `mrc_windows`
plans the context spans, `window_to_context` / `context_to_window` map inclusive token spans between
window positions and context token indices, and `char_span_to_tokens` / `tokens_to_char_span` map
between context token indices and character offsets of the context text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from zencli.errors import ZenError

Window = tuple[int, int]  # [start, end) over token positions
_EDGE = 1 << 62  # context beyond an edge of the whole input: unlimited


def plan_windows(n_tokens: int, max_tokens: int, stride: int) -> list[Window]:
    """Windows covering positions 0..n_tokens-1 (one window (0, n_tokens) when it fits, (0, 0) if empty)."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    if not 1 <= stride <= max_tokens:
        raise ValueError(f"stride must be in 1..max_tokens ({max_tokens}), got {stride}")
    if n_tokens < 0:
        raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
    out: list[Window] = []
    start = 0
    while True:
        end = min(start + max_tokens, n_tokens)
        out.append((start, end))
        if end >= n_tokens:
            return out
        start += stride


def context_scores(window: Window, n_tokens: int) -> np.ndarray:
    """[end − start] context of each position of `window`: min(positions left of it, right of it),
    an edge of the whole input counting as unlimited."""
    start, end = window
    pos = np.arange(start, end)
    left = pos - start if start > 0 else np.full(len(pos), _EDGE)
    right = end - 1 - pos if end < n_tokens else np.full(len(pos), _EDGE)
    return np.minimum(left, right)


def best_windows(windows: Sequence[Window], n_tokens: int) -> np.ndarray:
    """[n_tokens] index of the window where each position has the most context (ties: earliest)."""
    _check_windows(windows, n_tokens)
    best = np.full(n_tokens, -1, np.int64)
    score = np.full(n_tokens, -1, np.int64)
    for w, (start, end) in enumerate(windows):
        s = context_scores((start, end), n_tokens)
        better = s > score[start:end]  # strict: an equal score keeps the earlier window
        best[start:end][better] = w
        score[start:end][better] = s[better]
    return best


def max_context_masks(windows: Sequence[Window], n_tokens: int) -> list[np.ndarray]:
    """Per window, bool [end − start]: the positions whose prediction this window supplies (BERT's
    `token_is_max_context`: a predicted MRC span should start at such a position)."""
    best = best_windows(windows, n_tokens)
    return [best[start:end] == w for w, (start, end) in enumerate(windows)]


def merge_token_predictions(
    windows: Sequence[Window],
    per_window_predictions: Sequence[Sequence | np.ndarray],
    n_tokens: int,
    *,
    reduce: Literal["best", "mean"] = "best",
) -> np.ndarray:
    """One prediction per position [n_tokens, ...] from per-window predictions [end − start, ...].

    "best": the prediction of the window where the position has the most context (labels, tags).
    "mean": the average over every window covering the position (scores, logits, probabilities).
    """
    if len(per_window_predictions) != len(windows):
        raise ValueError(f"{len(windows)} windows but {len(per_window_predictions)} predictions")
    preds = [np.asarray(p) for p in per_window_predictions]
    for w, ((start, end), p) in enumerate(zip(windows, preds)):
        if p.ndim == 0 or len(p) != end - start:
            raise ValueError(f"window {w} spans {end - start} positions but has {len(p) if p.ndim else 0} predictions")
    if len({p.shape[1:] for p in preds}) > 1:
        raise ValueError("per-window predictions must have equal trailing shapes")
    trailing = preds[0].shape[1:]
    if reduce == "best":
        best = best_windows(windows, n_tokens)
        out = np.empty((n_tokens, *trailing), np.result_type(*preds))
        for w, ((start, end), p) in enumerate(zip(windows, preds)):
            mine = best[start:end] == w
            out[start:end][mine] = p[mine]
        return out
    if reduce == "mean":
        _check_windows(windows, n_tokens)
        total = np.zeros((n_tokens, *trailing), np.float64)
        count = np.zeros(n_tokens, np.int64)
        for (start, end), p in zip(windows, preds):
            total[start:end] += p
            count[start:end] += 1
        return total / count.reshape(-1, *([1] * len(trailing)))
    raise ValueError(f"reduce must be 'best' or 'mean', got {reduce!r}")


def _check_windows(windows: Sequence[Window], n_tokens: int) -> None:
    covered = np.zeros(n_tokens + 1, np.int64)
    for w, (start, end) in enumerate(windows):
        if not 0 <= start <= end <= n_tokens:
            raise ValueError(f"window {w} = ({start}, {end}) is not within 0..{n_tokens}")
        covered[start] += 1
        covered[end] -= 1
    hole = np.flatnonzero(np.cumsum(covered)[:n_tokens] == 0)
    if len(hole):
        raise ValueError(f"position {int(hole[0])} of {n_tokens} is in no window")


# ----------------------------------------------------------------------------------------------------
# MRC


def mrc_windows(question_len: int, context_len: int, max_seq_len: int, doc_stride: int) -> list[Window]:
    """Context token spans for `[CLS] question [SEP] context[start:end] [SEP]` windows of at most
    max_seq_len tokens, advancing by doc_stride (capped at the room a window has, as in BERT, so no
    context token is ever skipped)."""
    room = max_seq_len - question_len - 3
    if room < 1:
        raise ZenError(
            f"a question of {question_len} tokens leaves no room for the context in max_seq_len={max_seq_len}; "
            f"expected at most {max_seq_len - 4} question tokens (raise max_seq_len or shorten the question)"
        )
    if doc_stride < 1:
        raise ZenError(f"doc_stride: expected >= 1, got {doc_stride}")
    return plan_windows(context_len, room, min(doc_stride, room))


def context_offset(question_len: int) -> int:
    """Window position of the first context token: after [CLS], the question and [SEP]."""
    return question_len + 2


def window_to_context(window: Window, question_len: int, start: int, end: int) -> tuple[int, int] | None:
    """Inclusive window positions [start, end] → inclusive context token indices, or None when the span
    is empty or not inside the window's context part (e.g. [CLS], the question, a [SEP])."""
    off = context_offset(question_len)
    size = window[1] - window[0]
    if not off <= start <= end < off + size:
        return None
    return window[0] + start - off, window[0] + end - off


def context_to_window(window: Window, question_len: int, start: int, end: int) -> tuple[int, int] | None:
    """Inclusive context token indices [start, end] → inclusive window positions, or None when the span
    is not wholly inside the window (BERT then trains the window to point at [CLS])."""
    if not window[0] <= start <= end < window[1]:
        return None
    off = context_offset(question_len) - window[0]
    return start + off, end + off


def char_span_to_tokens(offsets: np.ndarray, char_start: int, char_end: int) -> tuple[int, int] | None:
    """Characters [char_start, char_end) → the inclusive token span overlapping them (offsets [n, 2] are
    each token's [start, end) in the text), or None when no token overlaps."""
    offsets = np.asarray(offsets)
    hit = np.flatnonzero((offsets[:, 0] < char_end) & (offsets[:, 1] > char_start))
    if not len(hit):
        return None
    return int(hit[0]), int(hit[-1])


def tokens_to_char_span(offsets: np.ndarray, tok_start: int, tok_end: int) -> tuple[int, int]:
    """Inclusive token span → its characters [start, end) in the text."""
    return int(offsets[tok_start][0]), int(offsets[tok_end][1])
