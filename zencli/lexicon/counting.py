"""Exact n-gram counting with bounded memory: chunks → counts files → level-wise merge.

Design (one code path for `zen lexicon build`, `count` and `merge`):

1. **Count (map).** The input files are cut into byte ranges at line boundaries (`shard_byte_ranges`);
   worker processes read their ranges (`iter_lines`), tokenize each line and cut the stream into chunks of
   about `chunk_chars` characters. A chunk is counted on its own, entirely in numpy:
   * its distinct tokens are sorted (by code point) and numbered 0..V-1; the chunk becomes one int32
     array with -1 between lines, so no n-gram crosses a line end;
   * level by level, the n-gram starting at position i is (rank of its (n-1)-gram prefix at i, its last
     token). The pair and the position pack into one uint64 that is sorted (np.sort; argsort only if a
     huge chunk does not fit 64 bits); runs of equal pairs are the distinct n-grams, their lengths the
     counts, and the run index each position's rank for the next level. Ranks are in lexicographic token
     order at every level, and the n-grams never leave numpy.
   * The chunk is stored as a *section*: its token table, token counts and, per length n ≥ 2, three
     uint32 arrays (prefix rank, suffix rank, count) sorted by n-gram. This is an exact trie: nothing is
     hashed, two n-grams can never merge. Levels are written as they are counted, so a worker holds one
     level at a time (about 40 bytes per char of its chunk at peak).
   A counts file (`*.counts`) is the magic line `ZENCOUNTS 1` followed by sections; each section is
   `SECT`, u64 data length, the arrays (8-byte aligned), u64 header length and a JSON header (token table,
   tokenizer, source byte range, lines/chars/tokens, number of k-gram positions, array names, dtypes,
   offsets). Concatenating sections is valid, which is how `count` joins its workers' output. Counts
   files are large, about 50-60 bytes per character of text: they hold every distinct n-gram of every
   chunk, because any n-gram rare in one shard may be frequent overall.

2. **Merge (reduce), level-wise with apriori pruning.** An n-gram can reach `min_freq` only if its prefix
   and its suffix (the (n-1)-grams) reach it. So the merge works one length at a time and keeps global
   ids only for *frequent* n-grams:
   * level 1: token counts are summed over the sections' token tables; frequent tokens get global ids in
     sorted order, and every section gets a map local id → global id (-1: not frequent);
   * level n: each section's entries are translated through its level n-1 map; entries whose prefix or
     suffix is not frequent are dropped (exactly the apriori rule), the rest become int64 keys
     `gprefix * F[n-1] + gsuffix`, still sorted, and are spilled to a temp folder;
   * the spills are merged range by range (key ranges chosen from samples so that one range holds about
     `partition_entries` entries), counts summed, frequent n-grams kept; their global id is their rank;
   * each section's level-n map is then built by binary search and spilled for the next level.
   Peak memory is one section's arrays, one key range, and the frequent n-grams themselves; the full
   set of distinct n-grams of the corpus never sits in memory, only on disk.
   Because every count is exact and all ids follow lexicographic token order, the result does not depend
   on how the corpus was cut into shards, chunks or workers: merging counts files of shards equals a
   one-pass build of the concatenated corpus.

3. **Neighbours (optional, for the branching-entropy filter of pmi.py).** The left and right neighbours
   of an n-gram w are read off the (n+1)-grams a·w and w·b, so counting goes one level deeper (max_n + 1)
   and the merge, at level n+1, spills keys (global id of w, id of the neighbour among *all* tokens)
   taken before frequency pruning (a rare neighbour still counts). They are merged range by range like the
   n-grams, with range bounds that never split one w, and reduced to sum c·log2(c) per w in key order, so
   the entropies too are the same, bit for bit, whatever the sharding.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import re
import shutil
import struct
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from zencli.errors import ZenError
from zencli.text.reading import check_readable, iter_lines, shard_byte_ranges
from zencli.text.tokenizer import CONTINUATION

TokenizeFn = Callable[[str], list[str]]

MAGIC = b"ZENCOUNTS 1\n"
_SECTION = b"SECT"
_ALIGN = 8
# Bytes read per task = this many times chunk_chars: about one chunk of CJK text (3 UTF-8 bytes/char).
_TASK_BYTES_PER_CHAR = 3
_PROGRESS_EVERY_LINES = 512


# ----------------------------------------------------------------------------- counting one chunk


def _sorted_positions(key: np.ndarray, pos: np.ndarray, key_limit: int,
                      pos_limit: int) -> tuple[np.ndarray, np.ndarray]:
    """(key, pos) sorted by key (ties in any order). When key and position fit in 64 bits together they
    are packed and sorted as one uint64 array, about 3x faster than argsort."""
    pos_bits = max(1, int(pos_limit).bit_length())
    if int(key_limit).bit_length() + pos_bits <= 63:
        packed = key.astype(np.uint64)
        packed <<= np.uint64(pos_bits)
        packed |= pos.astype(np.uint64)
        del key, pos
        packed.sort()
        pos = (packed & np.uint64((1 << pos_bits) - 1)).view(np.int64)
        packed >>= np.uint64(pos_bits)
        return packed.view(np.int64), pos
    order = np.argsort(key)
    return key[order], pos[order]


def iter_levels(seq: np.ndarray, vocab_size: int, max_n: int) -> Iterator[tuple[str, np.ndarray]]:
    """Count every n-gram (n = 1..max_n) of a token-id sequence, one length at a time.

    seq: int32 [L], token ids 0..vocab_size-1, -1 between lines (n-grams never contain a -1).
    Yields ("counts_1", uint32 [V]) and then, for n = 2..max_n, ("prefix_n", ·), ("suffix_n", ·),
    ("counts_n", ·): uint32 arrays [R_n] sorted by n-gram, where prefix/suffix is the rank of the n-gram's
    first/last n-1 tokens among the distinct (n-1)-grams of this sequence (for n = 2: token ids).
    """
    yield "counts_1", np.bincount(seq[seq >= 0], minlength=vocab_size).astype(np.uint32)
    vocab = max(vocab_size, 1)
    rank = seq  # rank[i]: the (n-1)-gram starting at i, -1 where there is none
    size = vocab_size  # number of distinct (n-1)-grams
    for n in range(2, max_n + 1):
        last = seq[n - 1 :]  # [L-n+1] last token of the n-gram at i
        a, b = rank[:-1], rank[1:]  # prefix at i, suffix at i+1
        pos = np.flatnonzero((a >= 0) & (b >= 0))
        # The n-gram at i is (prefix rank, last token): lexicographic order, as (prefix, suffix) is.
        key = a[pos].astype(np.int64)
        key *= vocab
        key += last[pos]
        key, pos = _sorted_positions(key, pos, size * vocab, len(a))
        new = np.empty(len(key), dtype=bool)
        new[:1] = True
        np.not_equal(key[1:], key[:-1], out=new[1:])
        del key
        starts = np.flatnonzero(new)
        first = pos[starts]  # one position of each distinct n-gram
        yield f"prefix_{n}", a[first].astype(np.uint32)
        yield f"suffix_{n}", b[first].astype(np.uint32)
        yield f"counts_{n}", np.diff(np.append(starts, len(pos))).astype(np.uint32)
        size = len(starts)
        del first, starts
        if n < max_n:
            ids = np.cumsum(new, dtype=np.int64)
            ids -= 1
            rank = np.full(len(a), -1, dtype=np.int32)
            rank[pos] = ids
            del ids
        del pos, new


class _Table(dict):
    """token → chunk-local id; a new token gets the next id."""

    def __missing__(self, token: str) -> int:
        i = self[token] = len(self)
        return i


class ChunkBuilder:
    """Collects tokenized lines of one chunk as ids into a chunk-local token table."""

    def __init__(self) -> None:
        self.table = _Table()
        self.ids = array("i")
        self.line_tokens = array("i")
        self.chars = 0

    def add(self, tokens: list[str], chars: int) -> None:
        if tokens:
            self.ids.extend(map(self.table.__getitem__, tokens))
            self.ids.append(-1)
        self.line_tokens.append(len(tokens))
        self.chars += chars

    @property
    def lines(self) -> int:
        return len(self.line_tokens)

    def write(self, f, max_n: int, extra: dict[str, Any]) -> dict[str, Any]:
        """Count this chunk and append it to counts file `f` as one section; returns the header."""
        table = sorted(self.table)
        remap = np.empty(len(table) + 1, dtype=np.int32)  # remap[-1] keeps the line separator -1
        remap[np.fromiter((self.table[t] for t in table), dtype=np.int64, count=len(table))] = np.arange(
            len(table), dtype=np.int32
        )
        remap[-1] = -1
        seq = remap[np.frombuffer(self.ids, dtype=np.int32)] if len(self.ids) else np.zeros(0, np.int32)
        self.ids = array("i")
        lengths = (np.frombuffer(self.line_tokens, dtype=np.int32).astype(np.int64) if self.lines
                   else np.zeros(0, np.int64))
        header = {
            "max_n": max_n,
            "lines": self.lines,
            "chars": self.chars,
            "tokens": int(lengths.sum()),
            "positions": [int(np.maximum(lengths - k + 1, 0).sum()) for k in range(1, max_n + 1)],
            "table": table,
            **extra,
        }
        write_section(f, header, iter_levels(seq, len(table), max_n))
        return header


# ----------------------------------------------------------------------------- counts files


def write_section(f, header: dict[str, Any], arrays: Iterator[tuple[str, np.ndarray]]) -> None:
    """Append one section: `SECT`, u64 data length, the arrays (8-byte aligned), u64 header length, JSON
    header (with each array's name, dtype, length, offset). Arrays are written as they come, so a chunk's
    levels never have to be in memory together; the data length is patched in at the end."""
    start = f.tell()
    f.write(_SECTION + struct.pack("<Q", 0))
    specs, offset = [], 0
    for name, arr in arrays:
        data = np.ascontiguousarray(arr).tobytes()
        specs.append({"name": name, "dtype": arr.dtype.str, "length": int(arr.size), "offset": offset})
        f.write(data + b"\0" * (-len(data) % _ALIGN))
        offset += len(data) + (-len(data) % _ALIGN)
        del data
    head = json.dumps({**header, "arrays": specs}, ensure_ascii=False).encode("utf-8")
    head += b" " * (-len(head) % _ALIGN)
    f.write(struct.pack("<Q", len(head)) + head)
    end = f.tell()
    f.seek(start + len(_SECTION))
    f.write(struct.pack("<Q", offset))
    f.seek(end)


@dataclass
class CountsSection:
    """One counted chunk inside a counts file; arrays are read from disk on demand."""

    path: Path
    index: int
    data_offset: int
    header: dict[str, Any]

    @property
    def table(self) -> list[str]:
        return self.header["table"]

    @property
    def max_n(self) -> int:
        return int(self.header["max_n"])

    def array(self, name: str) -> np.ndarray:
        spec = next((a for a in self.header["arrays"] if a["name"] == name), None)
        if spec is None:
            raise ZenError(f"{self.path}: section {self.index + 1} has no array {name!r}; not a complete counts file")
        dtype = np.dtype(spec["dtype"])
        with open(self.path, "rb") as f:
            f.seek(self.data_offset + spec["offset"])
            arr = np.fromfile(f, dtype=dtype, count=spec["length"])
        if arr.size != spec["length"]:
            raise ZenError(f"{self.path}: truncated in section {self.index + 1} ({name}); "
                           "expected a complete counts file")
        return arr


_HEADER_KEYS = ("max_n", "lines", "chars", "tokens", "positions", "table", "arrays", "tokenizer", "source")


def read_counts_file(path: str | Path) -> list[CountsSection]:
    """The sections of a counts file (headers only; arrays stay on disk)."""
    p = check_readable(path)
    size = p.stat().st_size
    sections: list[CountsSection] = []
    with open(p, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise ZenError(f"{p}: not a zen counts file (expected it to start with {MAGIC!r}; "
                           f"make one with `zen lexicon count`)")
        while True:
            start = f.tell()
            tag = f.read(len(_SECTION))
            if not tag:
                break
            raw_len = f.read(8)
            if tag != _SECTION or len(raw_len) != 8:
                raise ZenError(f"{p}: byte {start}: expected a counts section; the file is damaged or truncated")
            (data_len,) = struct.unpack("<Q", raw_len)
            data_offset = f.tell()
            header = None
            if data_offset + data_len + 8 <= size:
                f.seek(data_offset + data_len)
                (head_len,) = struct.unpack("<Q", f.read(8))
                head = f.read(head_len)
                try:
                    header = json.loads(head.decode("utf-8")) if len(head) == head_len else None
                except (UnicodeDecodeError, json.JSONDecodeError):
                    header = None
            if not isinstance(header, dict) or any(k not in header for k in _HEADER_KEYS):
                raise ZenError(f"{p}: section {len(sections) + 1} (byte {start}) is damaged or truncated; "
                               f"expected a complete counts file")
            sections.append(CountsSection(p, len(sections), data_offset, header))
    if not sections:
        raise ZenError(f"{p}: counts file holds no sections")
    return sections


def concat_counts_files(parts: Sequence[Path], out: Path) -> None:
    """Join counts files (sections in order) into one file, atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "wb") as w:
        w.write(MAGIC)
        for part in parts:
            with open(part, "rb") as r:
                if r.read(len(MAGIC)) != MAGIC:
                    raise ZenError(f"{part}: not a zen counts file")
                shutil.copyfileobj(r, w, 16 << 20)
    tmp.replace(out)


