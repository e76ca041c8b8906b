"""Segmenters for whole n-gram masking: a token sequence → consecutive pieces (words) covering it.

Whole n-gram masking (ZEN 2.0) masks linguistic units rather than single characters: a segmenter cuts the
text into pieces, `zencli.data.masking.merge_with_lexicon` merges adjacent pieces into lexicon n-grams,
and whole units are masked. Every segmenter answers

    segment(tokens: list[str]) -> list[tuple[int, int]]

with spans `[start, end)` over token positions that are consecutive and cover all tokens (an empty
list for no tokens). `make_segmenter(spec, lexicon)` builds one from a spec string:

- `lexicon`: forward maximum matching on the lexicon's n-grams (built in, no dependency). At each
  position the longest lexicon n-gram starting there is one piece, else the single token.
- `jieba`: the jieba word segmenter (optional extra: `pip install jieba`, or `pip install 'zencli[jieba]'`).
  jieba segments the surface text (the tokens joined, `##` markers removed, special tokens as one space);
  its word boundaries are mapped back to token positions, and a token that straddles a jieba boundary
  (a WordPiece piece spanning two jieba words) keeps the piece boundary at the next token boundary.
- `model:DIR`: a zen CWS model fine-tuned by `zen finetune --task cws` (the role WMSeg plays in the
  ZEN 2.0 paper). The model labels the characters of the tokens' surface text (B/M/E/S); a piece ends
  at a token whose last character ends a predicted word (a word ending inside a token extends to the
  token's end). Special tokens are pieces of their own. It runs one forward pass per segment, so it is
  the slowest segmenter; generate shards with `--workers` to use the cores.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.tokenizer import CONTINUATION
from zencli.text.vocab import SPECIAL_TOKENS

Span = tuple[int, int]
SEGMENTER_KINDS = ("lexicon", "jieba", "model:DIR")


class Segmenter(Protocol):
    def segment(self, tokens: Sequence[str]) -> list[Span]: ...


def lexicon_ngram_set(lexicon: Lexicon, max_n: int = 8) -> set[tuple[str, ...]]:
    """The lexicon's n-grams of 2..max_n tokens, as a set of token tuples (for membership tests)."""
    return {g for g in lexicon.ngrams if 2 <= len(g) <= max_n}


class LexiconSegmenter:
    """Forward maximum matching on lexicon n-grams of 2..max_n tokens; other tokens are single pieces."""

    name = "lexicon"

    def __init__(self, lexicon: Lexicon, max_n: int = 8, *, ngram_set: set[tuple[str, ...]] | None = None):
        if max_n < 2:
            raise ValueError(f"max_n must be >= 2, got {max_n}")
        self.max_n = max_n
        self.ngrams = ngram_set if ngram_set is not None else lexicon_ngram_set(lexicon, max_n)
        # First token → length of the longest n-gram starting with it: bounds the search at each position
        # (most tokens start no n-gram at all, and most start only short ones).
        self._longest: dict[str, int] = {}
        for g in self.ngrams:
            if len(g) <= max_n and len(g) > self._longest.get(g[0], 0):
                self._longest[g[0]] = len(g)

    def segment(self, tokens: Sequence[str]) -> list[Span]:
        ngrams, longest = self.ngrams, self._longest
        n = len(tokens)
        out: list[Span] = []
        i = 0
        while i < n:
            step = 1
            for k in range(min(longest.get(tokens[i], 0), n - i), 1, -1):
                if tuple(tokens[i : i + k]) in ngrams:
                    step = k
                    break
            out.append((i, i + step))
            i += step
        return out


def surface(token: str) -> str:
    """The text a token stands for when tokens are joined back into a string for a word segmenter."""
    if token in SPECIAL_TOKENS:
        return " "
    if token.startswith(CONTINUATION) and len(token) > len(CONTINUATION):
        return token[len(CONTINUATION) :]
    return token


def spans_from_word_bounds(tokens: Sequence[str], word_bounds: Iterable[int]) -> list[Span]:
    """Pieces over token positions from word boundaries given as character offsets into the joined
    surface text: a token starts a new piece iff a word boundary falls exactly at its first character."""
    bounds = set(word_bounds)
    starts = [0]
    offset = 0
    for i, tok in enumerate(tokens):
        if i and offset in bounds:
            starts.append(i)
        offset += len(surface(tok))
    if not tokens:
        return []
    ends = starts[1:] + [len(tokens)]
    return list(zip(starts, ends))


class JiebaSegmenter:
    """jieba word segmentation (default mode, HMM on) mapped back to token positions.

    `tokenize` (for tests and other word segmenters): text → iterable of (word, start, end) character
    spans, as `jieba.Tokenizer().tokenize` yields; None loads jieba.
    """

    name = "jieba"

    def __init__(self, tokenize: Callable[[str], Iterable[tuple[str, int, int]]] | None = None):
        self.version = "custom"
        if tokenize is None:
            try:
                import jieba  # optional dependency (zencli[jieba])
            except ImportError:
                raise ZenError(
                    "segmenter 'jieba' needs the jieba package, which is not installed: pip install jieba "
                    "(or pip install 'zencli[jieba]'), or use --segmenter lexicon"
                ) from None
            jieba.setLogLevel(logging.WARNING)  # its dictionary loading chatters on stderr
            tokenizer = jieba.Tokenizer()
            self.version = f"jieba {getattr(jieba, '__version__', '?')}"
            tokenize = tokenizer.tokenize
        self._tokenize = tokenize

    def segment(self, tokens: Sequence[str]) -> list[Span]:
        text = "".join(map(surface, tokens))
        bounds = [start for _, start, _ in self._tokenize(text)]
        return spans_from_word_bounds(tokens, bounds)


ModelLoader = Callable[[str], Segmenter]  # `model:DIR` → a Segmenter (zencli.tasks.segmenter.load_model_segmenter)


def make_segmenter(spec: str, lexicon: Lexicon, *, max_n: int = 8, load_model: ModelLoader | None = None) -> Segmenter:
    """`lexicon` | `jieba` | `model:DIR` → a Segmenter (one-line ZenError for anything else).

    A `model:DIR` segmenter is a fine-tuned CWS model, which belongs to the tasks layer above this one: the
    caller passes its loader (`load_model`), so the data layer never imports upward."""
    spec = spec.strip()
    if spec == "lexicon":
        return LexiconSegmenter(lexicon, max_n)
    if spec == "jieba":
        return JiebaSegmenter()
    if spec.startswith("model:"):
        directory = spec[len("model:") :]
        if not directory:
            raise ZenError("segmenter 'model:DIR': expected a model directory after 'model:', got nothing")
        if load_model is None:
            raise ZenError("segmenter 'model:DIR': this caller cannot load task models (pretraining passes "
                           "zencli.tasks.segmenter.load_model_segmenter); use lexicon or jieba here")
        return load_model(directory)
    raise ZenError(f"segmenter: expected one of {', '.join(SEGMENTER_KINDS)}, got {spec!r}")


def describe_segmenter(segmenter: Segmenter) -> str:
    """A string that changes whenever the segmenter's output may change (part of a data fingerprint)."""
    if isinstance(segmenter, LexiconSegmenter):
        return f"lexicon fmm max_n={segmenter.max_n}"
    if isinstance(segmenter, JiebaSegmenter):
        return segmenter.version
    describe = getattr(segmenter, "describe", None)  # e.g. the model segmenter: its weights' identity
    return describe() if describe is not None else type(segmenter).__name__
