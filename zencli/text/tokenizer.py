"""BERT-compatible tokenization (BasicTokenizer + WordPiece) with character offsets into the original text.

Semantics follow Google BERT's `tokenization.py` (which ZEN's released code and the `tokenizers` library's
BertNormalizer copy): drop NUL, U+FFFD and every code point of category C* except TAB/LF/CR (this includes
unassigned code points); split on white space; every CJK ideograph (BERT's `_is_chinese_char` ranges) is
its own token; each remaining word is lower-cased (optional), accent-stripped (NFD, drop Mn; by default
only when lower-casing, like BERT) and split so that every punctuation character (ASCII non-alphanumerics
and Unicode P*) is its own token; then WordPiece, greedy longest-match-first with `##` continuations,
[UNK] for a word longer than 100 characters or one that cannot be covered. There is no NFC step
(recent HF `transformers` slow tokenizers added one; Google BERT, ZEN and HF's fast tokenizer have none).

Arabic normalisation (`normalize`, a subset of `ARABIC_NORMALIZATIONS`, off by default): after cleaning and
before case and accents, `diacritics` drops the harakat, tanween, shadda, sukun, dagger alef and Quranic
annotation marks, `tatweel` drops the kashida U+0640, `alef` writes أ إ آ ٱ as ا, `yaa` writes ى (and the
Persian ی) as ي. Each maps one char to one char or to nothing, so offsets into the original text hold: a
dropped mark stays inside its word's span. The setting is stored with the vocabulary (vocab.json) and a
fine-tuned model's inputs (task.json), so training, evaluation and prediction normalise alike.

More: docs/design.md, "Tokenization".
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zencli.errors import ZenError
from zencli.text.vocab import UNK, Vocab, read_sidecar

# BERT's `_is_chinese_char`: CJK Unified Ideographs and extensions A–E plus the compatibility blocks.
CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_CJK_COMPAT_RANGES = ((0xF900, 0xFAFF), (0x2F800, 0x2FA1F))  # NFD maps most of these to unified ideographs
MAX_CHARS_PER_WORD = 100
CONTINUATION = "##"
_CACHE_LIMIT = 1 << 16  # words kept per cache (bounded memory); cleared when full, frequent words return at once


# Arabic normalisations: one char → one char (a str) or → nothing (None).
_ARABIC_DIACRITICS = [*range(0x0610, 0x061B), *range(0x064B, 0x0660), 0x0670, *range(0x06D6, 0x06DD),
                      *range(0x06DF, 0x06E5), 0x06E7, 0x06E8, *range(0x06EA, 0x06EE)]
ARABIC_NORMALIZATIONS: dict[str, dict[int, str | None]] = {
    "diacritics": dict.fromkeys(_ARABIC_DIACRITICS),
    "tatweel": {0x0640: None},
    "alef": dict.fromkeys((0x0622, 0x0623, 0x0625, 0x0671), "\u0627"),
    "yaa": dict.fromkeys((0x0649, 0x06CC), "\u064a"),
}


def normalization_table(names: Iterable[str] | None) -> dict[int, str | None]:
    """The str.translate table of the named Arabic normalisations (ValueError for an unknown name)."""
    table: dict[int, str | None] = {}
    for name in names or ():
        if name not in ARABIC_NORMALIZATIONS:
            raise ValueError(f"normalize: unknown normalisation {name!r}; expected some of "
                             f"{', '.join(ARABIC_NORMALIZATIONS)}")
        table.update(ARABIC_NORMALIZATIONS[name])
    return table


def check_normalize(names: Iterable[str] | None) -> list[str]:
    """The normalisation names in their canonical order (as saved), checked."""
    given = list(names or ())
    normalization_table(given)
    return [n for n in ARABIC_NORMALIZATIONS if n in given]


@dataclass(frozen=True, slots=True)
class Token:
    """One token: its vocabulary string, its span `[start, end)` in the original text, and its id
    (-1 where no vocabulary is involved, e.g. basic tokens)."""

    text: str
    start: int
    end: int
    id: int = -1


# ----------------------------------------------------------------------------------------------------
# Character classes (BERT's definitions, for the Unicode version of this Python)


def is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES) and not is_removed(ch)


def is_removed(ch: str) -> bool:
    """Dropped by BERT's `_clean_text`: NUL, U+FFFD and category C* (control, format, private use,
    surrogate, unassigned) except TAB, LF, CR."""
    if ch in "\t\n\r":
        return False
    return ch == "\x00" or ch == "\ufffd" or unicodedata.category(ch)[0] == "C"


def is_space(ch: str) -> bool:
    """Separates words: what survives cleaning and Python's `str.split()` splits on (BERT maps its own
    white space to " " and then calls `split()`)."""
    return ch.isspace() and not is_removed(ch)


def is_punctuation(ch: str) -> bool:
    """BERT's `_is_punctuation`: ASCII non-alphanumeric printables, and Unicode category P*."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch)[0] == "P"


