"""Stage 2 of the package docstring, the reduce: counts files merged one n-gram length at a time, keeping
global ids only for frequent n-grams (apriori: an n-gram is frequent only if its prefix and suffix are).

Per level n, each section's entries are translated to global ids through its level n-1 map (a file per
section in the temp folder), spilled as sorted keys, merged range by range (spill.py), and the frequent
ones get their global ids; each section's level-n map is then built for the next level.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from zencli.atomic_write import save_npy
from zencli.errors import ZenError
from zencli.lexicon.counting.counts_file import CountsSection
from zencli.lexicon.counting.frequent import FrequentNgrams
from zencli.lexicon.counting.neighbours import Neighbours, is_continuation
from zencli.lexicon.counting.spill import Spill, merged_ranges, spill_sorted


def merge_sections(
    sections: Sequence[CountsSection],
    *,
    max_n: int,
    min_freq: int,
    tmp_dir: Path,
    partition_entries: int = 8_000_000,
    on_step: Callable[[int, int], None] | None = None,
    entropy_from: int | None = None,
    workers: int = 1,
) -> FrequentNgrams:
    """Sum the sections' counts and keep n-grams with count >= min_freq (see the package docstring).

    `entropy_from`: also compute the left/right branching entropy of the frequent n-grams of lengths
    entropy_from..max_n (`Neighbours`); this reads the (max_n+1)-grams, so the sections must hold them.
    `on_step(level, sections_done)` is called after each section of each level, for a progress bar.
    `workers`: threads that read, translate and spill the sections of a level side by side (numpy's sorts,
    searches and file writes run without the GIL); the result does not depend on it.
    """
    if not sections:
        raise ZenError("no counts to merge")
    last_level = max_n + 1 if entropy_from is not None else max_n
    _check_compatible(sections, max_n, last_level, min_freq)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    merge = _Merge(sections, max_n, min_freq, tmp_dir, partition_entries, on_step, max(1, workers))
    merge.tokens(entropy=entropy_from is not None)
    for n in range(2, last_level + 1):
        n_prev = len(merge.result.counts[n - 1])
        if n_prev == 0:
            break
        select = n <= max_n  # below: level n's own n-grams; at max_n + 1 only the neighbours of level n-1
        nb = None
        if entropy_from is not None and entropy_from <= n - 1:
            nb = Neighbours(tmp_dir, merge.ends.vocab, merge.ends.continuation)
        spills, samples = merge.scan(n, n_prev, select, nb, keep=n < last_level)
        if nb is not None:
            merge.entropy(n - 1, nb)
        if not select:
            break
        keys = merge.frequent(n, n_prev, spills, samples)
        merge.next_maps(n, keys, spills, keep=n < last_level)
    merge.remove_files()
    _fill_empty_levels(merge.result, entropy_from)
    return merge.result


def _check_compatible(sections: Sequence[CountsSection], max_n: int, depth: int, min_freq: int) -> None:
    """Same tokenizer everywhere, n-grams counted up to `depth` (max_n, or max_n + 1 for entropy), and none
    left out (prune.py) that this min_freq would keep."""
    first = sections[0]
    for s in sections:
        pruned = s.header.get("pruned")
        if pruned is not None and min_freq < pruned["min_freq"]:
            raise ZenError(f"{s.path}: counted without the n-grams that cannot reach min_freq={pruned['min_freq']}; "
                           f"expected min_freq >= {pruned['min_freq']}, got {min_freq} (count again)")
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



class _TokenEnds:
    """For the branching entropy: the first and last token of every section's n-grams, level by level.

    Every token (frequent or not) gets an id into the table of all tokens, since a rare neighbour still
    counts; per section and level the ids are kept in the temp folder as [2, R_n] (first, last): uint16
    while the tokens fit (they are written for every n-gram of every section), else int32.
    """

    def __init__(self, sections: Sequence[CountsSection], totals: dict[str, int], frequent: list[str],
                 tmp_dir: Path):
        every = sorted(totals)
        self.vocab = len(every)
        self.continuation = np.array([is_continuation(t) for t in every], dtype=bool)  # [all tokens]
        self.glued = np.array([is_continuation(t) for t in frequent], dtype=bool)  # [F_1] frequent tokens
        self.tmp_dir = tmp_dir
        all_id = {t: i for i, t in enumerate(every)}
        dtype = np.uint16 if self.vocab <= np.iinfo(np.uint16).max + 1 else np.int32
        self.paths: list[Path] = []
        for i, s in enumerate(sections):
            tok = np.array([all_id[t] for t in s.table], dtype=dtype)
            path = tmp_dir / f"ends-{i:05d}-1.npy"
            save_npy(path, np.stack([tok, tok]))  # [2, V_local]: first, last token
            self.paths.append(path)
        self.next_paths: list[Path | None] = [None] * len(sections)

    def level(self, i: int, n: int, pre: np.ndarray, suf: np.ndarray, keep: bool) -> tuple[np.ndarray, np.ndarray]:
        """First and last token of section i's level-n n-grams (their prefix and suffix ranks `pre`, `suf`),
        kept for level n + 1 when `keep`."""
        e = np.load(self.paths[i])
        first, last = e[0][pre], e[1][suf]
        if keep:
            path = self.tmp_dir / f"ends-{i:05d}-{n}.npy"
            save_npy(path, np.stack([first, last]))
            self.next_paths[i] = path
        return first, last

    def next_level(self) -> None:
        for p in self.paths:
            p.unlink(missing_ok=True)
        self.paths = [p for p in self.next_paths if p is not None]  # all of them, in order, when kept
        self.next_paths = [None] * len(self.next_paths)


class _Merge:
    """The state of one merge between levels: the result so far and, per section, the files that map its
    local (n-1)-gram ids to global ids (and, for the entropy, its n-grams' end tokens)."""

    def __init__(self, sections: Sequence[CountsSection], max_n: int, min_freq: int, tmp_dir: Path,
                 partition_entries: int, on_step: Callable[[int, int], None] | None, workers: int = 1):
        self.sections, self.min_freq, self.tmp_dir = sections, min_freq, tmp_dir
        self.partition_entries, self.on_step, self.workers = partition_entries, on_step, workers
        self._lock = threading.Lock()
        positions = {n: sum(int(s.header["positions"][n - 1]) for s in sections) for n in range(1, max_n + 1)}
        sources = list(dict.fromkeys(s.header["source"]["path"] for s in sections))
        self.result = FrequentNgrams(
            tokens=[], counts={}, prefix={}, suffix={}, positions=positions, max_n=max_n, min_freq=min_freq,
            lines=sum(s.header["lines"] for s in sections), chars=sum(s.header["chars"] for s in sections),
            total_tokens=sum(s.header["tokens"] for s in sections), sources=sources,
            tokenizer=sections[0].header["tokenizer"],
        )
        self.maps: list[Path] = []
        self.ends: _TokenEnds | None = None

    def tokens(self, entropy: bool) -> None:
        """Level 1: token tables are small, so their counts are summed in Python; frequent tokens get global
        ids in sorted order, and each section a map local id → global id (-1: not frequent)."""
        result, sections = self.result, self.sections
        totals: dict[str, int] = {}
        for s in sections:
            for tok, c in zip(s.table, s.array("counts_1").tolist()):
                totals[tok] = totals.get(tok, 0) + c
        result.candidates[1] = len(totals)
        tokens = sorted(t for t, c in totals.items() if c >= self.min_freq)
        gid = {t: i for i, t in enumerate(tokens)}
        result.tokens = tokens
        result.counts[1] = np.array([totals[t] for t in tokens], dtype=np.int64)
        for i, s in enumerate(sections):
            path = self.tmp_dir / f"map-{i:05d}-1.npy"
            save_npy(path, np.array([gid.get(t, -1) for t in s.table], dtype=np.int32))
            self.maps.append(path)
        if entropy:
            self.ends = _TokenEnds(sections, totals, tokens, self.tmp_dir)
        if self.on_step:
            self.on_step(1, len(sections))

    def scan(self, n: int, n_prev: int, select: bool, nb: Neighbours | None,
             keep: bool) -> tuple[list[Spill], list[np.ndarray]]:
        """Level n of every section through its level n-1 map: neighbour entries to `nb`, and, when
        `select`, the entries whose prefix and suffix are both frequent spilled as sorted keys
        gprefix * n_prev + gsuffix (with a sample of each spill's keys)."""
        done = [0]

        def one(i: int) -> tuple[Spill, np.ndarray] | None:
            s = self.sections[i]
            m = np.load(self.maps[i])
            pre, suf = s.array(f"prefix_{n}"), s.array(f"suffix_{n}")
            counts_n = s.array(f"counts_{n}")
            gp, gs = m[pre], m[suf]
            if self.ends is not None:
                first, last = self.ends.level(i, n, pre, suf, keep)  # first/last token of each local n-gram
                if nb is not None:
                    nb.add(i, "left", gs, first, counts_n)  # w = the last n-1 tokens, neighbour = the first
                    nb.add(i, "right", gp, last, counts_n)  # w = the first n-1 tokens, neighbour = the last
                del first, last
            if select:
                local = np.flatnonzero((gp >= 0) & (gs >= 0)).astype(np.int32)  # 4 bytes on disk, not 8
                keys = gp[local].astype(np.int64) * n_prev + gs[local]
                if len(keys) > 1 and not bool(np.all(keys[1:] > keys[:-1])):
                    raise ZenError(f"{s.path}: section {s.index + 1}, length {n}: n-grams out of order; "
                                   f"the counts file is damaged")
                out = spill_sorted(self.tmp_dir, f"s{i:05d}", keys, counts_n[local], local)
                del keys, local
            else:
                out = None
            del m, gp, gs, pre, suf, counts_n
            self._step(n, done)
            return out

        results = self._each(one, range(len(self.sections)))
        if self.ends is not None:
            self.ends.next_level()
        spills = [r[0] for r in results if r is not None]
        return spills, [r[1] for r in results if r is not None]

    def _each(self, fn: Callable[[int], Any], items: Iterable[int]) -> list[Any]:
        """fn over items, in order, on `workers` threads."""
        if self.workers == 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(fn, items))

    def _step(self, n: int, done: list[int]) -> None:
        with self._lock:
            done[0] += 1
            if self.on_step:
                self.on_step(n, done[0])

    def entropy(self, n: int, nb: Neighbours) -> None:
        """The branching entropies of the level-n n-grams, from the neighbours gathered at level n + 1."""
        result = self.result
        w_counts = result.counts[n]
        result.entropy_left[n] = nb.entropy("left", w_counts, self.partition_entries)
        result.entropy_right[n] = nb.entropy("right", w_counts, self.partition_entries)
        # An n-gram that starts with a `##` piece always starts inside a word: no free left boundary. (Its first
        # token a chunk at a time: a chain over a whole level holds n int64 arrays of it.)
        chunk = min(self.partition_entries, 1 << 20)
        for lo in range(0, len(w_counts), chunk):
            ids = np.arange(lo, min(lo + chunk, len(w_counts)))
            first_token = result.chain(n, ids, "prefix")[1]
            result.entropy_left[n][ids[self.ends.glued[first_token]]] = 0.0

    def frequent(self, n: int, n_prev: int, spills: list[Spill], samples: list[np.ndarray]) -> np.ndarray:
        """Merge level n's spills: the frequent n-grams (their global id is their rank) into the result;
        returns their sorted keys."""
        result = self.result
        result.candidates[n] = sum(sp.size for sp in spills)
        freq_keys, freq_counts = [], []
        for k, c in merged_ranges(spills, samples, self.partition_entries, self.min_freq):
            freq_keys.append(k)
            freq_counts.append(c)
        keys = np.concatenate(freq_keys) if freq_keys else np.zeros(0, np.int64)
        result.counts[n] = np.concatenate(freq_counts) if freq_counts else np.zeros(0, np.int64)
        result.prefix[n] = (keys // n_prev).astype(np.int32)
        result.suffix[n] = (keys % n_prev).astype(np.int32)
        return keys

    def next_maps(self, n: int, keys: np.ndarray, spills: list[Spill], keep: bool) -> None:
        """Each section's local level-n id → global id (binary search of its keys among the frequent ones),
        for the next level when `keep`; level n's spills and level n-1's maps are deleted."""
        def one(i: int) -> Path | None:
            s, sp, path = self.sections[i], spills[i], None
            if keep and len(keys):
                local_keys = sp.keys(mmap=False)
                pos = np.searchsorted(keys, local_keys)
                found = pos < len(keys)
                found[found] = keys[pos[found]] == local_keys[found]
                m = np.full(_section_len(s, n), -1, dtype=np.int32)
                m[sp.local()[found]] = pos[found]
                path = self.tmp_dir / f"map-{i:05d}-{n}.npy"
                save_npy(path, m)
                del m, pos, found, local_keys
            sp.delete()
            return path

        new_maps = [p for p in self._each(one, range(len(self.sections))) if p is not None]
        for p in self.maps:
            p.unlink(missing_ok=True)
        self.maps = new_maps

    def remove_files(self) -> None:
        for p in self.maps + (self.ends.paths if self.ends is not None else []):
            p.unlink(missing_ok=True)


def _fill_empty_levels(result: FrequentNgrams, entropy_from: int | None) -> None:
    """Levels the merge never reached (nothing frequent below them) get empty arrays."""
    for n in range(1, result.max_n + 1):
        result.counts.setdefault(n, np.zeros(0, np.int64))
        result.candidates.setdefault(n, 0)
        if n >= 2:
            result.prefix.setdefault(n, np.zeros(0, np.int32))
            result.suffix.setdefault(n, np.zeros(0, np.int32))
        if entropy_from is not None and n >= entropy_from:
            result.entropy_left.setdefault(n, np.zeros(result.size(n), np.float64))
            result.entropy_right.setdefault(n, np.zeros(result.size(n), np.float64))


def _section_len(section: CountsSection, n: int) -> int:
    spec = next(a for a in section.header["arrays"] if a["name"] == f"counts_{n}")
    return int(spec["length"])

