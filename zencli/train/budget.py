"""Fitting a training run into a wall-clock budget (`TrainSettings.max_minutes`).

A step count that fits "15 minutes" depends on the machine, so the loop plans it while it runs:

- `fit`: after `CALIBRATION_STEPS` timed steps (the first step of an invocation is not timed: it pays for
  lazy initialisation), the plan becomes the steps that fit into the remaining time at the median step
  time, capped by `max_steps`. The learning-rate schedule is rebuilt for that count, so the run still
  warms up and decays to zero instead of being cut off at its peak rate.
- `refit` after each evaluation: evaluations cost time the first fit could not see, and the machine may
  have become slower or faster since (other jobs on a shared CPU): the plan is redone from the step times
  since the last fit. It shrinks whenever it no longer fits, and grows when more than `GROW` more steps
  fit (a run calibrated while the CPU was busy would otherwise end early and leave budget unused).
- `spent`: the hard stop, checked after every step: a run stops once the budget, less the time of the
  final evaluation (as long as the last one took), is used up.

The plan and the time already spent travel in checkpoints, so a resumed run keeps its plan and its
budget counts the time of earlier invocations.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

CALIBRATION_STEPS = 8
# Share of the remaining time given to planned steps: the rest absorbs step-time noise, the final
# evaluation and the last checkpoint.
MARGIN = 0.93
GROW = 0.05  # relative growth of the plan worth a jump in the decaying learning rate


class TimeBudget:
    def __init__(self, minutes: float, max_steps: int):
        self.seconds = 60.0 * minutes
        self.max_steps = max_steps
        self.total_steps = max_steps  # the current plan
        self.fitted = False
        self.elapsed_before = 0.0  # wall seconds of earlier invocations of this run
        self.eval_seconds = 0.0  # the last evaluation's duration
        self._t0 = time.perf_counter()
        self._step_times: list[float] = []  # timed steps since the last (re)fit
        self._per_step: float | None = None  # the median step time the plan was made with

    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self._t0

    def spent(self) -> bool:
        """True when the run must stop now: the evaluation that follows the last step (as long as the last
        one took) must still fit."""
        return self.elapsed() + self.eval_seconds >= self.seconds

    def record_step(self, seconds: float, first_of_invocation: bool) -> None:
        if not first_of_invocation:
            self._step_times.append(seconds)

    def step_seconds(self) -> float | None:
        return self._per_step

    def _measure(self) -> bool:
        """Take the median of the steps timed since the last fit, when there are enough of them."""
        if len(self._step_times) < CALIBRATION_STEPS:
            return False
        self._per_step = statistics.median(self._step_times)
        self._step_times = []
        return True

    def fit(self, step: int) -> bool:
        """Plan the run once enough steps are timed; True when the plan was set now."""
        if self.fitted or not self._measure():
            return False
        self.fitted = True
        self.total_steps = self._fitting(step, eval_every=0)
        return True

    def refit(self, step: int, eval_seconds: float, eval_every: int) -> bool:
        """After an evaluation that took `eval_seconds`: redo the plan with the step time measured since the
        last fit; True when the plan changed."""
        self.eval_seconds = eval_seconds
        if not self.fitted:
            return False
        self._measure()
        if self._per_step is None:  # resumed, nothing timed yet
            return False
        n = self._fitting(step, eval_every)
        if n < self.total_steps or n > self.total_steps * (1 + GROW):
            self.total_steps = n
            return True
        return False

    def _fitting(self, step: int, eval_every: int) -> int:
        per = self._per_step or 0.0
        room = (self.seconds - self.elapsed()) * MARGIN
        # n more steps cost n·per plus, when evaluating every `eval_every` steps, ceil(n / eval_every)
        # evaluations (the last one included) of eval_seconds each.
        cost = per + (self.eval_seconds / eval_every if eval_every else 0.0)
        room -= self.eval_seconds if eval_every else 0.0
        more = math.floor(room / cost) if cost > 0 else self.max_steps
        return max(step + 1, min(self.max_steps, step + max(0, more)))

    def state_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "total_steps": self.total_steps, "fitted": self.fitted,
                "elapsed_s": self.elapsed(), "eval_seconds": self.eval_seconds}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.total_steps = int(state["total_steps"])
        self.fitted = bool(state["fitted"])
        self.elapsed_before = float(state["elapsed_s"])
        self.eval_seconds = float(state.get("eval_seconds", 0.0))
        self._t0 = time.perf_counter()
