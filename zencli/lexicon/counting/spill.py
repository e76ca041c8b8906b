"""Sorted runs on disk: each section's entries of one level are spilled as sorted int64 keys with their
counts, and the spills are merged range by range, so one key range (not the corpus's distinct n-grams)
sits in memory at a time. Used by the n-gram merge and by the neighbour statistics alike."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from zencli.atomic_write import save_npy


class Spill:
    """One section's level-n entries on disk: sorted int64 keys, counts, and (optionally) local indices."""

    def __init__(self, folder: Path, name: str, keys: np.ndarray, counts: np.ndarray, local: np.ndarray | None = None):
        self.base = folder / name
        self.size = len(keys)
        save_npy(f"{self.base}-k.npy", keys)
        save_npy(f"{self.base}-c.npy", counts)
        if local is not None:
            save_npy(f"{self.base}-i.npy", local)

    def keys(self, mmap: bool = True) -> np.ndarray:
        return np.load(f"{self.base}-k.npy", mmap_mode="r" if mmap else None)

    def counts(self) -> np.ndarray:
        return np.load(f"{self.base}-c.npy", mmap_mode="r")

    def local(self) -> np.ndarray:
        return np.load(f"{self.base}-i.npy")

    def delete(self) -> None:
        for s in ("k", "c", "i"):
            Path(f"{self.base}-{s}.npy").unlink(missing_ok=True)


def sum_sorted_runs(keys: np.ndarray, counts: np.ndarray, min_freq: int) -> tuple[np.ndarray, np.ndarray]:
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


def spill_sorted(folder: Path, name: str, keys: np.ndarray, counts: np.ndarray,
                  local: np.ndarray | None = None) -> tuple[Spill, np.ndarray]:
    """Spill entries whose keys are already sorted; returns the spill and a sample of its keys (a copy: a
    strided view would keep all of `keys` in memory, for every section, until the level is merged)."""
    return Spill(folder, name, keys, counts, local), keys[:: max(1, len(keys) // 256)].copy()


def merged_ranges(spills: Sequence[Spill], samples: Sequence[np.ndarray], partition_entries: int,
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
            yield sum_sorted_runs(np.concatenate(ks), np.concatenate(cs), min_freq)
