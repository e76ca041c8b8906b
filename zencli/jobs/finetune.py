"""`zen finetune`'s job: a recipe with overrides or a task's defaults-chain recipe on the workspace, run here or
as `--nproc` processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from zencli.config.finetune import FinetuneConfig
from zencli.config.loading import build_job_config, parse_override, to_dict
from zencli.errors import ZenError
from zencli.jobs.common import launch, reports
from zencli.jobs.workspace import (
    FROM_PRETRAINED,
    STEP_MINUTES,
    Workspace,
    as_overrides,
    expected_training,
    locate_dataset,
    overridden,
    scratch_base,
    task_defaults,
)

WORKDIR_ERROR = ("--workdir: the workspace is used by `zen finetune --task T` without a recipe, data files or "
                 "--vocab/--ngram; here those name the run (set its output with --output)")


def uses_workspace(recipe: str | None, overrides: list[str], options: dict[str, Any]) -> bool:
    """The defaults chain applies when nothing says what to train on: no recipe, no data files, and no
    vocab.txt / ngram.txt of a model built from scratch (on the command line or in --set)."""
    given = any(options.get(k) is not None for k in ("data.train", "data.dev", "data.test", "model.vocab",
                                                     "model.ngram"))
    return recipe is None and not given and not overridden(overrides, "data.train", "data.dev", "data.test",
                                                           "model.vocab", "model.ngram")


def build_config(recipe: str | Path | None, overrides: list[str], options: dict[str, Any]) -> FinetuneConfig:
    """Recipe (or the defaults) < --set overrides < command-line options, validated once. Without a recipe,
    a model trained from scratch starts from the task's tiny from-scratch recipe (`scratch_recipe`)."""
    base = scratch_recipe(recipe, overrides, options)
    if base is not None:
        recipe, cleared = base
        overrides = [*cleared, *overrides]
    return build_job_config(FinetuneConfig, "finetune", recipe, overrides, options)


def scratch_recipe(recipe: str | Path | None, overrides: list[str],
                   options: dict[str, Any]) -> tuple[str, list[str]] | None:
    """(recipe, overrides clearing its files) a recipe-less run from scratch starts from
    (zencli.jobs.workspace.scratch_base); None with a recipe or a pretrained model."""
    if recipe is not None or options.get("model.pretrained") is not None or overridden(overrides, "model.pretrained"):
        return None
    return scratch_base(_task_name(overrides, options))


def _task_name(overrides: list[str], options: dict[str, Any]) -> str | None:
    """--task, else the last --set task.name."""
    task = options.get("task.name")
    if task is None:
        named = [value for path, value in map(parse_override, overrides) if path == ["task", "name"]]
        task = str(named[-1]) if named and named[-1] is not None else None
    return task


def workspace_config(ws: Workspace, overrides: list[str], options: dict[str, Any], *, data: Path | None = None,
                     console=None) -> FinetuneConfig:
    """The settings of `zen finetune --task T` on the defaults chain: the task's recipe with its dataset's
    files (`data`: the dataset directory, default located), the workspace's pretrained model unless
    --model (or --set model.pretrained) names one, WORK/finetune-T as the output and the training time
    `zen quickstart` gives the step (zencli.jobs.workspace.STEP_MINUTES); `--set` overrides and options still win."""
    task = _task_name(overrides, options)  # --set task.name=T counts as --task T (the last one wins)
    if task is None:
        raise ZenError("task.name: no task given; use --task ner (or cws, pos, sa) to fine-tune the workspace's "
                       "pretrained model, or give --recipe / --train")
    table = task_defaults(task)
    defaults: dict[str, Any] = dict(FROM_PRETRAINED)
    if options.get("model.pretrained") is None and not overridden(overrides, "model.pretrained"):
        defaults["model.pretrained"] = ws.require_pretrained()
    files = table.files(Path(data) if data is not None else locate_dataset(table.dataset, console=console))
    defaults.update({f"data.{split}": path for split, path in files.items()})
    defaults["train.output_dir"] = ws.finetune_dir(task)
    defaults["train.max_minutes"] = STEP_MINUTES["finetune_minutes"]
    return build_config(table.recipe, [*as_overrides(defaults), *overrides], options)


def expected_duration(cfg: FinetuneConfig) -> str:
    """The line the pipeline's fine-tuning step prints before it starts: how long it is expected to take."""
    if cfg.epochs_auto:
        length = "the epochs the data size gives (epochs auto)"
    elif cfg.epochs is not None:
        length = f"all {cfg.epochs:g} epochs"
    else:
        length = f"all {cfg.train.max_steps:,} steps"
    rest = "reading the data" + (" and scoring " + " and ".join(
        s for s in ("dev", "test") if getattr(cfg.data, s) is not None) if cfg.data.dev or cfg.data.test else "")
    return expected_training(f"finetune {cfg.task.name}", cfg.train.max_minutes, length, rest)


def finished(ws: Workspace, cfg: FinetuneConfig, options: dict[str, Any]) -> str | None:
    """The line `zen finetune --task T` prints instead of training when the workspace's step already ran
    (None: train; --overwrite trains again)."""
    name = cfg.task.name
    if options.get("train.overwrite") or Path(cfg.train.output_dir) != ws.finetune_dir(name) \
            or not ws.finetune_done(name):
        return None
    return (f"finetune: {name} already fine-tuned in {ws.finetune_dir(name)} (model: {ws.finetuned_model(name)}); "
            f"--overwrite trains again · next: {ws.command('predict < input.txt')}")


def use_model_files(cfg: FinetuneConfig, options: dict[str, Any]) -> None:
    """--model brings its own vocab.txt / ngram.txt: a recipe's files (meant for a model built from scratch)
    give way to them, unless they were given on this command line."""
    if options.get("model.pretrained") is None:
        return
    d = Path(cfg.model.pretrained)
    if options.get("model.vocab") is None and (d / "vocab.txt").is_file():
        cfg.model.vocab = None
    if options.get("model.ngram") is None and (d / "ngram.txt").is_file():
        cfg.model.ngram = None


def run_job(cfg: FinetuneConfig, *, nproc: int = 1, quiet: bool = False, console=None,
            compare_scratch: bool = False):
    """Fine-tune here (`zencli.tasks.finetune.run_finetune`), or start `nproc` processes on the recipe written to
    the output directory. Returns the FinetuneResult where this process reports it, else None.
    `compare_scratch`: also train the task's small from-scratch model at the same budget; returns the
    comparison (`zencli.jobs.compare_scratch`)."""
    # lazy, here and below: these import torch, and a recipe's errors (jobs.training imports this module)
    # come before torch loads
    from zencli.train.distributed import launches

    if compare_scratch:
        if launches(nproc, cfg.train.device):
            raise ZenError("--compare-scratch: runs in one process; leave out --nproc")
        from zencli.jobs.compare_scratch import compare_scratch as run_both

        return run_both(cfg, console=console, show_progress=not quiet)
    if launches(nproc, cfg.train.device):
        if cfg.adapt.minutes is not None:
            raise ZenError("adapt.minutes: adaptation runs in one process; leave out --nproc")

        cfg.train.micro_batch_size(nproc)  # a global batch the processes cannot split: said before they start

        out = Path(cfg.train.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        path = out / "recipe.yaml"
        path.write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False, allow_unicode=True), encoding="utf-8")
        launch(["finetune", "--recipe", str(path), *(["--quiet"] if quiet else [])], nproc)
        return None
    from zencli.tasks.finetune import run_finetune

    result = run_finetune(cfg, console=console, show_progress=not quiet)
    return result if reports() else None