# ----------------------------------------------------------------------------- parallel counting


@dataclass(frozen=True)
class CountTask:
    path: str
    start: int
    end: int
    out: str


@dataclass
class CountRun:
    """What a counting pass produced: counts files (one per task, in input order) and corpus totals."""

    parts: list[Path]
    files: list[str]
    lines: int = 0
    chars: int = 0
    tokens: int = 0
    bytes: int = 0
    sections: int = 0
    seconds: float = 0.0


def plan_tasks(files: Sequence[str | Path], workers: int, chunk_chars: int, out_dir: Path) -> list[CountTask]:
    """Byte ranges to count: about one chunk each, and at least one per worker."""
    paths = [check_readable(f) for f in files]
    sizes = [p.stat().st_size for p in paths]
    for p, s in zip(paths, sizes):
        if s == 0:
            raise ZenError(f"{p}: file is empty")
    total = sum(sizes)
    target = max(1, chunk_chars * _TASK_BYTES_PER_CHAR)
    tasks = []
    for p, size in zip(paths, sizes):
        n = max(math.ceil(size / target), math.ceil(workers * size / total))
        for start, end in shard_byte_ranges(p, n):
            tasks.append(CountTask(str(p), start, end, str(out_dir / f"part-{len(tasks):05d}.counts")))
    return tasks


