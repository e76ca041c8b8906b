"""Find every occurrence of lexicon n-grams in token-id sequences, a whole batch at a time.

The released ZEN code looks up `tuple(tokens[s:s+n])` in a dict for every start s and every length n,
about 6·L Python-level look-ups per sequence. Here the lexicon is compiled once into a trie over token
ids stored as a *double array* (`base`, `check`): the child of trie node `s` on token code `c` is slot
`t = base[s] + c`, and it exists iff `check[t] == s`. One transition is thus two array reads and a
comparison, which numpy can do for all positions of a batch at once. The batch is walked level by level:
level 1 holds every position whose token starts some n-gram, level d+1 keeps the positions whose
(d+1)-token prefix is still in the trie. Every prefix is exact (no hashing), so a match can never be
wrong; each level shrinks quickly, so a batch costs a few dozen vector operations instead of ~6·L·B
dict look-ups per batch (see `zen bench matcher` for the measured speed-up).

Token ids are first mapped to dense codes 1..A-1 (A-1 = distinct tokens in the lexicon, code 0 = token
not in the lexicon and padding) so that the double array stays about as long as the trie has nodes.
Codes are given in order of decreasing count, which keeps the children of one node close together.

N-gram ids follow ngram.txt: id = index in the lexicon list + 1; 0 is padding. If one n-gram occurs
twice, the later id wins, as in the released `ngram_to_id_dict`.

`select_released` reproduces which matches the released code keeps and in which slot order (ZEN 2.0:
smallest ids first; ZEN 1.0: shuffled), see docs/checkpoints.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

# The released code matches lengths range(2, 8) only, whatever the lexicon holds.
RELEASED_MIN_LEN = 2
RELEASED_MAX_LEN = 7
RELEASED_VERSIONS = ("zen1", "zen2")

# Token ids index a dense id→code table; this bounds its size (64 MiB) for absurd ids.
_MAX_TOKEN_ID = 1 << 24


class LexiconLike(Protocol):
    """What `NgramMatcher.from_lexicon` reads (zencli.lexicon.ngram_file.Lexicon has it)."""

    ngrams: Sequence[tuple[str, ...]]
    freqs: Sequence[int]


@dataclass(frozen=True)
class Matches:
    """Flat match arrays for a batch, grouped by sequence (`seq` ascending), each of shape [K], int64.

    Order inside one sequence, as the matcher returns them: by length, then start, which is the
    released code's enumeration order; `select_released` returns its own slot order instead.
    """

    seq: np.ndarray  # [K] index of the sequence in the batch
    ngram_id: np.ndarray  # [K] lexicon index + 1
    start: np.ndarray  # [K] token index of the first token
    length: np.ndarray  # [K] number of tokens
    freq: np.ndarray  # [K] lexicon frequency of the n-gram
    seq_lengths: np.ndarray  # [B] tokens in each sequence of the batch

    def __len__(self) -> int:
        return len(self.seq)

    @property
    def n_seqs(self) -> int:
        return len(self.seq_lengths)

    def counts(self) -> np.ndarray:
        """Matches per sequence, [B]."""
        return np.bincount(self.seq, minlength=self.n_seqs)

    def offsets(self) -> np.ndarray:
        """[B+1]: the matches of sequence b are rows offsets[b]:offsets[b+1]."""
        return np.searchsorted(self.seq, np.arange(self.n_seqs + 1))

    def take(self, rows: np.ndarray) -> Matches:
        """The matches at `rows` (indices or a boolean mask), in that order."""
        return Matches(self.seq[rows], self.ngram_id[rows], self.start[rows], self.length[rows],
                       self.freq[rows], self.seq_lengths)

    def sequence(self, b: int) -> list[tuple[int, int, int, int]]:
        """(ngram_id, start, length, freq) of sequence b, in this object's order."""
        lo, hi = np.searchsorted(self.seq, [b, b + 1])
        cols = (self.ngram_id[lo:hi], self.start[lo:hi], self.length[lo:hi], self.freq[lo:hi])
        return list(zip(*(c.tolist() for c in cols)))

    def padded(self, n_slots: int | None = None) -> dict[str, np.ndarray]:
        """Slot tensors [B, n_slots] (zero-padded, in this object's order) and a 0/1 `ngram_mask`.

        `n_slots` defaults to the largest count; a sequence with more matches than `n_slots` is an
        error (cap first, e.g. with `select_released`), never a silent truncation.
        """
        counts = self.counts()
        most = int(counts.max()) if len(counts) else 0
        n_slots = most if n_slots is None else n_slots
        if most > n_slots:
            b = int(np.argmax(counts))
            raise ValueError(f"sequence {b} has {most} n-gram matches but only {n_slots} slots; cap the matches first")
        slot = np.arange(len(self.seq)) - self.offsets()[self.seq]
        out = {}
        for name, col in (("ngram_ids", self.ngram_id), ("ngram_starts", self.start),
                          ("ngram_lengths", self.length), ("ngram_freqs", self.freq)):
            a = np.zeros((self.n_seqs, n_slots), np.int64)
            a[self.seq, slot] = col
            out[name] = a
        mask = np.zeros((self.n_seqs, n_slots), np.int64)
        mask[self.seq, slot] = 1
        out["ngram_mask"] = mask
        return out


