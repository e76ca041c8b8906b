"""`zen bench ablation`: the ZEN 2.0 / ZEN 1.0 / BERT and CHTE comparisons on PD98 under one CPU budget,
several seeds each, and a markdown report (zencli.bench.ablation*: plan, runner, report)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

import typer

from zencli.bench.ablation import DEFAULT_FINETUNE_STEPS, DEFAULT_PRETRAIN_STEPS, DEFAULT_SEEDS, VARIANT_NAMES
from zencli.cli.common import console, err_console


def _command(task: str, data: Optional[Path], task_data: Optional[Path], pretrained_from: Optional[Path], out: Path,
             seeds: int, budget: Optional[float], pretrain_steps: int, finetune_steps: Optional[int],
             finetune_epochs: Optional[float], scratch_steps: Optional[int], only: Optional[str],
             set_pretrain: list[str], set_finetune: list[str]) -> str:
    """The command line that reproduces (and continues) this ablation, options in a fixed order."""
    args = ["zen", "bench", "ablation", "--task", task]
    if data is not None:
        args += ["--data", str(data)]
    if task_data is not None:
        args += ["--task-data", str(task_data)]
    if pretrained_from is not None:
        args += ["--pretrained-from", str(pretrained_from)]
    args += ["--out", str(out), "--seeds", str(seeds), "--pretrain-steps", str(pretrain_steps)]
    args += (["--finetune-epochs", f"{finetune_epochs:g}"] if finetune_epochs is not None
             else ["--finetune-steps", str(finetune_steps)])
    if scratch_steps is not None:
        args += ["--scratch-steps", str(scratch_steps)]
    if only:
        args += ["--only", only]
    for s in set_pretrain:
        args += ["--set-pretrain", s]
    for s in set_finetune:
        args += ["--set-finetune", s]
    if budget is not None:
        args += ["--budget", f"{budget:g}"]
    return shlex.join(args)


def ablation(
    task: str = typer.Option(..., "--task", "-t", help="ner, cws, pos (PD98) or sa (the sentiment reviews)."),
    data: Optional[Path] = typer.Option(None, "--data", help="Dataset directory in the shared layout (raw/, ner/, "
                                        "cws/, pos/); default: the located PD98."),
    task_data: Optional[Path] = typer.Option(None, "--task-data", help="Folder with the task's train, dev and test "
                                             "files (default: the task's folder of --data; sa: the located "
                                             "sentiment dataset)."),
    pretrained_from: Optional[Path] = typer.Option(None, "--pretrained-from", help="Another ablation's --out: use "
                                                   "its lexicon and pretrained models (same pretraining settings "
                                                   "required), e.g. to fine-tune one pretraining on every task."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Where the runs and the report go "
                                       "(default: runs/ablation-TASK)."),
    seeds: int = typer.Option(DEFAULT_SEEDS, "--seeds", help="Fine-tuning seeds per variant (1..N)."),
    budget: Optional[float] = typer.Option(None, "--budget", help="Minutes: start no new run after this long "
                                           "(the running one finishes); run the same command again to continue."),
    pretrain_steps: int = typer.Option(DEFAULT_PRETRAIN_STEPS, "--pretrain-steps",
                                       help="Pretraining steps, the same for every pretrained variant."),
    finetune_steps: Optional[int] = typer.Option(None, "--finetune-steps", help="Fine-tuning steps per run "
                                                 f"(default {DEFAULT_FINETUNE_STEPS}; dev scored 5 times)."),
    finetune_epochs: Optional[float] = typer.Option(None, "--finetune-epochs", help="Fine-tuning epochs per run "
                                                    "instead of --finetune-steps (dev scored every epoch)."),
    scratch_steps: Optional[int] = typer.Option(None, "--scratch-steps", help="Training steps of the variants "
                                                "without pretraining (CHTE, Transformer-CRF); default: "
                                                "--pretrain-steps + --finetune-steps."),
    only: Optional[str] = typer.Option(None, "--only", help="Comma-separated variants to run (default: all): "
                                       f"{', '.join(VARIANT_NAMES)}."),
    set_pretrain: list[str] = typer.Option([], "--set-pretrain", help="Pretraining recipe key for every pretrained "
                                           "variant: KEY=VALUE (repeatable), e.g. train.num_threads=2."),
    set_finetune: list[str] = typer.Option([], "--set-finetune", help="Fine-tuning recipe key for every run: "
                                           "KEY=VALUE (repeatable)."),
    report_only: bool = typer.Option(False, "--report-only", help="Rebuild report.md / report.json (and plots) from "
                                     "the finished runs in --out; train nothing."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No training progress bars."),
) -> None:
    """The ZEN 2.0 / ZEN 1.0 / BERT and CHTE papers' comparisons on PD98 or the reviews, several seeds, mean ± std.

    Pretrains and fine-tunes each variant (n-gram weighting, positions, masking, CHTE heads and residuals)
    with fixed step counts. Finished runs are skipped and interrupted ones resume from their checkpoints, so
    the same command continues an ablation; the report (OUT/report.md) is rewritten after every invocation."""
    from zencli.bench.ablation import AblationSettings, Plan
    from zencli.bench.ablation_report import duration, write_report
    from zencli.errors import ZenError

    out = out if out is not None else Path("runs") / f"ablation-{task}"
    if report_only:
        _finish(write_report(out))
        return
    if finetune_steps is None and finetune_epochs is None:
        finetune_steps = DEFAULT_FINETUNE_STEPS
    from zencli.bench.common import dataset_dir

    names = [x.strip() for x in only.split(",") if x.strip()] if only is not None else None
    from zencli.bench.ablation import TASK_DATASETS

    own = TASK_DATASETS.get(task)
    settings = AblationSettings(task=task, data=Path("."), out=out, seeds=seeds, pretrain_steps=pretrain_steps,
                                finetune_steps=finetune_steps, finetune_epochs=finetune_epochs,
                                scratch_steps=scratch_steps, only=names, task_data=task_data,
                                pretrained_from=pretrained_from,
                                pretrain_sets=list(set_pretrain), finetune_sets=list(set_finetune))
    settings.validate()  # option errors before the datasets are located (which may fetch them)
    settings.data = dataset_dir(data)
    if own and task_data is None:
        settings.task_data = dataset_dir(None, own)
    elif task_data is not None and not task_data.is_dir():
        raise ZenError(f"--task-data: {task_data} is not a directory; expected the task's train/dev/test folder")
    plan = Plan(settings)
    command = _command(task, data, task_data, pretrained_from, out, seeds, budget, pretrain_steps, finetune_steps,
                       finetune_epochs, scratch_steps, only, list(set_pretrain), list(set_finetune))
    from zencli.bench.ablation_runner import run_plan

    summary = None
    try:
        summary = run_plan(plan, command=command, budget_min=budget, console=err_console, show_progress=not quiet)
    finally:
        if (out / "plan.json").is_file():
            try:
                report = write_report(out)
            except ZenError as e:  # the run's own error matters more than the report's
                err_console.print(f"report not written: {e}", highlight=False)
                report = None
            if summary is not None and report is not None:
                _finish(report)
    for run, message in summary.failed:
        console.print(f"failed: {run.label} ({run.dir}): {message}", highlight=False, soft_wrap=True)
    if summary.left:
        left = summary.left
        eta = (f" (≈ {duration(summary.estimate_left_s)} at the pace measured so far)"
               if summary.estimate_left_s else "")
        why = (f"the budget of {budget:g} min is used ({duration(summary.elapsed_s)})" if summary.stopped_by_budget
               else f"{len(summary.failed)} run(s) failed")
        console.print(f"{why}: {summary.total - len(left)} of {summary.total} runs finished, {len(left)} left{eta}: "
                      f"{', '.join(r.label for r in left[:4])}{' …' if len(left) > 4 else ''}", highlight=False)
        console.print(f"continue with: {command}", highlight=False, soft_wrap=True)
        if summary.failed:
            raise typer.Exit(1)
    else:
        console.print(f"all {summary.total} runs finished ({len(summary.completed)} in this invocation, "
                      f"{duration(summary.elapsed_s)})", highlight=False)


def _finish(report) -> None:
    """Print the report's score table and where the report went."""
    from rich.markup import escape
    from rich.table import Table

    from zencli.bench.ablation_report import REPORT_JSON

    path, plots, data = report
    t = Table(title=f"{data['task']} {data['metric']} × 100: mean ± std over seeds "
                    f"({data['finished_runs']} of {data['planned_runs']} runs finished)")
    for c in ("variant", "test", "dev", "seeds"):
        t.add_column(c, justify="left" if c == "variant" else "right")
    for v in data["variants"]:
        if v["runs"]:
            t.add_row(v["name"], _pm(v["test_mean"], v["test_std"]), _pm(v["dev_mean"], v["dev_std"]),
                      str(len(v["runs"])))
    console.print(t)
    c = Table(title="the papers' claims: better − worse (test, paired by seed)")
    for col in ("claim", "difference", "won", "agrees"):
        c.add_column(col, justify="left" if col == "claim" else "right")
    for x in data["comparisons"]:
        if x["seeds"]:
            diff = f"{x['test_diff_mean']:+.2f}" + (f" ± {x['test_diff_std']:.2f}" if x["test_diff_std"] is not None
                                                     else "")
            c.add_row(f"{x['claim']} ({x['better']} vs {x['worse']})", diff, f"{x['wins']}/{len(x['seeds'])}",
                      "yes" if x["agrees"] else "no")
    if c.row_count:
        console.print(c)
    console.print(f"report: {escape(str(path))}, {escape(str(path.parent / REPORT_JSON))}"
                  + (f", {len(plots)} plot(s)" if isinstance(plots, list) else ""), highlight=False)
    if isinstance(plots, str):
        console.print(escape(plots), highlight=False)


def _pm(mean, std) -> str:
    if mean is None:
        return "—"
    return f"{mean:.2f} ± {std:.2f}" if std is not None else f"{mean:.2f}"
