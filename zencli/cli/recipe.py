"""`zen recipe list|show`."""

from __future__ import annotations

import functools

import typer
import yaml

from zencli.cli.common import OVERRIDES, console

app = typer.Typer(help="List and show recipes (YAML settings in recipes/).", no_args_is_help=True)


@app.command("list")
def list_() -> None:
    """List the built-in recipes with their job and the command that runs them."""
    from rich.table import Table

    from zencli.config import list_recipes, read_recipe_data

    table = Table(title="built-in recipes")
    table.add_column("name")
    table.add_column("job")
    table.add_column("command")
    for name in list_recipes():
        data, path = read_recipe_data(name)
        first = path.read_text(encoding="utf-8").splitlines()[0] if path.stat().st_size else ""
        command = first.lstrip("# ").strip() if first.startswith("#") else ""
        table.add_row(name, str(data.get("job", "?")), command)
    console.print(table)


@app.command("show")
def show(
    name: str = typer.Argument(..., help="Recipe name or YAML file."),
    overrides: list[str] = OVERRIDES,
) -> None:
    """Print the fully resolved recipe (defaults filled in, overrides applied, validated)."""
    from zencli.config import load_job_recipe, to_dict

    cfg = load_job_recipe(name, overrides)
    typer.echo(yaml.safe_dump(to_dict(cfg), sort_keys=False, allow_unicode=True), nl=False)
    for first, second, what, how in getattr(cfg, "ALTERNATIVES", ()):
        value = functools.reduce(getattr, first.split("."), cfg)
        if value is not None:  # YAML comments: the output stays a recipe
            shown = value if isinstance(value, str) else f"{value:g}"
            typer.echo(f"# {second}: null = from {first}: {shown} ({what}, {how})")
