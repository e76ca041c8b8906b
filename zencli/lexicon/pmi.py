"""Pointwise mutual information of n-grams, and lexicon selection by frequency and PMI.

For an n-gram w of n >= 2 tokens,

    PMI(w) = min over binary splits w = l·r of  log2( p(w) / (p(l) · p(r)) ),   p(x) = count(x) / N_|x|

where N_k is the number of k-gram positions in the corpus (a line of m tokens has max(0, m-k+1)). So a
2-gram has one split, an 8-gram seven, and an n-gram passes only if *every* way of cutting it in two
shows the parts occur together more often than chance; a long n-gram glued from two independent halves
fails. Normalising each length by its own N_k makes p(x) a probability over k-gram positions.

PMI is not monotone in n-gram length, so it never prunes counting; only frequency does (counting/merge.py).

More: docs/design.md, "PMI and lexicon selection".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from zencli.lexicon.counting import FrequentNgrams

LOG_BASE = 2


def log_prob(freq: FrequentNgrams, n: int, ids: np.ndarray) -> np.ndarray:
    """log2 p(x) for level-n n-grams `ids`: log2(count / N_n)."""
    return np.log2(freq.counts[n][ids].astype(np.float64)) - np.log2(float(freq.positions[n]))


# N-grams whose PMI is computed at once: their prefix and suffix chains (2n int64 arrays) stay this small, where
# a level of a 1G-character corpus holds 8.5M frequent n-grams (1.2 GB of chains at once).
PMI_CHUNK = 1 << 20


def pmi(freq: FrequentNgrams, n: int, ids: np.ndarray | None = None) -> np.ndarray:
    """float64 [len(ids)]: PMI (min over binary splits, bits) of level-n n-grams `ids` (default: all)."""
    if n < 2:
        raise ValueError("PMI needs n-grams of at least 2 tokens")
    if ids is None:
        ids = np.arange(freq.size(n))
    ids = np.asarray(ids, dtype=np.int64)
    best = np.full(len(ids), np.inf)
    for lo in range(0, len(ids), PMI_CHUNK):
        part = ids[lo : lo + PMI_CHUNK]
        first = freq.chain(n, part, "prefix")  # first[k]: the first k tokens, as a level-k id
        last = freq.chain(n, part, "suffix")  # last[k]: the last k tokens
        lw = log_prob(freq, n, part)
        out = best[lo : lo + PMI_CHUNK]
        for k in range(1, n):  # w = (first k tokens) · (last n-k tokens)
            np.minimum(out, lw - log_prob(freq, k, first[k]) - log_prob(freq, n - k, last[n - k]), out=out)
    return best


@dataclass
class Selection:
    """The selected n-grams of each length: level ids, their counts and PMI (NaN for 1-grams); passed_pmi[n]:
    how many passed frequency and PMI, before the entropy filter."""

    ids: dict[int, np.ndarray]
    counts: dict[int, np.ndarray]
    pmi: dict[int, np.ndarray]
    passed_pmi: dict[int, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return sum(len(v) for v in self.ids.values())


def select(freq: FrequentNgrams, *, min_n: int, max_n: int, min_freq: int, min_pmi: float,
           min_entropy: float | None = None) -> Selection:
    """N-grams of length min_n..max_n with count >= min_freq and PMI >= min_pmi, and, when min_entropy is
    set, min(H_left, H_right) >= min_entropy (the merge must have computed the entropies)."""
    if min_freq < freq.min_freq:
        raise ValueError(f"counts were pruned at {freq.min_freq}; cannot select at {min_freq}")
    sel = Selection({}, {}, {})
    for n in range(min_n, max_n + 1):
        if freq.size(n) == 0:
            sel.ids[n], sel.counts[n], sel.pmi[n] = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
            sel.passed_pmi[n] = 0
            continue
        ids = np.flatnonzero(freq.counts[n] >= min_freq)
        if n == 1:
            scores = np.full(len(ids), np.nan)
        else:
            scores = pmi(freq, n, ids)
            keep = scores >= min_pmi
            ids, scores = ids[keep], scores[keep]
        sel.passed_pmi[n] = len(ids)
        if min_entropy is not None:
            if n not in freq.entropy_left:
                raise ValueError(f"no branching entropy for length {n}: merge with entropy_from <= {min_n}")
            keep = np.minimum(freq.entropy_left[n][ids], freq.entropy_right[n][ids]) >= min_entropy
            ids, scores = ids[keep], scores[keep]
        sel.ids[n], sel.counts[n], sel.pmi[n] = ids, freq.counts[n][ids], scores
    return sel


def ranked_rows(freq: FrequentNgrams, sel: Selection) -> tuple[np.ndarray, np.ndarray]:
    """The selected n-grams, most frequent first, ties in token order (Python tuple order: a shorter n-gram before
    its extensions), so the order is fully deterministic: int32 [N, longest] global token ids (-1 after an
    n-gram's end) and int64 [N] counts."""
    levels = [n for n in sorted(sel.ids) if len(sel.ids[n])]
    if not levels:
        return np.zeros((0, 0), np.int32), np.zeros(0, np.int64)
    width = max(levels)
    rows = []
    for n in levels:
        m = np.full((len(sel.ids[n]), width), -1, dtype=np.int32)  # -1 pads: sorts before any token
        m[:, :n] = freq.token_ids(n, sel.ids[n])
        rows.append(m)
    mat = np.concatenate(rows)
    counts = np.concatenate([sel.counts[n] for n in levels])
    # Global token ids are ranks in sorted string order, so comparing ids compares strings.
    order = np.lexsort([mat[:, j] for j in range(width - 1, -1, -1)] + [-counts])
    return mat[order], counts[order]


def as_tuples(tokens: list[str], rows: np.ndarray) -> list[tuple[str, ...]]:
    """Rows of token ids (-1: none) as tuples of token strings, a chunk of rows at a time: as Python lists a row
    costs about 120 bytes, so the whole of a large lexicon's rows never is."""
    out: list[tuple[str, ...]] = []
    for lo in range(0, len(rows), PMI_CHUNK):
        out += [tuple(tokens[t] for t in row if t >= 0) for row in rows[lo : lo + PMI_CHUNK].tolist()]
    return out
