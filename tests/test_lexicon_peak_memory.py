"""The lexicon sidecar's memory figures: a worker's peak is its own, not its parent's size at the spawn."""

import multiprocessing as mp
import time

import numpy as np

from zencli.lexicon.extract import PeakMemory

MB = 1 << 20


def _hold(mb: int) -> int:
    block = np.ones(mb * MB // 8)  # touched: resident
    time.sleep(0.5)  # long enough for several samples
    return int(block[-1])


def test_worker_peak_is_the_workers_own():
    parent = np.ones(400 * MB // 8)  # this process is large when it spawns the workers
    ctx = mp.get_context("spawn")
    with PeakMemory(interval=0.02) as mem:
        with ctx.Pool(1) as pool:
            assert pool.apply(_hold, (1,)) == 1
    small = mem.report()["peak_rss_worker_max"]
    with PeakMemory(interval=0.02) as mem:
        with ctx.Pool(1) as pool:
            assert pool.apply(_hold, (200,)) == 1
    large = mem.report()["peak_rss_worker_max"]
    assert parent[0] == 1
    assert small < 200 * MB  # a worker holding 1 MB is not reported at the parent's 400+ MB
    assert large > 200 * MB > small
    assert mem.report()["peak_rss_total_sampled"] > 600 * MB  # parent + worker
