"""`zen finetune`: fine-tune an encoder on a task (zencli.tasks.finetune does the work).

`zen finetune --task T` with no recipe, data or vocabulary is the default pipeline's third step: the task's
built-in recipe (zencli.jobs.workspace.TASK_DEFAULTS: ner → finetune-pd98-ner on PD98 ner/{train,dev,test}.tsv,
also cws, pos, sa) adapted to a pretrained model, starting from the workspace's `zen pretrain` model (or
--model), into WORKDIR/finetune-T, with the training time `zen quickstart` gives the step (--max-minutes
changes it). Without a recipe but with data files, a model trained from scratch starts from that recipe too."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from zencli.cli.common import (
    OVERRIDES,
    RECIPE,
    WORKDIR_OPTION,
    console,
    encoding_errors_option,
    err_console,
    keyed,
    keyed_options,
)
from zencli.jobs.workspace import Workspace


def finetune(
    recipe: Optional[str] = RECIPE,
    overrides: list[str] = OVERRIDES,
    task: Optional[str] = keyed("task.name", "--task", "-t", help="Task: cws, pos, ner (or another registered "
                                "task)."),
    train: Optional[Path] = keyed("data.train", "--train", help="Training file (any format the task's reader "
                                  "accepts)."),
    dev: Optional[Path] = keyed("data.dev", "--dev", help="Dev file: evaluated every epoch, picks the best model."),
    test: Optional[Path] = keyed("data.test", "--test", help="Test file: scored once with the final model."),
    fmt: Optional[str] = keyed("data.format", "--format", "-f", help="Format of the data files (default: "
                               "detected)."),
    encoding_errors: Optional[str] = encoding_errors_option("data.encoding_errors"),
    model: Optional[Path] = keyed(
        "model.pretrained", "--model", "-m",
        help="Pretrained model: a zen model directory, a released ZEN 1.0/2.0 directory or a BERT-Chinese "
        "directory. Omit to train from scratch (needs --vocab, and --ngram for ZEN)."),
    encoder: Optional[str] = keyed(
        "model.encoder", "--encoder", "-e",
        help="zen2 (default), zen1, bert, or chte (from characters; on top of --model when given)."),
    decoder: Optional[str] = keyed("task.decoder", "--decoder", help="Token tasks: softmax or crf (default: crf for "
                                   "ner and for CHTE, softmax otherwise)."),
    vocab: Optional[Path] = keyed("model.vocab", "--vocab", help="vocab.txt for a model built from scratch."),
    ngram: Optional[Path] = keyed("model.ngram", "--ngram", help="ngram.txt for a ZEN model built from scratch."),
    output: Optional[Path] = keyed("train.output_dir", "--output", "-o", help="Output directory (the model goes to "
                                   "OUTPUT/model)."),
    epochs: Optional[float] = keyed("epochs", "--epochs", help="Training epochs (sets the step count)."),
    max_steps: Optional[int] = keyed("train.max_steps", "--max-steps", help="Optimizer steps (instead of --epochs)."),
    batch_size: Optional[int] = keyed("train.batch_size", "--batch-size", "-b", help="Sequences per optimizer "
                                      "step."),
    lr: Optional[float] = keyed("train.lr", "--lr", help="Peak learning rate."),
    seed: Optional[int] = keyed("train.seed", "--seed", help="Random seed (data order, initialisation, dropout)."),
    max_seq_len: Optional[int] = keyed("task.max_seq_len", "--max-seq-len", help="Tokens per input window."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an earlier run in the output directory "
                                   "instead of resuming or refusing."),
    max_minutes: Optional[float] = keyed("train.max_minutes", "--max-minutes", help="Train for at most this many "
                                         "minutes: the step count and schedule are fitted to it."),
    adapt_minutes: Optional[float] = keyed("adapt.minutes", "--adapt-minutes", help="First adapt the pretrained "
                                           "model to the task's text for this many minutes of --max-minutes: its "
                                           "lexicon grows by that text's n-grams, then masked-LM pretraining "
                                           "continues on it."),
    adapt_text: Optional[list[Path]] = keyed("adapt.text", "--adapt-text", help="Raw text of your domain to adapt "
                                             "to as well, one document per line (repeatable; needs "
                                             "--adapt-minutes)."),
    workdir: Optional[Path] = WORKDIR_OPTION,
    nproc: int = typer.Option(1, "--nproc", help="Data-parallel processes on this machine (DDP; one GPU "
                               "each on CUDA; train.batch_size stays the global batch). Or use torchrun."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
    compare_scratch: bool = typer.Option(False, "--compare-scratch", help="After the run from --model, train the "
                                         "task's small from-scratch model at the same budget (into OUTPUT/scratch) "
                                         "and report both (OUTPUT/compare-scratch.json)."),
) -> None:
    """Fine-tune on a task: CWS / POS / NER and more, from scratch or from a pretrained model.

    Evaluates on dev every epoch, keeps the best model by the task's main score, writes dev/test scores
    as JSON beside the model, and resumes from its checkpoints when run again with the same output.

    `zen finetune --task ner` alone (no recipe, data or vocab): the task's built-in recipe on its default
    data (ner/cws/pos: PD98, sa: sentiment), from the workspace's pretrained model, into WORKDIR/finetune-ner,
    for the training time `zen quickstart` gives the step. With data files but no recipe or --model, the
    model is trained from scratch with that recipe's settings (a tiny encoder)."""
    from zencli.jobs.training import run_training

    options = {**keyed_options(finetune, locals()), "train.overwrite": True if overwrite else None}
    options["adapt.text"] = options["adapt.text"] or None  # a repeatable flag left out reads as []
    job, result = run_training("finetune", recipe, overrides, options, workdir, nproc=nproc, quiet=quiet,
                               console=err_console, out=console, compare_scratch=compare_scratch)
    if result is None:
        return
    if compare_scratch:
        report(result.pretrained, job.workspace)
        report_comparison(result)
    else:
        report(result, job.workspace)