def _absolute_line_error(err: ZenError, path: str, start: int) -> ZenError:
    """iter_lines numbers lines from the start of a byte range; rewrite `file:N:` to the file's line."""
    prefix = f"{Path(path)}:"
    msg = str(err)
    m = re.match(r"(\d+):", msg[len(prefix):]) if msg.startswith(prefix) and start > 0 else None
    if m is None:
        return err
    before = 0
    with open(path, "rb") as f:
        f.seek(start - 1)
        if f.read(1) != b"\n":
            f.readline()
        aligned = f.tell()
        f.seek(0)
        left = aligned
        while left > 0:
            block = f.read(min(left, 16 << 20))
            if not block:
                break
            before += block.count(b"\n")
            left -= len(block)
    line = int(m.group(1)) + before
    return ZenError(f"{prefix}{line}:{msg[len(prefix) + m.end():]}")


class _Aborted(Exception):
    pass


# Shared with the parent: bytes read, chars read, abort flag (set by the parent when another task failed).
_shared: tuple[Any, Any, Any] | None = None


def _init_worker(shared: tuple[Any, Any, Any]) -> None:
    global _shared
    _shared = shared


def _add_progress(nbytes: int, nchars: int) -> None:
    if _shared is None:
        return
    done_bytes, done_chars, abort = _shared
    if abort.value:
        raise _Aborted
    with done_bytes.get_lock():
        done_bytes.value += nbytes
    with done_chars.get_lock():
        done_chars.value += nchars


