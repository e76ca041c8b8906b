"""The output directory of a pretraining run: the names in it, the marker that says which run it holds
(compared on the next start: another run is refused), the recipe to continue it, and what `--overwrite`
removes (see "Output directory" in `zencli.tasks.pretraining`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from zencli.atomic_write import atomic_write_text
from zencli.config.loading import to_dict
from zencli.config.pretrain import PretrainConfig
from zencli.diffs import first_difference
from zencli.errors import ZenError
from zencli.train.checkpoint import CheckpointDir
from zencli.train.settings import TrainSettings

MODEL_DIR = "model"
DATA_DIR = "data"
MARKER_NAME = "pretrain.json"
RESULTS_NAME = "results.json"
RECIPE_NAME = "recipe.yaml"
MARKER_FORMAT = "zen-pretrain-run/1"


def run_plan(cfg: PretrainConfig) -> dict[str, Any]:
    """The settings that make a run what it is (not cadence, workers or paths of outputs)."""
    data = to_dict(cfg.data)
    for key in ("workers", "heldout_examples", "eval_batch_size", "encoding_errors"):  # (text read as strict reads it)
        data.pop(key)
    # keys added later: runs made before them keep their plan when they are off
    for key, off in (("normalize", []), ("ngram_min_entropy", None), ("ngram_max_size", None)):
        if data.get(key) == off:
            data.pop(key)
    plan = {"language": cfg.language, "data": data, "masking": to_dict(cfg.masking), "model": to_dict(cfg.model),
            "init": to_dict(cfg.init), "train": {**to_dict(cfg.train.fingerprint_fields()),
                                                "dtype": cfg.train.dtype}}
    if cfg.objective != "mlm":  # only then, so MLM runs made before objectives existed keep their plan
        plan.update(objective=cfg.objective, rtd=to_dict(cfg.rtd))
    return plan


def _with_current_keys(plan: Any) -> Any:
    """A plan recorded before a train key's rename (`TrainSettings.RENAMED`: `precision` is `dtype`) under
    today's names: the same run, not another one."""
    train = plan.get("train") if isinstance(plan, dict) else None
    if not isinstance(train, dict):
        return plan
    renamed = TrainSettings.RENAMED
    return {**plan, "train": {renamed[k] if k in renamed and renamed[k] not in train else k: v
                              for k, v in train.items()}}


def check_output_dir(cfg: PretrainConfig, out: Path) -> None:
    """Refuse an output directory holding another run (unless train.overwrite)."""
    if cfg.train.overwrite or not out.is_dir():
        return
    marker = out / MARKER_NAME
    if marker.is_file():
        try:
            old = json.loads(marker.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise ZenError(f"{marker}: not valid JSON; use a new output dir or pass --overwrite") from None
        diff = (first_difference(_with_current_keys(old.get("plan", {})), run_plan(cfg)) if isinstance(old, dict)
                else "unreadable")
        if diff and ((out / "run.json").is_file() or (out / "checkpoints").is_dir()):
            raise ZenError(f"{out}: holds a pretraining run with other settings ({diff}); continue it with its own "
                           f"recipe ({out / RECIPE_NAME}), use a new output dir, or pass --overwrite")
        return
    if (out / "run.json").is_file() or (out / "checkpoints").is_dir():
        raise ZenError(f"{out}: holds another run's checkpoints (not a zen pretrain run: no {MARKER_NAME}); "
                       "use a new output dir or pass --overwrite")


def built_files(out: Path) -> list[str]:
    """The vocab/lexicon files an earlier start built in `out`, as its marker lists them ([] without one)."""
    try:
        return list(json.loads((out / MARKER_NAME).read_text(encoding="utf-8")).get("built", []))
    except (OSError, ValueError, UnicodeDecodeError, AttributeError):
        return []


def write_marker(cfg: PretrainConfig, out: Path, built: list[str]) -> None:
    """The marker: this run's plan and the files it built (rewritten after each, so --overwrite finds them)."""
    marker = {"format": MARKER_FORMAT, "plan": run_plan(cfg), "built": built}
    atomic_write_text(out / MARKER_NAME, json.dumps(marker, indent=1, ensure_ascii=False, default=str) + "\n")


def recipe_yaml(cfg: PretrainConfig) -> str:
    """The resolved recipe, as the way to continue this run: `overwrite` off, `resume` auto."""
    data = to_dict(cfg)
    data["train"].update(overwrite=False, resume="auto")
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def clear_outputs(out: Path) -> None:
    """What `--overwrite` removes: this package's files and the training loop's (nothing else)."""
    # Only the vocab/lexicon files this command built: a vocab.txt the user put there is input, not output.
    for path in map(Path, built_files(out)):
        if path.parent.resolve() == out.resolve():
            path.unlink(missing_ok=True)
            path.with_suffix(".json").unlink(missing_ok=True)
    for name in (MARKER_NAME, RESULTS_NAME, RECIPE_NAME, "metrics.jsonl", "run.json"):
        (out / name).unlink(missing_ok=True)
    for name in (MODEL_DIR, DATA_DIR):
        if (out / name).is_dir():
            shutil.rmtree(out / name)
    CheckpointDir(out / "checkpoints").clear()
    tb = out / "tensorboard"
    if tb.is_dir():
        for f in tb.glob("events.out.tfevents.*"):
            f.unlink()
