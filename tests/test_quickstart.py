"""`zen quickstart` end to end on a tiny made-up corpus ($ZEN_DATA, nothing downloaded) under a tiny time
budget: every step's outputs, the summary and quickstart.json, the bare commands continuing from its
workspace, skipping finished steps on a second run and redoing an unfinished one from its checkpoint."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import DATA, needs_data
from tests.test_workspace import write_corpus
from zencli.cli.app import app
from zencli.errors import ZenError
from zencli.jobs.quickstart import SENTENCES
from zencli.jobs.workspace import Workspace, budget

runner = CliRunner()

STEPS = ["data", "lexicon", "pretrain", "finetune", "evaluate", "predict"]
SETS = ["--pretrain-set", "train.log_every=10", "--finetune-set", "train.batch_size=16"]


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict[str, str]:
    root = write_corpus(tmp_path / "data")
    values = {"ZEN_DATA": str(root), "ZEN_CACHE_DIR": str(tmp_path / "cache")}
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("ZEN_WORKDIR", raising=False)
    return values


def _status(summary: dict) -> dict[str, str]:
    return {s["name"]: s["status"] for s in summary["steps"]}


def test_budget_split():
    b = budget(15)
    assert b["pretrain_minutes"] == 6.75 and b["finetune_minutes"] == 3.75
    assert math.isclose(b["pretrain_minutes"] + b["finetune_minutes"] + b["other_minutes"], 15)
    assert budget(2)["pretrain_minutes"] == 0.9


def test_quickstart_runs_the_chain_then_skips_finished_steps(tmp_path, env):
    ws = Workspace.at(tmp_path / "ws")
    # the real defaults (tiny ZEN 2.0 recipe, NER recipe) under a 0.3-minute budget: 8 s of pretraining,
    # 4.5 s of fine-tuning
    r = runner.invoke(app, ["quickstart", "--minutes", "0.3", "--workdir", str(ws.root), "--quiet", *SETS],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    summary = json.loads(ws.quickstart_json.read_text(encoding="utf-8"))
    assert [s["name"] for s in summary["steps"]] == STEPS
    assert set(_status(summary).values()) == {"ran"}
    assert summary["budget"] == budget(0.3)

    # each step's outputs, where the commands look for them
    assert ws.lexicon_done() and summary["lexicon"]["ngrams"] == len(ws.ngram.read_text(encoding="utf-8").splitlines())
    assert ws.pretrain_done() and ws.finetune_done("ner")
    pre = summary["pretrain"]
    results = json.loads((ws.pretrain_dir / "results.json").read_text(encoding="utf-8"))
    assert pre["steps"] == results["steps"] >= 1 and pre["loss_end"] == results["last_train_record"]["loss"]
    assert pre["heldout_mlm_loss_start"] > pre["heldout_mlm_loss_end"]  # it learned something
    assert pre["seconds_per_step"] > 0
    run = json.loads((ws.pretrain_dir / "run.json").read_text(encoding="utf-8"))
    assert run["settings"]["max_minutes"] == budget(0.3)["pretrain_minutes"]
    assert run["settings"]["lr"] == 1e-3 and run["settings"]["warmup_steps"] == 300  # the tiny recipe's
    assert run["settings"]["log_every"] == 10  # --pretrain-set
    tuned = json.loads((ws.finetune_dir("ner") / "run.json").read_text(encoding="utf-8"))["settings"]
    assert tuned["batch_size"] == 16 and tuned["lr"] == 1e-3  # --finetune-set; the rate for a pretrained model
    assert tuned["max_minutes"] == budget(0.3)["finetune_minutes"]
    recipe = (ws.finetune_dir("ner") / "recipe.yaml").read_text(encoding="utf-8")
    assert f"pretrained: {ws.pretrained_model}" in recipe and "test: null" in recipe
    test = json.loads((ws.finetuned_model("ner") / "test_scores.json").read_text(encoding="utf-8"))
    ner = summary["ner_test"]
    assert (ner["precision"], ner["recall"], ner["f1"]) == (test["precision"], test["recall"], test["f1"])
    assert test["gold_file"].endswith("ner/test.tsv") and 0 <= ner["f1"] <= 1
    predictions = (ws.quickstart_dir / "predictions.txt").read_text(encoding="utf-8").splitlines()
    assert len(predictions) == len(SENTENCES) == len(summary["predictions"])
    assert "zen quickstart" in r.output and "the same, step by step" in r.output

    # the bare command continues from the workspace: predict with no MODEL uses the fine-tuned NER model
    r = runner.invoke(app, ["predict", "--workdir", str(ws.root)], input="".join(s + "\n" for s in SENTENCES))
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == predictions

    # a second run, as a real process: finished steps are skipped and keep their numbers and times
    p = subprocess.run([sys.executable, "-m", "zencli", "quickstart", "--minutes", "0.3", "--workdir", str(ws.root),
                        "--quiet", *SETS], cwd=tmp_path, capture_output=True, text=True, env={**os.environ, **env})
    assert p.returncode == 0, p.stderr
    again = json.loads(ws.quickstart_json.read_text(encoding="utf-8"))
    assert _status(again) == {"data": "ran", "lexicon": "skipped", "pretrain": "skipped", "finetune": "skipped",
                              "evaluate": "skipped", "predict": "ran"}
    first = {s["name"]: s for s in summary["steps"]}
    for s in again["steps"]:
        if s["status"] == "skipped":
            assert s["ran_seconds"] == first[s["name"]]["seconds"]
    for key in ("lexicon", "pretrain", "finetune", "ner_test"):
        assert again[key] == summary[key]
    assert "skipped" in p.stdout

    # another dtype: test is scored again in it (scores of another dtype are not reused)
    r = runner.invoke(app, ["quickstart", "--minutes", "0.3", "--workdir", str(ws.root), "--quiet", "--dtype",
                            "int8", *SETS], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    int8 = json.loads(ws.quickstart_json.read_text(encoding="utf-8"))
    assert int8["dtype"] == "int8" and _status(int8)["evaluate"] == "ran"
    steps = {st["name"]: st for st in int8["steps"]}
    assert steps["evaluate"]["command"].endswith("--dtype int8") and "predict --dtype int8" in \
        steps["predict"]["command"]
    scores = json.loads((ws.finetuned_model("ner") / "test_scores.json").read_text(encoding="utf-8"))
    assert scores["inference_dtype"] == "int8"

    # an unfinished fine-tuning (no exported model) is redone from its checkpoint, and test is scored again
    (ws.finetuned_model("ner") / "task.json").unlink()
    r = runner.invoke(app, ["quickstart", "--minutes", "0.3", "--workdir", str(ws.root), "--quiet", *SETS],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    third = json.loads(ws.quickstart_json.read_text(encoding="utf-8"))
    assert _status(third)["pretrain"] == "skipped"
    assert _status(third)["finetune"] == "ran" and _status(third)["evaluate"] == "ran"
    assert third["finetune"]["steps"] == summary["finetune"]["steps"]  # resumed at its last step: no more training
    assert third["ner_test"] == summary["ner_test"]


def test_the_commands_as_typed_chain_through_zen_work_and_the_quickstart_continues_them(tmp_path, env,
                                                                                          monkeypatch):
    """`zen lexicon`, `zen pretrain`, `zen finetune --task ner`, `zen predict < file` with nothing but a time
    limit, in a fresh directory: each finds the last one's output in ./zen-work."""
    monkeypatch.chdir(tmp_path)
    ws = Workspace.at()
    assert ws.root == Path("zen-work")
    zen = lambda *args, **kw: runner.invoke(app, list(args), catch_exceptions=False, **kw)  # noqa: E731
    chars = len((Path(env["ZEN_DATA"]) / "pd98" / "raw" / "train.txt").read_text(encoding="utf-8"))
    expected = {"lexicon": f"lexicon: {chars:,} characters of ", "pretrain": "pretrain: expected about 6 s of training",
                "finetune": "finetune ner: expected about 6 s of training (train.max_minutes 0.1"}
    for args in (["lexicon"], ["pretrain", "--max-minutes", "0.1", "--quiet"],
                 ["finetune", "--task", "ner", "--max-minutes", "0.1", "--quiet"]):
        r = zen(*args)
        assert r.exit_code == 0, r.output
        assert expected[args[0]] in r.output  # said before the step starts
    assert ws.lexicon_done() and ws.pretrain_done() and ws.finetune_done("ner")
    finetuned = (ws.finetune_dir("ner") / "recipe.yaml").read_text(encoding="utf-8")
    assert f"pretrained: {ws.pretrained_model}" in finetuned and "ner/test.tsv" in finetuned
    r = zen("predict", input="".join(s + "\n" for s in SENTENCES))
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == len(SENTENCES)
    # finished steps are not redone by the commands either
    assert "already finished" in zen("pretrain", "--max-minutes", "0.1").stdout
    assert "already fine-tuned" in zen("finetune", "--task", "ner").stdout
    # the quickstart takes over the workspace: only the data lookup and the prediction run
    r = zen("quickstart", "--quiet")
    assert r.exit_code == 0, r.output
    summary = json.loads(ws.quickstart_json.read_text(encoding="utf-8"))
    assert _status(summary) == {"data": "ran", "lexicon": "skipped", "pretrain": "skipped", "finetune": "skipped",
                                "evaluate": "skipped", "predict": "ran"}
    scores = json.loads((ws.finetuned_model("ner") / "test_scores.json").read_text(encoding="utf-8"))
    assert summary["ner_test"]["f1"] == scores["f1"]  # `zen finetune` scored test: the quickstart reads it


