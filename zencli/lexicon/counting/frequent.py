"""The result of a merge: every n-gram that reached min_freq, as a trie over global ids (what PMI and the
entropy filter select from, pmi.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class FrequentNgrams:
    """All n-grams of length 1..max_n with count >= min_freq, as a trie over global ids.

    tokens[i] is the token with global id i (level 1, sorted). For n >= 2, the n-gram with level-n id j
    has count counts[n][j] and consists of n-gram prefix[n][j] of level n-1 followed by the last token of
    n-gram suffix[n][j] of level n-1. Ids at every level are in lexicographic token order.
    positions[n] = N_n, the number of n-gram positions in the corpus (all n-grams, frequent or not).
    entropy_left[n] / entropy_right[n]: branching entropy (bits) of each level-n n-gram, for the levels
    the merge was asked for (`merge_sections(entropy_from=...)`, defined in pmi.py); absent otherwise.
    """

    tokens: list[str]
    counts: dict[int, np.ndarray]
    prefix: dict[int, np.ndarray]
    suffix: dict[int, np.ndarray]
    positions: dict[int, int]
    max_n: int
    min_freq: int
    lines: int = 0
    chars: int = 0
    total_tokens: int = 0
    sources: list[str] = field(default_factory=list)
    tokenizer: dict[str, Any] = field(default_factory=dict)
    candidates: dict[int, int] = field(default_factory=dict)  # n-grams counted at level n after pruning
    entropy_left: dict[int, np.ndarray] = field(default_factory=dict)
    entropy_right: dict[int, np.ndarray] = field(default_factory=dict)

    def release_levels(self) -> None:
        """Let go of the per-level arrays (most of the memory of a large corpus's merge) once nothing reads them;
        the corpus totals and `candidates` stay."""
        for levels in (self.counts, self.prefix, self.suffix, self.entropy_left, self.entropy_right):
            levels.clear()

    def size(self, n: int) -> int:
        return len(self.counts.get(n, ()))

    def token_ids(self, n: int, ids: np.ndarray) -> np.ndarray:
        """int32 [len(ids), n]: the global token ids of level-n n-grams `ids`."""
        pre = self.chain(n, ids, "prefix")  # pre[k]: level-k id of the first k tokens
        out = np.empty((len(pre[n]), n), dtype=np.int32)
        out[:, 0] = pre[1]
        for j in range(1, n):  # token j is the last token of the (j+1)-token prefix
            x = pre[j + 1]
            for k in range(j + 1, 1, -1):
                x = self.suffix[k][x]
            out[:, j] = x
        return out

    def chain(self, n: int, ids: np.ndarray, side: str) -> dict[int, np.ndarray]:
        """For level-n ids: {k: id at level k of the n-gram's first (side='prefix') or last k tokens}."""
        link = self.prefix if side == "prefix" else self.suffix
        out = {n: np.asarray(ids, dtype=np.int64)}
        for k in range(n, 1, -1):
            out[k - 1] = link[k][out[k]].astype(np.int64)
        return out