@dataclass(frozen=True)
class _Tables:
    segment: re.Pattern[str]  # group 1: run of CJK chars, group 2: run of other non-space chars (a word)
    word: re.Pattern[str]  # segment's group 2 alone
    cjk: re.Pattern[str]  # one CJK char
    removed: re.Pattern[str]  # one removed char
    punct_split: re.Pattern[str]  # one punctuation char, or a run of non-punctuation
    compat: re.Pattern[str]  # a char of the CJK compatibility blocks (cheap test before str.translate)
    compat_nfd: dict[int, str]  # for str.translate
    compat_nfd_chars: dict[str, str]


def _char_class(ranges: Iterable[tuple[int, int]]) -> str:
    """A regex character class body; adjacent ranges are merged (sre tests ranges one by one)."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in merged)


def _minus(ranges: list[tuple[int, int]], holes: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        cp = lo
        for h in sorted(h for h in holes if lo <= h <= hi):
            if h > cp:
                out.append((cp, h - 1))
            cp = h + 1
        if cp <= hi:
            out.append((cp, hi))
    return out


@functools.cache
def _tables() -> _Tables:
    """Regexes for the character classes above, built once per process from the categories of all code
    points (~0.3 s), so they agree with the per-character functions for this Python's Unicode version."""
    cats = list(map(unicodedata.category, map(chr, range(0x110000))))
    removed: list[tuple[int, int]] = []
    punct: list[tuple[int, int]] = [(33, 47), (58, 64), (91, 96), (123, 126)]
    space: list[tuple[int, int]] = [(9, 10), (13, 13)]
    cp = 0
    for cat, run in itertools.groupby(cats):
        n = sum(1 for _ in run)
        if cat[0] == "C":
            removed.append((cp, cp + n - 1))
        elif cat[0] == "P":
            punct.append((cp, cp + n - 1))
        elif cat[0] == "Z":  # str.isspace() is true only for Z* and control characters
            space.extend((c, c) for c in range(cp, cp + n) if chr(c).isspace())
        cp += n
    removed = _minus(removed, {9, 10, 13}) + [(0xFFFD, 0xFFFD)]
    unassigned_cjk = {c for lo, hi in CJK_RANGES for c in range(lo, hi + 1) if cats[c][0] == "C"}
    cjk = _minus(list(CJK_RANGES), unassigned_cjk)
    cjk_cls, space_cls, punct_cls = _char_class(cjk), _char_class(space), _char_class(punct)
    compat_nfd: dict[int, str] = {}
    for lo, hi in _CJK_COMPAT_RANGES:
        for c in range(lo, hi + 1):
            d = unicodedata.normalize("NFD", chr(c))
            if d != chr(c):
                # Safe to apply to a whole text: the result is again one CJK char, i.e. its own token.
                assert len(d) == 1 and is_cjk(d), hex(c)
                compat_nfd[c] = d
    return _Tables(
        segment=re.compile(f"([{cjk_cls}]+)|([^{space_cls}{cjk_cls}]+)"),
        word=re.compile(f"[^{space_cls}{cjk_cls}]+"),
        cjk=re.compile(f"[{cjk_cls}]"),
        removed=re.compile(f"[{_char_class(removed)}]"),
        punct_split=re.compile(f"[{punct_cls}]|[^{punct_cls}]+"),
        compat=re.compile(f"[{_char_class(_CJK_COMPAT_RANGES)}]"),
        compat_nfd=compat_nfd,
        compat_nfd_chars={chr(c): d for c, d in compat_nfd.items()},
    )


# ----------------------------------------------------------------------------------------------------
# Basic tokenization


