"""Stage 1 of the package docstring, the map: the input files cut into byte ranges (tasks), each counted
by a worker process into its own counts file, one section per chunk."""

from __future__ import annotations

import math
import multiprocessing as mp
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zencli.cpus import usable_cpus
from zencli.errors import ZenError
from zencli.lexicon.counting.chunk import ChunkBuilder
from zencli.lexicon.counting.counts_file import MAGIC
from zencli.lexicon.counting.prune import KnownFrequent
from zencli.text.reading import (
    absolute_line_error,
    check_readable,
    decoding,
    encoding_errors,
    iter_lines,
    record_replaced,
    shard_byte_ranges,
)

TokenizeFn = Callable[[str], list[str]]

# Bytes read per task = this many times chunk_chars: about one chunk of CJK text (3 UTF-8 bytes/char).
_TASK_BYTES_PER_CHAR = 3
_PROGRESS_EVERY_LINES = 512


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


class _Aborted(Exception):
    pass


# Shared with the parent: bytes read, chars read, abort flag (set by the parent when another task failed).
_shared: tuple[Any, Any, Any] | None = None
# A first pass's frequent n-grams (prune.py), sent once to each worker rather than with every task.
_known: KnownFrequent | None = None


def _init_worker(shared: tuple[Any, Any, Any] | None, known: KnownFrequent | None = None) -> None:
    global _shared, _known
    _shared, _known = shared, known


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
    task: CountTask, tokenize: TokenizeFn, signature: dict[str, Any], max_n: int, chunk_chars: int,
    errors: str = "strict",
) -> dict[str, Any]:
    """Count one byte range into its counts file; one section per `chunk_chars` characters. `errors`: the
    decoding policy of the process that planned it (a spawned worker starts with the default); what it
    replaced comes back under "replaced"."""
    with decoding(errors) as replaced:
        totals = _count_range(task, tokenize, signature, max_n, chunk_chars)
    return {**totals, "replaced": replaced.lines}


def _count_range(
    task: CountTask, tokenize: TokenizeFn, signature: dict[str, Any], max_n: int, chunk_chars: int
) -> dict[str, int]:
    span = task.end - task.start
    sent_bytes = pending_bytes = pending_chars = 0
    totals = {"lines": 0, "chars": 0, "tokens": 0, "sections": 0}
    with open(task.out, "wb") as out:
        out.write(MAGIC)

        def flush(builder: ChunkBuilder) -> None:
            source = {"path": task.path, "start_byte": task.start, "end_byte": task.end, "section": totals["sections"]}
            header = builder.write(out, max_n, {"tokenizer": signature, "source": source}, _known)
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
            raise absolute_line_error(e, task.path, task.start) from None
        if builder.lines or totals["sections"] == 0:
            flush(builder)
    _add_progress(span - sent_bytes, pending_chars)
    return totals


def _run_task(args: tuple) -> dict[str, Any]:
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
    known: KnownFrequent | None = None,
) -> CountRun:
    """Count `files` with `workers` processes into counts files under `out_dir`.

    `tokenize` must be picklable (it travels to the workers). `on_progress(bytes_done, bytes_total,
    chars_done)` is called a few times a second from this process. `known`: a first pass's frequent
    n-grams, to leave out what cannot matter (prune.py).
    """
    t0 = time.perf_counter()
    workers = max(1, workers or usable_cpus())
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = plan_tasks(files, workers, chunk_chars, out_dir)
    total_bytes = sum(t.end - t.start for t in tasks)
    ctx = mp.get_context("spawn")
    shared = (ctx.Value("q", 0), ctx.Value("q", 0), ctx.Value("b", 0))
    args = [(t, tokenize, signature, max_n, chunk_chars, encoding_errors()) for t in tasks]

    def report() -> None:
        if on_progress is not None:
            on_progress(shared[0].value, total_bytes, shared[1].value)

    if workers == 1 or len(tasks) == 1:
        results = _count_here(args, (shared, known), report)
    else:
        results = _count_in_pool(args, min(workers, len(tasks)), ctx, (shared, known), report)
    report()
    run = CountRun(parts=[Path(t.out) for t in tasks], files=[str(Path(f)) for f in files], bytes=total_bytes)
    for r in results:
        record_replaced(r.get("replaced", {}))
        run.lines += r["lines"]
        run.chars += r["chars"]
        run.tokens += r["tokens"]
        run.sections += r["sections"]
    run.seconds = time.perf_counter() - t0
    return run


def _count_here(args: list[tuple], init: tuple, report: Callable[[], None]) -> list[dict[str, Any]]:
    """The tasks one after another in this process (one worker, or one task): no processes to start."""
    results = []
    _init_worker(*init)
    try:
        for a in args:
            results.append(count_task(*a))
            report()
    finally:
        _init_worker(None)
    return results


def _count_in_pool(args: list[tuple], workers: int, ctx: Any, init: tuple,
                   report: Callable[[], None]) -> list[dict[str, Any]]:
    """The tasks on `workers` processes, reporting progress while they run; the first error stops the
    others (they see the abort flag) and is raised here."""
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                             initializer=_init_worker, initargs=init) as pool:
        futures: list[Future] = [pool.submit(_run_task, a) for a in args]
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
                report()
                for fut in done:
                    fut.result()  # re-raises a worker's ZenError here
        except BaseException:
            init[0][2].value = 1  # the abort flag
            for fut in futures:
                fut.cancel()
            raise
        return [f.result() for f in futures]
