"""What a fine-tuning says about itself: the one-line plan, the majority baseline of tagging and classification,
and the end-of-run warnings (best dev score early in the run; dev never above the majority baseline)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.conftest import write
from zencli.config.finetune import TaskSection
from zencli.tasks.base import task_class
from zencli.tasks.run_checks import Baseline, end_warnings, majority_baseline, plan_line
from zencli.tasks.scoring import read_gold

TRAIN = "北\tB-LOC\n京\tE-LOC\n是\tO\n城\tO\n\n北\tB-LOC\n京\tE-LOC\n大\tO\n\n他\tS-PER\n是\tO\n北\tO\n"
DEV = "北\tB-LOC\n京\tE-LOC\n好\tO\n\n他\tS-PER\n在\tO\n南\tB-LOC\n京\tE-LOC\n"


def _settings(**kw):
    base = dict(lr=1e-3, warmup_steps=0, warmup_ratio=0.05, batch_size=32, max_steps=300, max_minutes=None,
                best_metric="f1", eval_every=100, patience=0.2)
    return SimpleNamespace(**{**base, **kw})


def test_tagging_baseline_is_each_tokens_most_frequent_tag(tmp_path):
    train = read_gold(write(tmp_path / "train.tsv", TRAIN), "ner")
    dev = read_gold(write(tmp_path / "dev.tsv", DEV), "ner")
    task = task_class("ner").from_training_data(TaskSection(name="ner"), train)
    what, predictions = task.baseline_predictions(train, dev.examples)
    # 北: B-LOC twice, O once; 京: E-LOC; 他: S-PER; unseen chars: O (the most frequent label)
    assert predictions == [["B-LOC", "E-LOC", "O"], ["S-PER", "O", "O", "E-LOC"]]
    assert "most frequent training tag of each char" == what
    baseline = majority_baseline(task, train, dev)
    assert baseline.metric == "f1" and 0 < baseline.score < 1  # 2 of 3 entities, 2 predicted: F1 0.8
    assert abs(baseline.score - 0.8) < 1e-9
    assert majority_baseline(task, train, None) is None


def test_classification_baseline_is_the_most_frequent_label(tmp_path: Path):
    train = read_gold(write(tmp_path / "train.tsv", ["1\t好", "0\t坏", "1\t很好"]), "sa")
    dev = read_gold(write(tmp_path / "dev.tsv", ["0\t差", "1\t棒", "0\t烂", "0\t糟"]), "sa")
    task = task_class("sa").from_training_data(TaskSection(name="sa"), train)
    baseline = majority_baseline(task, train, dev)
    assert baseline.metric == "accuracy" and baseline.score == 0.25 and "'1'" in baseline.what


def test_the_plan_is_one_line_with_rate_steps_and_early_stopping():
    line = plan_line(_settings(), 100, Baseline("most frequent training tag of each char", "f1", 0.1234))
    assert "\n" not in line and line.startswith("plan: lr 1e-3 (warm-up 5% of the steps")
    assert "300 steps (3.00 epochs)" in line and "dev every 100 steps keeps the best f1" in line
    assert "early stopping after 20% of the steps without a better dev f1 (not before the warm-up ends" in line
    assert "majority baseline (most frequent training tag of each char): 12.34" in line
    # auto: once per epoch within 5 to 50 evaluations; an epoch of 2 steps in a 400-step run: every 8 steps
    line = plan_line(_settings(eval_every="auto", max_steps=400), 2, None)
    assert "dev every 8 steps (about once per epoch, 5 to 50 evaluations a run)" in line
    line = plan_line(_settings(max_minutes=5.0, patience=0, warmup_ratio=0.0, lr=3e-4), 100, None)
    assert "lr 3e-4 (no warm-up" in line and "budget 5 min" in line and "no early stopping" in line
    assert "no dev evaluation" in plan_line(_settings(best_metric=None, patience=0), 100, None)


def test_warns_when_the_best_dev_score_came_in_the_first_tenth():
    (text,) = end_warnings(steps=1000, best_step=100, best_value=0.5, baseline=None, lr=1e-3)
    assert "step 100 of 1,000, in the first 10%" in text and "--lr 3e-4" in text
    assert end_warnings(steps=1000, best_step=101, best_value=0.5, baseline=None, lr=1e-3) == []
    assert end_warnings(steps=1000, best_step=None, best_value=None, baseline=None, lr=1e-3) == []


def test_warns_when_dev_never_beat_the_majority_baseline():
    baseline = Baseline("most frequent training tag of each word", "accuracy", 0.8038)
    (text,) = end_warnings(steps=100, best_step=90, best_value=0.7170, baseline=baseline, lr=1e-3)
    assert "never beat the majority baseline" in text and "71.70 vs 80.38" in text
    assert end_warnings(steps=100, best_step=90, best_value=0.81, baseline=baseline, lr=1e-3) == []
