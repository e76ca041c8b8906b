"""Pretraining example shards on disk: storage format, manifest, and a memory-mapped dataset.

An output folder holds

    manifest.json         settings, fingerprint, vocab/lexicon checksums, the complete shards, totals
    ngram_freqs.npy       [G+1] int64 lexicon frequency by n-gram id (id 0: padding), shared by all shards
    shard-00000/          one folder per shard, written to a temp folder and renamed when complete
        meta.json         fingerprint, round/part, statistics of this shard
        input_ids.npy     [N, L] uint16 (int32 when the vocabulary has more than 65,536 tokens), padded
        lengths.npy       [N] uint16   tokens of each example, [CLS] and both [SEP] included
        seg_a.npy         [N] uint16   tokens of `[CLS] A [SEP]` (token type 0); the rest is type 1
        nsp_labels.npy    [N] uint8    1 when B is a random segment from another document
        mlm_offsets.npy   [N+1] int64  example i's masked positions are rows mlm_offsets[i]:mlm_offsets[i+1]
        mlm_positions.npy [K] uint16   masked positions (counting [CLS] as 0)
        mlm_ids.npy       [K] token dtype  original token ids at those positions (the MLM targets)
        ngram_offsets.npy [N+1] int64  example i's n-gram slots are rows ngram_offsets[i]:ngram_offsets[i+1]
        ngram_ids.npy     [S] int32    line of ngram.txt
        ngram_starts.npy  [S] uint16   first token of the slot
        ngram_lengths.npy [S] uint8    tokens in the slot

Slots and MLM targets are stored ragged (flat + offsets), so no example pays for a fixed maximum and no
cap on slots is needed for storage. Token types and n-gram types follow from `seg_a`, n-gram
frequencies from `ngram_freqs.npy`. Every array is an `.npy` file opened with `np.load(mmap_mode="r")`:
opening a dataset reads only the manifest, and a batch reads only its rows.

More: docs/design.md, "Pretraining shards".
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from zencli.atomic_write import atomic_write_text, save_npy
from zencli.errors import WriteError, ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.vocab import Vocab

FORMAT = "zen-pretrain-shards"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
FREQS_NAME = "ngram_freqs.npy"
META_NAME = "meta.json"
SHARD_PREFIX = "shard-"
TMP_PREFIX = ".tmp-"
IGNORE_INDEX = -100

MAX_SEQ_LEN_LIMIT = 65_535  # positions and lengths are stored as uint16
MAX_NGRAM_LEN_LIMIT = 255  # slot lengths are stored as uint8
COLUMNS = (
    "input_ids", "lengths", "seg_a", "nsp_labels", "mlm_offsets", "mlm_positions", "mlm_ids",
    "ngram_offsets", "ngram_ids", "ngram_starts", "ngram_lengths",
)


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.int32)


def shard_name(index: int) -> str:
    return f"{SHARD_PREFIX}{index:05d}"


# ----------------------------------------------------------------------------------------------------
# checksums


def vocab_checksum(vocab: Vocab) -> str:
    """sha256 of the token list (ids are positions, so equal lists mean equal ids)."""
    h = hashlib.sha256()
    for tok in vocab:
        h.update(tok.encode("utf-8") + b"\n")
    return h.hexdigest()


def lexicon_checksum(lexicon: Lexicon) -> str:
    """sha256 of the n-grams (as tokens) and frequencies in id order, whatever the file's style."""
    h = hashlib.sha256()
    for g, f in zip(lexicon.ngrams, lexicon.freqs):
        h.update((" ".join(g) + f",{f}\n").encode("utf-8"))
    return h.hexdigest()