def ngram_index(ngrams: Sequence[Sequence[int] | None]) -> dict[tuple[int, ...], int]:
    """{n-gram tuple: id} as the released ZenNgramDict builds it: id = index + 1, a later duplicate wins."""
    return {tuple(g): i for i, g in enumerate(ngrams, 1) if g is not None}


def naive_matches(
    tokens: Sequence[int], ngram_to_id: Mapping[tuple[int, ...], int], min_len: int = 2, max_len: int = 8
) -> list[tuple[int, int, int]]:
    """The released matching loop, kept as the reference: (id, start, length) of every match.

    Order is the released enumeration order: by length, then start (ZEN 1.0 shuffles exactly this list).
    """
    out = []
    n_tok = len(tokens)
    for n in range(min_len, max_len + 1):
        for s in range(n_tok - n + 1):
            i = ngram_to_id.get(tuple(tokens[s : s + n]))
            if i is not None:
                out.append((i, s, n))
    return out


class NgramMatcher:
    """All occurrences of lexicon n-grams of `min_len..max_len` tokens, overlapping ones included.

    `ngrams[i]` is n-gram id i+1 as a sequence of token ids, or None for an n-gram that can never match
    (e.g. it holds a token the vocabulary lacks); None entries keep later ids aligned with ngram.txt.
    N-grams outside `min_len..max_len` are kept in the id space but never match.
    """

    def __init__(
        self,
        ngrams: Sequence[Sequence[int] | None],
        freqs: Sequence[int],
        min_len: int = 2,
        max_len: int = 8,
    ):
        if len(ngrams) != len(freqs):
            raise ValueError(f"{len(ngrams)} n-grams but {len(freqs)} frequencies")
        if not 1 <= min_len <= max_len:
            raise ValueError(f"expected 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
        self.min_len, self.max_len = min_len, max_len
        self.freqs = np.zeros(len(ngrams) + 1, np.int64)  # [n_ids + 1], by id
        self.freqs[1:] = np.asarray(freqs, dtype=np.int64).reshape(-1)
        self.lengths = np.zeros(len(ngrams) + 1, np.int64)  # [n_ids + 1], by id; 0 for None
        self.lengths[1:] = [0 if g is None else len(g) for g in ngrams]
        ids = np.flatnonzero((self.lengths >= min_len) & (self.lengths <= max_len))
        used = [ngrams[i - 1] for i in ids.tolist()]
        flat = np.fromiter(itertools.chain.from_iterable(used), np.int64, int(self.lengths[ids].sum()))
        if len(flat) and (flat.min() < 0 or flat.max() >= _MAX_TOKEN_ID):
            bad = int(flat.min()) if flat.min() < 0 else int(flat.max())
            raise ValueError(f"n-gram token ids must be in 0..{_MAX_TOKEN_ID - 1}, got {bad}")
        self._build(ids, self.lengths[ids], flat)

    @classmethod
    def from_lexicon(
        cls,
        lexicon: LexiconLike,
        vocab_lookup: Callable[[str], int | None],
        min_len: int = 2,
        max_len: int = 8,
    ) -> NgramMatcher:
        """Map the lexicon's token strings to ids with `vocab_lookup` (None = not in the vocabulary).

        An n-gram with an unknown token can never match (the released code keeps it as a raw string
        key that no token tuple equals); it keeps its id so later ids stay aligned with ngram.txt.
        """
        ngrams: list[tuple[int, ...] | None] = []
        for g in lexicon.ngrams:
            ids = tuple(vocab_lookup(t) for t in g)
            ngrams.append(None if None in ids else ids)  # type: ignore[arg-type]
        return cls(ngrams, lexicon.freqs, min_len, max_len)

    @property
    def n_ngrams(self) -> int:
        return len(self.freqs) - 1

    # ------------------------------------------------------------------ building

    def _build(self, ids: np.ndarray, lens: np.ndarray, flat: np.ndarray) -> None:
        """Trie of the n-grams `ids` (token ids `flat`, concatenated), then its double array."""
        uniq, inv, count = np.unique(flat, return_inverse=True, return_counts=True)
        code_of = np.empty(len(uniq), np.int64)  # most frequent token -> code 1
        code_of[np.argsort(-count, kind="stable")] = np.arange(1, len(uniq) + 1)
        n_codes = len(uniq) + 1
        top = int(uniq[-1]) + 1 if len(uniq) else 0
        # token id -> code; the last entry (0) is where padding and unknown ids land via mode="clip".
        self._remap = np.zeros(top + 1, np.int32)
        self._remap[uniq] = code_of
        self._pad_token = top

        # Trie nodes level by level: node of prefix[:d+1] = unique (node of prefix[:d], code) pairs.
        n_grams = len(ids)
        codes = np.zeros((n_grams, self.max_len), np.int64)  # [G, max_len]
        row = np.repeat(np.arange(n_grams), lens)
        col = np.arange(len(flat)) - np.repeat(np.cumsum(lens) - lens, lens)
        codes[row, col] = code_of[inv]
        node = np.zeros(n_grams, np.int64)
        n_nodes = 1
        parents, edge_codes, children = [], [], []
        for d in range(int(lens.max()) if n_grams else 0):
            alive = np.flatnonzero(lens > d)
            key = node[alive] * n_codes + codes[alive, d]
            u, inv_u = np.unique(key, return_inverse=True)
            new = n_nodes + np.arange(len(u))
            parents.append(u // n_codes)
            edge_codes.append(u % n_codes)
            children.append(new)
            node[alive] = new[inv_u]
            n_nodes += len(u)
        parent = np.concatenate(parents) if parents else np.zeros(0, np.int64)
        code = np.concatenate(edge_codes) if edge_codes else np.zeros(0, np.int64)
        child = np.concatenate(children) if children else np.zeros(0, np.int64)
        term = np.zeros(n_nodes, np.int64)
        np.maximum.at(term, node, ids)  # a duplicate n-gram: the later id wins, as in the released dict

        base_of = _place(parent, code, n_nodes, n_codes)  # [n_nodes]
        slot = np.zeros(n_nodes, np.int64)  # root in slot 0
        slot[child] = base_of[parent] + code
        size = int(slot.max()) + 1 + n_codes + 1  # any base + any code stays inside
        self._base = np.zeros(size, np.int32)
        self._check = np.full(size, -1, np.int32)
        self._term = np.zeros(size, np.int32)
        self._base[slot] = base_of
        self._check[slot[child]] = slot[parent]
        self._check[0] = -2  # the root is nobody's child
        self._term[slot] = term
        self.n_nodes = n_nodes

    # ------------------------------------------------------------------ matching

    def match(self, tokens: Sequence[int] | np.ndarray) -> Matches:
        """All matches in one sequence (`seq` is 0 everywhere)."""
        return self.match_batch([tokens])

    def match_batch(
        self,
        sequences: Sequence[Sequence[int] | np.ndarray] | np.ndarray,
        lengths: Sequence[int] | np.ndarray | None = None,
    ) -> Matches:
        """All matches in a batch: a list of token-id sequences, or a padded [B, L] array with `lengths`."""
        ids, seq_lengths = self._token_ids(sequences, lengths)  # [B, W], W >= longest + 1
        n_rows, width = ids.shape
        n = n_rows * width
        flat = np.zeros(n + self.max_len, np.int32)  # [n + max_len] codes; the tail: reads past the end find no child
        self._remap.take(ids.reshape(-1), out=flat[:n], mode="clip")
        base, check, term = self._base, self._check, self._term
        levels: list[tuple[int, np.ndarray, np.ndarray]] = []  # (length, flat start positions, ids)

        if self.min_len == 1:
            # Root's children sit in slot = code.
            c = flat[:n]
            tid = term.take(c)
            k = np.flatnonzero((check.take(c) == 0) & (tid > 0))
            levels.append((1, k, tid.take(k)))
        pos = node = None
        if self.max_len >= 2 and n > 1:
            # Levels 1 and 2 fused, one pass over all positions: pos = starts whose first two tokens
            # are a trie path, node = the slot of that 2-token prefix.
            c0, c1 = flat[: n - 1], flat[1:n]
            nxt = base.take(c0) + c1
            pos = np.flatnonzero((check.take(c0) == 0) & (check.take(nxt) == c0))
            node = nxt.take(pos)
        d = 2
        while pos is not None and len(pos):
            if d >= self.min_len:
                tid = term.take(node)
                k = np.flatnonzero(tid)
                # Lexicons are mostly prefix-closed: often every prefix is an n-gram itself.
                levels.append((d, pos, tid) if len(k) == len(tid) else (d, pos.take(k), tid.take(k)))
            if d == self.max_len:
                break
            nxt = base.take(node) + flat.take(pos + d)
            k = np.flatnonzero(check.take(nxt) == node)
            pos, node = pos.take(k), nxt.take(k)
            d += 1
        return self._collect(levels, n_rows, width, seq_lengths)

    def _collect(
        self, levels: list[tuple[int, np.ndarray, np.ndarray]], n_rows: int, width: int, seq_lengths: np.ndarray
    ) -> Matches:
        """Concatenate the per-length hits and group them by sequence (stable: length, then start, stay)."""
        if not levels:
            empty = np.zeros(0, np.int64)
            return Matches(empty, empty, empty, empty, empty, seq_lengths)
        p = np.concatenate([x for _, x, _ in levels])
        ngram_id = np.concatenate([x for _, _, x in levels]).astype(np.int64)
        length = np.repeat(np.array([d for d, _, _ in levels], np.int64), [len(x) for _, x, _ in levels])
        seq = p // width
        # A stable sort on 16-bit keys is a radix sort in numpy: linear time.
        order = np.argsort(seq.astype(np.uint16) if n_rows <= 1 << 16 else seq, kind="stable")
        seq, ngram_id, length = seq.take(order), ngram_id.take(order), length.take(order)
        start = p.take(order) - seq * width
        return Matches(seq, ngram_id, start, length, self.freqs.take(ngram_id), seq_lengths)

    def _token_ids(
        self, sequences: Sequence[Sequence[int] | np.ndarray] | np.ndarray, lengths: Sequence[int] | np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """[B, W] token ids, W >= longest + 1, padded with an id that maps to code 0 (so rows never join)."""
        pad = self._pad_token
        if isinstance(sequences, np.ndarray) and sequences.ndim == 2:
            if lengths is None:
                raise ValueError("a padded [B, L] array needs `lengths`")
            seq_lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
            n_rows, n_cols = sequences.shape
            if len(seq_lengths) != n_rows or (n_rows and (seq_lengths.min() < 0 or seq_lengths.max() > n_cols)):
                raise ValueError(f"`lengths` must give 0..{n_cols} for each of the {n_rows} rows")
            if not np.issubdtype(sequences.dtype, np.integer):
                raise ValueError(f"token ids must be integers, got dtype {sequences.dtype}")
            ids = np.full((n_rows, n_cols + 1), pad, np.int64)
            ids[:, :n_cols] = sequences
            ids[np.arange(n_cols + 1)[None, :] >= seq_lengths[:, None]] = pad
        else:
            if lengths is not None:
                raise ValueError("`lengths` is only for a padded [B, L] array")
            seq_lengths = np.fromiter(map(len, sequences), np.int64, len(sequences))
            width = int(seq_lengths.max()) + 1 if len(seq_lengths) else 1
            ids = np.full((len(sequences), width), pad, np.int64)
            for i, s in enumerate(sequences):
                ids[i, : len(s)] = s
        if ids.size and ids.min() < 0:
            raise ValueError(f"token ids must be >= 0, got {int(ids.min())}")
        return ids, seq_lengths


def _place(parent: np.ndarray, code: np.ndarray, n_nodes: int, n_codes: int) -> np.ndarray:
    """A base for every trie node such that the child slots base + code of all nodes are distinct.

    Edges come sorted by (parent, code). The root has base 0, so its children use slots 1..A-1.
    Nodes with several children are placed first, most children first, each at the first base (from a
    moving search start) where all its slots are free; nodes with one child then fill the holes.
    """
    deg = np.bincount(parent, minlength=n_nodes)
    first = np.zeros(n_nodes + 1, np.int64)
    np.cumsum(deg, out=first[1:])
    base = np.zeros(n_nodes, np.int64)
    block = 2048
    free = np.ones(n_codes + 2 * n_nodes + block + 1, bool)
    free[0] = False
    free[code[parent == 0]] = False
    hi = n_codes  # slots >= hi are all free
    first_free, last_lo = 1, 1
    multi = np.flatnonzero(deg >= 2)
    multi = multi[multi != 0]
    multi = multi[np.argsort(-deg[multi], kind="stable")]
    for n in multi.tolist():
        cs = code[first[n] : first[n + 1]]
        c_lo, c_hi = int(cs[0]), int(cs[-1])
        while not free[first_free]:
            first_free += 1
        # Searching from the last success (less one alphabet) keeps this linear; the holes it skips
        # are filled by the one-child nodes below.
        lo = max(first_free - c_lo, 1, last_lo - n_codes)
        while True:
            if lo + c_hi + block + 1 > len(free):
                free = np.concatenate([free, np.ones(len(free), bool)])
            ok = free[lo + c_lo : lo + c_lo + block].copy()
            for c in cs[1:].tolist():
                ok &= free[lo + c : lo + c + block]
            hit = np.flatnonzero(ok)
            if len(hit):
                b = lo + int(hit[0])
                break
            lo += block
        base[n] = last_lo = b
        free[b + cs] = False
        hi = max(hi, b + c_hi + 1)
    single = np.flatnonzero(deg == 1)
    single = single[single != 0]
    if len(single):
        holes = np.flatnonzero(free[n_codes:hi]) + n_codes  # >= n_codes, so base = hole - code >= 1
        slots = np.concatenate([holes[: len(single)], hi + np.arange(max(0, len(single) - len(holes)))])
        base[single] = slots - code[first[single]]
    return base


def released_cap(seq_lengths: np.ndarray | Sequence[int], max_seq_len: int, max_ngram_in_seq: int = 128) -> np.ndarray:
    """Matches the released code keeps per sequence: ceil(len(tokens) / max_seq_len * max_ngram_in_seq).

    Computed in float64 in the released order of operations, so rounding agrees with Python's math.ceil.
    """
    n = np.asarray(seq_lengths, dtype=np.float64)
    return np.ceil((n / max_seq_len) * max_ngram_in_seq).astype(np.int64)


def select_released(
    matches: Matches,
    version: str,
    max_seq_len: int,
    max_ngram_in_seq: int = 128,
    rng: np.random.Generator | int | None = None,
) -> Matches:
    """The matches the released code keeps, in its slot order.

    Both versions match lengths 2..7 only and keep at most `released_cap(...)` per sequence, where the
    sequence is the full token list the matcher saw ([CLS] and [SEP] included). ZEN 2.0 keeps the
    smallest ids (slot order = id order, equal ids by start). ZEN 1.0 shuffles first; its random order
    cannot be replayed, so `rng` (required; one seeded Generator per run, not one seed per batch) draws a
    uniformly random order per sequence instead.
    """
    if version not in RELEASED_VERSIONS:
        raise ValueError(f"version must be one of {', '.join(RELEASED_VERSIONS)}, got {version!r}")
    if max_seq_len < 1 or max_ngram_in_seq < 0:
        raise ValueError(f"expected max_seq_len >= 1 and max_ngram_in_seq >= 0, got {max_seq_len}, {max_ngram_in_seq}")
    if matches.n_seqs and int(matches.seq_lengths.max()) > max_seq_len:
        b = int(np.argmax(matches.seq_lengths))
        raise ValueError(f"sequence {b} has {int(matches.seq_lengths[b])} tokens, more than max_seq_len={max_seq_len}")
    if version == "zen1" and rng is None:
        raise ValueError("ZEN 1.0 keeps a random subset: pass rng (a seeded numpy Generator, or a seed)")
    rows = np.flatnonzero((matches.length >= RELEASED_MIN_LEN) & (matches.length <= RELEASED_MAX_LEN))
    seq = matches.seq.take(rows)
    if version == "zen2":
        keys = [matches.start.take(rows), matches.ngram_id.take(rows), seq]
    else:
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        keys = [gen.permutation(len(rows)), seq]
    order = _lsd_order(keys)
    rows, seq = rows.take(order), seq.take(order)
    rank = np.arange(len(rows)) - np.searchsorted(seq, np.arange(matches.n_seqs + 1)).take(seq)
    cap = released_cap(matches.seq_lengths, max_seq_len, max_ngram_in_seq)
    return matches.take(rows.take(np.flatnonzero(rank < cap.take(seq))))


def _lsd_order(keys: list[np.ndarray]) -> np.ndarray:
    """Stable order by several non-negative integer keys, least significant first.

    Least-significant-digit radix sort: numpy's stable sort of 16-bit keys is a linear-time radix
    sort, several times faster than a comparison sort of one combined 64-bit key.
    """
    order = np.arange(len(keys[0]))
    for key in keys:
        top = int(key.max()) if len(key) else 0
        shift = 0
        while True:
            digit = ((key.take(order) >> shift) & 0xFFFF).astype(np.uint16)
            order = order.take(np.argsort(digit, kind="stable"))
            shift += 16
            if top >> shift == 0:
                break
    return order
