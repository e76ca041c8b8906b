"""Atomic file writes: a reader (or a resumed run) sees either the old file or the complete new one.

Data goes to a temp file in the same directory (so the rename cannot cross file systems), is fsynced,
then `os.replace`d over the target, and the directory entry is fsynced. A crash at any moment leaves at
most a stray `.NAME.tmp-PID` file behind, never a truncated target.

Any failure removes the temp file. An OSError while writing (disk full, quota, read-only file system, I/O
error, permission), also one that a library wrapped (torch.save raises a RuntimeError while handling the
OSError of its write), becomes a `WriteError`: one line naming the file and the errno's meaning; the
earlier file of that name is left as it was.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from zencli.errors import WriteError, ZenError, os_error_in


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open directories; the rename is still atomic there
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_path(path: Path) -> Path:
    return path.parent / f".{path.name}.tmp-{os.getpid()}"


def atomic_write_path(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call `write(tmp_path)` (for writers that want a file name), then move the result into place."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        error = os_error_in(e) if isinstance(e, Exception) and not isinstance(e, ZenError) else None
        if error is not None:
            raise WriteError(path, error) from None
        raise
    _fsync_dir(path.parent)


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None]) -> None:
    """Call `write(f)` on a binary file object, then move the result into place."""

    def to_path(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            write(f)

    atomic_write_path(path, to_path)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


class _Stream:
    """A file that np.save sees as a plain stream, so it writes through `write`: a full disk then raises
    the OS's OSError (ENOSPC), not ndarray.tofile's errno-less "N requested and M written"."""

    def __init__(self, f: BinaryIO):
        self.write = f.write


def save_npy(f: BinaryIO | str | Path, array: np.ndarray) -> None:
    """np.save(f, array) to an open file or a path, a failed write reported with its errno (see _Stream)."""
    if isinstance(f, (str, Path)):
        with open(f, "wb") as out:
            np.save(_Stream(out), array)
    else:
        np.save(_Stream(f), array)
