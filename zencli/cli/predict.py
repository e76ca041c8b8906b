"""`zen predict [MODEL]`: stream text through a fine-tuned model (zencli.tasks.predict does the work).

Without MODEL it is the default pipeline's last step: the workspace's most recently fine-tuned model
(WORKDIR/finetune-*/model, zencli.jobs.workspace)."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from zencli.cli.common import DTYPE_OPTION, ENGINE_OPTION, WORKDIR_OPTION, err_console
from zencli.errors import ZenError
from zencli.jobs.workspace import Workspace


def resolve_model(model: Optional[Path], model_option: Optional[Path], workdir: Optional[Path]) -> Path:
    """MODEL, or --model, or the workspace's newest fine-tuned model."""
    if model is not None and model_option is not None and model != model_option:
        raise ZenError(f"MODEL {model} and --model {model_option} disagree; give one of them")
    chosen = model if model is not None else model_option
    if chosen is not None:
        if workdir is not None:
            raise ZenError("--workdir: the workspace only picks the model when MODEL is not given; give one of them")
        return chosen
    return Workspace.at(workdir).latest_finetuned()


def _say(text: str) -> None:
    err_console.print(text, highlight=False, soft_wrap=True)  # stderr: stdout is data


def predict(
    model: Optional[Path] = typer.Argument(None, help="A fine-tuned model directory (or the output directory of "
                                           "`zen finetune`). Default: the workspace's newest fine-tuned model."),
    model_option: Optional[Path] = typer.Option(None, "--model", "-m", help="The same as MODEL."),
    workdir: Optional[Path] = WORKDIR_OPTION,
    input_path: Optional[Path] = typer.Option(None, "--input", "-i", help="Input file (default: stdin), one "
                                              "example per line."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Output file (default: stdout)."),
    fmt: Optional[str] = typer.Option(
        None, "--format", "-f",
        help="Output format; the first listed is the task's default. cws/pos/ner: text (spaced words, "
        "word/TAG, \\[entity]/TYPE inline), json (one object per line, character offsets), conll "
        "(char<TAB>label); dc/sa/spm/nli: text (label<TAB>probability), json, label; qa: text (score), "
        "json; mrc: json (id, answer, start, end), text."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", "-b", help="Windows per forward pass "
                                             "(default: the model's eval_batch_size)."),
    chunk_lines: Optional[int] = typer.Option(None, "--chunk-lines", help="Lines read, predicted and written at a "
                                              "time (default 256; 1 when reading a terminal)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    dtype: str = DTYPE_OPTION,
    engine: str = ENGINE_OPTION,
) -> None:
    """Predict: one example per input line, output in input order (empty lines stay empty lines).

    Usage: zen predict [MODEL] < input.txt > output.txt   (no MODEL: the latest `zen finetune` of the workspace)"""
    from zencli.tasks.engine import load_engine
    from zencli.tasks.predict import STDIN, predict_stream, predict_to_file, read_stream
    from zencli.text.reading import iter_lines

    if batch_size is not None and batch_size < 1:
        raise ZenError(f"--batch-size: expected >= 1, got {batch_size}")
    path = resolve_model(model, model_option, workdir)
    loaded = load_engine(path, engine=engine, device=device, dtype=dtype, say=_say)
    if model is None and model_option is None:  # say which model the workspace gave (stderr: stdout is data)
        from rich.markup import escape

        err_console.print(f"predict: {loaded.task.name} model {escape(str(path))}", highlight=False, soft_wrap=True)
    fmt = loaded.task.check_format(fmt)

    if input_path is None:
        stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else sys.stdin
        lines = read_stream(stream, STDIN)
        source = STDIN
        interactive = hasattr(sys.stdin, "isatty") and sys.stdin.isatty()
    else:
        lines = iter_lines(input_path, allow_empty=True)
        source = str(input_path)
        interactive = False
    chunk = chunk_lines if chunk_lines is not None else (1 if interactive else 256)
    kwargs = {"fmt": fmt, "source": source, "chunk_lines": chunk, "batch_size": batch_size}

    if output is not None:
        predict_to_file(loaded, lines, output, **kwargs)
        return

    buffer = getattr(sys.stdout, "buffer", None)
    out = sys.stdout if buffer is None else io.TextIOWrapper(buffer, encoding="utf-8", newline="\n",
                                                             write_through=True)
    if buffer is not None:
        sys.stdout.flush()
    try:
        predict_stream(loaded, lines, out, **kwargs)
    except BrokenPipeError:
        # The reader went away (`zen predict M < big.txt | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(1) from None
    finally:
        if buffer is not None:
            try:
                out.detach()
            except (ValueError, BrokenPipeError):
                pass
