"""The corpus, read and tokenized once per run into flat arrays, and its plan: consecutive *parts* of whole
documents, one per shard of a round (see "Sharding and determinism" in `zencli.data.pretraining`)."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zencli.data.documents import read_documents
from zencli.text.tokenizer import Tokenizer


@dataclass
class TokenizedCorpus:
    ids: np.ndarray  # [T] int32 all tokens
    sent_offsets: np.ndarray  # [S+1] int64 sentence s is ids[sent_offsets[s]:sent_offsets[s+1]]
    doc_offsets: np.ndarray  # [D+1] int64 document d is sentences doc_offsets[d]:doc_offsets[d+1]
    chars: int  # characters of the sentences read

    @property
    def n_docs(self) -> int:
        return len(self.doc_offsets) - 1

    def doc_tokens(self) -> np.ndarray:
        """[D] tokens per document."""
        return np.diff(self.sent_offsets[self.doc_offsets])

    def documents(self, lo: int, hi: int) -> list[list[list[int]]]:
        """Documents lo..hi-1 as lists of sentences of token ids (what make_pairs takes)."""
        so = self.sent_offsets
        out = []
        for d in range(lo, hi):
            s0, s1 = int(self.doc_offsets[d]), int(self.doc_offsets[d + 1])
            flat = self.ids[so[s0] : so[s1]].tolist()
            bounds = (so[s0 : s1 + 1] - so[s0]).tolist()
            out.append([flat[bounds[k] : bounds[k + 1]] for k in range(len(bounds) - 1)])
        return out

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name in ("ids", "sent_offsets", "doc_offsets"):
            np.save(directory / f"{name}.npy", getattr(self, name))

    @classmethod
    def load(cls, directory: Path, chars: int = 0) -> TokenizedCorpus:
        arrays = {n: np.load(directory / f"{n}.npy", mmap_mode="r") for n in ("ids", "sent_offsets", "doc_offsets")}
        return cls(chars=chars, **arrays)


def tokenize_corpus(
    files: Sequence[Path], tokenizer: Tokenizer, layout: str, on_doc: Callable[[int, int], None] | None = None
) -> TokenizedCorpus:
    """Read and tokenize every document; sentences and documents left without tokens are skipped."""
    ids = array("i")
    sent_offsets = array("q", [0])
    doc_offsets = array("q", [0])
    chars = 0
    encode = tokenizer.encode
    n_docs = 0
    for doc in read_documents(files, layout):  # type: ignore[arg-type]
        n_sent = 0
        for sentence in doc:
            chars += len(sentence)
            toks = encode(sentence)
            if toks:
                ids.extend(toks)
                sent_offsets.append(len(ids))
                n_sent += 1
        if n_sent:
            doc_offsets.append(len(sent_offsets) - 1)
            n_docs += 1
            if on_doc is not None and n_docs % 1000 == 0:
                on_doc(n_docs, chars)
    if on_doc is not None:
        on_doc(n_docs, chars)
    return TokenizedCorpus(
        np.frombuffer(ids, np.int32).copy(),
        np.frombuffer(sent_offsets, np.int64).copy(),
        np.frombuffer(doc_offsets, np.int64).copy(),
        chars,
    )


def plan_parts(doc_tokens: np.ndarray, max_seq_len: int, examples_per_shard: int) -> list[tuple[int, int]]:
    """Consecutive document ranges [lo, hi) of about `examples_per_shard` examples each (a document of
    n tokens gives about ceil(n / (max_seq_len - 3)) examples), each with at least two documents."""
    est = np.maximum(1, -(-np.asarray(doc_tokens, np.int64) // (max_seq_len - 3))).tolist()
    parts: list[tuple[int, int]] = []
    lo, acc = 0, 0
    for d, e in enumerate(est):
        acc += e
        if acc >= examples_per_shard and d + 1 - lo >= 2:
            parts.append((lo, d + 1))
            lo, acc = d + 1, 0
    n = len(est)
    if lo < n:
        if n - lo >= 2 or not parts:
            parts.append((lo, n))
        else:
            parts[-1] = (parts[-1][0], n)
    return parts
