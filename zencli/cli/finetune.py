"""`zen finetune`: fine-tune an encoder on a task (zencli.tasks.finetune does the work).

`zen finetune --task T` with no recipe, data or vocabulary is the default pipeline's third step: the task's
built-in recipe (zencli.workspace.TASK_DEFAULTS: ner → finetune-pd98-ner on PD98 ner/{train,dev,test}.tsv,
also cws, pos, sa) adapted to a pretrained model, starting from the workspace's `zen pretrain` model (or
--model), into WORKDIR/finetune-T, with the training time `zen quickstart` gives the step (--max-minutes
changes it). Without a recipe but with data files, a model trained from scratch starts from that recipe too."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import typer

from zencli.cli.common import OVERRIDES, RECIPE, WORKDIR_OPTION, console, err_console, keyed, keyed_options
from zencli.errors import ZenError
from zencli.jobs.finetune import build_config, workspace_config
from zencli.workspace import Workspace


def uses_workspace(recipe: str | None, overrides: list[str], options: dict[str, Any]) -> bool:
    """The defaults chain applies when nothing says what to train on: no recipe, no data files, and no
    vocab.txt / ngram.txt of a model built from scratch (on the command line or in --set)."""
    from zencli.workspace import overridden

    given = any(options.get(k) is not None for k in ("data.train", "data.dev", "data.test", "model.vocab",
                                                     "model.ngram"))
    return recipe is None and not given and not overridden(overrides, "data.train", "data.dev", "data.test",
                                                           "model.vocab", "model.ngram")


def announce(cfg) -> None:
    """Say how long the pipeline's fine-tuning step is expected to take, before it starts."""
    from zencli.jobs.finetune import expected_duration

    err_console.print(expected_duration(cfg), markup=False, highlight=False, soft_wrap=True)


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
    model: Optional[Path] = keyed(
        "model.pretrained", "--model", "-m",
        help="Pretrained model: a zen model directory, a released ZEN 1.0/2.0 directory or a BERT-Chinese "
        "directory. Omit to train from scratch (needs --vocab, and --ngram for ZEN)."),
    encoder: Optional[str] = keyed(
        "model.encoder", "--encoder", "-e",
        help="zen2 (default), zen1, bert, or chte (from characters; on top of --model when given)."),
    decoder: Optional[str] = keyed("task.decoder", "--decoder", help="Token tasks: softmax or crf (default: crf for "
                                   "CHTE, softmax otherwise)."),
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
    from zencli.config.loading import to_dict

    options = {**keyed_options(finetune, locals()), "train.overwrite": True if overwrite else None}
    ws = None
    if uses_workspace(recipe, overrides, options):
        ws = Workspace.at(workdir)
        cfg = workspace_config(ws, overrides, options, console=err_console)
        name = cfg.task.name
        if Path(cfg.train.output_dir) == ws.finetune_dir(name) and ws.finetune_done(name) and not overwrite:
            console.print(f"finetune: {name} already fine-tuned in {ws.finetune_dir(name)} (model: "
                          f"{ws.finetuned_model(name)}); --overwrite trains again · next: "
                          f"{ws.command('predict < input.txt')}", markup=False, highlight=False, soft_wrap=True)
            return
        announce(cfg)
    elif workdir is not None:
        raise ZenError("--workdir: the workspace is used by `zen finetune --task T` without a recipe, data "
                       "files or --vocab/--ngram; here those name the run (set its output with --output)")
    else:
        cfg = build_config(recipe, overrides, options)
    if model is not None:
        _use_model_files(cfg, vocab, ngram)
    from zencli.train.distributed import launches

    if launches(nproc, cfg.train.device):
        if compare_scratch:
            raise ZenError("--compare-scratch: runs in one process; leave out --nproc")
        _launch(cfg, nproc, quiet, to_dict)
        return
    if compare_scratch:
        from zencli.jobs.compare_scratch import compare_scratch as run_both

        comparison = run_both(cfg, console=err_console, show_progress=not quiet)
        report(comparison.pretrained, ws)
        report_comparison(comparison)
        return
    from zencli.tasks.finetune import run_finetune

    result = run_finetune(cfg, console=err_console, show_progress=not quiet)
    if int(os.environ.get("RANK", "0") or 0) == 0:
        report(result, ws)


def _use_model_files(cfg, vocab: Optional[Path], ngram: Optional[Path]) -> None:
    """--model brings its own vocab.txt / ngram.txt: a recipe's files (meant for a model built from scratch)
    give way to them, unless they were given on this command line."""
    d = Path(cfg.model.pretrained)
    if vocab is None and (d / "vocab.txt").is_file():
        cfg.model.vocab = None
    if ngram is None and (d / "ngram.txt").is_file():
        cfg.model.ngram = None


def _launch(cfg, nproc: int, quiet: bool, to_dict) -> None:
    """Start `nproc` processes running this recipe (written to the output directory)."""
    import yaml

    from zencli.train.distributed import launch_local, python_module_command

    out = Path(cfg.train.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "recipe.yaml"
    path.write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False, allow_unicode=True), encoding="utf-8")
    args = ["finetune", "--recipe", str(path), *(["--quiet"] if quiet else [])]
    code = launch_local(nproc, python_module_command(*args))
    if code:
        raise ZenError(f"finetune: a training process exited with status {code}")


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