@dataclass(frozen=True, slots=True)
class _Basic:
    """A basic token with, per character, the index in the original text it came from."""

    text: str
    pos: list[int]
    dropped: frozenset[int]  # original indices of combining marks removed by accent stripping

    def span(self, a: int, b: int) -> tuple[int, int]:
        """Original span of characters [a, b) of this token."""
        part = self.pos[a:b]
        end = max(part) + 1
        while end in self.dropped:
            end += 1
        return min(part), end


class BasicTokenizer:
    """BERT's BasicTokenizer for one setting of lower-casing and accent stripping.

    `strip_accents=None` follows BERT: strip exactly when lower-casing. Arabic and other scripts whose
    combining marks carry meaning want `strip_accents=False`.
    """

    def __init__(self, lowercase: bool = True, strip_accents: bool | None = None,
                 normalize: Iterable[str] | None = None):
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.normalize = check_normalize(normalize)
        self._norm = normalization_table(self.normalize)
        self._t = _tables()
        self._words: dict[str, list[str]] = {}
        self._pieces: dict[str, list[str]] = {}

    # -- fast path: strings only --------------------------------------------------------------------

    def _prepare(self, text: str) -> str:
        t = self._t
        if self.strip_accents and t.compat.search(text):
            text = text.translate(t.compat_nfd)
        return text

    def _split_word(self, word: str) -> list[str]:
        """Basic tokens of one whitespace-free, CJK-free run of the original text."""
        s = self._t.removed.sub("", word)
        if self._norm:
            s = s.translate(self._norm)
        if self.lowercase:
            s = s.lower()
        if self.strip_accents:
            s = "".join(c for c in unicodedata.normalize("NFD", s) if unicodedata.category(c) != "Mn")
        return self._t.punct_split.findall(s)

    def split(self, text: str) -> list[str]:
        """The basic tokens of `text` (what WordPiece sees)."""
        out: list[str] = []
        cache = self._words
        for cjk, word in self._t.segment.findall(self._prepare(text)):
            if cjk:
                out += cjk
            else:
                toks = cache.get(word)
                if toks is None:
                    if len(cache) >= _CACHE_LIMIT:
                        cache.clear()
                    toks = cache[word] = self._split_word(word)
                out += toks
        return out

    def char_pieces(self, text: str) -> list[str]:
        """What WordPiece would produce with a complete single-character vocabulary: every CJK and
        punctuation char is a piece, other words become `a ##b ##c`; a word over 100 chars is [UNK]."""
        out: list[str] = []
        cache = self._pieces
        for cjk, word in self._t.segment.findall(self._prepare(text)):
            if cjk:
                out += cjk
            else:
                pieces = cache.get(word)
                if pieces is None:
                    if len(cache) >= _CACHE_LIMIT:
                        cache.clear()
                    pieces = cache[word] = [p for tok in self._split_word(word) for p in _char_pieces_of(tok)]
                out += pieces
        return out

    def char_piece_counts(self, text: str) -> Counter[str]:
        """Counter(self.char_pieces(text)), counted in C: the characters of the text at once (its CJK ones are
        pieces) and its words at once (each distinct word split into pieces once). Lines may be joined by
        newlines first: a newline separates words as a line end does."""
        text = self._prepare(text)
        code_points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
        chars = np.bincount(code_points)  # [max code point + 1]
        present = np.flatnonzero(chars).tolist()
        out: Counter[str] = Counter({chr(c): int(chars[c]) for c in present if self._t.cjk.match(chr(c))})
        words = Counter(self._t.word.findall(text))
        for word, n in words.items():
            for piece in [p for tok in self._split_word(word) for p in _char_pieces_of(tok)]:
                out[piece] += n
        return out

    # -- offsets path -------------------------------------------------------------------------------

    def split_with_offsets(self, text: str) -> list[Token]:
        """The basic tokens with their spans in `text`."""
        out: list[Token] = []
        for b in self._basic_with_positions(text):
            start, end = b.span(0, len(b.text))
            out.append(Token(b.text, start, end))
        return out

    def _basic_with_positions(self, text: str) -> list[_Basic]:
        out: list[_Basic] = []
        compat = self._t.compat_nfd_chars if self.strip_accents else {}
        for m in self._t.segment.finditer(text):
            cjk = m.group(1)
            if cjk:
                base = m.start(1)
                out.extend(_Basic(compat.get(c, c), [base + k], frozenset()) for k, c in enumerate(cjk))
            else:
                out.extend(self._word_with_positions(m.group(2), m.start(2)))
        return out

    def _word_with_positions(self, word: str, base: int) -> list[_Basic]:
        pos = [base + i for i, c in enumerate(word) if not is_removed(c)]
        s = "".join(word[p - base] for p in pos)
        normalized: frozenset[int] = frozenset()
        if self._norm:
            # One char → one char or nothing: positions follow; a dropped char (a diacritic) is kept in
            # the span of the token it sits in, like a stripped accent.
            mapped = [(self._norm.get(ord(c), c), p) for c, p in zip(s, pos)]
            normalized = frozenset(p for m, p in mapped if m is None)
            s = "".join(m for m, _ in mapped if m is not None)
            pos = [p for m, p in mapped if m is not None]
        if self.lowercase:
            low = s.lower()
            if len(low) != len(s):
                # Each char lowers to >= 1 chars; only the final-sigma rule depends on context, 1:1.
                lens = [len(c.lower()) for c in s]
                if sum(lens) == len(low):
                    pos = [p for p, n in zip(pos, lens) for _ in range(n)]
                else:
                    pos = _stretch(pos, len(low))
            s = low
        dropped: frozenset[int] = frozenset()
        if self.strip_accents:
            nfd = unicodedata.normalize("NFD", s)
            pairs = [(d, p) for c, p in zip(s, pos) for d in unicodedata.normalize("NFD", c)]
            pairs = _canonical_reorder(pairs)
            if "".join(d for d, _ in pairs) != nfd:
                pairs = list(zip(nfd, _stretch(pos, len(nfd))))
            kept = [(d, p) for d, p in pairs if unicodedata.category(d) != "Mn"]
            if len(kept) != len(pairs):
                kept_pos = {p for _, p in kept}
                dropped = frozenset(p for _, p in pairs if p not in kept_pos)
            s = "".join(d for d, _ in kept)
            pos = [p for _, p in kept]
        dropped |= normalized
        out = []
        for m in self._t.punct_split.finditer(s):
            out.append(_Basic(m.group(), pos[m.start() : m.end()], dropped))
        return out


