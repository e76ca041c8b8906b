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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Literal

import numpy as np

from zencli.errors import ZenError
from zencli.text.reading import iter_lines

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
        path = Path(path)
        mode = detect_layout(path) if layout == "auto" else layout
        if mode == "line":
            for _, line in iter_lines(path):
                sents = split_sentences(line.strip())
                if sents:
                    yield sents
        else:
            doc: list[str] = []
            for _, line in iter_lines(path):
                if line.strip():
                    doc.append(line.strip())
                elif doc:
                    yield doc
                    doc = []
            if doc:
                yield doc


@dataclass
class Pair:
    a: list[int]  # token ids of segment A
    b: list[int]  # token ids of segment B
    is_random_next: bool


def _windows(ids: list[int], size: int) -> list[list[int]]:
    if len(ids) <= size:  # most sentences: the list itself (no one changes it)
        return [ids]
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def make_pairs(
    docs: Sequence[Sequence[Sequence[int]]],
    max_seq_len: int,
    rng: np.random.Generator,
    short_seq_prob: float = 0.1,
) -> list[Pair]:
    """Build NSP pairs from tokenised documents (each a list of sentences of token ids).

    `[CLS] A [SEP] B [SEP]` fits in max_seq_len. B is the true continuation half of the time, otherwise a
    segment from a random other document. Needs at least two documents with text.
    """
    max_tokens = max_seq_len - 3
    if max_tokens < 2:
        raise ZenError(f"max_seq_len: expected at least 5 for sentence pairs, got {max_seq_len}")
    half = max(1, max_tokens // 2)
    docs = [[w for s in doc for w in _windows(s if type(s) is list else list(s), half) if w] for doc in docs]
    docs = [d for d in docs if d]
    if len(docs) < 2:
        raise ZenError(
            "the corpus holds fewer than two documents with text, so next-sentence prediction has no "
            "random-next segments: add documents (blank line between documents, or one document per line)"
        )
    pairs: list[Pair] = []
    draw = _Draws(rng)
    for di, doc in enumerate(docs):
        target = max_tokens
        if draw.random() < short_seq_prob:
            target = draw.integers(2, max_tokens + 1)
        chunk: list[list[int]] = []
        length = 0
        i = 0
        while i < len(doc):
            seg = doc[i]
            if chunk and length + len(seg) > target:
                pair, i = _pair_from_chunk(chunk, docs, di, target, draw, i)
                pairs.append(pair)
                chunk, length = [], 0
                target = max_tokens if draw.random() >= short_seq_prob else draw.integers(2, max_tokens + 1)
                continue
            chunk.append(seg)
            length += len(seg)
            i += 1
            if i == len(doc) and chunk:
                pair, i = _pair_from_chunk(chunk, docs, di, target, draw, i)
                pairs.append(pair)
                chunk, length = [], 0
    return pairs


def _pair_from_chunk(
    chunk: list[list[int]], docs: list[list[list[int]]], di: int, target: int, draw: _Draws, next_i: int
) -> tuple[Pair, int]:
    """Split a chunk into A and B (true next) or A and a random B; also returns where the document resumes."""
    if len(chunk) == 1 and len(chunk[0]) >= 2 and draw.random() >= 0.5:
        # A lone segment (a one-sentence paragraph, common in `line` layout) is cut at a random point so
        # it can still give a true-next pair; otherwise NSP would be dominated by random-next pairs.
        cut = draw.integers(1, len(chunk[0]))
        return Pair(list(chunk[0][:cut]), list(chunk[0][cut:]), False), next_i
    a_end = draw.integers(1, len(chunk)) if len(chunk) >= 2 else 1
    a = list(chain.from_iterable(chunk[:a_end]))
    if len(chunk) == 1 or draw.random() < 0.5:
        # Random next: B from another document; the unused segments of this chunk are revisited.
        other = draw.integers(0, len(docs) - 1)
        other += other >= di
        odoc = docs[other]
        start = draw.integers(0, len(odoc))
        b: list[int] = []
        budget = max(1, target - len(a))
        for seg in odoc[start:]:
            b.extend(seg)
            if len(b) >= budget:
                break
        return Pair(a, b[:budget], True), next_i - (len(chunk) - a_end)
    b = list(chain.from_iterable(chunk[a_end:]))
    return Pair(a, b, False), next_i


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
