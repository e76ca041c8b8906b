"""`max_minutes`: the loop fits its step count and LR decay into a wall-clock budget, keeps the plan across
a resume, and never runs past the budget."""

import json

import pytest

from tests.helpers_train import lm_loss
from tests.test_train_loop import run
from zencli.train import budget as B
from zencli.train.checkpoint import load_checkpoint


def test_fit_plans_the_steps_that_fit_after_calibration(clock):
    b = B.TimeBudget(minutes=1.0, max_steps=10_000)
    for step in range(1, B.CALIBRATION_STEPS + 2):  # the first step of an invocation is not timed
        clock.now += 0.5
        b.record_step(0.5 if step > 1 else 9.0, first_of_invocation=step == 1)
        fitted = b.fit(step)
        assert fitted == (step == B.CALIBRATION_STEPS + 1)
    step = B.CALIBRATION_STEPS + 1
    # 60 s budget, 4.5 s gone, 0.5 s a step: floor(55.5 × MARGIN / 0.5) more steps
    assert b.total_steps == step + int(55.5 * B.MARGIN / 0.5)
    assert not b.fit(step + 1)  # planned once


def test_plan_is_capped_by_max_steps_and_always_moves_on(clock):
    b = B.TimeBudget(minutes=10.0, max_steps=20)
    for step in range(1, 11):
        b.record_step(0.01, step == 1)
        b.fit(step)
    assert b.total_steps == 20
    slow = B.TimeBudget(minutes=0.001, max_steps=1000)
    for step in range(1, 11):
        clock.now += 1.0
        slow.record_step(1.0, step == 1)
        slow.fit(step)
    assert slow.total_steps == 10  # no room left: the plan ends at the next step, never before it
    assert slow.spent()


def test_refit_after_an_evaluation_only_shrinks(clock):
    b = B.TimeBudget(minutes=1.0, max_steps=10_000)
    for step in range(1, 10):
        b.record_step(0.1, step == 1)
        b.fit(step)
    planned = b.total_steps
    assert not b.refit(9, eval_seconds=0.0, eval_every=100)  # cheap evaluations: plan unchanged
    assert b.refit(9, eval_seconds=5.0, eval_every=100)  # 5 s per evaluation every 100 steps
    room = 60.0 * B.MARGIN - 5.0
    assert b.total_steps == 9 + int(room / (0.1 + 5.0 / 100)) < planned


def test_state_round_trip_counts_earlier_time(clock):
    b = B.TimeBudget(minutes=2.0, max_steps=500)
    clock.now += 30.0
    b.fitted, b.total_steps = True, 123
    state = b.state_dict()
    c = B.TimeBudget(minutes=2.0, max_steps=500)
    c.load_state_dict(state)
    assert (c.total_steps, c.fitted) == (123, True) and c.elapsed() == pytest.approx(30.0)
    clock.now += 90.0
    assert c.spent()


def timed_loss(clock, seconds):
    """lm_loss on a simulated clock: each step takes `seconds(step)` and nothing else takes time."""
    calls = {"n": 0}

    def loss(model, batch):
        calls["n"] += 1
        clock.now += seconds(calls["n"])
        return lm_loss(model, batch)
    return loss


