"""Raw pretraining text → documents → BERT sentence pairs for next-sentence prediction.

Two input layouts (detected per file, or forced):
- `blank-line`: one sentence per line, a blank line between documents (BERT's layout);
- `line`: one document per line (e.g. a paragraph), split into sentences after 。！？!? and friends.
`auto` picks `blank-line` when the file contains a blank line between non-blank lines, else `line`.

Pairs follow BERT's create_instances_from_document with two changes. Nothing is truncated, and a chunk
holding a single segment is cut in two half of the time to give a true-next pair (BERT always pairs it
with a random B, which pushes the random-next share far above 50% on paragraph-per-line corpora). A sentence
longer than half the budget is cut into consecutive windows first, and a chunk stops growing *before* a
sentence that would not fit, so every token of the corpus lands in exactly one segment A or true
segment B per duplication round. Only the random B (taken from another document) is cut to length,
which loses nothing since that text is also visited in its own document.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from zencli.errors import ZenError
from zencli.text.reading import iter_lines, shard_byte_ranges

Layout = Literal["auto", "blank-line", "line"]

# Sentence ends: Chinese and ASCII terminal punctuation, optionally followed by closing quotes/brackets.
_SENT_END = re.compile(r"(?<=[。！？!?；…])(?![”’」』）)\]」。！？!?…])|(?<=[。！？!?][”’」』）)\]])")


def split_sentences(text: str) -> list[str]:
    """Split a paragraph after sentence-final punctuation (closing quotes stay with their sentence)."""
    parts = [p for p in _SENT_END.split(text) if p.strip()]
    return parts or ([text] if text.strip() else [])


def detect_layout(path: Path) -> Literal["blank-line", "line"]:
    seen_text = False
    blank_after_text = False
    for _, line in iter_lines(path):
        if not line.strip():
            if seen_text:
                blank_after_text = True
        elif blank_after_text:
            return "blank-line"
        else:
            seen_text = True
    return "line"


def read_documents(paths: Sequence[str | Path], layout: Layout = "auto") -> Iterable[list[str]]:
    """Yield documents as lists of sentences (non-empty strings)."""
    for path in paths:
        yield from documents_in(path, detect_layout(Path(path)) if layout == "auto" else layout)


def documents_in(path: str | Path, mode: Literal["blank-line", "line"], start_byte: int = 0,
                 end_byte: int | None = None) -> Iterator[list[str]]:
    """The documents of one file in layout `mode`, of the lines that start in [start_byte, end_byte) (see
    `document_ranges`; line numbers in errors are then relative to start_byte)."""
    lines = iter_lines(path, start_byte=start_byte, end_byte=end_byte)
    if mode == "line":
        for _, line in lines:
            sents = split_sentences(line.strip())
            if sents:
                yield sents
        return
    doc: list[str] = []
    for _, line in lines:
        if line.strip():
            doc.append(line.strip())
        elif doc:
            yield doc
            doc = []
    if doc:
        yield doc


def document_ranges(path: str | Path, mode: Literal["blank-line", "line"], n: int) -> list[tuple[int, int]]:
    """About `n` byte ranges of a file, each holding whole documents: read with `documents_in`, one after
    another, they give the file's documents. A `line` document is a line; a `blank-line` range ends after a
    blank line (fewer ranges when the blank lines are fewer)."""
    ranges = shard_byte_ranges(path, n)
    if mode == "line" or len(ranges) == 1:
        return ranges
    cuts = [0]
    with open(path, "rb") as f:
        for _, end in ranges[:-1]:
            if end <= cuts[-1]:
                continue
            f.seek(end - 1)
            if f.read(1) != b"\n":
                f.readline()  # the line that starts before the cut
            while True:  # to the end of the next blank line
                line = f.readline()
                if not line or not line.decode("utf-8", "replace").strip():
                    break
            cut = f.tell()
            if cut < ranges[-1][1] and cut > cuts[-1]:
                cuts.append(cut)
    cuts.append(ranges[-1][1])
    return list(zip(cuts[:-1], cuts[1:]))


@dataclass
class Segments:
    """Documents cut into NSP segments, flat: segment k is ids[bounds[k]:bounds[k+1]], document d is segments
    docs[d]:docs[d+1]. A sentence longer than `half` tokens is cut into consecutive windows of `half`, empty
    sentences and documents are left out, so a document's segments are consecutive in `ids` and every span of
    consecutive segments is one slice of it."""

    ids: np.ndarray  # [T] token ids
    bounds: np.ndarray  # [K+1] int64
    docs: np.ndarray  # [D+1] int64

    @classmethod
    def of_sentences(cls, ids: np.ndarray, sent_offsets: np.ndarray, doc_offsets: np.ndarray,
                     half: int) -> Segments:
        """sent_offsets [S+1]: sentence s is ids[sent_offsets[s]:sent_offsets[s+1]]; doc_offsets [D+1]:
        document d is sentences doc_offsets[d]:doc_offsets[d+1]."""
        sent_offsets = np.asarray(sent_offsets, np.int64)
        lengths = np.diff(sent_offsets)  # [S]
        windows = -(-lengths // half)  # [S] ceil: 0 for an empty sentence
        first = np.repeat(np.cumsum(windows) - windows, windows)  # [K] the sentence's first window, per window
        bounds = np.empty(int(windows.sum()) + 1, np.int64)
        bounds[:-1] = np.repeat(sent_offsets[:-1], windows) + (np.arange(len(first)) - first) * half
        bounds[-1] = sent_offsets[-1]
        in_docs = np.concatenate([[0], np.cumsum(windows)])[np.asarray(doc_offsets, np.int64)]  # [D+1]
        docs = np.append(in_docs[:-1][np.diff(in_docs) > 0], in_docs[-1])
        return cls(np.asarray(ids), bounds, docs)

    @classmethod
    def of_lists(cls, docs: Sequence[Sequence[Sequence[int]]], half: int) -> Segments:
        """From documents as lists of sentences of token ids."""
        sents = [s for d in docs for s in d]
        sent_offsets = np.concatenate([[0], np.cumsum([len(s) for s in sents], dtype=np.int64)])
        doc_offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs], dtype=np.int64)])
        ids = np.fromiter((t for s in sents for t in s), np.int64, int(sent_offsets[-1]))
        return cls.of_sentences(ids, sent_offsets, doc_offsets, half)

    @property
    def n_docs(self) -> int:
        return len(self.docs) - 1


@dataclass
class PairSpans:
    """NSP pairs as slices of `Segments.ids`: A is ids[a0:a1], B is ids[b0:b1]; is_random_next [N] bool."""

    a0: np.ndarray
    a1: np.ndarray
    b0: np.ndarray
    b1: np.ndarray
    is_random_next: np.ndarray


@dataclass
class Pair:
    a: list[int]  # token ids of segment A
    b: list[int]  # token ids of segment B
    is_random_next: bool


def half_segment(max_seq_len: int) -> int:
    """Segment length cap: half the tokens a pair holds (a longer sentence is cut into windows)."""
    max_tokens = max_seq_len - 3
    if max_tokens < 2:
        raise ZenError(f"max_seq_len: expected at least 5 for sentence pairs, got {max_seq_len}")
    return max(1, max_tokens // 2)


def make_pairs(
    docs: Sequence[Sequence[Sequence[int]]],
    max_seq_len: int,
    rng: np.random.Generator,
    short_seq_prob: float = 0.1,
) -> list[Pair]:
    """`pair_spans` of documents given as lists of sentences of token ids, as lists."""
    seg = Segments.of_lists(docs, half_segment(max_seq_len))
    spans = pair_spans(seg, max_seq_len, rng, short_seq_prob)
    ids = seg.ids.tolist()
    return [Pair(ids[a0:a1], ids[b0:b1], r) for a0, a1, b0, b1, r in
            zip(spans.a0.tolist(), spans.a1.tolist(), spans.b0.tolist(), spans.b1.tolist(),
                spans.is_random_next.tolist())]


def pair_spans(seg: Segments, max_seq_len: int, rng: np.random.Generator, short_seq_prob: float = 0.1) -> PairSpans:
    """Build NSP pairs from segmented documents.

    `[CLS] A [SEP] B [SEP]` fits in max_seq_len. B is the true continuation half of the time, otherwise a
    segment from a random other document. Needs at least two documents with text. The loop walks segment
    lengths only (every A and B is one slice of `seg.ids`), so its Python cost is a few operations per segment.
    """
    max_tokens = max_seq_len - 3
    half_segment(max_seq_len)
    if seg.n_docs < 2:
        raise ZenError(
            "the corpus holds fewer than two documents with text, so next-sentence prediction has no "
            "random-next segments: add documents (blank line between documents, or one document per line)"
        )
    bounds, docs = seg.bounds.tolist(), seg.docs.tolist()
    out: list[int] = []  # a0, a1, b0, b1, is_random_next of each pair in turn
    draw = _Draws(rng)
    n_docs = len(docs) - 1
    for di in range(n_docs):
        end = docs[di + 1]
        target = max_tokens
        if draw.random() < short_seq_prob:
            target = draw.integers(2, max_tokens + 1)
        c0 = i = docs[di]  # the chunk is segments c0..i-1
        while i < end:
            if i > c0 and bounds[i + 1] - bounds[c0] > target:
                i = _pair_from_chunk(bounds, docs, c0, i, di, n_docs, target, draw, out)
                c0 = i
                target = max_tokens if draw.random() >= short_seq_prob else draw.integers(2, max_tokens + 1)
                continue
            i += 1
            if i == end:
                i = c0 = _pair_from_chunk(bounds, docs, c0, i, di, n_docs, target, draw, out)
    cols = np.array(out, np.int64).reshape(-1, 5)
    return PairSpans(cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3], cols[:, 4].astype(bool))


def _pair_from_chunk(bounds: list[int], docs: list[int], c0: int, c1: int, di: int, n_docs: int, target: int,
                     draw: _Draws, out: list[int]) -> int:
    """Split the chunk of segments c0..c1-1 into A and B (true next) or A and a random B, appended to `out`;
    returns the segment where the document resumes."""
    n = c1 - c0
    if n == 1 and bounds[c1] - bounds[c0] >= 2 and draw.random() >= 0.5:
        # A lone segment (a one-sentence paragraph, common in `line` layout) is cut at a random point so
        # it can still give a true-next pair; otherwise NSP would be dominated by random-next pairs.
        cut = bounds[c0] + draw.integers(1, bounds[c1] - bounds[c0])
        out += (bounds[c0], cut, cut, bounds[c1], 0)
        return c1
    a_end = c0 + (draw.integers(1, n) if n >= 2 else 1)
    if n == 1 or draw.random() < 0.5:
        # Random next: B from another document, cut to the budget; the unused segments of this chunk are
        # revisited.
        other = draw.integers(0, n_docs - 1)
        other += other >= di
        start = bounds[docs[other] + draw.integers(0, docs[other + 1] - docs[other])]
        budget = max(1, target - (bounds[a_end] - bounds[c0]))
        out += (bounds[c0], bounds[a_end], start, min(start + budget, bounds[docs[other + 1]]), 1)
        return a_end
    out += (bounds[c0], bounds[a_end], bounds[a_end], bounds[c1], 0)
    return c1


class _Draws:
    """Uniform draws from a numpy Generator taken a block at a time: one scalar call costs about a microsecond
    (`integers`, several), which made the draws a large share of the pairs' time."""

    BLOCK = 4096

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.buf: list[float] = []

    def random(self) -> float:
        """A float in [0, 1)."""
        if not self.buf:
            self.buf = self.rng.random(self.BLOCK).tolist()[::-1]
        return self.buf.pop()

    def integers(self, lo: int, hi: int) -> int:
        """An int in [lo, hi), each equally likely."""
        return min(hi - 1, lo + int(self.random() * (hi - lo)))  # min: u · n may round up to n


def tokenize_documents(
    docs: Iterable[list[str]], encode: Callable[[str], list[int]]
) -> list[list[list[int]]]:
    return [[ids for ids in (encode(s) for s in doc) if ids] for doc in docs]
