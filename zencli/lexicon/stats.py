"""`zen lexicon stats`: how a lexicon's matches sit against the words of gold-segmented text.

Definitions (counted over the whole gold file):

* **Gold text.** One sentence per line, words separated by whitespace (SIGHAN/PD98 CWS files). A line's
  text is its words joined with nothing between them, which is what a model reads; word i spans the
  characters [b_i, b_i+1) of it, and b_0 = 0, b_1, …, b_k = len(text) are the line's *word boundaries*.
  An empty line has no words; a line without spaces is one word.
* **Tokens.** The text is cut into tokens exactly as the lexicon's n-grams were counted (and as
  pretraining feeds the model): `char_pieces`, one token per character, characters after the first of a
  run of digits or Latin letters as `##` pieces (`１９９８` → `１ ##９ ##９ ##８`), lower-cased as the lexicon's
  sidecar says (default: lower-cased). Every token has a character span.
* **Match.** Every occurrence of a lexicon n-gram of 2..8 tokens in a line's tokens, overlapping ones
  included, found by `NgramMatcher`: the matcher that fills the model's n-gram slots. A match spans from
  its first token's start to its last token's end.
* **Cutting match.** A match whose start or end lies strictly inside a gold word (is not a word boundary).
  **Cut share** = cutting matches / matches.
* **Coverage.** A multi-character gold word (an occurrence, not a type: >= 2 characters) is *covered*
  when some match spans exactly that word. **Coverage** = covered multi-character words / multi-character
  words. Words of more than 8 characters count too, though no n-gram is that long.
* A match that cuts nothing spans either exactly one gold word (which it covers: a span holds at most
  one n-gram, so these matches are the covered words) or several whole words (`phrase_matches`).
* Per length n = 2..8: matches of n tokens, how many cut, their share; gold words of n characters, how
  many are covered, coverage (words of 9+ characters in one row).

Shares with a zero denominator are None. The file is streamed in batches (memory stays flat).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from zencli.errors import ZenError
from zencli.lexicon.matcher import NgramMatcher
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.reading import check_readable, iter_lines
from zencli.text.tokenizer import CONTINUATION, MAX_CHARS_PER_WORD, BasicTokenizer
from zencli.text.vocab import UNK

MIN_LEN, MAX_LEN = 2, 8  # match lengths, as the model's n-gram slots ("zen" rules)
LONG = MAX_LEN + 1  # row of the per-length table that holds gold words of 9+ characters
_SPAN = 1 << 32  # span key = start * _SPAN + length (chars); a batch is far below 2**31 chars
_BATCH_LINES = 512
_BATCH_CELLS = 2_000_000  # lines × longest line (tokens): the matcher pads a batch to its longest line


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass
class BoundaryStats:
    """The counts behind the figures (see the module docstring); all per-length arrays are indexed by n."""

    lexicon: str
    gold: str
    ngrams: int
    lines: int = 0
    chars: int = 0
    words: int = 0
    matches: np.ndarray = field(default_factory=lambda: np.zeros(LONG + 1, np.int64))  # [n] by tokens
    cutting: np.ndarray = field(default_factory=lambda: np.zeros(LONG + 1, np.int64))
    gold_words: np.ndarray = field(default_factory=lambda: np.zeros(LONG + 1, np.int64))  # [n] by chars, 9+ at LONG
    covered: np.ndarray = field(default_factory=lambda: np.zeros(LONG + 1, np.int64))

    @property
    def total_matches(self) -> int:
        return int(self.matches.sum())

    @property
    def total_cutting(self) -> int:
        return int(self.cutting.sum())

    @property
    def multichar_words(self) -> int:
        return int(self.gold_words[2:].sum())

    @property
    def total_covered(self) -> int:
        return int(self.covered.sum())

    @property
    def cut_share(self) -> float | None:
        return _share(self.total_cutting, self.total_matches)

    @property
    def coverage(self) -> float | None:
        return _share(self.total_covered, self.multichar_words)

    def per_length(self) -> list[dict[str, Any]]:
        rows = []
        for n in range(MIN_LEN, LONG + 1):
            m, c, w, v = (int(a[n]) for a in (self.matches, self.cutting, self.gold_words, self.covered))
            rows.append({"n": n if n <= MAX_LEN else f"{LONG}+", "matches": m, "cutting": c,
                         "cut_share": _share(c, m), "gold_words": w, "covered": v, "coverage": _share(v, w)})
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "lexicon": self.lexicon, "gold": self.gold, "ngrams": self.ngrams,
            "lines": self.lines, "chars": self.chars, "words": self.words,
            "multichar_words": self.multichar_words, "covered": self.total_covered, "coverage": self.coverage,
            "matches": self.total_matches, "cutting": self.total_cutting, "cut_share": self.cut_share,
            "phrase_matches": self.total_matches - self.total_cutting - self.total_covered,
            "per_length": self.per_length(),
        }


def char_pieces_with_spans(basic: BasicTokenizer, text: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """`basic.char_pieces(text)` with each piece's character span [start, end) in `text`.

    A basic token whose normalised form has as many chars as its span (always, for Chinese text) gives
    piece k the span of char k; otherwise (lower-casing or accent stripping changed the length) its
    pieces share the span out in order, first piece at its start, last at its end.
    """
    pieces: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for tok in basic.split_with_offsets(text):
        t, a, z = tok.text, tok.start, tok.end
        if len(t) > MAX_CHARS_PER_WORD:
            pieces.append(UNK)
            starts.append(a)
            ends.append(z)
            continue
        n = len(t)
        cuts = [a + k for k in range(n + 1)] if z - a == n else [a + (k * (z - a)) // n for k in range(n + 1)]
        cuts[-1] = z
        pieces.append(t[0])
        pieces.extend(CONTINUATION + c for c in t[1:])
        starts.extend(cuts[:-1])
        ends.extend(cuts[1:])
    return pieces, np.asarray(starts, np.int64), np.asarray(ends, np.int64)


def _tokenizer_of(ngram_path: Path) -> BasicTokenizer:
    """The lexicon's tokenizer settings from its sidecar (ngram.json), if it has one."""
    side = ngram_path.with_suffix(".json")
    settings: dict[str, Any] = {}
    if side.is_file():
        try:
            settings = json.loads(side.read_text(encoding="utf-8")).get("settings", {}).get("tokenizer") or {}
        except (UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            raise ZenError(f"{side}: not a valid lexicon sidecar (JSON written by `zen lexicon build`)") from None
    kind = settings.get("kind", "char_pieces")
    if kind != "char_pieces":
        raise ZenError(f"{side}: the lexicon was counted over {kind} tokens; `zen lexicon stats` compares "
                       f"character n-grams with gold word boundaries (expected a character lexicon)")
    return BasicTokenizer(lowercase=settings.get("lowercase", True), strip_accents=settings.get("strip_accents"))


@dataclass
class _Batch:
    """A batch of gold lines: per line its token ids, token char spans, word boundaries b_0..b_k."""

    ids: list[np.ndarray] = field(default_factory=list)
    tok_start: list[np.ndarray] = field(default_factory=list)
    tok_end: list[np.ndarray] = field(default_factory=list)
    bounds: list[np.ndarray] = field(default_factory=list)
    width: int = 0  # tokens of the longest line

    def __len__(self) -> int:
        return len(self.ids)


def _flat(parts: list[np.ndarray], offsets: np.ndarray) -> np.ndarray:
    """Concatenate per-line arrays of char positions, shifting line i by offsets[i]."""
    sizes = np.fromiter(map(len, parts), np.int64, len(parts))
    return np.concatenate(parts) + np.repeat(offsets, sizes)


def _count_batch(batch: _Batch, matcher: NgramMatcher, out: BoundaryStats) -> None:
    """Add one batch's counts to `out`. The batch's lines are laid out in one flat char space, line i at
    char_off[i], with a gap of one position between lines so that spans of two lines never touch."""
    lens = np.fromiter((int(b[-1]) for b in batch.bounds), np.int64, len(batch))  # [B] chars per line
    char_off = np.zeros(len(batch), np.int64)
    np.cumsum(lens[:-1] + 1, out=char_off[1:])
    tok_start = _flat(batch.tok_start, char_off)  # [T] flat char spans of all tokens
    tok_end = _flat(batch.tok_end, char_off)
    tok_off = np.zeros(len(batch), np.int64)  # [B] index of each line's first token in the flat arrays
    np.cumsum([len(x) for x in batch.ids[:-1]], out=tok_off[1:])

    is_bound = np.zeros(int(char_off[-1] + lens[-1]) + 1, bool)  # [chars + gaps + 1]
    is_bound[_flat(batch.bounds, char_off)] = True
    word_start = _flat([b[:-1] for b in batch.bounds], char_off)  # [W] flat start of every gold word
    word_len = np.concatenate([np.diff(b) for b in batch.bounds])  # [W] chars
    word_keys = word_start * _SPAN + word_len

    m = matcher.match_batch(batch.ids)
    first = tok_off[m.seq] + m.start  # [K] flat index of each match's first token
    a = tok_start[first]  # [K] match span [a, z) in flat chars
    z = tok_end[first + m.length - 1]
    cut = ~(is_bound[a] & is_bound[z])
    match_keys = a * _SPAN + (z - a)
    out.matches += np.bincount(m.length, minlength=LONG + 1)
    out.cutting += np.bincount(m.length[cut], minlength=LONG + 1)

    row = np.minimum(word_len, LONG)
    covered = (word_len >= 2) & np.isin(word_keys, match_keys)
    out.gold_words += np.bincount(row, minlength=LONG + 1)
    out.covered += np.bincount(row[covered], minlength=LONG + 1)
    out.words += len(word_len)


def gold_stats(
    ngram_path: str | Path,
    gold_path: str | Path,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> BoundaryStats:
    """Match the lexicon in the gold text and count (see the module docstring).

    `on_progress(bytes_done, bytes_total)` is called after each batch."""
    ngram_path, gold_path = Path(ngram_path), check_readable(gold_path)
    lexicon = Lexicon.load(ngram_path)
    basic = _tokenizer_of(ngram_path)
    table: dict[str, int] = {}
    for g in lexicon.ngrams:
        for t in g:
            table.setdefault(t, len(table))
    unknown = len(table)  # one id for every token the lexicon lacks: it starts and continues no n-gram
    matcher = NgramMatcher.from_lexicon(lexicon, table.get, MIN_LEN, MAX_LEN)
    out = BoundaryStats(str(ngram_path), str(gold_path), len(lexicon))
    total = gold_path.stat().st_size
    done = 0
    for batch, nbytes in _batches(gold_path, basic, table, unknown, out):
        _count_batch(batch, matcher, out)
        done += nbytes
        if on_progress is not None:
            on_progress(done, total)
    return out


def _batches(path: Path, basic: BasicTokenizer, table: dict[str, int], unknown: int,
             out: BoundaryStats) -> Iterator[tuple[_Batch, int]]:
    batch, nbytes = _Batch(), 0
    for _, line in iter_lines(path):
        words = line.split()
        text = "".join(words)
        pieces, starts, ends = char_pieces_with_spans(basic, text)
        width = max(batch.width, len(pieces))
        if len(batch) and (len(batch) >= _BATCH_LINES or (len(batch) + 1) * width > _BATCH_CELLS):
            yield batch, nbytes  # a long line starts a batch of its own rather than widen this one
            batch, nbytes, width = _Batch(), 0, len(pieces)
        bounds = np.zeros(len(words) + 1, np.int64)
        np.cumsum([len(w) for w in words], out=bounds[1:])
        batch.ids.append(np.fromiter((table.get(p, unknown) for p in pieces), np.int64, len(pieces)))
        batch.tok_start.append(starts)
        batch.tok_end.append(ends)
        batch.bounds.append(bounds)
        batch.width = width
        out.lines += 1
        out.chars += len(text)
        nbytes += len(line.encode("utf-8")) + 1
    if len(batch):
        yield batch, nbytes