def records(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_training_fits_the_budget_and_decays_the_rate(tmp_path, clock):
    # 6 s at 0.05 s a step; warm-up over half of the run: the plan keeps that share
    start = clock.now
    _, result = run(tmp_path, loss_fn=timed_loss(clock, lambda n: 0.05), max_steps=1000, warmup_steps=0,
                    warmup_ratio=0.5, max_minutes=0.1, save_every=0)
    steps = B.CALIBRATION_STEPS + 1 + int((6.0 - (B.CALIBRATION_STEPS + 1) * 0.05) * B.MARGIN / 0.05)
    assert result.step == result.planned_steps == steps  # not 1,000
    assert clock.now - start <= 6.0
    lrs = [r["lr"] for r in records(tmp_path) if r["kind"] == "train"]
    assert max(lrs) == pytest.approx(3e-3, rel=0.05)  # warm-up scaled to the plan: the peak is reached
    assert lrs[-1] == pytest.approx(3e-3 / (steps - round(0.5 * steps)))  # and decays to the end
    state = load_checkpoint(result.checkpoint)
    assert state["budget"]["total_steps"] == steps and state["budget"]["fitted"]


def test_hard_stop_when_steps_slow_down(tmp_path, clock):
    start = clock.now
    slowing = timed_loss(clock, lambda n: 0.02 if n <= 12 else 0.5)  # calibrated fast, then 25× slower
    _, result = run(tmp_path, loss_fn=slowing, max_steps=100_000, max_minutes=0.05, save_every=0)
    assert result.step < result.planned_steps  # stopped by the clock, not the plan
    assert 3.0 <= clock.now - start < 3.0 + 0.5  # the step that crossed the budget is the last


def test_evaluations_shrink_the_plan(tmp_path, clock):
    def slow_eval(model):
        clock.now += 1.0
        return {"score": 0.5}

    from tests.helpers_train import build, collate, make_examples
    from tests.test_train_loop import settings
    from zencli.train import IndexedBatches, train

    start = clock.now
    result = train(build(), timed_loss(clock, lambda n: 0.05), IndexedBatches(make_examples(), collate, seed=3),
                   settings(tmp_path, max_steps=1000, max_minutes=0.1, save_every=0, eval_every=20),
                   eval_fn=slow_eval, show_progress=False)
    assert result.step == result.planned_steps < 100  # 120 steps without evaluations
    assert clock.now - start <= 6.0  # the final evaluation included


def test_hard_stop_leaves_time_for_the_final_evaluation(tmp_path, clock):
    def slow_eval(model):
        clock.now += 1.0
        return {"score": 0.5}

    from tests.helpers_train import build, collate, make_examples
    from tests.test_train_loop import settings
    from zencli.train import IndexedBatches, train

    start = clock.now
    slowing = timed_loss(clock, lambda n: 0.05 if n <= 30 else 0.5)  # planned fast, then 10× slower
    result = train(build(), slowing, IndexedBatches(make_examples(), collate, seed=3),
                   settings(tmp_path, max_steps=1000, max_minutes=0.1, save_every=0, eval_every=20),
                   eval_fn=slow_eval, show_progress=False)
    assert result.step < result.planned_steps  # the clock stopped it
    assert clock.now - start <= 6.0 + 0.5  # at most the step that crossed the line, evaluation included


def test_resumed_run_keeps_its_plan(tmp_path, clock):
    kw = dict(max_steps=100_000, max_minutes=0.05, save_every=5, keep_last=50)
    _, first = run(tmp_path, loss_fn=timed_loss(clock, lambda n: 0.03), **kw)
    assert first.step == first.planned_steps < 100_000
    mid = [p for p in sorted((tmp_path / "checkpoints").glob("step-*.pt"))
           if load_checkpoint(p)["budget"]["fitted"]][0]  # the first checkpoint after planning
    state = load_checkpoint(mid)
    assert state["budget"]["elapsed_s"] == pytest.approx(state["step"] * 0.03)
    _, again = run(tmp_path, loss_fn=timed_loss(clock, lambda n: 0.03), **kw, resume=str(mid))
    assert again.start_step == state["step"] and again.planned_steps == first.planned_steps
    assert again.step == first.step


def test_max_minutes_is_validated_and_fingerprinted(tmp_path):
    from zencli.errors import ZenError
    from zencli.train import TrainSettings

    with pytest.raises(ZenError, match="max_minutes"):
        TrainSettings(max_minutes=0).validate()
    assert "max_minutes" not in TrainSettings().fingerprint_fields()
    assert TrainSettings(max_minutes=5).fingerprint_fields()["max_minutes"] == 5


def test_refit_grows_the_plan_when_steps_get_faster(clock):
    b = B.TimeBudget(minutes=1.0, max_steps=10_000)
    for step in range(1, B.CALIBRATION_STEPS + 2):
        clock.now += 0.4
        b.record_step(0.4, step == 1)
        b.fit(step)
    planned = b.total_steps
    for _ in range(B.CALIBRATION_STEPS + 2, 40):  # the other jobs on the CPU finished: 4× faster
        clock.now += 0.1
        b.record_step(0.1, False)
    assert b.refit(39, eval_seconds=0.0, eval_every=50) and b.total_steps > 2 * planned
    assert b.step_seconds() == pytest.approx(0.1)
    grown = b.total_steps
    for _ in range(40, 50):  # the same speed again: the plan stays (no change worth a jump in the rate)
        clock.now += 0.1
        b.record_step(0.1, False)
    assert not b.refit(49, eval_seconds=0.0, eval_every=50) and b.total_steps == grown


def test_resuming_a_run_stopped_by_the_clock_trains_no_more(tmp_path, clock):
    """A run the hard stop ended before its plan: its last checkpoint has used the budget, so resuming it
    (e.g. to export a model) must not train one more step past the budget."""
    slowing = timed_loss(clock, lambda n: 0.02 if n <= 12 else 0.5)  # calibrated fast, then 25× slower
    _, first = run(tmp_path, loss_fn=slowing, max_steps=100_000, max_minutes=0.05, save_every=0)
    assert first.step < first.planned_steps  # stopped by the clock
    _, again = run(tmp_path, loss_fn=timed_loss(clock, lambda n: 0.5), max_steps=100_000, max_minutes=0.05,
                   save_every=0)
    assert again.start_step == first.step and again.step == first.step
