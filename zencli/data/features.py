"""Examples → feature records: the token ids and n-gram slots of `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`.

A feature record is a dict of 1-D numpy arrays for one sequence of n tokens with m n-gram slots:

    input_ids [n] int32, token_type_ids [n] int8          (0 for `[CLS] A [SEP]`, 1 for `B [SEP]`)
    ngram_ids [m] int32                                   (line of ngram.txt; 0 is never a slot here)
    ngram_starts [m] int32                                (token index, counting [CLS] as 0)
    ngram_lengths [m] int32, ngram_freqs [m] int64, ngram_token_type_ids [m] int8

Attention masks are not stored: they follow from the lengths, and `collate` builds them when it pads.
The records of one `featurize_batch` call are views into shared arrays: copy one before writing to it.
Task code adds its label keys (`labels`, `start_positions`, …) to the same dict; `collate` passes them on.

N-grams never cover [CLS] or [SEP] and never cross from A into B: the whole sequence is matched in one
batched call (`NgramMatcher.match_batch`) and matches touching a special position are dropped. An
n-gram's type is 0 if it starts before len(A) + 2, else 1 (the released rule; with the filter above it
is simply the segment the n-gram lies in).

Long inputs must be cut into windows first (`zencli.data.windows`); a sequence longer than
`max_seq_len` is a bug in the caller and raises ValueError instead of being truncated.

More: docs/design.md, "Feature records".
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from zencli.lexicon.matcher import (
    RELEASED_MAX_LEN,
    RELEASED_MIN_LEN,
    RELEASED_VERSIONS,
    Matches,
    NgramMatcher,
    released_cap,
    select_released,
)
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.tokenizer import CONTINUATION, Tokenizer, normalization_table, width_variants
from zencli.text.vocab import UNK, Vocab

Rules = Literal["zen", "released"]
RULES: tuple[str, ...] = ("zen", "released")
Record = dict[str, np.ndarray]
TokenIds = Sequence[int] | np.ndarray

TOKEN_KEYS = ("input_ids", "token_type_ids")
SLOT_KEYS = ("ngram_ids", "ngram_starts", "ngram_lengths", "ngram_freqs", "ngram_token_type_ids")
RECORD_KEYS = TOKEN_KEYS + SLOT_KEYS


class NgramFeaturizer:
    """Token ids of one or two segments → feature records, many examples per call.

    `lexicon` is an `ngram.txt` Lexicon (its tokens are looked up in `vocab`) or a ready NgramMatcher
    whose ids follow that file. `max_seq_len` bounds the full sequence (specials included) and sets the
    released proportional cap; `max_ngram_in_seq` is the released cap's numerator (128 in the released
    code); `max_ngrams` is a hard cap on slots per sequence (None: no cap beyond the rules').
    """

    def __init__(
        self,
        vocab: Vocab,
        lexicon: Lexicon | NgramMatcher,
        *,
        rules: Rules = "zen",
        max_ngrams: int | None = None,
        max_seq_len: int = 512,
        max_ngram_in_seq: int = 128,
        min_len: int = 2,
        max_len: int = 8,
        released_version: str = "zen2",
        seed: int = 0,
    ):
        if rules not in RULES:
            raise ValueError(f"rules must be one of {', '.join(RULES)}, got {rules!r}")
        if released_version not in RELEASED_VERSIONS:
            raise ValueError(
                f"released_version must be one of {', '.join(RELEASED_VERSIONS)}, got {released_version!r}"
            )
        if max_seq_len < 2:
            raise ValueError(f"max_seq_len must be >= 2 ([CLS] and [SEP]), got {max_seq_len}")
        if max_ngrams is not None and max_ngrams < 0:
            raise ValueError(f"max_ngrams must be >= 0 or None, got {max_ngrams}")
        if rules == "released":
            min_len, max_len = RELEASED_MIN_LEN, RELEASED_MAX_LEN
        if not 1 <= min_len <= max_len:
            raise ValueError(f"expected 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
        if isinstance(lexicon, NgramMatcher):
            matcher = lexicon
            if matcher.min_len > min_len or matcher.max_len < max_len:
                raise ValueError(
                    f"the matcher finds n-grams of {matcher.min_len}..{matcher.max_len} tokens; "
                    f"rules {rules!r} need {min_len}..{max_len}"
                )
        else:
            matcher = NgramMatcher.from_lexicon(lexicon, vocab.get, min_len, max_len)
        self.vocab = vocab
        self.matcher = matcher
        self.rules = rules
        self.released_version = released_version
        self.max_ngrams = max_ngrams
        self.max_seq_len = max_seq_len
        self.max_ngram_in_seq = max_ngram_in_seq
        self.min_len, self.max_len = min_len, max_len
        self.cls_id, self.sep_id = vocab.cls_id, vocab.sep_id
        self._rng = np.random.default_rng(seed)  # ZEN 1.0 draws: one generator per featurizer

    @classmethod
    def from_files(cls, vocab_path: str | Path, ngram_path: str | Path, **kwargs: object) -> NgramFeaturizer:
        return cls(Vocab.load(vocab_path), Lexicon.load(ngram_path), **kwargs)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ public API

    def featurize(self, a: TokenIds, b: TokenIds | None = None, *, blocked: np.ndarray | None = None,
                  excluded: np.ndarray | None = None) -> Record:
        """One example; see `featurize_batch`."""
        return self.featurize_batch([a], None if b is None else [b],
                                    blocked=None if blocked is None else [blocked],
                                    excluded=None if excluded is None else [excluded])[0]

    def featurize_batch(
        self,
        a: Sequence[TokenIds],
        b: Sequence[TokenIds | None] | None = None,
        *,
        blocked: Sequence[np.ndarray | None] | None = None,
        excluded: Sequence[np.ndarray | None] | None = None,
    ) -> list[Record]:
        """Records for examples (a[i], b[i]); b[i] None (or b None) means a single segment.

        `a`, `b` hold token ids without specials. `blocked[i]`, a bool array over the full sequence
        (n tokens, [CLS] at 0), marks positions no n-gram may cover, e.g. the masked positions of a
        pretraining example (an n-gram covering a masked char would reveal it); such n-grams are dropped
        before the slot cap, so they never take a slot. `excluded[i]` lists n-gram ids example i may not
        use (a training sentence's own words, `LeaveOneOut`); they too are dropped before the cap.
        """
        n_ex = len(a)
        if b is not None and len(b) != n_ex:
            raise ValueError(f"{n_ex} first segments but {len(b)} second segments")
        if n_ex == 0:
            return []
        len_a = np.fromiter(map(len, a), np.int64, n_ex)
        has_b = np.zeros(n_ex, bool) if b is None else np.fromiter((x is not None for x in b), bool, n_ex)
        len_b = np.zeros(n_ex, np.int64) if b is None else np.fromiter(
            (0 if x is None else len(x) for x in b), np.int64, n_ex)
        n_tok = len_a + 2 + np.where(has_b, len_b + 1, 0)  # [B]
        too_long = np.flatnonzero(n_tok > self.max_seq_len)
        if len(too_long):
            i = int(too_long[0])
            raise ValueError(
                f"example {i} has {int(n_tok[i])} tokens with [CLS]/[SEP], more than max_seq_len="
                f"{self.max_seq_len}; cut long inputs into windows first (zencli.data.windows)"
            )
        flat = self._concatenate(a, b, has_b)  # [N] all tokens of the batch
        offsets = np.zeros(n_ex + 1, np.int64)
        np.cumsum(n_tok, out=offsets[1:])
        # Position of every token inside its own sequence, and that sequence's first [SEP].
        pos = np.arange(len(flat)) - np.repeat(offsets[:-1], n_tok)
        types = (pos >= np.repeat(len_a + 2, n_tok)).astype(np.int8)

        width = int(n_tok.max())
        grid = np.zeros((n_ex, width), np.int64)  # [B, W] padded ids for the matcher
        grid[np.arange(width)[None, :] < n_tok[:, None]] = flat
        matches = self.matcher.match_batch(grid, n_tok)
        matches = self._select(matches, len_a, n_tok, _blocked_grid(blocked, n_tok, width), excluded)

        slot_bounds = np.searchsorted(matches.seq, np.arange(n_ex + 1)).tolist()
        seg_a_end = (len_a + 2).take(matches.seq)
        slot_cols = {
            "ngram_ids": matches.ngram_id.astype(np.int32),
            "ngram_starts": matches.start.astype(np.int32),
            "ngram_lengths": matches.length.astype(np.int32),
            "ngram_freqs": matches.freq.astype(np.int64),
            "ngram_token_type_ids": (matches.start >= seg_a_end).astype(np.int8),
        }
        ids32 = flat.astype(np.int32)
        tok_bounds = offsets.tolist()
        records: list[Record] = []
        for i in range(n_ex):
            t0, t1, s0, s1 = tok_bounds[i], tok_bounds[i + 1], slot_bounds[i], slot_bounds[i + 1]
            rec = {"input_ids": ids32[t0:t1], "token_type_ids": types[t0:t1]}
            for key, col in slot_cols.items():
                rec[key] = col[s0:s1]
            records.append(rec)
        return records

    def slots_of_padded(self, ids: np.ndarray, n_tok: np.ndarray, len_a: np.ndarray,
                        rng: np.random.Generator | None = None, blocked: np.ndarray | None = None) -> Matches:
        """The slots of whole sequences `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` laid out in a padded
        [B, W] id array (n_tok[i] tokens, len(A) = len_a[i]): the same slots, in the same order, that
        `featurize_batch` gives for those segments. For sequences made in the training step (replaced-token
        detection matches the text its discriminator sees, after sampling) and for a shard's examples made
        all at once (`blocked`: bool [B, W], the positions no n-gram may cover). `rng`: the ZEN 1.0 released
        rules' draws (None: this featurizer's own generator)."""
        n_tok = np.asarray(n_tok, np.int64).reshape(-1)
        len_a = np.asarray(len_a, np.int64).reshape(-1)
        if blocked is not None and blocked.shape != ids.shape:
            raise ValueError(f"blocked has shape {blocked.shape}; expected the ids' {ids.shape}")
        return self._select(self.matcher.match_batch(ids, n_tok), len_a, n_tok, blocked, rng=rng)

    # ------------------------------------------------------------------ internals

    def _concatenate(self, a: Sequence[TokenIds], b: Sequence[TokenIds | None] | None, has_b: np.ndarray) -> np.ndarray:
        """All sequences of the batch, specials included, as one int64 array."""
        cls, sep = np.array([self.cls_id], np.int64), np.array([self.sep_id], np.int64)
        pieces: list[TokenIds] = []
        if b is None or not has_b.any():
            for x in a:
                pieces += (cls, x, sep)
        else:
            for x, y in zip(a, b):
                pieces += (cls, x, sep) if y is None else (cls, x, sep, y, sep)
        flat = np.concatenate([np.asarray(p, dtype=np.int64) if not isinstance(p, np.ndarray) else p for p in pieces])
        flat = flat.astype(np.int64, copy=False)
        if len(flat) and flat.min() < 0:
            raise ValueError(f"token ids must be >= 0, got {int(flat.min())}")
        return flat

    def _select(
        self,
        m: Matches,
        len_a: np.ndarray,
        n_tok: np.ndarray,
        blocked: np.ndarray | None,
        excluded: Sequence[np.ndarray | None] | None = None,
        rng: np.random.Generator | None = None,
    ) -> Matches:
        """Drop matches touching specials / crossing A|B / covering blocked positions / of excluded ids, then
        apply the rules."""
        seq, start = m.seq, m.start
        end = start + m.length
        sep_a = (len_a + 1).take(seq)  # index of the first [SEP]
        keep = (start >= 1) & (end <= n_tok.take(seq) - 1) & ((end <= sep_a) | (start > sep_a))
        if blocked is not None:  # [B, W]: a match covering a blocked position is dropped (prefix sums per row)
            csum = np.zeros((blocked.shape[0], blocked.shape[1] + 1), np.int64)
            np.cumsum(blocked, axis=1, out=csum[:, 1:])
            keep &= csum[seq, end] - csum[seq, start] == 0
        if excluded is not None:
            keep &= ~_is_excluded(m, excluded)
        if self.rules == "zen":
            keep &= (m.length >= self.min_len) & (m.length <= self.max_len)
        m = m.take(np.flatnonzero(keep))

        if self.rules == "released":
            m = select_released(m, self.released_version, self.max_seq_len, self.max_ngram_in_seq,
                                rng or self._rng)
            if self.max_ngrams is not None:
                m = m.take(np.flatnonzero(_rank_in_group(m.seq, m.n_seqs) < self.max_ngrams))
            return m
        if self.max_ngrams is not None and np.bincount(m.seq, minlength=1).max() > self.max_ngrams:
            # Priority: longest, most frequent, earliest, smallest id (lexsort: last key is primary). Only
            # when some example has more matches than slots: the cap then keeps every match of the others.
            order = np.lexsort((m.ngram_id, m.start, -m.freq, -m.length, m.seq))
            m = m.take(order)
            m = m.take(np.flatnonzero(_rank_in_group(m.seq, m.n_seqs) < self.max_ngrams))
        # Slot order (seq, start, length) via one int64 key: no two matches share all three. The matcher
        # gives them in that order already unless the cap above reordered them.
        width = int(n_tok.max()) + 1
        key = (m.seq * width + m.start) * (self.max_len + 1) + m.length
        if len(key) > 1 and not (key[1:] > key[:-1]).all():
            m = m.take(np.argsort(key))
        return m


def _blocked_grid(blocked: Sequence[np.ndarray | None] | None, n_tok: np.ndarray, width: int) -> np.ndarray | None:
    """The per-example blocked masks (each over its n tokens, [CLS] at 0; None: nothing blocked) as one padded
    bool [B, width] grid, as `slots_of_padded` takes them."""
    if blocked is None:
        return None
    if len(blocked) != len(n_tok):
        raise ValueError(f"{len(n_tok)} examples but {len(blocked)} blocked masks")
    grid = np.zeros((len(n_tok), width), bool)
    for i, (x, n) in enumerate(zip(blocked, n_tok.tolist())):
        if x is None:
            continue
        x = np.asarray(x, dtype=bool)
        if x.shape != (n,):
            raise ValueError(
                f"blocked mask {i} has shape {x.shape}; expected ({n},), one flag per token incl. specials"
            )
        grid[i, :n] = x
    return grid


def _is_excluded(m: Matches, excluded: Sequence[np.ndarray | None]) -> np.ndarray:
    """[K] True where match k's n-gram id is in excluded[its example] (one isin over (example, id) keys)."""
    if len(excluded) != m.n_seqs:
        raise ValueError(f"{m.n_seqs} examples but {len(excluded)} excluded id lists")
    lists = [(i, np.asarray(x, np.int64)) for i, x in enumerate(excluded) if x is not None and len(x)]
    if not lists:
        return np.zeros(len(m.seq), bool)
    width = int(max(m.ngram_id.max(initial=0), max(int(x.max()) for _, x in lists))) + 1
    keys = [i * width + x for i, x in lists]
    return np.isin(m.seq.astype(np.int64) * width + m.ngram_id, np.concatenate(keys))


def _rank_in_group(seq: np.ndarray, n_groups: int) -> np.ndarray:
    """Index of each row within its run of equal (sorted) `seq` values."""
    return np.arange(len(seq)) - np.searchsorted(seq, np.arange(n_groups + 1)).take(seq)


def released_slot_cap(n_tokens: int, max_seq_len: int, max_ngram_in_seq: int = 128) -> int:
    """Slots the released rules allow a sequence of n_tokens (specials included)."""
    return int(released_cap(np.array([n_tokens]), max_seq_len, max_ngram_in_seq)[0])


def unmatchable_ngrams(lexicon: Lexicon, vocab: Vocab) -> tuple[list[int], Counter[str]]:
    """The lexicon's n-grams that can never match (0-based rows of ngram.txt): those holding a token the
    vocabulary lacks (`NgramMatcher.from_lexicon` looks tokens up with `vocab.get`), and the missing tokens
    with the number of n-grams each one spoils."""
    rows: list[int] = []
    missing: Counter[str] = Counter()
    for i, g in enumerate(lexicon.ngrams):
        lacking = {t for t in g if vocab.get(t) is None}
        if lacking:
            rows.append(i)
            missing.update(lacking)
    return rows, missing


# ----------------------------------------------------------------------------------------------------
# Token ids for tasks


class CharIds:
    """One vocabulary id per input character, for char-level tagging (labels stay aligned).

    A char maps to its normalised form (lower-cased when the tokenizer lower-cases, accents stripped
    when it strips them) if that is in the vocabulary, else to `##` + that form, else the same for the
    char as written, else (`width_fallback`, as the Tokenizer) the same for its full-/half-width forms,
    else [UNK]. Never merges or drops a char, unlike the Tokenizer (which drops
    control characters and splits on white space).
    """

    def __init__(self, vocab: Vocab, lowercase: bool = True, strip_accents: bool | None = None,
                 width_fallback: bool = True, normalize: Sequence[str] | None = None):
        self.vocab = vocab
        self.width_fallback = width_fallback
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self._norm = normalization_table(normalize)
        self.unk_id = vocab.special_id(UNK)
        self._cache: dict[str, int] = {}

    @classmethod
    def from_tokenizer(cls, tokenizer: Tokenizer) -> CharIds:
        return cls(tokenizer.vocab, tokenizer.lowercase, tokenizer.strip_accents, tokenizer.width_fallback,
                   tokenizer.normalize)

    def __call__(self, chars: Sequence[str]) -> np.ndarray:
        cache, lookup = self._cache, self._lookup
        out = np.empty(len(chars), np.int32)
        for k, c in enumerate(chars):
            i = cache.get(c)
            if i is None:
                if len(cache) >= 1 << 16:
                    cache.clear()
                i = cache[c] = lookup(c)
            out[k] = i
        return out

    def normal_form(self, c: str) -> str:
        """The form of `c` looked up first (normalised, lower-cased, accents stripped as set); "" when
        normalising drops it. A token added for `c` is spelled so (`model.extend_vocab`)."""
        norm = c.translate(self._norm) if self._norm else c
        norm = norm.lower() if self.lowercase else norm
        if self.strip_accents:
            norm = "".join(d for d in unicodedata.normalize("NFD", norm) if unicodedata.category(d) != "Mn")
        return norm

    def _lookup(self, c: str) -> int:
        ids = self.vocab.token_ids
        norm = self.normal_form(c)  # a dropped char ("") falls back to c below
        forms = [norm, c] if norm and norm != c else [c]
        if self.width_fallback:
            forms += [v for f in forms for v in width_variants(f)]
        for form in forms:
            for piece in (form, CONTINUATION + form):
                i = ids.get(piece)
                if i is not None:
                    return i
        return self.unk_id


def char_token_ids(
    chars: Sequence[str], vocab: Vocab, lowercase: bool = True, strip_accents: bool | None = None
) -> np.ndarray:
    """Ids [len(chars)] int32, one per char (see `CharIds`; build one CharIds to reuse its cache)."""
    return CharIds(vocab, lowercase, strip_accents)(chars)


def encode_with_offsets(tokenizer: Tokenizer, text: str) -> tuple[np.ndarray, np.ndarray]:
    """WordPiece ids [n] int32 and their `[start, end)` spans in `text` [n, 2] int32."""
    toks = tokenizer.tokenize(text)
    ids = np.fromiter((t.id for t in toks), np.int32, len(toks))
    spans = np.fromiter((x for t in toks for x in (t.start, t.end)), np.int32, 2 * len(toks)).reshape(-1, 2)
    return ids, spans
