"""The project's Rich progress display, built in one place so every long job shows the same columns.

Left to right: [spinner] description, bar, amount done, [one task field], [elapsed], ETA. The amount is
`count` (done/total), `bytes` (size done/total and transfer speed) or `percent`. Byte counts show their
throughput as a column; a count shows its rate (tok/s, chars/s) in the task field the caller fills.

This module sits beside zencli/errors.py, below every layer, so text, lexicon, data, train, datasets
and cli can all use it. Rich is imported only when a display is built, which keeps `zen --help` fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

Amount = Literal["count", "bytes", "percent"]


def make_progress(console: Console | None = None, *, amount: Amount = "count", width: int = 0,
                  field: str | None = None, spinner: bool = False, elapsed: bool = False,
                  transient: bool = False) -> Progress:
    """A Rich `Progress` with the standard columns (see the module docstring).

    `width` pads the description so the bars of several tasks line up; `field` names a task field shown
    after the amount (`add_task(..., info="")`); `spinner` leads with a spinner for tasks of unknown
    length; `elapsed` adds the time spent; `transient` clears the display when it stops."""
    # lazy: `zen --help` imports this module; rich.progress loads with the first bar
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns: list[ProgressColumn] = [SpinnerColumn()] if spinner else []
    columns.append(TextColumn(f"[bold]{{task.description:<{width}}}" if width else "[bold]{task.description}"))
    columns.append(BarColumn())
    if amount == "bytes":
        columns += [DownloadColumn(), TransferSpeedColumn()]
    elif amount == "percent":
        columns.append(TaskProgressColumn())
    else:
        columns.append(MofNCompleteColumn())
    if field is not None:
        columns.append(TextColumn(f"{{task.fields[{field}]}}"))
    if elapsed:
        columns.append(TimeElapsedColumn())
    # The label keeps the remaining time from being read as the elapsed time beside it.
    columns += [TextColumn("ETA"), TimeRemainingColumn()]
    return Progress(*columns, console=console, transient=transient)


@contextmanager
def optional_progress(console: Console | None, *, amount: Amount = "count", width: int = 0,
                      field: str | None = None, spinner: bool = False, elapsed: bool = False,
                      transient: bool = False) -> Iterator[Progress | None]:
    """A started `make_progress` display, or None when `console` is None (quiet runs, JSON on stdout),
    so callers write `if progress is not None: progress.update(...)` instead of two code paths."""
    if console is None:
        yield None
        return
    with make_progress(console, amount=amount, width=width, field=field, spinner=spinner, elapsed=elapsed,
                       transient=transient) as progress:
        yield progress