def file_checksum(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


# ----------------------------------------------------------------------------------------------------
# writing


def write_shard(out_dir: Path, index: int, columns: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> Path:
    """Write one shard atomically: all files into a temp folder, then one rename to `shard-NNNNN`.

    A reader (or a resumed run) therefore sees a shard folder only when every file of it is complete.
    """
    missing = [c for c in COLUMNS if c not in columns]
    if missing:
        raise ValueError(f"shard columns missing: {missing}")
    final = out_dir / shard_name(index)
    tmp = out_dir / f"{TMP_PREFIX}{shard_name(index)}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        for name in COLUMNS:
            with open(tmp / f"{name}.npy", "wb") as f:
                save_npy(f, np.ascontiguousarray(columns[name]))
                f.flush()
                os.fsync(f.fileno())
        atomic_write_text(tmp / META_NAME, json.dumps(dict(meta), indent=1, sort_keys=True) + "\n")
        # The rename reaches the disk with the next manifest write, which fsyncs this same folder.
        os.replace(tmp, final)
    except OSError as e:  # a full disk: one line naming the shard; its temp folder goes (finally)
        raise WriteError(final, e) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def read_shard_meta(shard_dir: Path) -> dict[str, Any] | None:
    """meta.json of a complete shard folder, or None when it is unreadable (treated as incomplete)."""
    try:
        data = json.loads((shard_dir / META_NAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def write_manifest(out_dir: Path, manifest: Mapping[str, Any]) -> Path:
    path = out_dir / MANIFEST_NAME
    atomic_write_text(path, json.dumps(dict(manifest), indent=1, ensure_ascii=False) + "\n")
    return path


def read_manifest(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / MANIFEST_NAME
    if not Path(directory).is_dir():
        raise ZenError(f"{directory}: no such folder; expected pretraining shards made by generate_shards")
    if not path.is_file():
        raise ZenError(f"{path}: no such file; expected pretraining shards made by generate_shards")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ZenError(f"{path}: not valid UTF-8 JSON ({e}); expected a shard manifest") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ZenError(f"{path}: not a {FORMAT} manifest")
    if data.get("version") != FORMAT_VERSION:
        raise ZenError(f"{path}: format version {data.get('version')!r} is not supported (expected {FORMAT_VERSION})")
    return data


# ----------------------------------------------------------------------------------------------------
# reading


# Shards whose columns are memory-mapped at once: each mapping holds a file descriptor, and a 1G-character
# corpus makes thousands of shards (4,420 at the default 10,000 examples), which would exceed the usual limit
# of 1,024 open files. At most this many, and at most half the process's limit of open files; batches draw
# from at most batch-size shards, so a small cache keeps the reads cheap.
OPEN_SHARDS = 64


def open_shards_limit() -> int:
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # no such limit here (Windows)
        return OPEN_SHARDS
    if soft == resource.RLIM_INFINITY:
        return OPEN_SHARDS
    return max(1, min(OPEN_SHARDS, soft // 2 // len(COLUMNS)))
_LIMIT_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOMEM)


def _load_column(path: Path, mmap: bool, damaged: str = "the shard is damaged, generate it again") -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r" if mmap else None)
    except OSError as e:
        if e.errno in _LIMIT_ERRNOS:  # a limit of this machine or process, not the file's fault
            raise ZenError(f"{path}: cannot open ({e.strerror}); raise the limit (ulimit -n) or free memory") from None
        raise ZenError(f"{path}: cannot read ({e}); {damaged}") from None
    except ValueError as e:
        raise ZenError(f"{path}: cannot read ({e}); {damaged}") from None


class _Shard:
    """The memory-mapped columns of one shard folder, as attributes named after COLUMNS."""

    def __init__(self, directory: Path):
        self.dir = directory
        for name in COLUMNS:
            setattr(self, name, _load_column(directory / f"{name}.npy", mmap=True))
        self.n = len(self.lengths)
        for name in ("input_ids", "seg_a", "nsp_labels"):
            if len(getattr(self, name)) != self.n:
                raise ZenError(f"{directory / name}.npy: {len(getattr(self, name))} rows, expected {self.n}; "
                               f"the shard is damaged")
        for name in ("mlm_offsets", "ngram_offsets"):
            if len(getattr(self, name)) != self.n + 1:
                raise ZenError(f"{directory / name}.npy: {len(getattr(self, name))} entries, expected {self.n + 1}; "
                               f"the shard is damaged")


class PretrainShards:
    """All complete shards of an output folder as one indexable dataset (examples in shard order).

    `vocab` / `lexicon` (objects or paths), when given, must be the ones the shards were made with:
    their checksums are compared with the manifest's and a mismatch is a ZenError, since token and
    n-gram ids would silently mean something else.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        vocab: Vocab | str | Path | None = None,
        lexicon: Lexicon | str | Path | None = None,
    ):
        self.dir = Path(directory)
        self.manifest = read_manifest(self.dir)
        if not self.manifest.get("complete"):
            done, total = len(self.manifest.get("shards", [])), self.manifest.get("n_shards", "?")
            raise ZenError(
                f"{self.dir / MANIFEST_NAME}: generation is incomplete ({done} of {total} shards); "
                f"run the same generation again to finish it"
            )
        if vocab is not None:
            v = vocab if isinstance(vocab, Vocab) else Vocab.load(vocab)
            if vocab_checksum(v) != self.manifest["vocab"]["sha256"]:
                raise ZenError(
                    f"{v.source}: not the vocabulary the shards in {self.dir} were made with "
                    f"(checksum differs; {len(v)} tokens, shards used {self.manifest['vocab']['size']})"
                )
        if lexicon is not None:
            lex = lexicon if isinstance(lexicon, Lexicon) else Lexicon.load(lexicon)
            src = lexicon if not isinstance(lexicon, Lexicon) else "the lexicon"
            if lexicon_checksum(lex) != self.manifest["lexicon"]["sha256"]:
                raise ZenError(
                    f"{src}: not the n-gram lexicon the shards in {self.dir} were made with "
                    f"(checksum differs; {len(lex)} n-grams, shards used {self.manifest['lexicon']['size']})"
                )
        self.pad_id = int(self.manifest["pad_id"])
        self.names = [s["name"] for s in self.manifest["shards"]]
        counts = np.array([int(s["examples"]) for s in self.manifest["shards"]], np.int64)
        self._starts = np.zeros(len(counts) + 1, np.int64)  # [n_shards + 1] first example of each shard
        np.cumsum(counts, out=self._starts[1:])
        self._open: OrderedDict[int, _Shard] = OrderedDict()  # the shards most recently read
        self._open_limit = open_shards_limit()
        freqs_path = self.dir / FREQS_NAME
        self.ngram_freqs = _load_column(freqs_path, mmap=False, damaged="generate the shards again")  # [G+1] small

    def __len__(self) -> int:
        return int(self._starts[-1])

    def _shard(self, s: int) -> _Shard:
        shard = self._open.get(s)
        if shard is not None:
            self._open.move_to_end(s)
            return shard
        if len(self._open) >= self._open_limit:
            self._open.popitem(last=False)  # its mappings close with it
        shard = self._open[s] = _Shard(self.dir / self.names[s])
        self._check_count(s, shard.n)
        return shard

    def _check_count(self, s: int, n: int) -> None:
        expected = int(self._starts[s + 1] - self._starts[s])
        if n != expected:
            raise ZenError(f"{self.dir / self.names[s]}: {n} examples, the manifest says {expected}; "
                           f"the shard is damaged")

    def _locate(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(self)
        bad = (indices < 0) | (indices >= n)
        if bad.any():
            raise IndexError(f"example {int(indices[np.argmax(bad)])} out of range 0..{n - 1}")
        s = np.searchsorted(self._starts, indices, side="right") - 1
        return s, indices - self._starts[s]

    @property
    def lengths(self) -> np.ndarray:
        """[N] tokens of every example (for length-bucketed batches; reads one small column per shard)."""
        out = []
        for s, name in enumerate(self.names):  # read, not mapped: one file open at a time
            col = _load_column(self.dir / name / "lengths.npy", mmap=False)
            self._check_count(s, len(col))
            out.append(col.astype(np.int32, copy=False))
        return np.concatenate(out or [np.zeros(0, np.int32)])

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        if not isinstance(i, (int, np.integer)):
            raise TypeError(f"index with an int, got {type(i).__name__}; use get_batch for many")
        s, r = (int(x[0]) for x in self._locate(np.array([i], np.int64)))
        sh = self._shard(s)
        n, seg_a = int(sh.lengths[r]), int(sh.seg_a[r])
        m0, m1 = int(sh.mlm_offsets[r]), int(sh.mlm_offsets[r + 1])
        g0, g1 = int(sh.ngram_offsets[r]), int(sh.ngram_offsets[r + 1])
        labels = np.full(n, IGNORE_INDEX, np.int64)
        labels[sh.mlm_positions[m0:m1].astype(np.int64)] = sh.mlm_ids[m0:m1]
        ngram_ids = sh.ngram_ids[g0:g1].astype(np.int32)
        starts = sh.ngram_starts[g0:g1].astype(np.int32)
        return {
            "input_ids": sh.input_ids[r, :n].astype(np.int32),
            "token_type_ids": (np.arange(n) >= seg_a).astype(np.int8),
            "ngram_ids": ngram_ids,
            "ngram_starts": starts,
            "ngram_lengths": sh.ngram_lengths[g0:g1].astype(np.int32),
            "ngram_freqs": self.ngram_freqs[ngram_ids],
            "ngram_token_type_ids": (starts >= seg_a).astype(np.int8),
            "mlm_labels": labels,
            "nsp_labels": np.array(int(sh.nsp_labels[r]), np.int64),
        }

    def get_batch(self, indices: Sequence[int] | np.ndarray) -> dict[str, Any]:
        """The padded batch of tensors `collate([ds[i] for i in indices], pad_id=ds.pad_id)` returns,
        built from the arrays with one gather per shard and column (slots padded to the longest row, as
        collate pads them)."""
        import torch  # lazy: the shard writers (`zen data pretrain`, its worker processes) need no torch

        idx = np.asarray(indices, np.int64).reshape(-1)
        if len(idx) == 0:
            raise ValueError("get_batch needs at least one index")
        shard_of, row = self._locate(idx)
        B = len(idx)
        lengths = np.empty(B, np.int64)
        seg_a = np.empty(B, np.int64)
        nsp = np.empty(B, np.int64)
        m_lo, m_hi, g_lo, g_hi = (np.empty(B, np.int64) for _ in range(4))
        groups = [(s, np.flatnonzero(shard_of == s)) for s in np.unique(shard_of).tolist()]
        for s, sel in groups:
            sh, r = self._shard(s), row[sel]
            lengths[sel] = sh.lengths[r]
            seg_a[sel] = sh.seg_a[r]
            nsp[sel] = sh.nsp_labels[r]
            m_lo[sel], m_hi[sel] = sh.mlm_offsets[r], sh.mlm_offsets[r + 1]
            g_lo[sel], g_hi[sel] = sh.ngram_offsets[r], sh.ngram_offsets[r + 1]
        L = int(lengths.max())
        n_mlm, n_ng = m_hi - m_lo, g_hi - g_lo
        M = int(n_ng.max())
        input_ids = np.empty((B, L), np.int64)
        labels = np.full((B, L), IGNORE_INDEX, np.int64)
        ngram_ids = np.zeros((B, M), np.int64)
        ngram_starts = np.zeros((B, M), np.int64)
        ngram_lengths = np.zeros((B, M), np.int64)
        for s, sel in groups:
            sh = self._shard(s)
            input_ids[sel] = sh.input_ids[row[sel], :L]  # stored padded with pad_id
            b, k = _ragged_rows(sel, m_lo, n_mlm)
            labels[b, sh.mlm_positions[k].astype(np.int64)] = sh.mlm_ids[k]
            b, k = _ragged_rows(sel, g_lo, n_ng)
            slot = _rank_in_row(b, sel, n_ng)
            ngram_ids[b, slot] = sh.ngram_ids[k]
            ngram_starts[b, slot] = sh.ngram_starts[k]
            ngram_lengths[b, slot] = sh.ngram_lengths[k]
        pos = np.arange(L)[None, :]
        attention = pos < lengths[:, None]
        slot_mask = np.arange(M)[None, :] < n_ng[:, None]
        out = {
            "input_ids": input_ids,
            "token_type_ids": (attention & (pos >= seg_a[:, None])).astype(np.int64),
            "attention_mask": attention.astype(np.int64),
            "ngram_ids": ngram_ids,
            "ngram_starts": ngram_starts,
            "ngram_lengths": ngram_lengths,
            "ngram_freqs": np.where(slot_mask, self.ngram_freqs[ngram_ids], 0),
            "ngram_token_type_ids": (slot_mask & (ngram_starts >= seg_a[:, None])).astype(np.int64),
            "ngram_attention_mask": slot_mask.astype(np.int64),
            "mlm_labels": labels,
            "nsp_labels": nsp,
        }
        return {k: torch.from_numpy(v) for k, v in out.items()}


def _ragged_rows(sel: np.ndarray, lo: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For batch rows `sel` with ragged ranges [lo, lo+count): (batch row, flat index) of every element."""
    c = count[sel]
    total = int(c.sum())
    b = np.repeat(sel, c)
    first = np.repeat(np.cumsum(c) - c, c)  # where each row's run starts in the output
    k = np.repeat(lo[sel], c) + np.arange(total) - first
    return b, k


def _rank_in_row(b: np.ndarray, sel: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Position of each element within its row's run (0, 1, ...), for elements listed row by row."""
    c = count[sel]
    return np.arange(len(b)) - np.repeat(np.cumsum(c) - c, c)
