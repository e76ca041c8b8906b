"""SIGTERM and SIGINT: a command ends with one line and nothing half-written; training stops gracefully.

Schedulers (SLURM, Kubernetes, spot and preemptible instances) stop jobs with SIGTERM, Ctrl-C sends SIGINT.

- Outside training, `terminate_raises()` (what the CLI's `main` installs) turns SIGTERM into `Terminated`,
  a KeyboardInterrupt: every `finally` and the atomic writers' clean-up run as on Ctrl-C, so no temp or
  partial file stays behind, and the CLI prints one line and exits 143 (SIGINT: 130).
- A training run holds a `StopRequest` (zencli.train.loop): its handlers only record the signal; the loop
  finishes the optimizer step in progress, writes a checkpoint and raises `Interrupted`, which the CLI
  prints as `interrupted at step N: checkpoint saved; run the same command to resume` (exit 143 or 130).
  A second signal raises `Terminated` at once. A repeat within `DUPLICATE_S` of the first counts as the
  same request: Ctrl-C reaches every process of the terminal's group and a launcher (`--nproc`, torchrun)
  forwards the signal too, so each training process may see it twice at once.

Handlers are installed for a scope (context managers) and restored after it: library callers and tests
keep their own. A forked child (a DataLoader worker) inherits the parent's Python handlers but not its
role: there SIGTERM takes its default action (the parent or a pool ending its workers) and SIGINT is
ignored (the parent decides when its workers stop).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
DUPLICATE_S = 1.0


def exit_code(signum: int) -> int:
    """The shell's status for a process ended by `signum`: 130 (SIGINT), 143 (SIGTERM)."""
    return 128 + int(signum)


class Terminated(KeyboardInterrupt):
    """SIGTERM (or a second signal during training) raised where the program was: it unwinds like Ctrl-C."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(int(signum))
        self.signum = int(signum)


class Interrupted(Exception):
    """A run stopped on a signal after saving its state. `announce`: this process prints the message
    (rank 0 of a data-parallel run; the other ranks exit quietly with the same status)."""

    def __init__(self, message: str, signum: int, announce: bool = True):
        super().__init__(message)
        self.signum, self.announce = int(signum), announce

    @property
    def exit_code(self) -> int:
        return exit_code(self.signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _forked_child(signum: int) -> None:
    """A forked child received a signal through its parent's handler: default action for SIGTERM,
    nothing for SIGINT."""
    if signum == signal.SIGINT:
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


@contextlib.contextmanager
def _handlers(handler: Any, signals: tuple[int, ...]) -> Iterator[None]:
    """`handler` for `signals` inside the block (main thread only: elsewhere Python cannot set handlers)."""
    if not _in_main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """Inside the block SIGTERM raises `Terminated` (SIGINT keeps Python's KeyboardInterrupt)."""
    owner = os.getpid()

    def handle(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:
            _forked_child(signum)
            return
        raise Terminated(signum)

    with _handlers(handle, (signal.SIGTERM,)):
        yield


def ignore_signals() -> None:
    """From now on SIGINT and SIGTERM do nothing (a process that is already ending, e.g. printing why)."""
    if _in_main_thread():
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)


class StopRequest:
    """Records SIGTERM/SIGINT while entered; `signum` is the first one (None: no request). A later signal
    (more than DUPLICATE_S after the first) raises `Terminated` at once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._at = 0.0
        self._owner = os.getpid()
        self._scope: contextlib.AbstractContextManager | None = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self._owner:
            _forked_child(signum)
            return
        now = time.monotonic()
        if self.signum is None:
            self.signum, self._at = int(signum), now
        elif now - self._at > DUPLICATE_S:
            raise Terminated(signum)

    def __enter__(self) -> StopRequest:
        self._owner = os.getpid()
        self._scope = _handlers(self._handle, SIGNALS)
        self._scope.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._scope is not None
        self._scope.__exit__(*exc)
        self._scope = None
