"""`workers: 0` and the thread defaults count the cores this process may run on, not the machine's."""

import os

from zencli import cpus
from zencli.lexicon.extract import resolve_workers


def test_a_pinned_process_counts_its_own_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {1}, raising=False)  # `taskset -c 1`
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert cpus.usable_cpus() == 1 and resolve_workers(0) == 1 and resolve_workers(3) == 3


def test_without_an_affinity_call_the_machine_cores_count(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # macOS, Windows
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert cpus.usable_cpus() == 6
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert cpus.usable_cpus() == 1


def test_the_real_affinity_is_read():
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert cpus.usable_cpus() == expected
