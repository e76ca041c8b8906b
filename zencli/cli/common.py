"""Options and helpers shared by the command modules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from zencli.progress import make_progress
from zencli.workspace import DEFAULT_WORKDIR, ENV_WORKDIR

console = Console(stderr=False)
err_console = Console(stderr=True)

RECIPE = typer.Option(None, "--recipe", "-r", help="Recipe: a built-in name (see `zen recipe list`) or a YAML file.")
OVERRIDES = typer.Option([], "--set", "-s", help="Override a recipe key: --set a.b=value (repeatable).")
WORKDIR_OPTION = typer.Option(
    None, "--workdir", "-w", show_default=False,
    help=f"Workspace the default pipeline reads and writes (default: ${ENV_WORKDIR}, else ./{DEFAULT_WORKDIR}).")


def write_json_report(path: Path | None, report: dict[str, Any]) -> None:
    """`--json PATH` of the bench commands: the report for machines, beside the tables for people."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {path}")


def progress_bar(out: Console = console):
    """A transient Rich progress bar for benchmark rounds: description, bar, done/total, elapsed, ETA."""
    return make_progress(out, width=28, elapsed=True, transient=True)
