"""The corpus, read and tokenized once per run into flat arrays, and its plan: consecutive *parts* of whole
documents, one per shard of a round (see "Sharding and determinism" in `zencli.data.pretraining`).

The arrays of a real corpus are written to a work folder as they grow and read back memory-mapped, so
memory stays flat however large the corpus (4 bytes per token and 8 per sentence and document on disk).
"""

from __future__ import annotations

import shutil
import struct
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from zencli.atomic_write import save_npy
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
        # one read of the range's ids and offsets (a memory-mapped slice per document costs more than its copy)
        docs = np.asarray(self.doc_offsets[lo : hi + 1]).tolist()
        so = np.asarray(self.sent_offsets[docs[0] : docs[-1] + 1])
        flat = np.asarray(self.ids[so[0] : so[-1]]).tolist()
        bounds = (so - so[0]).tolist()
        base = docs[0]
        return [[flat[bounds[k - base] : bounds[k + 1 - base]] for k in range(s0, s1)]
                for s0, s1 in zip(docs[:-1], docs[1:])]

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name in ARRAYS:
            save_npy(directory / f"{name}.npy", getattr(self, name))

    @classmethod
    def load(cls, directory: Path, chars: int = 0) -> TokenizedCorpus:
        arrays = {n: np.load(directory / f"{n}.npy", mmap_mode="r") for n in ARRAYS}
        return cls(chars=chars, **arrays)


ARRAYS = ("ids", "sent_offsets", "doc_offsets")
FLUSH_ITEMS = 1 << 20  # items a column holds in memory before they go to its file
_NPY_HEADER = 128  # bytes reserved for the .npy header of a column written before its length is known


class _Column:
    """A flat array appended to in memory and flushed to `path` (an .npy file whose header is written last),
    or, without a path, kept whole in memory."""

    def __init__(self, code: str, dtype: str, path: Path | None, first: Sequence[int] = ()):
        self.buf = array(code, first)
        self.dtype = np.dtype(dtype)
        self.path = path
        self.flushed = 0
        self.file: BinaryIO | None = None
        if path is not None:
            self.file = open(path, "wb")
            self.file.write(b"\0" * _NPY_HEADER)

    def __len__(self) -> int:
        return self.flushed + len(self.buf)

    def flush(self) -> None:
        if self.file is not None and self.buf:
            self.file.write(np.frombuffer(self.buf, self.dtype).tobytes())
            self.flushed += len(self.buf)
            self.buf = array(self.buf.typecode)

    def close(self) -> np.ndarray:
        """The whole column: memory-mapped from its file, or (without a file) a copy in memory."""
        if self.file is None:
            return np.frombuffer(self.buf, self.dtype).copy()
        self.flush()
        self.file.seek(0)
        self.file.write(_npy_header(self.dtype, self.flushed))
        self.file.close()
        assert self.path is not None
        return np.load(self.path, mmap_mode="r")


def _npy_header(dtype: np.dtype, n: int) -> bytes:
    """The .npy (version 1.0) header of a 1-D array of `n` items, padded to `_NPY_HEADER` bytes as
    numpy pads its own (spaces, then a newline)."""
    d = repr({"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (n,)}).encode("latin1")
    pad = _NPY_HEADER - 10 - len(d) - 1
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", _NPY_HEADER - 10) + d + b" " * pad + b"\n"


def tokenize_corpus(
    files: Sequence[Path], tokenizer: Tokenizer, layout: str, on_doc: Callable[[int, int], None] | None = None,
    directory: Path | None = None,
) -> TokenizedCorpus:
    """Read and tokenize every document; sentences and documents left without tokens are skipped.

    With `directory` (made afresh), the arrays are written there as they grow (the files `save` writes) and
    come back memory-mapped: constant memory for any corpus. Without it they are built in memory."""
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)

    def path(name: str) -> Path | None:
        return directory / f"{name}.npy" if directory is not None else None

    ids = _Column("i", "<i4", path("ids"))
    sents = _Column("q", "<i8", path("sent_offsets"), [0])
    docs = _Column("q", "<i8", path("doc_offsets"), [0])
    chars = 0
    encode = tokenizer.encode
    n_docs = 0
    n_tokens = 0
    n_sents = 0  # sentences kept so far
    for doc in read_documents(files, layout):  # type: ignore[arg-type]
        n_sent = 0
        for sentence in doc:
            chars += len(sentence)
            toks = encode(sentence)
            if toks:
                ids.buf.extend(toks)
                n_tokens += len(toks)
                sents.buf.append(n_tokens)
                n_sent += 1
        if n_sent:
            n_sents += n_sent
            docs.buf.append(n_sents)
            n_docs += 1
            if n_docs % 1000 == 0:
                if len(ids.buf) >= FLUSH_ITEMS:
                    for column in (ids, sents, docs):
                        column.flush()
                if on_doc is not None:
                    on_doc(n_docs, chars)
    if on_doc is not None:
        on_doc(n_docs, chars)
    return TokenizedCorpus(ids.close(), sents.close(), docs.close(), chars)


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
