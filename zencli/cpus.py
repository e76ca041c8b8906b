"""The CPU cores this process may run on: what `workers: 0` ("one per core") and the thread defaults count.

`os.cpu_count()` counts the machine's cores, also for a process pinned to fewer of them (`taskset -c 1`, a
cgroup cpuset, a SLURM allocation), which would then start one worker per machine core on its one core.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any


def usable_cpus() -> int:
    """Cores in this process's CPU affinity (all of the machine's where the platform cannot say), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS and Windows have no sched_getaffinity
        return max(1, os.cpu_count() or 1)


def in_processes(fn: Callable[..., Any], tasks: Sequence[tuple], workers: int,
                 initializer: Callable[..., None] | None = None, initargs: tuple = ()) -> Iterator[tuple[int, Any]]:
    """(index, fn(*task)) of each task as it finishes, on up to `workers` spawned processes (no fork: the parent
    may hold threads, torch's or Rich's). The first failure cancels the tasks not started and is raised here."""
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(tasks))), mp_context=ctx,
                             initializer=initializer, initargs=initargs) as pool:
        futures = {pool.submit(fn, *t): k for k, t in enumerate(tasks)}
        try:
            for fut in as_completed(futures):
                yield futures[fut], fut.result()  # re-raises a worker's exception
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