def count_task(
    task: CountTask, tokenize: TokenizeFn, signature: dict[str, Any], max_n: int, chunk_chars: int
) -> dict[str, int]:
    """Count one byte range into its counts file; one section per `chunk_chars` characters."""
    span = task.end - task.start
    sent_bytes = pending_bytes = pending_chars = 0
    totals = {"lines": 0, "chars": 0, "tokens": 0, "sections": 0}
    with open(task.out, "wb") as out:
        out.write(MAGIC)

        def flush(builder: ChunkBuilder) -> None:
            source = {"path": task.path, "start_byte": task.start, "end_byte": task.end, "section": totals["sections"]}
            header = builder.write(out, max_n, {"tokenizer": signature, "source": source})
            totals["lines"] += header["lines"]
            totals["chars"] += header["chars"]
            totals["tokens"] += header["tokens"]
            totals["sections"] += 1

        builder = ChunkBuilder()
        try:
            for _, text in iter_lines(task.path, start_byte=task.start, end_byte=task.end):
                builder.add(tokenize(text), len(text))
                pending_bytes += len(text.encode("utf-8")) + 1
                pending_chars += len(text)
                if builder.lines % _PROGRESS_EVERY_LINES == 0:
                    step = min(pending_bytes, span - sent_bytes)
                    _add_progress(step, pending_chars)
                    sent_bytes += step
                    pending_bytes = pending_chars = 0
                if builder.chars >= chunk_chars:
                    flush(builder)
                    builder = ChunkBuilder()
        except ZenError as e:
            raise _absolute_line_error(e, task.path, task.start) from None
        if builder.lines or totals["sections"] == 0:
            flush(builder)
    _add_progress(span - sent_bytes, pending_chars)
    return totals


def _run_task(args: tuple) -> dict[str, int]:
    try:
        return count_task(*args)
    except _Aborted:
        return {}


