"""The best evaluation so far (`best_metric`, `best_mode`) and early stopping (`patience`). The state is
saved in every checkpoint ("eval"), so a resumed run selects and stops where an uninterrupted one would.

Patience is a share of the planned steps, not a count of evaluations: a count means a different span of
training for every evaluation cadence (five evaluations were 10 steps of a 400-step run whose epochs were
2 steps, and stopped it inside its warm-up). And a run is never stopped before it could have learned:
not inside its warm-up, not before `MIN_SHARE` of its planned steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from zencli.errors import ZenError

MIN_SHARE = 0.25  # early stopping waits for this share of the planned steps (and for the warm-up to end)


@dataclass
class BestEvaluation:
    metric: str | None  # None: no selection, no early stopping
    mode: str  # "max" or "min"
    patience: float  # share of the planned steps without improvement that stops the run; 0: never
    best_value: float | None = None
    best_step: int | None = None
    best_metrics: dict[str, float] = field(default_factory=dict)
    stopped_early: bool = False

    def update(self, step: int, metrics: dict[str, float], planned_steps: int, warmup_steps: int) -> bool:
        """Take the evaluation at `step` of a run planned to `planned_steps`; True when it is the best so far."""
        if self.metric is None:
            return False
        if self.metric not in metrics:
            raise ZenError(f"best_metric: expected one of the evaluation metrics "
                           f"({', '.join(sorted(metrics)) or 'none'}), got {self.metric!r}")
        value = metrics[self.metric]
        improved = self.best_value is None or (value > self.best_value if self.mode == "max"
                                               else value < self.best_value)
        if improved:
            self.best_value, self.best_step, self.best_metrics = value, step, metrics
        elif self.patience and self.best_step is not None:
            waited = step - self.best_step >= self.patience_steps(planned_steps)
            learned = step >= max(warmup_steps, math.ceil(MIN_SHARE * planned_steps))
            self.stopped_early = waited and learned
        return improved

    def patience_steps(self, planned_steps: int) -> int:
        """Steps without improvement that stop a run of `planned_steps` (at least 1)."""
        return max(1, math.ceil(self.patience * planned_steps))

    def state_dict(self) -> dict[str, Any]:
        return {"best_value": self.best_value, "best_step": self.best_step, "best_metrics": self.best_metrics,
                "stopped_early": self.stopped_early}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best_value, self.best_step, self.best_metrics = (state["best_value"], state["best_step"],
                                                              state["best_metrics"])
        self.stopped_early = state["stopped_early"]
