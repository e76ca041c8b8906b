"""Apriori across passes: the frequent n-grams of length <= k from an earlier, shorter pass over the corpus,
used by the next pass to leave out, chunk by chunk, the n-grams that cannot matter.

An n-gram is frequent only if its prefix and suffix are, so above k only if every k-gram inside it is. The
entropy filter also needs the (n+1)-grams a·w and w·b of a frequent w, whose other end may be rare. So a
chunk keeps an n-gram when its first n-1 or its last n-1 tokens can be frequent: a known frequent (n-1)-gram
up to k, or only frequent k-grams above. What is kept is closed under taking the prefix and the suffix (the
trie of a counts file stays whole), and the merge sees every entry it selects or reads neighbours from, so
the lexicon is the one a single pass gives; the counts files hold a fraction of the n-grams, most of which,
in a large corpus, occur once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zencli.lexicon.counting.frequent import FrequentNgrams


@dataclass
class KnownFrequent:
    """Global frequent n-grams of lengths 1..k: tokens (sorted) and, per level, sorted int64 keys
    prefix_id * size(n-1) + suffix_id (a key's rank is its global id, as in `FrequentNgrams`)."""

    k: int
    min_freq: int
    tokens: list[str]
    keys: dict[int, np.ndarray]  # n = 2..k: int64 [F_n]
    sizes: dict[int, int]  # n = 1..k: F_n

    @classmethod
    def from_frequent(cls, freq: FrequentNgrams, k: int) -> KnownFrequent:
        sizes = {n: freq.size(n) for n in range(1, k + 1)}
        keys = {n: freq.prefix[n].astype(np.int64) * sizes[n - 1] + freq.suffix[n] for n in range(2, k + 1)}
        return cls(k=k, min_freq=freq.min_freq, tokens=list(freq.tokens), keys=keys, sizes=sizes)

    def token_ids(self, table: list[str]) -> np.ndarray:
        """int64 [len(table)]: each chunk-local token's global id, -1 if it is not frequent."""
        gid = {t: i for i, t in enumerate(self.tokens)}
        return np.fromiter((gid.get(t, -1) for t in table), dtype=np.int64, count=len(table))

    def ids(self, n: int, prefix: np.ndarray, suffix: np.ndarray) -> np.ndarray:
        """int64: global ids of level-n n-grams given the global ids of their prefix and suffix (-1 where
        either is -1 or the n-gram is not frequent)."""
        out = np.full(len(prefix), -1, dtype=np.int64)
        both = np.flatnonzero((prefix >= 0) & (suffix >= 0))
        if len(both) == 0 or self.sizes[n] == 0:
            return out
        key = prefix[both] * self.sizes[n - 1] + suffix[both]
        pos = np.searchsorted(self.keys[n], key)
        pos[pos == len(self.keys[n])] = 0
        hit = self.keys[n][pos] == key
        out[both[hit]] = pos[hit]
        return out

    def header(self) -> dict[str, int]:
        """What a counts file records of its pruning (the merge must not select below this min_freq)."""
        return {"k": self.k, "min_freq": self.min_freq}
