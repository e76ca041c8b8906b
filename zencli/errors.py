"""The one exception type users see.

Every expected failure (bad input file, bad recipe key, mismatched checkpoint) raises ZenError with a
single-line message that names the file and line (or the recipe key) and says what was expected. The CLI
prints it as one line and exits with status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
import errno
import os
from collections.abc import Iterable
from pathlib import Path

# What the machine can do to any write: a full disk or quota, a read-only or failing file system, no
# permission. An OSError with one of these is a fault to report in one line, not a bug.
MACHINE_ERRNOS = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EFBIG, errno.EROFS,
                                       errno.EIO, errno.EACCES, errno.EPERM) if e is not None)


class ZenError(Exception):
    """A user-facing error: one line, no traceback."""

    def __init__(self, message: str):
        super().__init__(message.replace("\n", " "))


def where(path: str | Path, line: int | None = None) -> str:
    """`file:line` prefix for error messages (line is 1-based)."""
    return f"{path}:{line}" if line is not None else str(path)


def did_you_mean(name: str, choices: Iterable[str], prefix: str = "") -> str:
    """` (did you mean 'X'?)` with the closest of `choices` to a mistyped `name`, or "" when none is close."""
    close = difflib.get_close_matches(str(name), list(choices), n=1)
    return f" (did you mean '{prefix}{close[0]}'?)" if close else ""


def unknown_task(name: str, choices: Iterable[str]) -> ZenError:
    """The error for a task name that is not one of `choices`: the closest one, and all of them."""
    choices = sorted(choices)
    return ZenError(f"unknown task {name!r}{did_you_mean(name, choices)}; expected one of {', '.join(choices)}")


def os_error_in(exc: BaseException | None) -> OSError | None:
    """`exc` if it is an OSError, else the first OSError it was raised from or while handling: torch.save
    reports a full disk as a RuntimeError raised while handling the OSError of the write."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def os_reason(error: OSError) -> str:
    """The errno's meaning ("No space left on device"), else the error's text."""
    if error.errno:
        return error.strerror or os.strerror(error.errno)
    return str(error) or type(error).__name__


class WriteError(ZenError):
    """Writing `path` failed with an OSError (disk full, quota, read-only, I/O error, permission)."""

    def __init__(self, path: str | Path, error: OSError, detail: str = ""):
        self.path, self.error, self.errno = str(path), error, error.errno
        other = error.filename if error.filename not in (None, "") else None
        if other is not None and os.path.basename(os.fsdecode(other)).startswith(f".{Path(path).name}.tmp-"):
            other = None  # the writer's own temp file: name the file the user asked for
        if other is not None and os.fsdecode(other) != str(path):
            message = f"{os.fsdecode(other)}: {os_reason(error)} (while writing {path})"
        else:
            message = f"{path}: cannot write: {os_reason(error)}"
        super().__init__(message + (f"; {detail}" if detail else ""))

    def __reduce__(self):  # through a process pool: arrives as the ZenError it prints as
        return ZenError, (str(self),)