def _char_pieces_of(tok: str) -> list[str]:
    if len(tok) > MAX_CHARS_PER_WORD:
        return [UNK]
    return [tok[0], *(CONTINUATION + c for c in tok[1:])]


def _canonical_reorder(pairs: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Unicode canonical ordering (the last step of NFD): stable-sort each run of combining marks by
    combining class, carrying each mark's source index along."""
    out: list[tuple[str, int]] = []
    run: list[tuple[str, int]] = []
    for pair in pairs:
        if unicodedata.combining(pair[0]):
            run.append(pair)
            continue
        if run:
            out += sorted(run, key=lambda q: unicodedata.combining(q[0]))
            run = []
        out.append(pair)
    if run:
        out += sorted(run, key=lambda q: unicodedata.combining(q[0]))
    return out


def _stretch(pos: list[int], n: int) -> list[int]:
    """Fallback alignment of n output chars onto source positions, proportionally (never expected: only
    if Unicode ever broke the per-character rules relied on above)."""
    return [pos[min(k * len(pos) // n, len(pos) - 1)] for k in range(n)]


@functools.cache
def _basic(lowercase: bool, strip_accents: bool | None, normalize: tuple[str, ...] = ()) -> BasicTokenizer:
    return BasicTokenizer(lowercase, strip_accents, normalize)


def basic_tokenize(text: str, lowercase: bool = True, strip_accents: bool | None = None,
                   normalize: Iterable[str] = ()) -> list[str]:
    """BERT's basic tokens (before WordPiece)."""
    return _basic(lowercase, strip_accents, tuple(normalize)).split(text)


def char_pieces(text: str, lowercase: bool = True, strip_accents: bool | None = None,
                normalize: Iterable[str] = ()) -> list[str]:
    """Vocabulary-free tokenization: what `Tokenizer.tokens` returns with a complete character vocabulary
    (`"abc"` → `a ##b ##c`; each CJK and punctuation char alone). Used to count n-grams before a vocab exists."""
    return _basic(lowercase, strip_accents, tuple(normalize)).char_pieces(text)


def sidecar_normalize(side: dict | None, source: object) -> list[str]:
    """The `normalize` list of a vocab.json sidecar ([] when absent); ZenError naming the file if bad."""
    value = (side or {}).get("normalize", [])
    try:
        if not isinstance(value, list):
            raise ValueError(f"normalize: expected a list of names, got {value!r}")
        return check_normalize(value)
    except ValueError as e:
        raise ZenError(f"{Path(str(source)).with_suffix('.json')}: {e}") from None


# ----------------------------------------------------------------------------------------------------
# WordPiece


# Half-width ASCII ! .. ~ and their full-width forms U+FF01 .. U+FF5E (plus the two spaces) differ by a constant.
_FULL_OFFSET = 0xFEE0
_TO_FULL = {c: c + _FULL_OFFSET for c in range(0x21, 0x7F)} | {0x20: 0x3000}
_TO_HALF = {v: k for k, v in _TO_FULL.items()}


def width_variants(text: str) -> list[str]:
    """`text` written in full-width forms and in half-width ASCII, where either differs from it: what a
    vocabulary built from one kind of text (PD98 has only full-width digits, letters and punctuation)
    may know of the other kind (web text's `2024`, `CPU`, `!`)."""
    return [v for v in (text.translate(_TO_FULL), text.translate(_TO_HALF)) if v != text]


class _Lookup(dict):
    """A dict that answers `default` for missing keys (via __missing__, so lookups stay in C)."""

    def __init__(self, items: dict, default: object):
        super().__init__(items)
        self.default = default

    def __missing__(self, key: object) -> object:
        return self.default


class Tokenizer:
    """Basic tokenization + WordPiece against a `Vocab`. The vocabulary decides the granularity: a
    character vocabulary (Chinese) gives one token per char, a trained WordPiece vocabulary gives pieces."""

    def __init__(
        self,
        vocab: Vocab,
        *,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        max_chars_per_word: int = MAX_CHARS_PER_WORD,
        width_fallback: bool = True,
        normalize: Iterable[str] | None = None,
    ):
        self.vocab = vocab
        self.width_fallback = width_fallback
        self.basic = BasicTokenizer(lowercase, strip_accents, normalize)
        self.max_chars_per_word = max_chars_per_word
        self.unk_id = vocab.unk_id  # a clear error now if the vocabulary has no [UNK]
        self._ids = vocab.token_ids
        # A substring longer than this is in the vocabulary with neither prefix: bounds the greedy search.
        self._max_len = max((len(t) - 2 if t.startswith(CONTINUATION) else len(t) for t in vocab), default=1)
        self._word_tokens: dict[str, list[str]] = {}
        self._word_ids: dict[str, list[int]] = {}
        self._word_spans: dict[str, list[tuple[str, int, int, int]]] = {}
        # CJK runs go through map(lookup.__getitem__, run), which stays in C (2-3x a comprehension).
        self._char_token = _Lookup({t: t for t in vocab}, UNK)
        self._char_id = _Lookup(vocab.token_ids, self.unk_id)

    @classmethod
    def from_vocab(
        cls, vocab: str | Path | Vocab, lowercase: bool | None = None, strip_accents: bool | None = None
    ) -> Tokenizer:
        """Load a vocabulary (path or Vocab). Settings left as None come from the `vocab.json` that
        `zen vocab build` writes next to vocab.txt, else BERT's defaults (lower-case, strip accents); the
        Arabic normalisation always comes from there (none without one)."""
        v = vocab if isinstance(vocab, Vocab) else Vocab.load(vocab)
        side = read_sidecar(v.source) if Path(v.source).is_file() else None
        normalize = sidecar_normalize(side, v.source)
        if side is not None:
            lowercase = bool(side.get("lowercase", True)) if lowercase is None else lowercase
            if strip_accents is None and isinstance(side.get("strip_accents"), bool):
                strip_accents = side["strip_accents"]
        return cls(v, lowercase=True if lowercase is None else lowercase, strip_accents=strip_accents,
                   normalize=normalize)

    @property
    def normalize(self) -> list[str]:
        return self.basic.normalize

    @property
    def lowercase(self) -> bool:
        return self.basic.lowercase

    @property
    def strip_accents(self) -> bool:
        return self.basic.strip_accents

    def wordpiece(self, word: str) -> list[tuple[str, int, int]] | None:
        """Greedy longest-match-first pieces of one basic token as (piece, start, end) in the word, or
        None when the word is [UNK] (too long, or some part matches no vocabulary entry).

        With `width_fallback` (the default) a word BERT would make [UNK] is tried in full-width and in
        half-width forms (`width_variants`; same length, so the spans hold) before it is given up: the
        pieces are then the vocabulary's spelling. BERT's exact semantics: `width_fallback=False`."""
        pieces = self._wordpiece(word)
        if pieces is None and self.width_fallback:
            for variant in width_variants(word):
                pieces = self._wordpiece(variant)
                if pieces is not None:
                    break
        return pieces

    def _wordpiece(self, word: str) -> list[tuple[str, int, int]] | None:
        n = len(word)
        if n > self.max_chars_per_word:
            return None
        ids = self._ids
        out: list[tuple[str, int, int]] = []
        start = 0
        while start < n:
            end = min(n, start + self._max_len)
            while end > start:
                piece = word[start:end] if start == 0 else CONTINUATION + word[start:end]
                if piece in ids:
                    break
                end -= 1
            else:
                return None
            out.append((piece, start, end))
            start = end
        return out

    def _pieces_of_word(self, word: str) -> list[str]:
        out: list[str] = []
        for tok in self.basic._split_word(word):
            pieces = self.wordpiece(tok)
            if pieces is None:
                out.append(UNK)
            else:
                out += (p for p, _, _ in pieces)
        return out

    def tokens(self, text: str) -> list[str]:
        """Token strings (fast path; same tokens as `tokenize`)."""
        char_token = self._char_token.__getitem__
        out: list[str] = []
        cache = self._word_tokens
        for cjk, word in self.basic._t.segment.findall(self.basic._prepare(text)):
            if cjk:
                out += map(char_token, cjk)
            else:
                toks = cache.get(word)
                if toks is None:
                    if len(cache) >= _CACHE_LIMIT:
                        cache.clear()
                    toks = cache[word] = self._pieces_of_word(word)
                out += toks
        return out

    def encode(self, text: str) -> list[int]:
        """Token ids (fast path; no [CLS]/[SEP] added)."""
        char_id = self._char_id.__getitem__
        out: list[int] = []
        cache = self._word_ids
        for cjk, word in self.basic._t.segment.findall(self.basic._prepare(text)):
            if cjk:
                out += map(char_id, cjk)
            else:
                ids = cache.get(word)
                if ids is None:
                    if len(cache) >= _CACHE_LIMIT:
                        cache.clear()
                    ids = cache[word] = [self._ids[p] for p in self._pieces_of_word(word)]
                out += ids
        return out

    def tokenize(self, text: str) -> list[Token]:
        """Tokens with ids and `[start, end)` spans into `text` as given (before any normalisation)."""
        ids = self._ids
        unk = self.unk_id
        compat = self.basic._t.compat_nfd_chars if self.strip_accents else {}
        out: list[Token] = []
        for m in self.basic._t.segment.finditer(text):
            cjk = m.group(1)
            if cjk:  # one token per char: no WordPiece search needed
                base = m.start(1)
                for k, c in enumerate(cjk):
                    c = compat.get(c, c)
                    i = ids.get(c)
                    if i is None:
                        c, i = UNK, unk
                    out.append(Token(c, base + k, base + k + 1, i))
                continue
            word, base = m.group(2), m.start(2)
            spans = self._word_spans.get(word)
            if spans is None:
                if len(self._word_spans) >= _CACHE_LIMIT:
                    self._word_spans.clear()
                spans = self._word_spans[word] = self._spans_of_word(word)
            out += [Token(piece, base + a, base + z, i) for piece, a, z, i in spans]
        return out

    def _spans_of_word(self, word: str) -> list[tuple[str, int, int, int]]:
        """(piece, start, end, id) with spans relative to the word."""
        out: list[tuple[str, int, int, int]] = []
        for b in self.basic._word_with_positions(word, 0):
            pieces = self.wordpiece(b.text)
            if pieces is None:
                out.append((UNK, *b.span(0, len(b.text)), self.unk_id))
            else:
                out += [(piece, *b.span(a, z), self._ids[piece]) for piece, a, z in pieces]
        return out

    def decode_ids(self, ids: Iterable[int]) -> list[str]:
        return [self.vocab.id_to_token(i) for i in ids]
