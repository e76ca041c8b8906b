"""The `zen` Typer app: wires one module per command. Command modules only parse arguments and call
into the library; heavy imports (torch) happen inside the commands so `zen --help` stays fast."""

from __future__ import annotations

import sys

import typer

from zencli import __version__
from zencli.errors import ZenError

app = typer.Typer(
    name="zen",
    help="zen: n-gram enhanced text encoders (ZEN 2.0, ZEN 1.0, BERT, CHTE) from lexicon to prediction.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"zen {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """zen: n-gram enhanced text encoders."""


def _register() -> None:
    from zencli.cli import bench, data, evaluate, finetune, lexicon, model, predict, pretrain, quickstart, recipe, vocab

    app.command("quickstart")(quickstart.quickstart)
    app.command("evaluate")(evaluate.evaluate)
    app.command("pretrain")(pretrain.pretrain)
    app.command("finetune")(finetune.finetune)
    app.command("predict")(predict.predict)
    app.add_typer(lexicon.app, name="lexicon")
    app.add_typer(vocab.app, name="vocab")
    app.add_typer(model.app, name="model")
    app.add_typer(recipe.app, name="recipe")
    app.add_typer(bench.app, name="bench")
    app.add_typer(data.app, name="data")


_register()


def main() -> None:
    try:
        app()
    except ZenError as e:
        print(f"zen: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("zen: interrupted", file=sys.stderr)
        sys.exit(130)
