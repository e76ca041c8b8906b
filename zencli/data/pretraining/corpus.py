"""The corpus, read and tokenized once per run into flat arrays, and its plan: consecutive *parts* of whole
documents, one per shard of a round (see "Sharding and determinism" in `zencli.data.pretraining`).

The arrays of a real corpus are written to a work folder as they grow and read back memory-mapped, so
memory stays flat however large the corpus (4 bytes per token and 8 per sentence and document on disk).
"""

from __future__ import annotations

import shutil
import struct
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from zencli.atomic_write import save_npy
from zencli.cpus import in_processes
from zencli.data.documents import Segments, detect_layout, document_ranges, documents_in, half_segment
from zencli.errors import ZenError
from zencli.text.reading import absolute_line_error, decoding, encoding_errors, record_replaced
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

    def segments(self, lo: int, hi: int, max_seq_len: int) -> Segments:
        """Documents lo..hi-1 cut into the NSP segments of `max_seq_len` (what pair_spans takes), their ids
        read from the mapped file in one slice."""
        docs = np.asarray(self.doc_offsets[lo : hi + 1])
        so = np.asarray(self.sent_offsets[docs[0] : docs[-1] + 1])
        return Segments.of_sentences(np.asarray(self.ids[so[0] : so[-1]]), so - so[0], docs - docs[0],
                                     half_segment(max_seq_len))

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
    directory: Path | None = None, workers: int = 1,
) -> TokenizedCorpus:
    """Read and tokenize every document; sentences and documents left without tokens are skipped.

    With `directory` (made afresh), the arrays are written there as they grow (the files `save` writes) and
    come back memory-mapped: constant memory for any corpus. Without it they are built in memory.
    `workers` > 1 (with `directory`, files over one range): the files are cut into byte ranges of whole
    documents, tokenized in that many processes and joined in order, which gives the same arrays.
    `on_doc(documents, chars)` reports progress."""
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
    modes = [detect_layout(f) if layout == "auto" else layout for f in files]
    if workers > 1 and directory is not None and sum(Path(f).stat().st_size for f in files) > _RANGE_BYTES:
        return _tokenize_in_pool(files, modes, tokenizer, on_doc, directory, workers)
    columns = _Columns(directory)
    for f, mode in zip(files, modes):
        columns.add_documents(documents_in(f, mode), tokenizer.encode, on_doc)
    return columns.close()


class _Columns:
    """The three arrays of a tokenized corpus as they grow (in memory, or flushed to `directory`)."""

    def __init__(self, directory: Path | None):
        def path(name: str) -> Path | None:
            return directory / f"{name}.npy" if directory is not None else None

        self.ids = _Column("i", "<i4", path("ids"))
        self.sents = _Column("q", "<i8", path("sent_offsets"), [0])
        self.docs = _Column("q", "<i8", path("doc_offsets"), [0])
        self.chars = self.n_docs = self.n_tokens = self.n_sents = 0

    def add_documents(self, docs: Iterable[list[str]], encode: Callable[[str], list[int]],
                      on_doc: Callable[[int, int], None] | None = None) -> None:
        ids, sents, docs_col = self.ids, self.sents, self.docs
        for doc in docs:
            n_sent = 0
            for sentence in doc:
                self.chars += len(sentence)
                toks = encode(sentence)
                if toks:
                    ids.buf.extend(toks)
                    self.n_tokens += len(toks)
                    sents.buf.append(self.n_tokens)
                    n_sent += 1
            if n_sent:
                self.n_sents += n_sent
                docs_col.buf.append(self.n_sents)
                self.n_docs += 1
                if self.n_docs % 1000 == 0:
                    if len(ids.buf) >= FLUSH_ITEMS:
                        for column in (ids, sents, docs_col):
                            column.flush()
                    if on_doc is not None:
                        on_doc(self.n_docs, self.chars)
        if on_doc is not None:
            on_doc(self.n_docs, self.chars)

    def close(self) -> TokenizedCorpus:
        return TokenizedCorpus(self.ids.close(), self.sents.close(), self.docs.close(), self.chars)