def count_corpus(
    files: Sequence[str | Path],
    tokenize: TokenizeFn,
    signature: dict[str, Any],
    *,
    out_dir: Path,
    max_n: int,
    workers: int,
    chunk_chars: int,
    on_progress: Callable[[int, int, int], None] | None = None,
) -> CountRun:
    """Count `files` with `workers` processes into counts files under `out_dir`.

    `tokenize` must be picklable (it travels to the workers). `on_progress(bytes_done, bytes_total,
    chars_done)` is called a few times a second from this process.
    """
    t0 = time.perf_counter()
    workers = max(1, workers or os.cpu_count() or 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = plan_tasks(files, workers, chunk_chars, out_dir)
    total_bytes = sum(t.end - t.start for t in tasks)
    ctx = mp.get_context("spawn")
    shared = (ctx.Value("q", 0), ctx.Value("q", 0), ctx.Value("b", 0))
    results: list[dict[str, int]] = []
    args = [(t, tokenize, signature, max_n, chunk_chars) for t in tasks]

    def report() -> None:
        if on_progress is not None:
            on_progress(shared[0].value, total_bytes, shared[1].value)

    if workers == 1 or len(tasks) == 1:
        _init_worker(shared)
        try:
            for a in args:
                results.append(count_task(*a))
                report()
        finally:
            _init_worker(None)  # type: ignore[arg-type]
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx,
                                 initializer=_init_worker, initargs=(shared,)) as pool:
            futures: list[Future] = [pool.submit(_run_task, a) for a in args]
            pending = set(futures)
            try:
                while pending:
                    done, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
                    report()
                    for fut in done:
                        fut.result()  # re-raises a worker's ZenError here
            except BaseException:
                shared[2].value = 1
                for fut in futures:
                    fut.cancel()
                raise
            results = [f.result() for f in futures]
    report()
    run = CountRun(parts=[Path(t.out) for t in tasks], files=[str(Path(f)) for f in files], bytes=total_bytes)
    for r in results:
        run.lines += r["lines"]
        run.chars += r["chars"]
        run.tokens += r["tokens"]
        run.sections += r["sections"]
    run.seconds = time.perf_counter() - t0
    return run


# ----------------------------------------------------------------------------- merging


@dataclass
class FrequentNgrams:
    """All n-grams of length 1..max_n with count >= min_freq, as a trie over global ids.

    tokens[i] is the token with global id i (level 1, sorted). For n >= 2, the n-gram with level-n id j
    has count counts[n][j] and consists of n-gram prefix[n][j] of level n-1 followed by the last token of
    n-gram suffix[n][j] of level n-1. Ids at every level are in lexicographic token order.
    positions[n] = N_n, the number of n-gram positions in the corpus (all n-grams, frequent or not).
    entropy_left[n] / entropy_right[n]: branching entropy (bits) of each level-n n-gram, for the levels
    the merge was asked for (`merge_sections(entropy_from=...)`, defined in pmi.py); absent otherwise.
    """

    tokens: list[str]
    counts: dict[int, np.ndarray]
    prefix: dict[int, np.ndarray]
    suffix: dict[int, np.ndarray]
    positions: dict[int, int]
    max_n: int
    min_freq: int
    lines: int = 0
    chars: int = 0
    total_tokens: int = 0
    sources: list[str] = field(default_factory=list)
    tokenizer: dict[str, Any] = field(default_factory=dict)
    candidates: dict[int, int] = field(default_factory=dict)  # n-grams counted at level n after pruning
    entropy_left: dict[int, np.ndarray] = field(default_factory=dict)
    entropy_right: dict[int, np.ndarray] = field(default_factory=dict)

    def size(self, n: int) -> int:
        return len(self.counts.get(n, ()))

    def token_ids(self, n: int, ids: np.ndarray) -> np.ndarray:
        """int32 [len(ids), n]: the global token ids of level-n n-grams `ids`."""
        pre = self.chain(n, ids, "prefix")  # pre[k]: level-k id of the first k tokens
        out = np.empty((len(pre[n]), n), dtype=np.int32)
        out[:, 0] = pre[1]
        for j in range(1, n):  # token j is the last token of the (j+1)-token prefix
            x = pre[j + 1]
            for k in range(j + 1, 1, -1):
                x = self.suffix[k][x]
            out[:, j] = x
        return out

    def chain(self, n: int, ids: np.ndarray, side: str) -> dict[int, np.ndarray]:
        """For level-n ids: {k: id at level k of the n-gram's first (side='prefix') or last k tokens}."""
        link = self.prefix if side == "prefix" else self.suffix
        out = {n: np.asarray(ids, dtype=np.int64)}
        for k in range(n, 1, -1):
            out[k - 1] = link[k][out[k]].astype(np.int64)
        return out


def is_continuation(token: str) -> bool:
    """A WordPiece continuation piece (`##b`): it is glued to the token before it inside one word."""
    return token.startswith(CONTINUATION) and len(token) > len(CONTINUATION)


def _check_compatible(sections: Sequence[CountsSection], max_n: int, depth: int) -> None:
    """Same tokenizer everywhere, and n-grams counted up to `depth` (max_n, or max_n + 1 for entropy)."""
    first = sections[0]
    for s in sections:
        if s.header["tokenizer"] != first.header["tokenizer"]:
            raise ZenError(
                f"{s.path}: counted with tokenizer {s.header['tokenizer']}, but {first.path} with "
                f"{first.header['tokenizer']}; expected counts files made with the same tokenizer settings"
            )
        if s.max_n < depth:
            need = (f"max_n={max_n}" if depth == max_n
                    else f"{depth}: max_n={max_n} plus one level for the branching entropy")
            raise ZenError(f"{s.path}: holds n-grams up to length {s.max_n}, expected at least {need} "
                           f"(count again with --max-n {depth}, or with the same recipe)")


