"""The one exception type users see.

Every expected failure (bad input file, bad recipe key, mismatched checkpoint) raises ZenError with a
single-line message that names the file and line (or the recipe key) and says what was expected. The CLI
prints it as one line and exits with status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from pathlib import Path


class ZenError(Exception):
    """A user-facing error: one line, no traceback."""

    def __init__(self, message: str):
        super().__init__(message.replace("\n", " "))


def where(path: str | Path, line: int | None = None) -> str:
    """`file:line` prefix for error messages (line is 1-based)."""
    return f"{path}:{line}" if line is not None else str(path)
