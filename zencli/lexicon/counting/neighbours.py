"""Stage 3 of the package docstring: the branching entropy of frequent n-grams, from exact counts of
their left and right neighbour tokens, so sharded and one-pass builds agree bit for bit."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from zencli.lexicon.counting.spill import Spill, merged_ranges, spill_sorted
from zencli.text.tokenizer import CONTINUATION


def is_continuation(token: str) -> bool:
    """A WordPiece continuation piece (`##b`): it is glued to the token before it inside one word."""
    return token.startswith(CONTINUATION) and len(token) > len(CONTINUATION)


class Neighbours:
    """Exact branching-entropy statistics of one level's frequent n-grams, gathered at the next level.

    Every occurrence of an (n+1)-gram v = a·w is an occurrence of the n-gram w with left neighbour a, and
    v = w·b one of w with right neighbour b. So per section the (n+1)-grams give keys
    (global id of w) · V + (global id of the neighbour token, over *all* tokens, frequent or not) with
    their counts; rare neighbours matter, so these keys are taken before any frequency pruning. Summed
    over sections they are the exact corpus counts count(a·w), count(w·b), whatever the sharding.
    """

    def __init__(self, folder: Path, vocab_all: int, continuation: np.ndarray):
        self.folder, self.vocab = folder, vocab_all
        self.continuation = continuation  # [vocab_all] bool: token is a `##` piece
        self.parts: dict[str, dict[int, tuple[Spill, np.ndarray]]] = {"left": {}, "right": {}}  # by section
        self._lock = threading.Lock()  # sections may be added from several threads

    def add(self, index: int, side: str, gram: np.ndarray, neighbour: np.ndarray, counts: np.ndarray) -> None:
        """One section's entries: level-n global ids `gram` (-1: not frequent), neighbour token ids."""
        keep = np.flatnonzero(gram >= 0)
        keys = gram[keep].astype(np.int64) * self.vocab + neighbour[keep]
        order = np.argsort(keys, kind="stable")
        part = spill_sorted(self.folder, f"nb-{side}-{index:05d}", keys[order], counts[keep][order])
        with self._lock:
            self.parts[side][index] = part

    def entropy(self, side: str, totals: np.ndarray, partition_entries: int) -> np.ndarray:
        """float64 [F]: H = log2 T - (sum over neighbours c log2 c) / T, T = count(w).

        The T - sum(c) occurrences at a line start/end have no neighbour: each counts as a neighbour of
        its own (adds 0 to the sum), since a line edge is as free a boundary as any. On the right, all
        `##` continuation neighbours are one neighbour, "inside a word": w then ends inside a word of the
        tokenizer, and those occurrences say nothing about a free boundary.
        """
        s = np.zeros(len(totals), np.float64)
        parts = [self.parts[side][i] for i in sorted(self.parts[side])]
        spills = [sp for sp, _ in parts]
        for keys, c in merged_ranges(spills, [sample for _, sample in parts], partition_entries, 1, self.vocab):
            if not len(keys):
                continue
            w, tok = keys // self.vocab, keys % self.vocab
            c = c.astype(np.float64)
            lo = int(w[0])
            inside = self.continuation[tok] if side == "right" else np.zeros(len(tok), bool)
            size = int(w[-1]) - lo + 1
            # (astype: bincount of an empty selection returns int64 zeros)
            part = np.bincount(w[~inside] - lo, weights=c[~inside] * np.log2(c[~inside]),
                               minlength=size).astype(np.float64)
            glued = np.bincount(w[inside] - lo, weights=c[inside], minlength=size).astype(np.float64)
            part += glued * np.log2(np.maximum(glued, 1.0))
            s[lo : lo + len(part)] += part  # each n-gram's keys lie in one range: s is summed in key order
        for sp in spills:
            sp.delete()
        t = totals.astype(np.float64)
        return np.maximum(np.log2(t) - s / t, 0.0)
