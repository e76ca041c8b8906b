"""The CPU thread count of a run, set for the run only: a run inside a longer process (a benchmark, the
tests, a command that trains and then scores) leaves the count as it found it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with `n` torch threads (None or 0: leave the count alone), then restore the old count."""
    if not n:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)
