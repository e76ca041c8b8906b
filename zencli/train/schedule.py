"""Learning-rate schedule: linear warm-up to the peak, then linear decay towards 0 (BERT, ZEN).

`factor(step)` is the multiplier of the peak rate for the optimizer step with 0-based index `step`:

    step < warmup:   (step + 1) / warmup            first update already moves (HF's variant starts at 0)
    step >= warmup:  (total - step) / (total - warmup)   peak at `warmup`, 1/(total-warmup) at the last step

so no optimizer step runs with a zero rate. The schedule is a pure function of the step, so resuming
needs only the step count; `state_dict()` records the parameters to check that they did not change.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


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