class _Spill:
    """One section's level-n entries on disk: sorted int64 keys, counts, and (optionally) local indices."""

    def __init__(self, folder: Path, name: str, keys: np.ndarray, counts: np.ndarray, local: np.ndarray | None = None):
        self.base = folder / name
        self.size = len(keys)
        np.save(f"{self.base}-k.npy", keys)
        np.save(f"{self.base}-c.npy", counts)
        if local is not None:
            np.save(f"{self.base}-i.npy", local)

    def keys(self, mmap: bool = True) -> np.ndarray:
        return np.load(f"{self.base}-k.npy", mmap_mode="r" if mmap else None)

    def counts(self) -> np.ndarray:
        return np.load(f"{self.base}-c.npy", mmap_mode="r")

    def local(self) -> np.ndarray:
        return np.load(f"{self.base}-i.npy")

    def delete(self) -> None:
        for s in ("k", "c", "i"):
            Path(f"{self.base}-{s}.npy").unlink(missing_ok=True)


def _sum_sorted_runs(keys: np.ndarray, counts: np.ndarray, min_freq: int) -> tuple[np.ndarray, np.ndarray]:
    """Sum counts of equal keys (input: concatenated sorted runs); keep keys with sum >= min_freq."""
    if len(keys) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(keys, kind="stable")  # timsort: linear-ish on concatenated sorted runs
    keys = keys[order]
    counts = counts[order].astype(np.int64)
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    sums = np.add.reduceat(counts, starts)
    keep = sums >= min_freq
    return keys[starts][keep], sums[keep]


