"""One run per output directory: rank 0 holds an exclusive lock on `OUT/.zen-lock` while it trains there.

A second run started on the same directory (say a resume launched while the first is still alive) would
interleave checkpoints and metrics; it is refused with the first run's pid instead. The lock is an
advisory `flock`, so the kernel drops it when its holder dies (kill -9 included) and a later run simply
takes it over; the file is removed when a run ends normally. Where `fcntl` does not exist (Windows) there
is no lock.
"""

from __future__ import annotations

import os
from pathlib import Path

from zencli.errors import ZenError

try:
    import fcntl
except ImportError:  # not on this platform
    fcntl = None

LOCK_NAME = ".zen-lock"


class RunLock:
    """`with RunLock(out):` — hold the output directory's lock, or raise a one-line ZenError naming the pid
    of the run that holds it."""

    def __init__(self, directory: Path):
        self.path = Path(directory) / LOCK_NAME
        self.fd: int | None = None

    def __enter__(self) -> RunLock:
        if fcntl is None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise ZenError(f"{self.path.parent}: another zen run (pid {holder}) is training in this directory; "
                           "wait for it to end, or choose another output dir") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            self.path.unlink(missing_ok=True)  # while still holding it: nobody can have taken it meanwhile
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