# Bytes of text per tokenizing task (several per worker, so that progress moves and the workers finish together).
_RANGE_BYTES = 32 << 20


def _tokenize_in_pool(files: Sequence[Path], modes: list[str], tokenizer: Tokenizer,
                      on_doc: Callable[[int, int], None] | None, directory: Path, workers: int) -> TokenizedCorpus:
    """tokenize_corpus on `workers` processes: each byte range into its own folder, then joined in order."""
    tasks = []
    for f, mode in zip(files, modes):
        n = max(workers, -(-Path(f).stat().st_size // _RANGE_BYTES))
        for start, end in document_ranges(f, mode, n):  # type: ignore[arg-type]
            tasks.append((str(f), mode, start, end, directory / f"range-{len(tasks):05d}", encoding_errors()))
    done: dict[int, dict[str, Any]] = {}
    for k, result in in_processes(_tokenize_range, tasks, workers, _init_tokenizer, (tokenizer,)):
        done[k] = result
        if on_doc is not None:
            on_doc(sum(r["docs"] for r in done.values()), sum(r["chars"] for r in done.values()))
    for k in range(len(tasks)):
        record_replaced(done[k]["replaced"])
    return _join_ranges([Path(t[4]) for t in tasks], directory, sum(r["chars"] for r in done.values()))


_TOKENIZER: list[Tokenizer] = []  # a worker's tokenizer (set by _init_tokenizer)


def _init_tokenizer(tokenizer: Tokenizer) -> None:
    _TOKENIZER[:] = [tokenizer]


def _tokenize_range(path: str, mode: str, start: int, end: int, out: Path, errors: str) -> dict[str, Any]:
    """One byte range of a file into the arrays under `out` (decoded with the parent's `errors` policy)."""
    out.mkdir(parents=True)
    columns = _Columns(out)
    with decoding(errors) as replaced:
        try:
            columns.add_documents(documents_in(path, mode, start, end), _TOKENIZER[0].encode)  # type: ignore[arg-type]
        except ZenError as e:
            raise absolute_line_error(e, path, start) from None
    columns.close()
    return {"docs": columns.n_docs, "chars": columns.chars, "replaced": replaced.lines}


def _join_ranges(parts: list[Path], directory: Path, chars: int) -> TokenizedCorpus:
    """The ranges' arrays as one corpus in `directory`: ids one after another, offsets shifted by the tokens
    and sentences before them; the range folders are removed. One range's file is mapped at a time and let go
    after it: the pages of a mapping that was read count as resident memory until it is closed."""
    def length(part: Path, name: str) -> int:
        return len(np.load(part / f"{name}.npy", mmap_mode="r"))

    tokens = np.cumsum([0] + [length(p, "ids") for p in parts]).tolist()
    sents = np.cumsum([0] + [length(p, "sent_offsets") - 1 for p in parts]).tolist()
    for name, dtype, shift in (("ids", "<i4", None), ("sent_offsets", "<i8", tokens), ("doc_offsets", "<i8", sents)):
        with open(directory / f"{name}.npy", "wb") as f:
            if shift is None:
                f.write(_npy_header(np.dtype(dtype), tokens[-1]))
            else:  # each range's offsets start at 0: keep the first range's, drop the others'
                f.write(_npy_header(np.dtype(dtype), 1 + sum(length(p, name) - 1 for p in parts)))
                f.write(np.zeros(1, dtype).tobytes())
            for k, part in enumerate(parts):
                x = np.load(part / f"{name}.npy", mmap_mode="r")
                for lo in range(0 if shift is None else 1, len(x), FLUSH_ITEMS):
                    block = np.asarray(x[lo : lo + FLUSH_ITEMS], dtype)
                    f.write((block if shift is None else block + shift[k]).tobytes())
                del x
    for p in parts:
        shutil.rmtree(p)
    return TokenizedCorpus.load(directory, chars=chars)


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
