"""The `zen` Typer app: wires one module per command. Command modules only parse arguments and call
into the library; heavy imports (torch) happen inside the commands so `zen --help` stays fast."""

from __future__ import annotations

import inspect
import sys

import typer
import typer.core

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
    from zencli.cli.common import reads_text

    app.command("quickstart")(reads_text(quickstart.quickstart))
    app.command("evaluate")(reads_text(evaluate.evaluate))
    app.command("pretrain")(pretrain.pretrain)  # these two: --encoding-errors is a recipe key
    app.command("finetune")(finetune.finetune)
    app.command("predict")(reads_text(predict.predict))
    app.add_typer(lexicon.app, name="lexicon")
    app.add_typer(vocab.app, name="vocab")
    app.add_typer(model.app, name="model")
    app.add_typer(recipe.app, name="recipe")
    app.add_typer(bench.app, name="bench")
    app.add_typer(data.app, name="data")


def _refuse_renamed_flags() -> None:
    from zencli.cli.common import refuse_renamed_flags

    refuse_renamed_flags(app)  # `--precision` is `--dtype` now: the old flag is an error naming the new one


def _one_line_paragraphs(typer_app: typer.Typer) -> None:
    """Each command's help as its docstring with every paragraph on one line. Rich prints the paragraphs
    after the first with the source's line breaks, which cut sentences in two on a terminal narrower than
    the source; one-line paragraphs it wraps to the terminal."""
    for info in typer_app.registered_commands:
        doc = info.help or inspect.getdoc(info.callback)
        if doc:
            info.help = "\n\n".join(p.replace("\n", " ") for p in doc.split("\n\n"))
    for group in typer_app.registered_groups:
        _one_line_paragraphs(group.typer_instance)


def _no_value_placeholder_on_flags() -> None:
    """Typer's Rich help prints a value placeholder after every option, flags too (`--quiet <bool>`),
    though a flag takes no value (its plain-text help leaves it out): print none for flags."""
    option = typer.core.TyperOption
    placeholder = getattr(option, "display_type_rich", None)
    if placeholder is None:  # a Typer without the placeholder
        return

    def display_type_rich(self: typer.core.TyperOption, ctx) -> str | None:
        return None if self.is_flag else placeholder(self, ctx)

    option.display_type_rich = display_type_rich


_register()
_refuse_renamed_flags()
_one_line_paragraphs(app)
_no_value_placeholder_on_flags()


def _signal_behind(exit_: SystemExit) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt (Ctrl-C, or SIGTERM's `Terminated`) that Typer turned into `Exit(130)`."""
    cause = getattr(exit_.__context__, "__cause__", None)
    return cause if isinstance(cause, KeyboardInterrupt) else None


def main() -> None:
    """Run the app. Expected failures end in one line on stderr: a ZenError or an OSError of the machine
    (a full disk, a read-only file system) with status 2, a signal with 130 (SIGINT) or 143 (SIGTERM)."""
    import signal

    from zencli.errors import MACHINE_ERRNOS, os_error_in, os_reason
    from zencli.signals import Interrupted, exit_code, ignore_signals, terminate_raises

    try:
        with terminate_raises():
            try:
                app(prog_name="zen")  # not "python -m zencli" (bin/zen runs that)
            except SystemExit as e:
                stopped = _signal_behind(e)
                if stopped is None:
                    raise
                raise stopped from None
    except Interrupted as e:  # a training run saved its checkpoint and stopped
        ignore_signals()  # ending anyway: a late signal must not turn this into a traceback
        if e.announce:
            print(e, file=sys.stderr)
        sys.exit(e.exit_code)
    except ZenError as e:
        print(f"zen: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as e:
        ignore_signals()
        signum = getattr(e, "signum", signal.SIGINT)
        print(f"zen: {'terminated' if signum == signal.SIGTERM else 'interrupted'}", file=sys.stderr)
        sys.exit(exit_code(signum))
    except Exception as e:
        error = os_error_in(e)
        if error is None or error.errno not in MACHINE_ERRNOS:
            raise  # a bug: keep the traceback
        where = f"{error.filename}: " if error.filename else ""
        print(f"zen: error: {where}{os_reason(error)}", file=sys.stderr)
        sys.exit(2)
