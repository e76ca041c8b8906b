"""Options and helpers shared by the command modules."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from zencli.atomic_write import atomic_write_text
from zencli.errors import ZenError
from zencli.jobs.workspace import DEFAULT_WORKDIR, ENV_WORKDIR
from zencli.progress import make_progress
from zencli.text.reading import text_decoding

console = Console(stderr=False)
err_console = Console(stderr=True)

RECIPE = typer.Option(None, "--recipe", "-r", help="Recipe: a built-in name (see `zen recipe list`) or a YAML file.")
OVERRIDES = typer.Option([], "--set", "-s", help="Override a recipe key: --set a.b=value (repeatable).")
WORKDIR_OPTION = typer.Option(
    None, "--workdir", "-w", show_default=False,
    help=f"Workspace the default pipeline reads and writes (default: ${ENV_WORKDIR}, else ./{DEFAULT_WORKDIR}).")
DTYPE_OPTION = typer.Option(
    "auto", "--dtype",
    help="The compute dtype the model runs in: auto (bf16 on CUDA and on CPUs with bf16 instructions, else fp32; "
    "says which), fp32, bf16 (autocast) or int8 (linear layers quantized on the fly; CPU only). The model's "
    "files never change; docs/results.md gives the scores each loses.")

# Flags renamed since: old → new. A command that takes the new flag refuses the old one in one line naming the
# new one (`refuse_renamed_flags`), rather than Click's "No such option". `--precision` also names P in P/R/F.
ENGINE_OPTION = typer.Option("torch", "--engine", help="torch (MODEL: a model directory), torch-compile (the same, "
                             "its encoder compiled by torch.compile: tens of seconds first, then faster; fp32 or "
                             "bf16) or onnx (MODEL: the folder of `zen model export --format onnx`; fp32, or "
                             "--dtype int8).")
RENAMED_FLAGS = {"--precision": "--dtype"}


def _declares(command: Callable[..., Any], flag: str) -> bool:
    return any(flag in (getattr(p.default, "param_decls", None) or ())
               for p in inspect.signature(command).parameters.values())


def refuse_renamed(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command` with a hidden option for each old flag in RENAMED_FLAGS whose new name it takes: given, it is a
    ZenError `--precision was renamed: use --dtype`."""
    renamed = {old: new for old, new in RENAMED_FLAGS.items() if _declares(command, new)}
    if not renamed:
        return command
    signature = inspect.signature(command)

    def refuse(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is not None and not ctx.resilient_parsing:
            old = param.opts[0]
            raise ZenError(f"{old} was renamed: use {renamed[old]}")
        return value

    options = [inspect.Parameter(f"renamed_{old.lstrip('-').replace('-', '_')}", inspect.Parameter.KEYWORD_ONLY,
                                 default=typer.Option(None, old, hidden=True, callback=refuse),
                                 annotation=str) for old in renamed]
    names = {o.name for o in options}

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        return command(*args, **{k: v for k, v in kwargs.items() if k not in names})

    run.__signature__ = signature.replace(parameters=[*signature.parameters.values(), *options])  # type: ignore[attr-defined]
    run.__annotations__ = {**command.__annotations__, **{o.name: "str" for o in options}}
    return run


def refuse_renamed_flags(typer_app: typer.Typer) -> None:
    """`refuse_renamed` on every command of `typer_app` and its groups."""
    for info in typer_app.registered_commands:
        info.callback = refuse_renamed(info.callback)
    for group in typer_app.registered_groups:
        refuse_renamed_flags(group.typer_instance)


ENCODING_ERRORS_HELP = ("Invalid UTF-8 in the text read: strict (an error naming the file, line and byte) or replace "
                        "(each undecodable byte sequence becomes one U+FFFD; how many lines and sequences, on stderr).")
ENCODING_ERRORS = typer.Option("strict", "--encoding-errors", metavar="strict|replace", help=ENCODING_ERRORS_HELP)


def encoding_errors_option(key: str) -> Any:
    """--encoding-errors of a command whose recipe holds the setting (recipe key `key`)."""
    return keyed(key, "--encoding-errors", metavar="strict|replace", help=ENCODING_ERRORS_HELP.rstrip("."))


def reads_text(command: Callable[..., Any]) -> Callable[..., Any]:
    """A command without a recipe that reads text: adds its --encoding-errors option and runs it inside
    `text_decoding` (commands with a recipe take `encoding_errors_option` and read the setting from it)."""
    option = inspect.Parameter("encoding_errors", inspect.Parameter.KEYWORD_ONLY, default=ENCODING_ERRORS,
                               annotation=str)
    signature = inspect.signature(command)

    @functools.wraps(command)
    def run(*args: Any, encoding_errors: str = "strict", **kwargs: Any) -> Any:
        with text_decoding(encoding_errors):
            return command(*args, **kwargs)

    run.__signature__ = signature.replace(parameters=[*signature.parameters.values(), option])  # type: ignore[attr-defined]
    run.__annotations__ = {**command.__annotations__, "encoding_errors": "str"}
    return run


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
    atomic_write_text(path, json.dumps(report, indent=2) + "\n")
    console.print(f"wrote {path}")


def progress_bar(out: Console = console):
    """A transient Rich progress bar for benchmark rounds: description, bar, done/total, elapsed, ETA."""
    return make_progress(out, width=28, elapsed=True, transient=True)
