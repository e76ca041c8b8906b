"""Learning-rate schedule: linear warm-up to the peak, then linear decay towards 0 (BERT, ZEN).

`factor(step)` is the multiplier of the peak rate for the optimizer step with 0-based index `step`:

    step < warmup:   (step + 1) / warmup            first update already moves (HF's variant starts at 0)
    step >= warmup:  (total - step) / (total - warmup)   peak at `warmup`, 1/(total-warmup) at the last step

so no optimizer step runs with a zero rate. The schedule is a pure function of the step, so resuming
needs only the step count; `state_dict()` records the parameters to check that they did not change.

`plan_warmup` decides the warm-up of a run whose step count was fitted into a time budget: a warm-up
given as steps is kept (a short run needs it as much as a long one: scaling a 300-step warm-up down to
8 steps left a pretraining at the unigram plateau), a ratio follows the fitted steps, and whatever ends
up shorter than asked or below `WARMUP_FLOOR` steps comes with a note.

`StepPlan` is the run's plan in one object: the step count, the schedule over it and the evaluation
cadence, re-made together whenever a time budget re-fits the step count.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from zencli.train.settings import TrainSettings, warmup_from_ratio

# Fewer warm-up steps than this from a ratio of a fitted run get a note: BERT-style models trained from
# scratch at a large peak rate tend to stall at the unigram plateau with a warm-up this short.
WARMUP_FLOOR = 100
# An explicit warm-up may take at most this share of a fitted run; beyond it the rate would barely
# decay after its peak (or never reach it).
MAX_WARMUP_SHARE = 0.5
# `eval_every: auto` evaluates between MIN_EVALS and MAX_EVALS times a run: fewer cannot tell when dev
# stopped improving, more spend the run evaluating (an epoch of 2 steps on 60 sentences). Without an epoch
# to follow it evaluates AUTO_EVALS times.
MIN_EVALS, MAX_EVALS, AUTO_EVALS = 5, 50, 10


@dataclass(frozen=True)
class LinearWarmupDecay:
    peak_lr: float
    warmup_steps: int
    total_steps: int

    def factor(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        if self.total_steps <= self.warmup_steps:
            return 1.0
        return max(0.0, (self.total_steps - step) / (self.total_steps - self.warmup_steps))

    def lr(self, step: int) -> float:
        return self.peak_lr * self.factor(step)

    def state_dict(self) -> dict:
        return {"kind": "linear_warmup_decay", **asdict(self)}


def plan_warmup(warmup_steps: int, warmup_ratio: float, total_steps: int, max_steps: int) -> tuple[int, str | None]:
    """(warm-up steps, note or None) of a run planned to `total_steps` of at most `max_steps`.

    Without a fitted plan (`total_steps == max_steps`) this is the warm-up as configured, without a note.
    """
    fitted = total_steps < max_steps
    if warmup_ratio:
        warmup = warmup_from_ratio(warmup_ratio, total_steps)
        if fitted and warmup < WARMUP_FLOOR:
            return warmup, (f"warm-up: warmup_ratio {warmup_ratio:g} of the {total_steps:,} steps that fit the time "
                            f"budget is {warmup:,} step(s), fewer than {WARMUP_FLOOR}; if the loss stalls, lower lr "
                            "or set warmup_steps")
        return warmup, None
    if fitted and warmup_steps > MAX_WARMUP_SHARE * total_steps:
        short = int(MAX_WARMUP_SHARE * total_steps)
        return short, (f"warm-up shortened: warmup_steps {warmup_steps:,} do not fit into the {total_steps:,} steps "
                       f"that fit the time budget; warming up over {short:,} steps (half the run)")
    return warmup_steps, None


def eval_interval(eval_every: int | str, planned_steps: int, epoch_steps: int | None = None) -> int:
    """Steps between evaluations of a run planned to `planned_steps` (0: only at the end): `eval_every` as
    given, or for auto once per epoch (`epoch_steps`) kept within MIN_EVALS .. MAX_EVALS evaluations."""
    if eval_every != "auto":
        return int(eval_every)
    natural = epoch_steps or math.ceil(planned_steps / AUTO_EVALS)
    fewest = max(1, planned_steps // MIN_EVALS)  # the longest interval: at least MIN_EVALS evaluations
    most = max(1, math.ceil(planned_steps / MAX_EVALS))  # the shortest: at most MAX_EVALS
    return min(fewest, max(most, natural))


@dataclass
class StepPlan:
    """How many steps the run makes, its learning rate over them and how often it evaluates."""

    settings: TrainSettings
    epoch_steps: int | None = None  # optimizer steps of one pass over the data, when the caller knows it
    total_steps: int = 0
    schedule: LinearWarmupDecay = field(init=False)
    eval_every: int = 0

    def __post_init__(self) -> None:
        self.replan(self.settings.max_steps)

    def replan(self, total_steps: int) -> str | None:
        """Run `total_steps`: warm up as `plan_warmup` says, decay to the end; its note, if any."""
        s = self.settings
        self.total_steps = total_steps
        warmup, note = plan_warmup(s.warmup_steps, s.warmup_ratio, total_steps, s.max_steps)
        self.schedule = LinearWarmupDecay(s.lr, warmup, total_steps)
        self.eval_every = eval_interval(s.eval_every, total_steps, self.epoch_steps)
        return note

    def evaluates(self, step: int) -> bool:
        """Whether optimizer step `step` is on the evaluation cadence (the end of the run aside)."""
        return bool(self.eval_every) and step % self.eval_every == 0
