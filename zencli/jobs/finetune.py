"""`zen finetune` settings: a recipe with overrides, and a task's defaults-chain recipe on the workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zencli.config.finetune import FinetuneConfig
from zencli.errors import ZenError
from zencli.workspace import Workspace


def build_config(recipe: str | Path | None, overrides: list[str], options: dict[str, Any]) -> FinetuneConfig:
    """Recipe (or the defaults) < --set overrides < command-line options, validated once. Without a recipe,
    a model trained from scratch starts from the task's tiny from-scratch recipe (`scratch_recipe`)."""
    from zencli.config.loading import build_job_config

    base = scratch_recipe(recipe, overrides, options)
    if base is not None:
        recipe, cleared = base
        overrides = [*cleared, *overrides]
    return build_job_config(FinetuneConfig, "finetune", recipe, overrides, options)


def scratch_recipe(recipe: str | Path | None, overrides: list[str],
                   options: dict[str, Any]) -> tuple[str, list[str]] | None:
    """(recipe, overrides clearing its files) a recipe-less run from scratch starts from
    (zencli.workspace.scratch_base); None with a recipe or a pretrained model."""
    from zencli.workspace import overridden, scratch_base

    if recipe is not None or options.get("model.pretrained") is not None or overridden(overrides, "model.pretrained"):
        return None
    return scratch_base(_task_name(overrides, options))


def _task_name(overrides: list[str], options: dict[str, Any]) -> str | None:
    """--task, else the last --set task.name."""
    from zencli.config.loading import parse_override

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
    `zen quickstart` gives the step (zencli.workspace.STEP_MINUTES); `--set` overrides and options still win."""
    from zencli.workspace import FROM_PRETRAINED, STEP_MINUTES, as_overrides, locate_dataset, overridden, task_defaults

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
    from zencli.workspace import expected_training

    length = f"all {cfg.epochs:g} epochs" if cfg.epochs is not None else f"all {cfg.train.max_steps:,} steps"
    rest = "reading the data" + (" and scoring " + " and ".join(
        s for s in ("dev", "test") if getattr(cfg.data, s) is not None) if cfg.data.dev or cfg.data.test else "")
    return expected_training(f"finetune {cfg.task.name}", cfg.train.max_minutes, length, rest)
