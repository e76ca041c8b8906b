"""Making and writing shards: one shard per `ShardTask`, in this process or in a pool of spawned worker
processes that read the tokenized corpus from a work folder (memory-mapped) instead of receiving it."""

from __future__ import annotations

import multiprocessing as mp
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zencli.data.pretraining.corpus import TokenizedCorpus
from zencli.data.pretraining.examples import ExampleMaker
from zencli.data.pretraining.settings import PretrainDataSettings
from zencli.data.segmenters import ModelLoader
from zencli.data.shards import shard_name, write_shard
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.vocab import Vocab

WORK_DIR = ".work-tokens"


@dataclass(frozen=True)
class ShardTask:
    index: int
    round: int
    part: int
    doc_lo: int
    doc_hi: int


@dataclass
class WorkerConfig:
    vocab: Vocab
    lexicon: Lexicon
    settings: PretrainDataSettings
    out_dir: Path
    work_dir: Path
    fingerprint: str
    load_model: ModelLoader | None = None  # for a `model:DIR` segmenter (a module-level function: picklable)


@contextmanager
def shared_corpus(corpus: TokenizedCorpus, work_dir: Path) -> Iterator[None]:
    """The tokenized corpus in `work_dir` for the workers to load (saved there unless it was tokenized
    there: memory-mapped from it), removed afterwards."""
    try:
        mapped = getattr(corpus.ids, "filename", None)
        if mapped is None or Path(mapped).resolve() != (work_dir / "ids.npy").resolve():
            corpus.save(work_dir)
        yield
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def run_shards(pending: list[ShardTask], config: WorkerConfig, n_proc: int,
               finished: Callable[[dict[str, Any]], None]) -> None:
    """Make the `pending` shards in this process (`n_proc` 1) or in `n_proc` processes; `finished` gets
    each shard's meta, in this process, as it is written."""
    if n_proc > 1:
        _run_pool(pending, config, n_proc, finished)
        return
    _init_worker(config)
    try:
        for t in pending:
            finished(_make_shard(t))
    finally:
        _STATE.clear()


_STATE: dict[str, Any] = {}  # one worker's config and example maker (set by _init_worker)


def _init_worker(config: WorkerConfig) -> None:
    _STATE.clear()
    _STATE["config"] = config
    _STATE["maker"] = ExampleMaker(config.vocab, config.lexicon, config.settings, config.load_model)


def _make_shard(task: ShardTask) -> dict[str, Any]:
    config: WorkerConfig = _STATE["config"]
    maker: ExampleMaker = _STATE["maker"]
    t0 = time.perf_counter()
    # Mapped afresh per shard and let go after it, so a worker's resident pages are one part's, not the corpus's.
    seg = TokenizedCorpus.load(config.work_dir).segments(task.doc_lo, task.doc_hi, config.settings.max_seq_len)
    columns, stats = maker.make(seg, (config.settings.seed, task.round, task.part))
    meta = {
        "name": shard_name(task.index), "index": task.index, "round": task.round, "part": task.part,
        "documents": [task.doc_lo, task.doc_hi], "fingerprint": config.fingerprint, **stats,
    }
    write_shard(config.out_dir, task.index, columns, meta)
    meta["seconds"] = round(time.perf_counter() - t0, 3)
    return meta


def _run_pool(pending: list[ShardTask], config: WorkerConfig, n_proc: int,
              finished: Callable[[dict[str, Any]], None]) -> None:
    """Make shards in `n_proc` spawned processes; the first failure cancels the rest and is raised."""
    ctx = mp.get_context("spawn")  # no fork: the parent may hold threads (torch, Rich)
    pool = ProcessPoolExecutor(max_workers=n_proc, mp_context=ctx, initializer=_init_worker, initargs=(config,))
    try:
        futures = {pool.submit(_make_shard, t) for t in pending}
        while futures:
            ready, futures = wait(futures, return_when=FIRST_EXCEPTION)
            for f in ready:
                finished(f.result())  # re-raises a worker's exception
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
