"""Options and helpers shared by the command modules."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
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
PRECISION_OPTION = typer.Option(
    "auto", "--precision",
    help="Precision the model runs in: auto (bf16 on CUDA and on CPUs with bf16 instructions, else fp32; says "
    "which), fp32, bf16 (autocast) or int8 (linear layers quantized on the fly; CPU only). The model's files "
    "never change; docs/results.md gives the scores each loses.")


def keyed(key: str, *decls: str, help: str, **kw: Any) -> Any:
    """A flag that sets recipe key `key` (default: not given). The flag and its key are declared once, here:
    the help names the key, and `keyed_options` reads it back from the command's signature."""
    option = typer.Option(None, *decls, help=f"{help} (recipe key {key})", **kw)
    option.recipe_key = key
    return option


def keyed_options(command: Callable[..., Any], values: dict[str, Any]) -> dict[str, Any]:
    """{recipe key: value} of `command`'s keyed flags, from the values it was called with (None: not given)."""
    return {p.default.recipe_key: values[name] for name, p in inspect.signature(command).parameters.items()
            if hasattr(p.default, "recipe_key")}


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
