"""Masked-LM targets: whole n-gram masking (ZEN 2.0) and character masking (ZEN 1.0 / BERT).

Whole n-gram masking follows the ZEN 2.0 paper: a segmenter splits the text into pieces, adjacent pieces
are merged into larger units when their concatenation is a lexicon n-gram (longest first), then whole
units are drawn at random until 15% of the characters are masked. Each masked character is then replaced
by [MASK] (80%), a random token (10%) or kept (10%), as in BERT.

Units are drawn BERT-style: in random order, skipping a unit that would overshoot the budget, so the
number of masked characters never exceeds max(1, round(15% · n)) (it can fall short when only long units
remain), except that when every unit is longer than that budget the shortest unit is masked, so each
sequence with a maskable character gets at least one target.

The n-gram encoder must never see an n-gram that covers a masked character, or it would hand the
answer to the masked-LM head; `drop_covering_masked` removes such slots after matching.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Span = tuple[int, int]  # [start, end) over token positions


def merge_with_lexicon(
    tokens: Sequence[str], pieces: Sequence[Span], in_lexicon: Callable[[tuple[str, ...]], bool], max_n: int = 8
) -> list[Span]:
    """Merge runs of adjacent pieces whose concatenated tokens form a lexicon n-gram, longest run first.

    pieces: consecutive spans covering the tokens (a segmentation). Greedy from the left: at each piece,
    take the longest run of ≥ 2 pieces that is in the lexicon and at most `max_n` tokens long.
    """
    units: list[Span] = []
    i = 0
    while i < len(pieces):
        best = i
        start = pieces[i][0]
        j = i + 1
        while j < len(pieces) and pieces[j][1] - start <= max_n:
            if in_lexicon(tuple(tokens[start : pieces[j][1]])):
                best = j
            j += 1
        units.append((start, pieces[best][1]))
        i = best + 1
    return units


def choose_masked_units(
    units: Sequence[Span], maskable: np.ndarray, rng: np.random.Generator, rate: float = 0.15
) -> np.ndarray:
    """Pick whole units at random until `rate` of the maskable positions are covered.

    maskable: bool [L], False for [CLS]/[SEP]/padding; a unit containing a non-maskable position is never
    chosen. Returns bool [L], True at masked positions.
    """
    masked = np.zeros(len(maskable), dtype=bool)
    n_maskable = int(maskable.sum())
    if n_maskable == 0:
        return masked
    budget = max(1, int(round(n_maskable * rate)))
    # A unit is a candidate when all its positions are maskable: a prefix sum answers that per unit.
    blocked = np.concatenate([[0], np.cumsum(~maskable, dtype=np.int64)])
    candidates = [u for u in units if u[1] > u[0] and blocked[u[1]] == blocked[u[0]]]
    order = rng.permutation(len(candidates))
    covered = 0
    for k in order:
        s, e = candidates[k]
        if covered + (e - s) > budget:
            continue
        masked[s:e] = True
        covered += e - s
        if covered == budget:
            break
    if covered == 0 and candidates:  # every unit is longer than the budget: mask the shortest one
        s, e = min(candidates, key=lambda u: (u[1] - u[0], u[0]))
        masked[s:e] = True
    return masked


def choose_masked_chars_batch(maskable: np.ndarray, rng: np.random.Generator, rate: float = 0.15) -> np.ndarray:
    """Character masking of every row of `maskable` [N, L] at once, with one draw for the whole batch: row i
    gets a uniformly random subset of its m_i maskable positions, of size max(1, round(rate · m_i)) (0 when
    m_i = 0), as `choose_masked_units` gives a row whose units are its single positions. Returns bool [N, L]."""
    n, length = maskable.shape
    n_maskable = maskable.sum(1)  # [N]
    budget = np.where(n_maskable > 0, np.maximum(1, np.rint(n_maskable * rate)), 0)  # [N]; rint: round half to even
    keys = rng.random((n, length))
    keys[~maskable] = 2.0  # after every maskable position in the sort
    order = np.argsort(keys, axis=1)  # [N, L] each row's positions in random order, maskable ones first
    take = np.arange(length)[None, :] < budget[:, None]  # [N, L] the first budget_i of row i
    masked = np.zeros((n, length), dtype=bool)
    masked[np.nonzero(take)[0], order[take]] = True
    return masked


def char_units(maskable: np.ndarray) -> list[Span]:
    """Character masking (ZEN 1.0 / BERT): every maskable position is its own unit."""
    return [(int(i), int(i) + 1) for i in np.flatnonzero(maskable)]


def corrupt(
    ids: np.ndarray,
    masked: np.ndarray,
    rng: np.random.Generator,
    mask_id: int,
    random_ids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Apply 80/10/10 corruption at masked positions.

    ids: int [L] (or any shape: a batch [N, L] takes one draw per masked position, in row-major order);
    random_ids: the token ids a random replacement may draw (no special tokens).
    Returns (input_ids, labels), shaped as ids, with labels = original id at masked positions and -100 elsewhere.
    """
    inputs = np.array(ids, order="C")  # a C-ordered copy, so that the flat views below write into it
    labels = np.full(ids.shape, -100, ids.dtype)
    flat_in, flat_ids, flat_labels = inputs.reshape(-1), ids.reshape(-1), labels.reshape(-1)
    pos = np.flatnonzero(masked)
    flat_labels[pos] = flat_ids[pos]
    roll = rng.random(len(pos))
    flat_in[pos[roll < 0.8]] = mask_id
    rand_pos = pos[(roll >= 0.8) & (roll < 0.9)]
    if len(rand_pos):
        flat_in[rand_pos] = random_ids[rng.integers(0, len(random_ids), size=len(rand_pos))]
    return inputs, labels


def drop_covering_masked(starts: np.ndarray, lengths: np.ndarray, masked: np.ndarray) -> np.ndarray:
    """Bool keep-mask over n-gram slots: False where the slot covers any masked position.

    Uses a prefix sum over `masked`, so it is O(L + M) with no loop over slots.
    """
    csum = np.concatenate([[0], np.cumsum(masked, dtype=np.int64)])
    return (csum[starts + lengths] - csum[starts]) == 0
