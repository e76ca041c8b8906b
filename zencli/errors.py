"""The one exception type users see.

Every expected failure (bad input file, bad recipe key, mismatched checkpoint) raises ZenError with a
single-line message that names the file and line (or the recipe key) and says what was expected. The CLI
prints it as one line and exits with status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path


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
