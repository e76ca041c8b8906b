"""Small pieces the benchmarks share: where a dataset lives, what machine a measurement ran on, and the
interleaved-rounds timing every speed comparison uses."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from zencli import __version__
from zencli.errors import ZenError

# Imports inside functions are lazy on purpose: `zen --help` imports this module; the dataset locator and
# torch / numpy load only where a benchmark needs them.

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


def interleaved_rounds(keys: Sequence[K], rounds: int, warmup: int, run: Callable[[K, int], R]
                       ) -> dict[K, list[R]]:
    """`run(key, round)` for every key once per round, the results of the timed rounds per key, in order.

    The order is rotated from round to round, so no key always runs first or after the same neighbour, and
    each round's results ran close in time: on a machine shared with other load, the per-round ratios of two
    keys are what compares them (medians of those), not their separate totals. The first `warmup` rounds are
    run and dropped (allocator, caches, lazy initialisation)."""
    results: dict[K, list[R]] = {k: [] for k in keys}
    n = len(keys)
    for r in range(warmup + rounds):
        for k in list(keys[r % n:]) + list(keys[:r % n]):
            out = run(k, r)
            if r >= warmup:
                results[k].append(out)
    return results


def dataset_dir(data: Path | None, name: str = "pd98") -> Path:
    """`data` when given, else the dataset locator's directory for `name` (`zencli.datasets.locate`: the
    cache, $ZEN_DATA, or a fetch). Either holds the shared layout (raw/, cws/, ner/, ...)."""
    if data is not None:
        d = Path(data)
        if not d.is_dir():
            raise ZenError(f"--data: {d} is not a directory; expected a dataset directory (raw/, cws/, ner/ ...)")
        return d
    from zencli.datasets import locate  # lazily: the locator may fetch and convert the corpus

    return Path(locate(name))


def need_file(path: Path, what: str) -> Path:
    """`path` if it is a file, else a one-line error saying what it should have been."""
    if not path.is_file():
        raise ZenError(f"{path}: no such file; expected {what}")
    return path


def cpu_model() -> str | None:
    """The CPU's model name (Linux /proc/cpuinfo), None where unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def zen_source() -> dict[str, Any]:
    """Which zen made a measurement: the package version, and the git commit (with `dirty` when the working
    tree had changes) when zen runs from a git checkout; None where git or the checkout is missing."""
    root = Path(__file__).resolve().parents[2]
    commit = dirty = None
    if not (root / ".git").exists():  # an installed copy: no checkout of its own to ask
        return {"zen": __version__, "commit": None, "dirty": None}
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                                  check=True).stdout.strip()

        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        pass
    return {"zen": __version__, "commit": commit, "dirty": dirty}


def machine_facts() -> dict[str, Any]:
    """What a measurement ran on: CPUs, load, torch / numpy / Python versions, platform, zen's source."""
    import numpy as np
    import torch

    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "load_avg": load,
        **zen_source(),
    }
