"""`zen evaluate`: score predictions against gold data with each benchmark's official metric.

`zen evaluate --task T --gold GOLD --pred PRED` scores any system's output file (formats in
zencli.tasks.scoring); `zen evaluate MODEL --data FILE` scores a fine-tuned model: it predicts the file
in memory (`zencli.tasks.predict.evaluate_model`) and hands the predictions to the same
`score_predictions`, so both paths give the same numbers for the same predictions, in the same table
and JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from zencli.atomic_write import atomic_write_text
from zencli.cli.common import DTYPE_OPTION, ENGINE_OPTION, console, err_console
from zencli.errors import ZenError

if TYPE_CHECKING:
    from zencli.tasks.scoring import Evaluation

TASK_HELP = "cws, pos, ner, dc, sa, spm, nli, qa or mrc"


def evaluate(
    model: Optional[str] = typer.Argument(
        None, help="A model fine-tuned with `zen finetune` (scored on --data). Omit to score --pred files."
    ),
    data: Optional[Path] = typer.Option(None, "--data", "-d", help="Gold file to evaluate MODEL on."),
    task: Optional[str] = typer.Option(None, "--task", "-t", help=f"Task: {TASK_HELP}."),
    gold: Optional[Path] = typer.Option(None, "--gold", "-g", help="Gold file (any format the readers accept)."),
    pred: Optional[Path] = typer.Option(
        None,
        "--pred",
        "-p",
        help="Predictions: cws/pos/ner in a tagging format; dc/sa/spm/nli one label per line or the gold "
        "format; qa one score per line; mrc a JSON object {question id: answer}.",
    ),
    train_words: Optional[Path] = typer.Option(
        None,
        "--train-words",
        help="cws: training words for OOV rate / OOV recall / IV recall — a SIGHAN training file, a word "
        "list (one per line, optionally with counts) or a char-level BMES file.",
    ),
    json_out: Optional[str] = typer.Option(
        None, "--json", help="Write the scores as JSON to PATH; '-' prints only the JSON, to stdout."
    ),
    fmt: str = typer.Option(
        "auto", "--format", "-f", help="Format of the gold file (and of a tagging/label prediction file); "
        "default: detected."
    ),
    pred_format: Optional[str] = typer.Option(
        None, "--pred-format", help="Format of the prediction file, when it differs from --format."
    ),
    batch_size: Optional[int] = typer.Option(
        None, "--batch-size", "-b", help="MODEL: inputs per forward pass (default: the model's eval_batch_size)."
    ),
    device: str = typer.Option("auto", "--device", help="MODEL: auto, cpu or cuda."),
    dtype: str = DTYPE_OPTION,
    metric: Optional[str] = typer.Option(
        None, "--metric", help="mrc: cmrc2018 (the CMRC 2018 script) or squad (SQuAD v1.1's, for Arabic-SQuAD / "
        "ARCD); default: the model's task.metric, else cmrc2018."
    ),
    engine: str = ENGINE_OPTION,
) -> None:
    """Score predictions: word P/R/F (cws), entity F1 (ner), joint F1 (pos), accuracy, MRR, EM/F1.

    Usage: zen evaluate --task T --gold GOLD --pred PRED, or zen evaluate MODEL --data FILE [--task T]
    [--engine onnx]."""
    if model is not None:
        if train_words is not None or pred_format is not None:
            flag = "--train-words" if train_words is not None else "--pred-format"
            raise ZenError(f"{flag} goes with --gold/--pred; MODEL --data FILE scores the model's own predictions")
        evaluation = _evaluate_model(model, data, task, gold, pred, fmt, batch_size, device, dtype, metric, engine)
    else:
        for flag, value, default in (("--dtype", dtype, "auto"), ("--engine", engine, "torch")):
            if value != default:
                raise ZenError(f"{flag} goes with MODEL --data FILE; --gold/--pred scores predictions already made")
        evaluation = _evaluate_files(data, task, gold, pred, train_words, fmt, pred_format, metric)
    report = evaluation.to_dict()
    if json_out == "-":
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    print_evaluation(evaluation)
    if json_out is not None:
        path = Path(json_out)
        if path.is_dir():
            raise ZenError(f"{path}: is a directory; expected the JSON file to write (or '-' for stdout)")
        atomic_write_text(path, json.dumps(report, ensure_ascii=False, indent=2) + "\n")
        console.print(f"wrote {_esc(str(path))}")


def _check_metric(metric: Optional[str], task: str) -> None:
    from zencli.metrics.mrc import MRC_METRICS

    if metric is not None and (task != "mrc" or metric not in MRC_METRICS):
        raise ZenError(f"--metric {metric}: " + (f"expected {' or '.join(MRC_METRICS)}" if task == "mrc" else
                                                  f"applies to task mrc only, not {task}"))


def _evaluate_model(model: str, data: Optional[Path], task: Optional[str], gold: Optional[Path],
                    pred: Optional[Path], fmt: str, batch_size: Optional[int], device: str, dtype: str,
                    metric: Optional[str], engine: str) -> Evaluation:
    from zencli.tasks.engine import load_engine
    from zencli.tasks.predict import evaluate_model

    if gold is not None or pred is not None:
        raise ZenError("give either MODEL with --data, or --gold and --pred without a model, not both")
    if data is None:
        raise ZenError(f"missing --data; expected `zen evaluate {model} --data FILE` (a labelled file of the "
                       f"model's task)")
    if not Path(model).exists():
        raise ZenError(f"{model}: no such model directory; expected a model fine-tuned with `zen finetune` (its "
                       f"model/ folder), or `zen evaluate --task T --gold GOLD --pred PRED` to score a prediction file")
    if batch_size is not None and batch_size < 1:
        raise ZenError(f"--batch-size: expected >= 1, got {batch_size}")
    loaded = load_engine(model, engine=engine, device=device, dtype=dtype,
                         say=lambda text: err_console.print(text, highlight=False, soft_wrap=True))
    if task is not None and task != loaded.task.name:
        raise ZenError(f"--task {task}: {loaded.path} is a {loaded.task.name} model; omit --task or give "
                       f"--task {loaded.task.name}")
    _check_metric(metric, loaded.task.name)
    if metric is not None:
        loaded.task.settings.metric = metric  # this scoring only; the model keeps its own
    return evaluate_model(loaded, data, fmt, batch_size)


def _evaluate_files(data: Optional[Path], task: Optional[str], gold: Optional[Path], pred: Optional[Path],
                    train_words: Optional[Path], fmt: str, pred_format: Optional[str],
                    metric: Optional[str]) -> Evaluation:
    from zencli.tasks.scoring import score_files

    if data is not None:
        raise ZenError("--data goes with MODEL; to score a prediction file use --gold GOLD --pred PRED")
    if task is None or gold is None or pred is None:
        missing = [name for name, v in (("--task", task), ("--gold", gold), ("--pred", pred)) if v is None]
        raise ZenError(f"missing {', '.join(missing)}; expected `zen evaluate --task T --gold GOLD --pred PRED` "
                       f"(task: {TASK_HELP}) or `zen evaluate MODEL --data FILE`")
    _check_metric(metric, task)
    return score_files(task, gold, pred, fmt=fmt, pred_fmt=pred_format, train_words_path=train_words, metric=metric)


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def print_evaluation(evaluation: Evaluation) -> None:
    from rich.table import Table as RichTable

    from zencli.metrics import rich_tables

    e = evaluation
    console.print(
        f"[bold]{e.task}[/bold]  gold {_esc(e.gold)} ({e.gold_format})  prediction {_esc(e.prediction)} "
        f"({e.prediction_format}{', ' + e.inference_dtype if e.inference_dtype else ''})"
    )
    for table in rich_tables(e.result):
        console.print(table)
    if e.unseen_labels:
        t = RichTable(title="Unseen predicted labels")
        t.add_column("label")
        t.add_column("count", justify="right")
        for label, n in e.unseen_labels.items():
            t.add_row(_esc(label), str(n))
        console.print(t)
    for note in e.notes:
        console.print(f"note: {_esc(note)}")
    console.print(f"main score ({e.result.main}): [bold]{100 * e.main_score:.2f}[/bold]")
