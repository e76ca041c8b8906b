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
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from zencli.train.settings import warmup_from_ratio

# Fewer warm-up steps than this from a ratio of a fitted run get a note: BERT-style models trained from
# scratch at a large peak rate tend to stall at the unigram plateau with a warm-up this short.
WARMUP_FLOOR = 100
# An explicit warm-up may take at most this share of a fitted run; beyond it the rate would barely
# decay after its peak (or never reach it).
MAX_WARMUP_SHARE = 0.5


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
