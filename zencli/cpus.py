"""The CPU cores this process may run on: what `workers: 0` ("one per core") and the thread defaults count.

`os.cpu_count()` counts the machine's cores, also for a process pinned to fewer of them (`taskset -c 1`, a
cgroup cpuset, a SLURM allocation), which would then start one worker per machine core on its one core.
"""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """Cores in this process's CPU affinity (all of the machine's where the platform cannot say), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS and Windows have no sched_getaffinity
        return max(1, os.cpu_count() or 1)
