"""Counting one chunk, entirely in numpy (stage 1 of the package docstring): a chunk's lines become one
token-id sequence, and its n-grams are counted level by level into an exact trie of sorted arrays."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

import numpy as np

from zencli.lexicon.counting.counts_file import write_section
from zencli.lexicon.counting.prune import KnownFrequent


def _sorted_positions(key: np.ndarray, pos: np.ndarray, key_limit: int,
                      pos_limit: int) -> tuple[np.ndarray, np.ndarray]:
    """(key, pos) sorted by key (ties in any order). When key and position fit in 64 bits together they
    are packed and sorted as one uint64 array, about 3x faster than argsort."""
    pos_bits = max(1, int(pos_limit).bit_length())
    if int(key_limit).bit_length() + pos_bits <= 63:
        packed = key.astype(np.uint64)
        packed <<= np.uint64(pos_bits)
        packed |= pos.astype(np.uint64)
        del key, pos
        packed.sort()
        pos = (packed & np.uint64((1 << pos_bits) - 1)).view(np.int64)
        packed >>= np.uint64(pos_bits)
        return packed.view(np.int64), pos
    order = np.argsort(key)
    return key[order], pos[order]


def iter_levels(seq: np.ndarray, vocab_size: int, max_n: int,
                known: tuple[KnownFrequent, np.ndarray] | None = None) -> Iterator[tuple[str, np.ndarray]]:
    """Count every n-gram (n = 1..max_n) of a token-id sequence, one length at a time.

    seq: int32 [L], token ids 0..vocab_size-1, -1 between lines (n-grams never contain a -1).
    Yields ("counts_1", uint32 [V]) and then, for n = 2..max_n, ("prefix_n", ·), ("suffix_n", ·),
    ("counts_n", ·): uint32 arrays [R_n] sorted by n-gram, where prefix/suffix is the rank of the n-gram's
    first/last n-1 tokens among the distinct (n-1)-grams of this sequence (for n = 2: token ids).
    known: the frequent n-grams up to length k of an earlier pass (prune.py) and the global ids of this
    sequence's tokens: only n-grams whose first or last n-1 tokens can be frequent are kept, that is, are a
    frequent (n-1)-gram (n-1 <= k) or hold only frequent k-grams (n-1 > k).
    """
    yield "counts_1", np.bincount(seq[seq >= 0], minlength=vocab_size).astype(np.uint32)
    vocab = max(vocab_size, 1)
    rank = seq  # rank[i]: the (n-1)-gram starting at i, -1 where there is none
    size = vocab_size  # number of distinct (n-1)-grams
    prune, gid = known if known is not None else (None, None)  # gid: global id of each (n-1)-gram, or -1
    alive = None  # alive[i]: the (n-1)-gram at i can be frequent (prune.py)
    if prune is not None:
        alive = np.zeros(len(seq), dtype=bool)
        alive[seq >= 0] = gid[seq[seq >= 0]] >= 0
    for n in range(2, max_n + 1):
        last = seq[n - 1 :]  # [L-n+1] last token of the n-gram at i
        a, b = rank[:-1], rank[1:]  # prefix at i, suffix at i+1
        keep = (a >= 0) & (b >= 0)
        if alive is not None:
            keep &= alive[:-1] | alive[1:]
        pos = np.flatnonzero(keep)
        del keep
        # The n-gram at i is (prefix rank, last token): lexicographic order, as (prefix, suffix) is.
        key = a[pos].astype(np.int64)
        key *= vocab
        key += last[pos]
        key, pos = _sorted_positions(key, pos, size * vocab, len(a))
        new = np.empty(len(key), dtype=bool)
        new[:1] = True
        np.not_equal(key[1:], key[:-1], out=new[1:])
        del key
        starts = np.flatnonzero(new)
        first = pos[starts]  # one position of each distinct n-gram
        yield f"prefix_{n}", a[first].astype(np.uint32)
        yield f"suffix_{n}", b[first].astype(np.uint32)
        yield f"counts_{n}", np.diff(np.append(starts, len(pos))).astype(np.uint32)
        size = len(starts)
        if prune is not None and n <= prune.k:
            gid = prune.ids(n, gid[a[first]], gid[b[first]])  # [R_n] global ids of this level's n-grams
        del first, starts
        if n < max_n:
            ids = np.cumsum(new, dtype=np.int64)
            ids -= 1
            rank = np.full(len(a), -1, dtype=np.int32)
            rank[pos] = ids
            if prune is not None and n <= prune.k:  # frequent or not, known
                alive = np.zeros(len(a), dtype=bool)
                alive[pos] = gid[ids] >= 0
            elif alive is not None:  # every k-gram inside frequent
                alive = alive[:-1] & alive[1:]
            del ids
        del pos, new


class _Table(dict):
    """token → chunk-local id; a new token gets the next id."""

    def __missing__(self, token: str) -> int:
        i = self[token] = len(self)
        return i


class ChunkBuilder:
    """Collects tokenized lines of one chunk as ids into a chunk-local token table."""

    def __init__(self) -> None:
        self.table = _Table()
        self.ids = array("i")
        self.line_tokens = array("i")
        self.chars = 0

    def add(self, tokens: list[str], chars: int) -> None:
        if tokens:
            self.ids.extend(map(self.table.__getitem__, tokens))
            self.ids.append(-1)
        self.line_tokens.append(len(tokens))
        self.chars += chars

    @property
    def lines(self) -> int:
        return len(self.line_tokens)

    def write(self, f, max_n: int, extra: dict[str, Any], known: KnownFrequent | None = None) -> dict[str, Any]:
        """Count this chunk and append it to counts file `f` as one section (leaving out, with `known`, the
        n-grams prune.py says cannot matter); returns the header."""
        table = sorted(self.table)
        remap = np.empty(len(table) + 1, dtype=np.int32)  # remap[-1] keeps the line separator -1
        remap[np.fromiter((self.table[t] for t in table), dtype=np.int64, count=len(table))] = np.arange(
            len(table), dtype=np.int32
        )
        remap[-1] = -1
        seq = remap[np.frombuffer(self.ids, dtype=np.int32)] if len(self.ids) else np.zeros(0, np.int32)
        self.ids = array("i")
        lengths = (np.frombuffer(self.line_tokens, dtype=np.int32).astype(np.int64) if self.lines
                   else np.zeros(0, np.int64))
        header = {
            "max_n": max_n,
            "lines": self.lines,
            "chars": self.chars,
            "tokens": int(lengths.sum()),
            "positions": [int(np.maximum(lengths - k + 1, 0).sum()) for k in range(1, max_n + 1)],
            "table": table,
            **extra,
        }
        if known is not None and known.k < max_n:
            header["pruned"] = known.header()
            levels = iter_levels(seq, len(table), max_n, (known, known.token_ids(table)))
        else:
            levels = iter_levels(seq, len(table), max_n)
        write_section(f, header, levels)
        return header

