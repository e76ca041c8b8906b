"""A run's output directory before training starts: the checkpoint to continue from (checked against the
run's fingerprint), a directory holding another run refused, and the directory prepared (rank 0)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zencli.atomic_write import atomic_write_text
from zencli.errors import ZenError
from zencli.train.checkpoint import CheckpointDir, fingerprint_diff, load_checkpoint, with_current_names
from zencli.train.progress import MetricsLog
from zencli.train.settings import TrainSettings


def checkpoint_to_resume(s: TrainSettings, ckdir: CheckpointDir, out: Path, fp: str,
                         fp_values: dict[str, Any], note: Callable[[str], None] = lambda _: None) -> dict | None:
    """The checkpoint `s.resume` asks for (the newest readable one in `out` for `auto`: an unreadable one is
    named through `note`), loaded and checked to belong to this run (fingerprint `fp`); None: a fresh start."""
    explicit = s.resume not in ("auto", "never")
    path = None
    state = None
    if explicit:
        path = Path(s.resume)
    elif s.resume == "auto" and not s.overwrite:
        state = ckdir.newest_readable(note)
        path = None if state is None else ckdir.step_path(state["step"])
    elif s.resume == "never" and not s.overwrite and ckdir.latest() is not None:
        raise ZenError(f"{out}: holds checkpoints of an earlier run ({ckdir.latest().name}); "
                       "resume it with resume: auto, choose a new output dir, or pass --overwrite")
    if path is None:
        return None
    if state is None:
        state = load_checkpoint(path)
    if state["fingerprint"] != fp:
        diff = fingerprint_diff(state["fingerprint_values"], fp_values)
        if explicit:
            raise ZenError(f"{path}: resume: this checkpoint belongs to a run with other settings "
                           f"({diff}); resume it with the settings it was trained with")
        raise ZenError(f"{out}: holds checkpoints of a different run ({diff}); "
                       "use a new output dir or pass --overwrite")
    return state


def refuse_another_run(out: Path, fp: str, fp_values: dict[str, Any]) -> None:
    """ZenError when `out` has a run.json of another run (a fresh start must not mix two runs' files)."""
    run_json = out / "run.json"
    if not run_json.is_file():
        return
    try:
        other = json.loads(run_json.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise ZenError(f"{run_json}: not valid JSON; choose a new output dir or pass --overwrite") from None
    other_fp, other_values = with_current_names(other.get("fingerprint"), other.get("fingerprint_values", {}))
    if other_fp != fp:
        raise ZenError(f"{out}: holds another run "
                       f"({fingerprint_diff(other_values, fp_values)}); "
                       "use a new output dir or pass --overwrite")


def prepare_output_dir(out: Path, ckdir: CheckpointDir, *, overwrite: bool, resumed_step: int,
                       run: dict[str, Any]) -> None:
    """Rank 0: clear the earlier run's files when overwriting, remove temp files of a killed writer and
    the metrics written after the checkpoint resumed from (the run writes them again), write run.json."""
    out.mkdir(parents=True, exist_ok=True)
    if overwrite:
        ckdir.clear()
        for name in ("metrics.jsonl", "run.json"):
            (out / name).unlink(missing_ok=True)
        tb = out / "tensorboard"
        if tb.is_dir():
            for f in tb.glob("events.out.tfevents.*"):
                f.unlink()
    ckdir.remove_stale_temp_files()
    ckdir.set_damaged_aside()
    MetricsLog.truncate_after(out, resumed_step)
    atomic_write_text(out / "run.json", json.dumps(run, indent=2, ensure_ascii=False, default=str) + "\n")
