"""`zen finetune` settings: a recipe with overrides, and a task's defaults-chain recipe on the workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zencli.config.finetune import FinetuneConfig
from zencli.errors import ZenError
from zencli.workspace import Workspace


def build_config(recipe: str | Path | None, overrides: list[str], options: dict[str, Any]) -> FinetuneConfig:
    """Recipe (or the defaults) < --set overrides < command-line options, validated once."""
    from zencli.config.loading import build_job_config

    return build_job_config(FinetuneConfig, "finetune", recipe, overrides, options)


def workspace_config(ws: Workspace, overrides: list[str], options: dict[str, Any], *, data: Path | None = None,
                     console=None) -> FinetuneConfig:
    """The settings of `zen finetune --task T` on the defaults chain: the task's recipe with its dataset's
    files (`data`: the dataset directory, default located), the workspace's pretrained model unless
    --model (or --set model.pretrained) names one, and WORK/finetune-T as the output; `--set` overrides and
    options still win."""
    from zencli.config.loading import parse_override
    from zencli.workspace import FROM_PRETRAINED, as_overrides, locate_dataset, overridden, task_defaults

    task = options.get("task.name")
    if task is None:  # --set task.name=T counts as --task T (the last one wins, as in the recipe)
        named = [value for path, value in map(parse_override, overrides) if path == ["task", "name"]]
        task = str(named[-1]) if named and named[-1] is not None else None
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
    return build_config(table.recipe, [*as_overrides(defaults), *overrides], options)
