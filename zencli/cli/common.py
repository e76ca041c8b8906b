"""Options and helpers shared by the command modules."""

from __future__ import annotations

import typer
from rich.console import Console

console = Console(stderr=False)
err_console = Console(stderr=True)

RECIPE = typer.Option(None, "--recipe", "-r", help="Recipe: a built-in name (see `zen recipe list`) or a YAML file.")
OVERRIDES = typer.Option([], "--set", "-s", help="Override a recipe key: --set a.b=value (repeatable).")
