"""The warm-up under a time budget: `warmup_steps` is honoured as given (shortened, with a note, only beyond half
the fitted run), `warmup_ratio` follows the fitted steps (a note below the floor); one of the two at a time;
fingerprints of runs without a ratio are unchanged."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from tests.helpers_train import build, collate, make_examples
from tests.test_train_budget import records, timed_loss
from tests.test_train_loop import run, settings
from zencli.config.loading import from_dict
from zencli.errors import ZenError
from zencli.train import IndexedBatches, TrainSettings, train
from zencli.train import budget as B
from zencli.train.schedule import MAX_WARMUP_SHARE, WARMUP_FLOOR, plan_warmup

PEAK = 3e-3  # tests.test_train_loop.settings' lr
# 6 s (max_minutes 0.1) at 0.05 s a step: the steps the first fit plans (later re-fits move the end only)
FITTED = B.CALIBRATION_STEPS + 1 + int((6.0 - (B.CALIBRATION_STEPS + 1) * 0.05) * B.MARGIN / 0.05)


def test_plan_warmup_rules():
    assert plan_warmup(300, 0.0, 100_000, 100_000) == (300, None)  # nothing fitted: as configured
    assert plan_warmup(0, 0.1, 3000, 3000) == (300, None)
    assert plan_warmup(300, 0.0, 2832, 100_000) == (300, None)  # explicit steps are not scaled
    steps, note = plan_warmup(300, 0.0, 500, 100_000)
    assert steps == int(MAX_WARMUP_SHARE * 500) == 250
    assert note == ("warm-up shortened: warmup_steps 300 do not fit into the 500 steps that fit the time budget; "
                    "warming up over 250 steps (half the run)")
    assert plan_warmup(0, 0.1, 2832, 100_000) == (283, None)  # a ratio follows the fitted steps
    steps, note = plan_warmup(0, 0.1, 80, 100_000)
    assert steps == 8 and f"warmup_ratio 0.1 of the 80 steps that fit the time budget is 8 step(s), fewer than " \
                           f"{WARMUP_FLOOR}" in note
    assert plan_warmup(0, 0.1, 80, 80) == (8, None)  # short by design (max_steps 80), not by the budget


def budgeted(tmp_path, clock, **kw):
    """A run fitted into 6 simulated seconds (first planned to FITTED steps of max_steps 1,000, ending at the
    deadline); (train records, messages)."""
    buf = io.StringIO()
    result = train(build(), timed_loss(clock, lambda n: 0.05), IndexedBatches(make_examples(), collate, seed=3),
                   settings(tmp_path, max_steps=1000, max_minutes=0.1, save_every=0, **kw),
                   console=Console(file=buf, width=400), show_progress=True)
    assert f"→ {FITTED} steps" in buf.getvalue() and result.step == result.planned_steps >= FITTED
    recs = [r for r in records(tmp_path) if r["kind"] == "train"]
    assert recs[-1]["step"] == result.step and recs[-1]["lr"] <= 2 * PEAK / result.step  # decayed to ~0
    return recs, buf.getvalue()


def lr_at(train_records, step):
    return next(r["lr"] for r in train_records if r["step"] == step)


def test_explicit_warmup_steps_are_honoured_in_a_fitted_run(tmp_path, clock):
    recs, out = budgeted(tmp_path, clock, warmup_steps=30)
    assert lr_at(recs, 15) == pytest.approx(PEAK * 15 / 30)  # not 30 × FITTED / 1000 ≈ 3 steps
    assert lr_at(recs, 30) == pytest.approx(PEAK)
    assert "warm-up" not in out.split("train: starting")[1].split("\n", 1)[1]  # no note: nothing was shortened
    assert "warm-up 30 of 1,000 steps" in out  # the banner


def test_a_warmup_that_does_not_fit_is_shortened_with_a_note(tmp_path, clock):
    recs, out = budgeted(tmp_path, clock, warmup_steps=900)
    short = int(MAX_WARMUP_SHARE * FITTED)
    assert lr_at(recs, short) == pytest.approx(PEAK) and lr_at(recs, short - 1) < PEAK
    assert (f"warm-up shortened: warmup_steps 900 do not fit into the {FITTED} steps that fit the time budget; "
            f"warming up over {short} steps") in out


def test_a_warmup_ratio_follows_the_fitted_steps(tmp_path, clock):
    recs, out = budgeted(tmp_path, clock, warmup_steps=0, warmup_ratio=0.25)
    warmup = round(0.25 * FITTED)
    assert lr_at(recs, warmup) == pytest.approx(PEAK) and lr_at(recs, warmup - 1) < PEAK
    assert (f"warmup_ratio 0.25 of the {FITTED} steps that fit the time budget is {warmup} step(s), fewer than "
            f"{WARMUP_FLOOR}") in out


def test_without_a_budget_a_ratio_is_the_same_run_as_its_steps(tmp_path):
    _, by_steps = run(tmp_path / "steps", max_steps=8, warmup_steps=2)
    _, by_ratio = run(tmp_path / "ratio", max_steps=8, warmup_steps=0, warmup_ratio=0.25)
    steps = [(r["step"], r["loss"], r["lr"]) for r in records(tmp_path / "steps") if r["kind"] == "train"]
    assert steps == [(r["step"], r["loss"], r["lr"]) for r in records(tmp_path / "ratio") if r["kind"] == "train"]
    # so it resumes the other's checkpoints (what fine-tuning's warmup_ratio used to be turned into)
    _, again = run(tmp_path / "steps", max_steps=8, warmup_steps=0, warmup_ratio=0.25)
    assert again.start_step == 8


def test_warmup_settings_are_validated_naming_the_keys():
    with pytest.raises(ZenError, match=r"^warmup_steps, warmup_ratio: set one of them, not both \(warmup_steps 300, "
                                       r"warmup_ratio 0.1\)"):
        TrainSettings(warmup_steps=300, warmup_ratio=0.1, max_steps=1000).validate()
    with pytest.raises(ZenError, match=r"r.yaml: train.warmup_ratio: expected a fraction of the run's steps in "
                                       r"\[0, 1\), got 1.5"):
        from_dict(TrainSettings, {"warmup_ratio": 1.5}, source="r.yaml", prefix="train.")
    TrainSettings(warmup_steps=0, warmup_ratio=0.1).validate()


def test_fingerprints_hold_the_ratio_only_when_it_decides_something_new():
    assert "warmup_ratio" not in TrainSettings(warmup_steps=30).fingerprint_fields()
    assert TrainSettings(warmup_ratio=0.1, max_steps=3000).fingerprint_fields() == \
        TrainSettings(warmup_steps=300, max_steps=3000).fingerprint_fields()
    budget = TrainSettings(warmup_ratio=0.1, max_steps=3000, max_minutes=5).fingerprint_fields()
    assert budget["warmup_ratio"] == 0.1 and budget["warmup_steps"] == 0


@pytest.mark.usefixtures("dataset_folders")
def test_finetuning_passes_its_warmup_ratio_to_the_loop(tmp_path):
    from typer.testing import CliRunner

    from tests.test_finetune_cli import NGRAM, TINY, VOCAB, _sets, error, write_task_data
    from zencli.cli.app import app

    data = str(write_task_data(tmp_path, "cws"))
    base = ["--recipe", "finetune-pd98-cws", "--train", data, "--vocab", str(VOCAB), "--ngram", str(NGRAM),
            "-o", str(tmp_path / "run"), *_sets(TINY), "--max-steps", "4"]
    r = CliRunner().invoke(app, ["finetune", "--quiet", *base], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    run_settings = json.loads((tmp_path / "run" / "run.json").read_text())["settings"]
    assert (run_settings["warmup_ratio"], run_settings["warmup_steps"]) == (0.05, 0)  # the recipe's warmup_ratio
    # a typed train.warmup_steps replaces the recipe's warmup_ratio (tests/test_finetune_cli.py); the two ratios
    # are one warm-up given twice
    assert "warmup_ratio, train.warmup_ratio: set one warm-up, not both (warmup_ratio 0.05, train.warmup_ratio 0.2)" \
        in error(*base, "--set", "train.warmup_ratio=0.2")
