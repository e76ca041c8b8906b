"""Fitting a training run into a wall-clock budget (`TrainSettings.max_minutes`).

A step count that fits "15 minutes" depends on the machine, and on a shared machine it changes while the
run goes (another job starts: steps take twice as long). So the plan follows the clock:

- After `CALIBRATION_STEPS` timed steps (the first step of an invocation is not timed: it pays for lazy
  initialisation) the plan becomes the steps that fit into the remaining time, capped by `max_steps`.
- From then on it is re-fitted after every step from the mean of the last `WINDOW` step times (a
  recent window, so a slowdown mid-run shows within a few dozen steps; the mean, not the median, because
  the time left is spent by every step, the few slow ones included): it shrinks as soon as it no
  longer fits, and grows when more than `GROW` more steps fit (each change moves the decaying rate).
- In the last `TAIL` of the budget the plan follows the clock at every step, both ways, so the linear
  decay is tied to the time left and the learning rate reaches 0 at the deadline, not before nor after.
  There it counts each step at the slowest of the last `TAIL_WINDOW`: on a shared machine step times
  jump several-fold, and a plan from the typical step ran into the hard stop a few steps before its end,
  the rate still well above 0 (measured: 8 % of the peak, in a 50-step run). Ending up to one slow step
  early costs less than a schedule that never ends.
- Evaluations and checkpoints cost time: the plan counts each at its last measured duration, per step
  of their cadence, and keeps the final evaluation and checkpoint's time in reserve.
- `spent` is the hard stop, checked after every step: a run stops once the budget, less that reserve,
  is used up.

Rank 0 plans, and every process takes its plan and its verdict in one broadcast per step, so all stop
after the same step. The plan, the time spent and the recent step times travel in checkpoints, so a
resumed run keeps its plan and its budget counts the time of earlier invocations.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from typing import Any

from zencli.train import distributed as D

CALIBRATION_STEPS = 8
WINDOW = 32  # the recent step times the plan is made from
# Share of the remaining time given to planned steps: the rest absorbs step-time noise until the next
# re-fit (after every step, so the share left over shrinks with the time left).
MARGIN = 0.95
GROW = 0.05  # relative growth of the plan worth a jump in the decaying learning rate (before the tail)
# A change of the plan the log announces: on a machine shared with other jobs the step time wanders by more than
# GROW all the time, and a line per re-fit (87 in a 6.75-minute pretraining, measured) buries the run's output.
NEWS = 0.25
TAIL = 0.1  # last share of the budget in which the plan follows the clock at every step
TAIL_WINDOW = 16  # the recent steps whose slowest is the tail's step time


class TimeBudget:
    def __init__(self, minutes: float, max_steps: int, ctx: D.DistContext | None = None):
        self.seconds = 60.0 * minutes
        self.max_steps = max_steps
        self.ctx = ctx
        self.total_steps = max_steps  # the current plan
        self.fitted = False
        self.elapsed_before = 0.0  # wall seconds of earlier invocations of this run
        self.eval_seconds = 0.0  # the last evaluation's duration
        self.save_seconds = 0.0  # the last checkpoint's duration
        self._t0 = time.perf_counter()
        self._times: deque[float] = deque(maxlen=WINDOW)  # the recent timed steps
        self._per_step: float | None = None  # the mean step time of the current plan
        self._said: int | None = None  # the plan the log last announced

    def elapsed(self) -> float:
        # to the microsecond: a resumed run sums its time differently, and must plan the same steps
        return round(self.elapsed_before + time.perf_counter() - self._t0, 6)

    def _reserve(self) -> float:
        """Time kept for the final evaluation and checkpoint (as long as the last ones took)."""
        return self.eval_seconds + self.save_seconds

    def spent(self) -> bool:
        """True when the run must stop now: the final evaluation and checkpoint must still fit."""
        return self.elapsed() + self._reserve() >= self.seconds

    def step_seconds(self) -> float | None:
        return self._per_step

    def took(self, what: str, seconds: float) -> None:
        """An evaluation ("eval") or a checkpoint ("save") took `seconds`: the plan counts them from now on."""
        if what == "eval":
            self.eval_seconds = seconds
        else:
            self.save_seconds = seconds

    def after_step(self, step: int, seconds: float, first_of_invocation: bool, eval_every: int,
                   save_every: int) -> tuple[bool, bool]:
        """Take optimizer step `step`, which took `seconds`; (the plan changed, the budget is spent), the
        same on every process (rank 0's). `eval_every` / `save_every`: the cadences the plan pays for."""
        if not first_of_invocation:
            self._times.append(round(seconds, 6))
        total = self.total_steps
        if len(self._times) >= (1 if self.fitted else CALIBRATION_STEPS):
            total = self._refit(step, eval_every, save_every)
        total, spent = self._agreed((total, self.spent()))
        changed = total != self.total_steps
        self.total_steps = total
        return changed, spent

    def used_up(self) -> bool:
        """`spent` as rank 0 sees it, on every process: a resumed run whose budget is used up trains no more."""
        return self._agreed(self.spent())

    def _agreed(self, value: Any) -> Any:
        """Rank 0's `value` on every process (all stop after the same step, on the same plan)."""
        return D.broadcast_object(value, self.ctx) if self.ctx is not None else value

    def news(self) -> bool:
        """True once per notable change of the plan (the first fit, a change of more than NEWS since the last
        one announced): what the log announces, so a plan that follows the clock step by step does not fill it."""
        said = self._said
        if self.fitted and (said is None or abs(self.total_steps - said) > NEWS * said):
            self._said = self.total_steps
            return True
        return False

    def _refit(self, step: int, eval_every: int, save_every: int) -> int:
        """The plan after step `step` (rank 0's is the one every process takes)."""
        self._per_step = statistics.fmean(self._times)
        in_tail = self.fitted and self.seconds - self.elapsed() <= TAIL * self.seconds
        per = max(list(self._times)[-TAIL_WINDOW:]) if in_tail else self._per_step
        n = self._fitting(step, per, eval_every, save_every)
        if not self.fitted:
            self.fitted = True
            return n
        if in_tail or n < self.total_steps or n > self.total_steps * (1 + GROW):
            return n
        return self.total_steps

    def _fitting(self, step: int, per: float, eval_every: int, save_every: int) -> int:
        # n more steps cost n·per plus, per step, the evaluations and checkpoints of their cadences; the
        # final ones are in the reserve
        cost = per + (self.eval_seconds / eval_every if eval_every else 0.0) + (
            self.save_seconds / save_every if save_every else 0.0)
        room = (self.seconds - self.elapsed() - self._reserve()) * MARGIN
        more = math.floor(room / cost) if cost > 0 else self.max_steps
        return min(self.max_steps, step + max(0, more))  # `step` itself: no room for another step, end now

    def state_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "total_steps": self.total_steps, "fitted": self.fitted,
                "elapsed_s": self.elapsed(), "eval_seconds": self.eval_seconds,
                "save_seconds": self.save_seconds, "step_times": list(self._times)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.total_steps = int(state["total_steps"])
        self.fitted = bool(state["fitted"])
        self.elapsed_before = float(state["elapsed_s"])
        self.eval_seconds = float(state.get("eval_seconds", 0.0))
        self.save_seconds = float(state.get("save_seconds", 0.0))
        self._times = deque(state.get("step_times", []), maxlen=WINDOW)
        self._t0 = time.perf_counter()
