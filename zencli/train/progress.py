"""What a training run shows and records: a Rich progress bar (or plain lines), metrics.jsonl, TensorBoard.

On a terminal the live bar shows step, loss, the loss function's metrics, learning rate, tokens/s and
ETA. When the output is not a terminal (CI logs, `> file`, nohup) there is no live bar: one plain line
is printed per logging window instead, so logs grow by `max_steps / log_every` lines.

Every logging window is also one JSON object per line in `<output_dir>/metrics.jsonl`
(`{"kind": "train", "step": …, "loss": …, "lr": …, "tokens_per_s": …, …}`; evaluations as
`{"kind": "eval", "step": …, <metric>: …}`; warnings as `{"kind": "warning", "step": …, "message": …}`) and,
when the `tensorboard` package is installed, TensorBoard scalars under `<output_dir>/tensorboard/`.

`BaselineWatch` describes a check the loop makes once while it runs: is a train metric clearly past a
baseline (e.g. a pretraining's MLM loss past the unigram loss) after a share of the planned steps? If not,
the run warns loudly (red, even with the progress display off) and records the warning. `BaselineCheck` is
the callback that makes it: the loop calls `on_log` after each logged window and records what it returns.
`RunLog` is the loop's one place for what it shows and writes.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from rich.console import Console
from rich.panel import Panel
from rich.progress import Progress
from rich.text import Text

from zencli.atomic_write import atomic_write_text
from zencli.errors import WriteError, ZenError
from zencli.progress import make_progress

if TYPE_CHECKING:
    from zencli.train.schedule import StepPlan


def format_eta(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _fmt(key: str, value: Any) -> str:
    if key == "lr":
        return f"lr {value:.2e}"
    if key == "tokens_per_s":
        return f"{value:,.0f} tok/s"
    if isinstance(value, float):
        return f"{key} {value:.4f}"
    if value is None:
        return f"{key} n/a"
    return f"{key} {value}"


_SHOWN_LAST = ("lr", "tokens_per_s")
_NOT_SHOWN = ("kind", "step", "elapsed_s", "tokens", "grad_norm", "skipped_steps")


def summary(record: dict[str, Any]) -> str:
    """`loss 2.3012 · mlm_acc 0.4100 · lr 1.00e-04 · 1,234 tok/s` for a train record."""
    keys = [k for k in record if k not in _NOT_SHOWN and k not in _SHOWN_LAST]
    keys += [k for k in _SHOWN_LAST if k in record]
    return " · ".join(_fmt(k, record[k]) for k in keys)


@dataclass(frozen=True)
class BaselineWatch:
    """Judge once whether train metric `metric` has moved clearly past `baseline`.

    The loop judges the value of the logging window that ends at the first log step at or after `after` ×
    the planned steps, once this invocation has logged `min_windows` windows (a single window is noisy).
    """

    metric: str  # a key of the train records: "loss" or one of the loss function's metrics
    baseline: float
    label: str = "the baseline"  # how the warning names it, e.g. "the unigram MLM loss"
    mode: Literal["min", "max"] = "min"  # the direction in which the metric improves
    margin: float = 0.0  # clearly past: better than the baseline by more than this (in the metric's units)
    after: float = 0.2  # share of the planned steps
    min_windows: int = 3

    def due(self, step: int, planned_steps: int, windows: int) -> bool:
        return windows >= self.min_windows and step >= self.after * planned_steps

    def passed(self, value: float | None) -> bool:
        if value is None or not math.isfinite(value):
            return False
        if self.mode == "min":
            return value < self.baseline - self.margin
        return value > self.baseline + self.margin


class Callback(Protocol):
    """A small object the loop calls at fixed points; what it returns is recorded as a warning."""

    def on_log(self, step: int, record: dict[str, Any], plan: StepPlan) -> dict[str, Any] | None: ...


class BaselineCheck:
    """The callback of a `BaselineWatch`: judges once, when due, and returns a warning record if the metric
    has not moved past its baseline."""

    def __init__(self, watch: BaselineWatch):
        self.watch, self.windows, self.judged = watch, 0, False

    def on_log(self, step: int, record: dict[str, Any], plan: StepPlan) -> dict[str, Any] | None:
        w = self.watch
        self.windows += 1
        if self.judged or not w.due(step, plan.total_steps, self.windows):
            return None
        self.judged = True
        if w.metric not in record:
            raise ZenError(f"baseline watch: {w.metric!r} is not a train metric (expected one of "
                           f"{', '.join(k for k in record if k not in ('kind', 'step'))})")
        value = record[w.metric]
        if w.passed(value):
            return None
        below = w.mode == "min"
        bound = w.baseline - w.margin if below else w.baseline + w.margin
        margin = f" {'-' if below else '+'} {w.margin:g}" if w.margin else ""
        shown = "n/a" if value is None else f"{value:.4f}"
        warmup, total = plan.schedule.warmup_steps, plan.total_steps
        message = (f"step {step:,} of {total:,}: the train {w.metric} is {shown}, not yet "
                   f"{'below' if below else 'above'} {bound:.4f} ({w.label} {w.baseline:.4f}{margin}) — the model "
                   f"has not started learning (a slow start may still take off; a run that stays here learns "
                   f"nothing). Likely causes: a peak learning rate too high for its warm-up, or far too low "
                   f"(lr {plan.settings.lr:g}, warm-up {warmup:,} step{'' if warmup == 1 else 's'}); too few steps "
                   f"({total:,} planned). Lower lr (or raise a tiny one), lengthen the warm-up "
                   "(warmup_steps / warmup_ratio) or train longer.")
        return {"kind": "warning", "step": step, "metric": w.metric, "value": value, "baseline": w.baseline,
                "message": message}


def warning_panel(text: str) -> Panel:
    """A warning that must not be missed: bold red in a red box (the text is plain, never markup)."""
    return Panel(Text(text, style="bold red"), title="WARNING", title_align="left", border_style="bold red")


class ProgressDisplay:
    """Live bar on a terminal, one line per logging window elsewhere; `enabled=False` shows nothing."""

    def __init__(self, total_steps: int, start_step: int, console: Console | None = None,
                 enabled: bool = True):
        self.console = console or Console(stderr=True)
        self.total = total_steps
        self.enabled = enabled
        self.live = enabled and self.console.is_terminal
        self._start_step, self._start_time = start_step, time.perf_counter()
        self._progress: Progress | None = None
        if self.live:
            self._progress = make_progress(self.console, field="info")
            self._task = self._progress.add_task("train", total=total_steps, completed=start_step, info="")
            self._progress.start()

    def set_total(self, total_steps: int) -> None:
        self.total = total_steps
        if self._progress is not None:
            self._progress.update(self._task, total=total_steps)

    def advance(self, step: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=step)

    def eta_s(self, step: int) -> float:
        done = step - self._start_step
        if done <= 0:
            return float("nan")
        return (time.perf_counter() - self._start_time) / done * (self.total - step)

    def log(self, step: int, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        if self._progress is not None:
            self._progress.update(self._task, completed=step, info=summary(record))
        else:
            self.console.print(f"step {step}/{self.total} · {summary(record)} · "
                               f"ETA {format_eta(self.eta_s(step))}", highlight=False, soft_wrap=True)

    def message(self, text: str) -> None:
        if self.enabled:
            self.console.print(text, highlight=False, soft_wrap=True)

    def note(self, text: str) -> None:
        """A note printed even when the display is off (what happened to the user's files)."""
        self.console.print(text, highlight=False, soft_wrap=True)

    def warn(self, text: str) -> None:
        """A warning that must not be missed: bold red in a red box, printed even when the display is off."""
        self.console.print(warning_panel(text))

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def read_metrics(output_dir: Path) -> list[dict[str, Any]]:
    """The records of `<output_dir>/metrics.jsonl` ([] when there is none), skipping a torn line: only the
    last one can be, when the writer was killed mid-write."""
    path = Path(output_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


class MetricsLog:
    """Append-only `metrics.jsonl` (+ TensorBoard scalars when the package is installed)."""

    def __init__(self, output_dir: Path, tensorboard: bool = True):
        self.path = Path(output_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter  # optional dependency
            except ImportError:  # tensorboard is optional
                SummaryWriter = None
            if SummaryWriter is not None:
                self._tb = SummaryWriter(log_dir=str(Path(output_dir) / "tensorboard"))

    @staticmethod
    def truncate_after(output_dir: Path, step: int) -> None:
        """Drop records after `step` (and a torn last line) — what a killed run logged past its checkpoint."""
        path = Path(output_dir) / "metrics.jsonl"
        if not path.is_file():
            return
        kept = [json.dumps(r, ensure_ascii=False) for r in read_metrics(output_dir)
                if isinstance(r.get("step"), int) and r["step"] <= step]
        atomic_write_text(path, "".join(line + "\n" for line in kept))

    def write(self, record: dict[str, Any]) -> None:
        """Append `record` (a full disk: a WriteError naming the file; a torn last line is skipped on reading)."""
        try:
            self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._file.flush()
        except OSError as e:
            raise WriteError(self.path, e) from None
        if self._tb is not None:
            prefix = record.get("kind", "train")
            try:
                for key, value in record.items():
                    if key not in ("kind", "step") and isinstance(value, (int, float)):
                        self._tb.add_scalar(f"{prefix}/{key}", value, record["step"])
            except OSError as e:  # TensorBoard's writer thread re-raises its failed write here
                raise WriteError(self.path.parent / "tensorboard", e) from None

    def close(self) -> None:
        try:
            self._file.close()
        except OSError:  # the buffer was flushed after every record: nothing is lost
            pass
        if self._tb is not None:
            try:
                self._tb.close()
            except OSError:  # closing after a failed run: the scalars written so far stay
                pass


class RunLog:
    """What a training run shows and writes, in one place: the progress display and metrics.jsonl (rank 0),
    the notes said before the display opens, the warnings, the last train record."""

    def __init__(self, console: Console | None, show: bool, is_main: bool):
        self.console, self.show, self.is_main = console, show and is_main, is_main
        self.notes: list[str] = []  # said once the display is open
        self.file_notes: list[str] = []  # the same, also under --quiet (a damaged checkpoint passed over)
        self.warnings: list[dict[str, Any]] = []
        self.last_record: dict[str, Any] = {}
        self.progress: ProgressDisplay | None = None
        self.metrics: MetricsLog | None = None

    def open(self, out: Path, total_steps: int, start_step: int, tensorboard: bool, banner: str) -> None:
        self.progress = ProgressDisplay(total_steps, start_step, self.console, enabled=self.show)
        self.metrics = MetricsLog(out, tensorboard) if self.is_main else None
        for text in [banner, *self.notes]:
            self.say(text)
        if self.is_main:
            for text in self.file_notes:
                self.progress.note(text)

    def say(self, text: str) -> None:
        if self.progress is None:
            self.notes.append(text)
        elif self.is_main:
            self.progress.message(text)

    def set_total(self, total_steps: int) -> None:
        if self.progress is not None:
            self.progress.set_total(total_steps)

    def train(self, step: int, record: dict[str, Any]) -> None:
        self.last_record = record
        if self.metrics is not None:
            self.metrics.write(record)
            self.progress.log(step, record)

    def write(self, record: dict[str, Any]) -> None:
        if self.metrics is not None:
            self.metrics.write(record)

    def warn(self, record: dict[str, Any]) -> None:
        """A warning record: kept for the result, written, and shown loudly."""
        self.warnings.append(record)
        if self.metrics is not None:
            self.metrics.write(record)
            self.progress.warn(record["message"])

    def close(self) -> None:
        if self.progress is not None:
            self.progress.close()
        if self.metrics is not None:
            self.metrics.close()