def _spill_sorted(folder: Path, name: str, keys: np.ndarray, counts: np.ndarray,
                  local: np.ndarray | None = None) -> tuple[_Spill, np.ndarray]:
    """Spill entries whose keys are already sorted; returns the spill and a sample of its keys."""
    return _Spill(folder, name, keys, counts, local), keys[:: max(1, len(keys) // 256)]


def _merged_ranges(spills: Sequence[_Spill], samples: Sequence[np.ndarray], partition_entries: int,
                   min_freq: int, align: int = 1) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Merge sorted spills range by range (key ranges cut at sample quantiles so that one range holds
    about `partition_entries` entries): yields each range's distinct keys, in order, with summed counts
    >= min_freq. Range bounds are multiples of `align`, so keys with equal `key // align` share a range."""
    survivors = sum(sp.size for sp in spills)
    parts = max(1, math.ceil(survivors / partition_entries))
    bounds = np.zeros(0, np.int64)
    if parts > 1:
        pooled = np.sort(np.concatenate(samples))
        bounds = np.unique(pooled[(np.arange(1, parts) * len(pooled)) // parts] // align * align)
    cuts = []
    for sp in spills:
        k = sp.keys()
        cuts.append(np.concatenate(([0], np.searchsorted(k, bounds, side="left"), [sp.size])))
        del k
    for j in range(len(bounds) + 1):
        ks, cs = [], []
        for sp, cut in zip(spills, cuts):
            a, b = int(cut[j]), int(cut[j + 1])
            if b > a:
                ks.append(np.array(sp.keys()[a:b]))
                cs.append(np.array(sp.counts()[a:b]))
        if ks:
            yield _sum_sorted_runs(np.concatenate(ks), np.concatenate(cs), min_freq)


class _Neighbours:
    """Exact branching-entropy statistics of one level's frequent n-grams, gathered at the next level.

    Every occurrence of an (n+1)-gram v = a·w is an occurrence of the n-gram w with left neighbour a, and
    v = w·b one of w with right neighbour b. So per section the (n+1)-grams give keys
    (global id of w) · V + (global id of the neighbour token, over *all* tokens, frequent or not) with
    their counts; rare neighbours matter, so these keys are taken before any frequency pruning. Summed
    over sections they are the exact corpus counts count(a·w), count(w·b), whatever the sharding.
    """

    def __init__(self, folder: Path, vocab_all: int, continuation: np.ndarray):
        self.folder, self.vocab = folder, vocab_all
        self.continuation = continuation  # [vocab_all] bool: token is a `##` piece
        self.spills: dict[str, list[_Spill]] = {"left": [], "right": []}
        self.samples: dict[str, list[np.ndarray]] = {"left": [], "right": []}

    def add(self, index: int, side: str, gram: np.ndarray, neighbour: np.ndarray, counts: np.ndarray) -> None:
        """One section's entries: level-n global ids `gram` (-1: not frequent), neighbour token ids."""
        keep = np.flatnonzero(gram >= 0)
        keys = gram[keep].astype(np.int64) * self.vocab + neighbour[keep]
        order = np.argsort(keys, kind="stable")
        sp, sample = _spill_sorted(self.folder, f"nb-{side}-{index:05d}", keys[order], counts[keep][order])
        self.spills[side].append(sp)
        self.samples[side].append(sample)

    def entropy(self, side: str, totals: np.ndarray, partition_entries: int) -> np.ndarray:
        """float64 [F]: H = log2 T - (sum over neighbours c log2 c) / T, T = count(w).

        The T - sum(c) occurrences at a line start/end have no neighbour: each counts as a neighbour of
        its own (adds 0 to the sum), since a line edge is as free a boundary as any. On the right, all
        `##` continuation neighbours are one neighbour, "inside a word": w then ends inside a word of the
        tokenizer, and those occurrences say nothing about a free boundary.
        """
        s = np.zeros(len(totals), np.float64)
        for keys, c in _merged_ranges(self.spills[side], self.samples[side], partition_entries, 1, self.vocab):
            if not len(keys):
                continue
            w, tok = keys // self.vocab, keys % self.vocab
            c = c.astype(np.float64)
            lo = int(w[0])
            inside = self.continuation[tok] if side == "right" else np.zeros(len(tok), bool)
            size = int(w[-1]) - lo + 1
            # (astype: bincount of an empty selection returns int64 zeros)
            part = np.bincount(w[~inside] - lo, weights=c[~inside] * np.log2(c[~inside]),
                               minlength=size).astype(np.float64)
            glued = np.bincount(w[inside] - lo, weights=c[inside], minlength=size).astype(np.float64)
            part += glued * np.log2(np.maximum(glued, 1.0))
            s[lo : lo + len(part)] += part  # each n-gram's keys lie in one range: s is summed in key order
        for sp in self.spills[side]:
            sp.delete()
        t = totals.astype(np.float64)
        return np.maximum(np.log2(t) - s / t, 0.0)


def merge_sections(
    sections: Sequence[CountsSection],
    *,
    max_n: int,
    min_freq: int,
    tmp_dir: Path,
    partition_entries: int = 8_000_000,
    on_step: Callable[[int, int], None] | None = None,
    entropy_from: int | None = None,
) -> FrequentNgrams:
    """Sum the sections' counts and keep n-grams with count >= min_freq (see the module docstring).

    `entropy_from`: also compute the left/right branching entropy of the frequent n-grams of lengths
    entropy_from..max_n (`_Neighbours`); this reads the (max_n+1)-grams, so the sections must hold them.
    `on_step(level, sections_done)` is called after each section of each level, for a progress bar.
    """
    if not sections:
        raise ZenError("no counts to merge")
    last_level = max_n + 1 if entropy_from is not None else max_n
    _check_compatible(sections, max_n, last_level)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    positions = {n: sum(int(s.header["positions"][n - 1]) for s in sections) for n in range(1, max_n + 1)}
    sources = list(dict.fromkeys(s.header["source"]["path"] for s in sections))
    result = FrequentNgrams(
        tokens=[], counts={}, prefix={}, suffix={}, positions=positions, max_n=max_n, min_freq=min_freq,
        lines=sum(s.header["lines"] for s in sections), chars=sum(s.header["chars"] for s in sections),
        total_tokens=sum(s.header["tokens"] for s in sections), sources=sources,
        tokenizer=sections[0].header["tokenizer"],
    )

    # Level 1: token tables are small; sum them in Python.
    totals: dict[str, int] = {}
    for s in sections:
        for tok, c in zip(s.table, s.array("counts_1").tolist()):
            totals[tok] = totals.get(tok, 0) + c
    result.candidates[1] = len(totals)
    tokens = sorted(t for t, c in totals.items() if c >= min_freq)
    gid = {t: i for i, t in enumerate(tokens)}
    result.tokens = tokens
    result.counts[1] = np.array([totals[t] for t in tokens], dtype=np.int64)
    maps: list[Path] = []
    for i, s in enumerate(sections):
        path = tmp_dir / f"map-{i:05d}-1.npy"
        np.save(path, np.array([gid.get(t, -1) for t in s.table], dtype=np.int32))
        maps.append(path)
    # For entropy: every token (frequent or not) gets an id, and each section's n-grams remember their
    # first and last token (`ends`), level by level, as ids into that all-token table.
    entropy = entropy_from is not None
    ends: list[Path] = []
    if entropy:
        every = sorted(totals)
        continuation = np.array([is_continuation(t) for t in every], dtype=bool)  # [all tokens]
        glued = np.array([is_continuation(t) for t in tokens], dtype=bool)  # [F_1] frequent tokens
        all_id = {t: i for i, t in enumerate(every)}
        for i, s in enumerate(sections):
            tok = np.array([all_id[t] for t in s.table], dtype=np.int32)
            path = tmp_dir / f"ends-{i:05d}-1.npy"
            np.save(path, np.stack([tok, tok]))  # [2, V_local]: first, last token
            ends.append(path)
    if on_step:
        on_step(1, len(sections))

    for n in range(2, last_level + 1):
        n_prev = len(result.counts[n - 1])
        if n_prev == 0:
            break
        select = n <= max_n  # below: level n's own n-grams; at max_n + 1 only the neighbours of level n-1
        nb = None
        if entropy and entropy_from <= n - 1:
            nb = _Neighbours(tmp_dir, len(every), continuation)
        spills: list[_Spill] = []
        samples = []
        new_ends: list[Path] = []
        for i, s in enumerate(sections):
            m = np.load(maps[i])
            pre, suf = s.array(f"prefix_{n}"), s.array(f"suffix_{n}")
            counts_n = s.array(f"counts_{n}")
            gp, gs = m[pre], m[suf]
            if entropy:
                e = np.load(ends[i])
                first, last = e[0][pre], e[1][suf]  # first/last token of each local n-gram
                if nb is not None:
                    nb.add(i, "left", gs, first, counts_n)  # w = the last n-1 tokens, neighbour = the first
                    nb.add(i, "right", gp, last, counts_n)  # w = the first n-1 tokens, neighbour = the last
                if n < last_level:
                    path = tmp_dir / f"ends-{i:05d}-{n}.npy"
                    np.save(path, np.stack([first, last]))
                    new_ends.append(path)
                del e, first, last
            if select:
                local = np.flatnonzero((gp >= 0) & (gs >= 0)).astype(np.int64)
                keys = gp[local].astype(np.int64) * n_prev + gs[local]
                if len(keys) > 1 and not bool(np.all(keys[1:] > keys[:-1])):
                    raise ZenError(f"{s.path}: section {s.index + 1}, length {n}: n-grams out of order; "
                                   f"the counts file is damaged")
                sp, sample = _spill_sorted(tmp_dir, f"s{i:05d}", keys, counts_n[local], local)
                spills.append(sp)
                samples.append(sample)
                del keys, local
            del m, gp, gs, pre, suf, counts_n
            if on_step:
                on_step(n, i + 1)
        for p in ends:
            p.unlink(missing_ok=True)
        ends = new_ends
        if nb is not None:
            w_counts = result.counts[n - 1]
            result.entropy_left[n - 1] = nb.entropy("left", w_counts, partition_entries)
            result.entropy_right[n - 1] = nb.entropy("right", w_counts, partition_entries)
            # An n-gram that starts with a `##` piece always starts inside a word: no free left boundary.
            first_token = result.chain(n - 1, np.arange(len(w_counts)), "prefix")[1]
            result.entropy_left[n - 1][glued[first_token]] = 0.0
        if not select:
            break
        result.candidates[n] = sum(sp.size for sp in spills)

        freq_keys, freq_counts = [], []
        for k, c in _merged_ranges(spills, samples, partition_entries, min_freq):
            freq_keys.append(k)
            freq_counts.append(c)
        keys = np.concatenate(freq_keys) if freq_keys else np.zeros(0, np.int64)
        result.counts[n] = np.concatenate(freq_counts) if freq_counts else np.zeros(0, np.int64)
        result.prefix[n] = (keys // n_prev).astype(np.int32)
        result.suffix[n] = (keys % n_prev).astype(np.int32)

        # Each section's local level-n id → global id, for the next level.
        new_maps: list[Path] = []
        for i, (s, sp) in enumerate(zip(sections, spills)):
            if n < last_level and len(keys):
                local_keys = sp.keys(mmap=False)
                pos = np.searchsorted(keys, local_keys)
                found = pos < len(keys)
                found[found] = keys[pos[found]] == local_keys[found]
                m = np.full(_section_len(s, n), -1, dtype=np.int32)
                m[sp.local()[found]] = pos[found]
                path = tmp_dir / f"map-{i:05d}-{n}.npy"
                np.save(path, m)
                new_maps.append(path)
                del m, pos, found, local_keys
            sp.delete()
        for p in maps:
            p.unlink(missing_ok=True)
        maps = new_maps
        del keys
    for p in maps + ends:
        p.unlink(missing_ok=True)
    for n in range(1, max_n + 1):
        result.counts.setdefault(n, np.zeros(0, np.int64))
        result.candidates.setdefault(n, 0)
        if n >= 2:
            result.prefix.setdefault(n, np.zeros(0, np.int32))
            result.suffix.setdefault(n, np.zeros(0, np.int32))
        if entropy and n >= entropy_from:
            result.entropy_left.setdefault(n, np.zeros(result.size(n), np.float64))
            result.entropy_right.setdefault(n, np.zeros(result.size(n), np.float64))
    return result


def _section_len(section: CountsSection, n: int) -> int:
    spec = next(a for a in section.header["arrays"] if a["name"] == f"counts_{n}")
    return int(spec["length"])


def iter_sections(paths: Sequence[str | Path]) -> Iterator[CountsSection]:
    for p in paths:
        yield from read_counts_file(p)
