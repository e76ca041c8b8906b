"""What a fine-tuning says about itself: its plan in one line at the start, and the warnings at the end that
tell a user the run did not fit their data.

- `plan_line`: learning rate and warm-up, batch, steps (or the time budget they are fitted to), how dev
  picks the model and when early stopping ends the run, and the dev score of the majority baseline;
- `majority_baseline`: the dev score (task metric) of predicting from the training data's label counts alone
  (`Task.baseline_predictions`: the most frequent tag of each token, the most frequent class);
- `end_warnings`: the best dev score came in the first `EARLY_BEST_SHARE` of the run (the learning rate is
  likely too high, or the run much longer than it needs), or dev never beat the majority baseline (the
  model learned nothing the label counts do not already say).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zencli.tasks.base import Task
from zencli.tasks.scoring import GoldData
from zencli.train.early_stopping import MIN_SHARE
from zencli.train.schedule import MAX_EVALS, MIN_EVALS, eval_interval

EARLY_BEST_SHARE = 0.1  # best dev score within this share of the steps run: warn


@dataclass
class Baseline:
    what: str  # e.g. "most frequent training tag of each char"
    metric: str  # the task's main metric
    score: float  # on dev, as the task scores (a fraction for F1 / accuracy)


def majority_baseline(task: Task, train: GoldData, dev: GoldData | None) -> Baseline | None:
    """The dev score of the task's majority baseline; None without dev data or a baseline for the task."""
    if dev is None:
        return None
    found = task.baseline_predictions(train, dev.examples)
    if found is None:
        return None
    what, predictions = found
    evaluation = task.evaluate(dev, predictions, name="majority baseline", train=train)
    return Baseline(what, task.main_metric, float(evaluation.main_score))


def format_lr(x: float) -> str:
    """A learning rate as people write it: 1e-3, 3.3e-4, 0.01 (two significant digits)."""
    if x >= 0.01 or x == 0:
        return f"{x:g}"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def plan_line(s: Any, steps_per_epoch: int, baseline: Baseline | None, *, lr_why: str = "") -> str:
    """The run's choices in one line: `s` is the loop's TrainSettings for this run (steps and learning rate
    resolved); `lr_why`: how the rule chose the rate ("" when it was given)."""
    if s.warmup_steps:
        warm = f"{s.warmup_steps:,} warm-up steps"
    elif s.warmup_ratio:
        warm = f"warm-up {s.warmup_ratio:.0%} of the steps"
    else:
        warm = "no warm-up"
    how = [lr_why] if lr_why else []
    how.append(f"{warm}, then linear decay")
    if getattr(s, "layer_lr_decay", 1.0) != 1.0:
        how.append(f"× {s.layer_lr_decay:g} per layer down")
    if getattr(s, "head_lr_scale", 1.0) != 1.0:
        how.append(f"head × {s.head_lr_scale:g}")
    parts = [f"lr {format_lr(s.lr)} ({'; '.join(how)})", f"batch {s.batch_size}"]
    steps = f"{s.max_steps:,} steps ({s.max_steps / steps_per_epoch:.2f} epochs)"
    if s.max_minutes is not None:
        steps = f"budget {s.max_minutes:g} min (steps fitted to it, at most {s.max_steps:,})"
    parts.append(steps)
    if s.best_metric is None:
        parts.append("no dev evaluation: the last model is kept")
    else:
        stop = (f"early stopping after {s.patience:.0%} of the steps without a better dev {s.best_metric} (not "
                f"before the warm-up ends nor {MIN_SHARE:.0%} of the run)" if s.patience else "no early stopping")
        n = eval_interval(s.eval_every, s.max_steps, steps_per_epoch)
        every = "step" if n == 1 else f"{n:,} steps"
        if s.eval_every == "auto":
            every += f" (about once per epoch, {MIN_EVALS} to {MAX_EVALS} evaluations a run" + (
                ", following the steps the budget fits)" if s.max_minutes is not None else ")")
        parts.append(f"dev every {every} keeps the best {s.best_metric}; {stop}")
    if baseline is not None:
        parts.append(f"dev {baseline.metric} of the majority baseline ({baseline.what}): {100 * baseline.score:.2f}")
    return "plan: " + " · ".join(parts)


def end_warnings(*, steps: int, best_step: int | None, best_value: float | None, baseline: Baseline | None,
                 lr: float) -> list[str]:
    """Warnings about a finished run (module docstring); [] when it looks sound."""
    out = []
    if best_step is not None and steps >= 10 and best_step <= EARLY_BEST_SHARE * steps:
        lower = format_lr(float(f"{lr / 3:.0e}"))  # a third, to one digit: 1e-3 → 3e-4
        out.append(f"the best dev score came at step {best_step:,} of {steps:,}, in the first "
                   f"{EARLY_BEST_SHARE:.0%} of the run: later steps only made dev worse. The learning rate "
                   f"({format_lr(lr)}) is likely too high for this data (try --lr {lower}), or the run far "
                   f"longer than it needs")
    if baseline is not None and best_value is not None and best_value <= baseline.score:
        out.append(f"dev {baseline.metric} never beat the majority baseline ({baseline.what}): best "
                   f"{100 * best_value:.2f} vs {100 * baseline.score:.2f}. The model learned nothing the label "
                   f"counts do not already say: train longer, try another learning rate, or check the data")
    return out