def report(result, ws: Workspace | None = None) -> None:
    from rich.markup import escape

    from zencli.metrics import rich_tables

    for name in ("dev", "test"):
        evaluation = getattr(result, name)
        if evaluation is None:
            continue
        console.print(f"[bold]{name}[/bold] ({escape(evaluation.gold)})")
        for table in rich_tables(_Escaped(evaluation.result)):
            console.print(table)
        console.print(f"{name} {evaluation.result.main}: [bold]{100 * evaluation.main_score:.2f}[/bold]")
    resumed = f", resumed at step {result.start_step}" if result.start_step else ""
    early = ", stopped early" if result.stopped_early else ""
    console.print(f"trained {result.step} steps{resumed}{early} in {result.elapsed_s:.1f} s; model: "
                  f"{escape(str(result.model_dir))}", highlight=False)
    if ws is not None and ws.finetuned_models()[:1] == [result.model_dir]:
        console.print(f"predict with: {escape(ws.command('predict < input.txt'))}", highlight=False)
        return
    console.print(f"predict with: zen predict {escape(str(result.model_dir))} < input.txt", highlight=False)


def report_comparison(comparison) -> None:
    """The pretrained and the scratch run side by side (task metric, in points)."""
    from rich.markup import escape
    from rich.table import Table

    data = comparison.report
    table = Table(title=f"{escape(str(data['task']))}: pretrained vs from scratch, same data and budget "
                        f"({escape(str(data['metric']))})")
    for col in ("run", "model", "steps", "dev", "test"):
        table.add_column(col, justify="right" if col in ("steps", "dev", "test") else "left")
    for row in data["runs"]:
        table.add_row(row["run"], escape(row["model"]), f"{row['steps']:,}",
                      *("–" if row[s] is None else f"{100 * row[s]:.2f}" for s in ("dev", "test")))
    console.print(table)
    gain = ", ".join(f"{s} {100 * g:+.2f}" for s, g in data["pretrained_gain"].items() if g is not None)
    if gain:
        console.print(f"pretraining gains: {gain} points", highlight=False)
    console.print(f"comparison: {escape(str(comparison.path))}", highlight=False)


class _Escaped:
    """A result whose table cells are escaped for Rich markup (labels like `[UNK]` are data)."""

    def __init__(self, result):
        self.result = result

    def tables(self):
        from rich.markup import escape

        from zencli.metrics import Table

        return [Table(escape(t.title), [escape(c) for c in t.columns], [[escape(c) for c in r] for r in t.rows])
                for t in self.result.tables()]
