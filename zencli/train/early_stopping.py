"""The best evaluation so far (`best_metric`, `best_mode`) and early stopping (`patience`). The state is
saved in every checkpoint ("eval"), so a resumed run selects and stops where an uninterrupted one would."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zencli.errors import ZenError


@dataclass
class BestEvaluation:
    metric: str | None  # None: no selection, no early stopping
    mode: str  # "max" or "min"
    patience: int  # evaluations without improvement that stop the run; 0: never
    best_value: float | None = None
    best_step: int | None = None
    best_metrics: dict[str, float] = field(default_factory=dict)
    bad_evals: int = 0
    stopped_early: bool = False

    def update(self, step: int, metrics: dict[str, float]) -> bool:
        """Take the evaluation at `step`; True when it is the best so far."""
        if self.metric is None:
            return False
        if self.metric not in metrics:
            raise ZenError(f"best_metric: expected one of the evaluation metrics "
                           f"({', '.join(sorted(metrics)) or 'none'}), got {self.metric!r}")
        value = metrics[self.metric]
        improved = self.best_value is None or (value > self.best_value if self.mode == "max"
                                               else value < self.best_value)
        if improved:
            self.best_value, self.best_step, self.best_metrics, self.bad_evals = value, step, metrics, 0
        else:
            self.bad_evals += 1
            if self.patience and self.bad_evals >= self.patience:
                self.stopped_early = True
        return improved

    def state_dict(self) -> dict[str, Any]:
        return {"best_value": self.best_value, "best_step": self.best_step, "best_metrics": self.best_metrics,
                "bad_evals": self.bad_evals, "stopped_early": self.stopped_early}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best_value, self.best_step, self.best_metrics = (state["best_value"], state["best_step"],
                                                              state["best_metrics"])
        self.bad_evals, self.stopped_early = state["bad_evals"], state["stopped_early"]
