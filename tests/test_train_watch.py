"""The baseline watch: a run whose train metric is still at its baseline after a fifth of its steps warns
loudly (red, even with the progress display off), records a "warning" in metrics.jsonl and in the result;
a run that learns does not. Pretraining watches its MLM loss against the unigram MLM loss."""

from __future__ import annotations

import io
import json
import math

import pytest
import torch
import torch.nn.functional as F
from rich.console import Console
from torch import nn

from zencli.errors import ZenError
from zencli.train import IndexedBatches, TrainSettings, train
from zencli.train.progress import BaselineWatch

CLASSES = 50
UNIGRAM = math.log(CLASSES)  # the targets are uniform: the cross-entropy of the best context-free guess


class Lookup(nn.Module):
    """Predicts a token's class from the token itself: learnable in a few steps at a sane rate."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(CLASSES, 16)
        self.out = nn.Linear(16, CLASSES)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # [B, L] → [B, L, C]
        return self.out(self.embed(ids))


def mlm_like_loss(model, ids):
    logits = model(ids)
    loss = F.cross_entropy(logits.flatten(0, 1), ids.flatten())
    correct = (logits.argmax(-1) == ids).sum()
    return loss, {"mlm_loss": loss.detach(), "mlm_acc": (correct, ids.numel())}, ids.numel()


def watched_run(tmp_path, lr: float, watch: BaselineWatch | None = None):
    torch.manual_seed(0)
    examples = [torch.randint(0, CLASSES, (8,)) for _ in range(64)]
    buf = io.StringIO()
    result = train(Lookup(), mlm_like_loss, IndexedBatches(examples, torch.stack, seed=1),
                   TrainSettings(lr=lr, warmup_steps=2, max_steps=40, batch_size=8, dtype="fp32", device="cpu",
                                 log_every=2, save_every=0, output_dir=tmp_path, tensorboard=False),
                   console=Console(file=buf, width=300), show_progress=False,
                   watch=watch or BaselineWatch("mlm_loss", UNIGRAM, label="the unigram MLM loss", margin=0.2))
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return result, records, buf.getvalue()


def test_a_run_that_learns_is_not_warned(tmp_path):
    result, records, out = watched_run(tmp_path, lr=0.05)
    step8 = next(r for r in records if r["kind"] == "train" and r["step"] == 8)  # judged here: ≥ 20%, 4 windows
    assert step8["mlm_loss"] < UNIGRAM - 0.2
    assert result.warnings == [] and not [r for r in records if r["kind"] == "warning"] and "WARNING" not in out


@pytest.mark.parametrize("lr", [1e-7, 50.0], ids=["too-low", "too-high"])
def test_a_run_stuck_at_the_baseline_warns_once_loudly(tmp_path, lr):
    result, records, out = watched_run(tmp_path, lr=lr)
    warnings = [r for r in records if r["kind"] == "warning"]
    assert len(warnings) == 1 and result.warnings == warnings
    w = warnings[0]
    assert (w["step"], w["metric"], w["baseline"]) == (8, "mlm_loss", UNIGRAM)  # 20% of 40 steps, ≥ 3 windows
    train8 = next(r for r in records if r["kind"] == "train" and r["step"] == 8)
    assert w["value"] == train8["mlm_loss"] and not train8["mlm_loss"] < UNIGRAM - 0.2
    assert w["message"].startswith(f"step 8 of 40: the train mlm_loss is {train8['mlm_loss']:.4f}, not yet below "
                                   f"{UNIGRAM - 0.2:.4f} (the unigram MLM loss {UNIGRAM:.4f} - 0.2) — the model "
                                   "has not started learning")
    assert f"lr {lr:g}, warm-up 2 steps" in w["message"] and "(40 planned)" in w["message"]
    assert out.count("WARNING") == 1 and "the model has not started learning" in out  # printed with the display off
    assert result.step == 40  # a warning, not a stop


def test_the_watch_waits_for_its_share_of_the_run_and_enough_windows():
    w = BaselineWatch("loss", 1.0, after=0.2, min_windows=3)
    assert not w.due(19, 100, 5) and not w.due(40, 100, 2) and w.due(20, 100, 3)
    assert w.passed(0.5) and not w.passed(1.0) and not w.passed(None) and not w.passed(float("nan"))
    up = BaselineWatch("acc", 0.04, mode="max", margin=0.01)
    assert up.passed(0.06) and not up.passed(0.045)


def test_a_watch_of_a_metric_the_loss_does_not_report_is_an_error(tmp_path):
    with pytest.raises(ZenError, match=r"baseline watch: 'nsp_loss' is not a train metric \(expected one of "
                                       r"loss, mlm_acc, mlm_loss, lr"):
        watched_run(tmp_path, lr=0.05, watch=BaselineWatch("nsp_loss", 0.69))


def test_a_pretraining_at_the_unigram_plateau_says_so_in_its_results(tmp_path):
    from tests.test_pretrain_cli import micro_recipe, zen

    recipe = micro_recipe(tmp_path, train={"lr": 1e-7, "max_steps": 10, "eval_every": 0, "save_every": 0})
    out = zen("pretrain", "-r", str(recipe), "--quiet")
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    baseline = results["heldout"]["baseline"]["mlm_loss"]
    [w] = results["warnings"]
    assert (w["step"], w["metric"], w["baseline"]) == (3, "mlm_loss", baseline)  # ≥ 2 of 10 steps, 3 windows
    assert "(the unigram MLM loss" in w["message"] and "the model has not started learning" in w["message"]
    assert out.count("WARNING") == 2  # while it ran (--quiet or not), and under the final tables