def test_bad_minutes_is_a_one_line_error(tmp_path, env):
    r = runner.invoke(app, ["quickstart", "--minutes", "0", "--workdir", str(tmp_path / "ws")])
    assert isinstance(r.exception, ZenError) and "--minutes" in str(r.exception)
    assert not (tmp_path / "ws").exists()


# --- the acceptance run: the default quickstart on PD98 (slow: ~12-15 minutes; ZEN_SLOW=1) ------------------

@pytest.mark.slow
@needs_data(DATA / "pd98")
def test_default_quickstart_on_pd98_fits_15_minutes_and_learns(tmp_path):
    """`zen quickstart` with no options (PD98 found through $ZEN_DATA): done within its 15 minutes, the
    pretrained model well above the unigram baseline, NER far above chance; a second run only checks."""
    import time

    env = {**os.environ, "ZEN_DATA": str(DATA), "ZEN_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("ZEN_WORKDIR", None)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "zencli", "quickstart", "--quiet"], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    assert p.returncode == 0, p.stderr[-2000:]
    summary = json.loads((tmp_path / "zen-work" / "quickstart.json").read_text(encoding="utf-8"))
    times = ", ".join(f"{s['name']} {s['seconds']:.0f} s" for s in summary["steps"])
    print(f"quickstart on PD98: {wall:.0f} s; {times}; NER test F1 {summary['ner_test']['f1']:.4f}")
    assert wall <= 15 * 60
    assert summary["lexicon"]["ngrams"] > 10_000
    pre = summary["pretrain"]
    assert pre["heldout_masked_acc"] > 2 * pre["baseline_masked_acc"] and pre["loss_end"] < pre["loss_start"] - 1
    assert summary["ner_test"]["f1"] > 0.6
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "zencli", "quickstart", "--quiet"], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0 and time.perf_counter() - t0 < 60, p.stderr[-2000:]
