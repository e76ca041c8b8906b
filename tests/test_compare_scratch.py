"""`zen finetune --compare-scratch`: the run from a pretrained model, then the task's small from-scratch model
at the same budget on the same inputs, both reported (table + OUTPUT/compare-scratch.json)."""

from __future__ import annotations

import json

from tests.conftest import REF
from tests.test_finetune_cli import error, finetune
from tests.test_tasks_tagging import write_task_data


def test_compare_scratch_trains_both_and_reports_them(tmp_path, one_thread):
    r, out = finetune(tmp_path, "ner", "--model", str(REF), "--compare-scratch", steps=2, scratch=False)
    report = json.loads((out / "compare-scratch.json").read_text(encoding="utf-8"))
    pre, scratch = report["runs"]
    assert (pre["run"], scratch["run"]) == ("pretrained", "scratch") and pre["steps"] == scratch["steps"] == 2
    assert scratch["model_dir"] == str(out / "scratch" / "model") and (out / "scratch" / "model").is_dir()
    assert "new zen2 2 × 64" in scratch["model"] and report["metric"] == "f1"
    assert report["pretrained_gain"]["test"] == pre["test"] - scratch["test"]
    # the same inputs: the scratch model reads the pretrained model's vocabulary and lexicon
    for name in ("vocab.txt", "ngram.txt"):
        assert (out / "scratch" / "model" / name).read_bytes() == (REF / name).read_bytes()
    flat = " ".join(r.output.split())
    assert "pretrained vs from scratch" in flat and "pretraining gains: dev" in flat


def test_compare_scratch_needs_a_pretrained_model(tmp_path):
    data = write_task_data(tmp_path, "ner")
    msg = error("--task", "ner", "--train", str(data), "-o", str(tmp_path / "r"), "--compare-scratch")
    assert msg.startswith("--compare-scratch:") and "--model" in msg
