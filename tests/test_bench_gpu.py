"""`zen bench gpu --tiny` end to end on a made-up corpus in the PD98 layout (nothing downloaded, no real corpus
needed): the table's rows with their numbers, the JSON report, the test scores equal to `zen evaluate`'s, the
predictions, and the pass/fail logic on made-up failing cases. Also: the library layer it is built on
(zencli.bench.gpu, zencli.jobs) imports neither the CLI nor typer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.test_pretrain_cli import error
from tests.test_workspace import write_corpus
from zencli.bench import gpu
from zencli.cli.app import app
from zencli.errors import ZenError
from zencli.jobs.workspace import Workspace

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
STEPS = ["model fp32", "model bf16", "lexicon", "pretrain", "finetune ner", "finetune cws", "predict", "total"]
NUMBER = re.compile(r"\d")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    """One `zen bench gpu --tiny` run (about half a minute on 2 cores), shared by the tests below."""
    tmp = tmp_path_factory.mktemp("bench-gpu")
    data = write_corpus(tmp / "data", sizes=(300, 40, 40)) / "pd98"
    out, extra = tmp / "out", tmp / "copy" / "report.json"
    r = runner.invoke(app, ["bench", "gpu", "--tiny", "--data", str(data), "--output", str(out), "--json", str(extra),
                            "--quiet"], catch_exceptions=False)
    return {"result": r, "data": data, "out": out, "extra": extra}


def test_the_tiny_check_runs_every_step_and_passes(tiny):
    r = tiny["result"]
    assert r.exit_code == 0, r.output
    report = json.loads((tiny["out"] / gpu.REPORT_NAME).read_text(encoding="utf-8"))
    assert json.loads(tiny["extra"].read_text(encoding="utf-8")) == report  # --json: the same report
    assert report["passed"] is True and report["failures"] == []
    assert report["settings"]["preset"] == "tiny" and report["device"]["device"] == "cpu"
    rows = {row["step"]: row for row in report["rows"]}
    assert [row["step"] for row in report["rows"]] == STEPS
    for row in report["rows"]:
        assert row["seconds"] > 0 and NUMBER.search(row["key"]), row

    # the table: one line per row with its key numbers and verdicts
    assert "zen bench gpu (tiny) on cpu: passed" in r.stdout
    for step in STEPS:
        assert step in r.stdout
    assert "FAIL" not in r.stdout and r.stdout.count("pass") >= 6

    # 1. bench model: the three encoders' tokens/s and the zen2/bert ratio, at both dtypes
    for p in ("fp32", "bf16"):
        v = rows[f"model {p}"]["values"]
        assert set(v["train_tokens_per_s"]) == set(v["infer_tokens_per_s"]) == {"zen2", "zen1", "bert"}
        assert all(x > 0 for x in [*v["train_tokens_per_s"].values(), *v["infer_tokens_per_s"].values()])
        assert v["zen2_bert_step_ratio"] > 0 and v["report"]["settings"]["dtypes"] == [p]
        assert any(not c["required"] for c in rows[f"model {p}"]["checks"])  # the ratio is a goal, not a criterion
    assert 0 <= rows["model bf16"]["values"]["bf16_mlm_loss_gap"] <= 0.02

    # 3. the pretraining learned: above twice the unigram baseline it reports itself
    pre = rows["pretrain"]["values"]
    results = json.loads((tiny["out"] / "pretrain" / "results.json").read_text(encoding="utf-8"))
    assert pre["steps"] == results["steps"] == gpu.TINY.pretrain_steps
    assert pre["baseline_masked_acc"] == results["heldout"]["baseline"]["masked_acc"]
    assert pre["heldout_masked_acc"] >= 2 * pre["baseline_masked_acc"]
    assert results["recipe"]["model"]["hidden_size"] == 64 and results["recipe"]["train"]["batch_size"] == 64

    # 4. the fine-tunings start from that model; their test scores are `zen evaluate MODEL --data test`'s
    ws = Workspace.at(tiny["out"])
    assert ws.lexicon_done() and ws.pretrain_done()
    for task, test in (("ner", "ner/test.tsv"), ("cws", "cws/test.txt")):
        assert ws.finetune_done(task)
        recipe = (ws.finetune_dir(task) / "recipe.yaml").read_text(encoding="utf-8")
        assert f"pretrained: {ws.pretrained_model}" in recipe
        e = runner.invoke(app, ["evaluate", str(ws.finetuned_model(task)), "--data", str(tiny["data"] / test),
                                "--json", "-"], catch_exceptions=False)
        scores = json.loads(e.stdout)
        row = rows[f"finetune {task}"]["values"]
        assert (row["test"]["precision"], row["test"]["recall"], row["test"]["f1"]) == (
            scores["precision"], scores["recall"], scores["f1"])
        assert row["steps"] == gpu.TINY.finetune_steps and row["test"]["f1"] >= 0.5

    # 5. prediction: one output line per input line, throughput in lines and chars
    p = rows["predict"]["values"]
    assert p["lines"] == p["output_lines"] == gpu.TINY.predict_lines
    assert len(Path(p["output"]).read_text(encoding="utf-8").splitlines()) == gpu.TINY.predict_lines
    assert p["lines_per_s"] > 0 and p["chars_per_s"] > p["lines_per_s"]


def _made_up_results(final: float | None, baseline: float = 0.04) -> dict:
    held = {"baseline": {"masked_acc": baseline}, "final": None if final is None else {"masked_acc": final}}
    return {"heldout": held}


def test_the_pass_fail_logic_flips_on_made_up_failing_cases():
    # the run: 0.039 against 0.042 for always guessing '，' — a pretraining that did not learn
    assert not gpu.pretrain_check(_made_up_results(0.039, 0.042), 2.0).passed
    assert not gpu.pretrain_check(_made_up_results(0.079), 2.0).passed
    assert gpu.pretrain_check(_made_up_results(0.08), 2.0).passed
    assert not gpu.pretrain_check(_made_up_results(None), 2.0).passed  # no held-out score: no proof it learned
    assert not gpu.pretrain_check({"heldout": None}, 2.0).passed
    assert gpu.at_least("test F1", 0.61, 0.6).passed and not gpu.at_least("test F1", 0.59, 0.6).passed
    assert not gpu.at_least("test F1", None, 0.0).passed
    bf16 = {"results": [{"bf16_accuracy": [{"mlm_loss_abs_diff": 0.1, "mlm_loss_fp32": 7.0},
                                           {"mlm_loss_abs_diff": 0.2, "mlm_loss_fp32": 7.0}]}]}
    assert gpu.bf16_check(bf16, 0.03).passed and not gpu.bf16_check(bf16, 0.02).passed
    assert not gpu.bf16_check({"results": [{"bf16_accuracy": []}]}, 0.02).passed

    # only required criteria decide; a missed goal does not fail the check
    goal = gpu.Check("zen2/bert step ≤ 1.3× (goal)", False, required=False)
    rows = [gpu.Row("model fp32", "x", 1.0, "1", checks=[goal]),
            gpu.Row("pretrain", "x", 1.0, "1", checks=[gpu.pretrain_check(_made_up_results(0.3), 2.0)])]
    assert gpu.passed(rows) and gpu.failures(rows) == []
    rows[1].checks = [gpu.pretrain_check(_made_up_results(0.041), 2.0)]
    assert not gpu.passed(rows) and gpu.failures(rows) == ["pretrain: held-out masked-char acc ≥ 2× unigram"]


def test_a_failed_criterion_prints_FAIL_and_exits_non_zero(tiny, tmp_path, monkeypatch):
    """The command's verdict on a report whose pretraining stayed at the baseline: the table says FAIL, the
    summary line names the criterion, the exit status is 1 (the report is the tiny run's, made to fail)."""
    report = json.loads((tiny["out"] / gpu.REPORT_NAME).read_text(encoding="utf-8"))
    row = next(r for r in report["rows"] if r["step"] == "pretrain")
    row["checks"] = [{**row["checks"][0], "passed": False}]
    report["passed"], report["failures"] = False, ["pretrain: held-out masked-char acc ≥ 2× unigram"]
    monkeypatch.setattr(gpu, "run", lambda settings, **kw: report)
    out = tmp_path / "report.json"
    r = runner.invoke(app, ["bench", "gpu", "--tiny", "--json", str(out)])
    assert r.exit_code == 1, r.output
    assert "on cpu: FAILED" in r.stdout and "FAIL" in r.stdout.split("pretrain", 1)[1].split("\n", 3)[0]
    assert "zen bench gpu FAILED: pretrain: held-out masked-char acc ≥ 2× unigram" in r.stdout
    assert json.loads(out.read_text(encoding="utf-8"))["passed"] is False


def _settings(monkeypatch, *args: str) -> gpu.GpuCheckSettings:
    """The settings `zen bench gpu ARGS` hands to the library (which is stopped there)."""
    seen = []

    def stop(settings, **kw):
        seen.append(settings)
        raise ZenError("stopped by the test")

    monkeypatch.setattr(gpu, "run", stop)
    runner.invoke(app, ["bench", "gpu", *args])
    return seen[0]


def test_settings_come_from_the_preset_then_the_options(monkeypatch, tmp_path):
    s = _settings(monkeypatch, "--tiny", "--pretrain-minutes", "0.2", "--min-ner-f1", "0.7", "--pretrain-set",
                  "train.lr=1e-4", "--output", str(tmp_path))
    assert s == replace(gpu.TINY, pretrain_minutes=0.2, min_ner_f1=0.7, pretrain_sets=["train.lr=1e-4"],
                        output_dir=tmp_path)
    assert _settings(monkeypatch) == gpu.GPU
    assert _settings(monkeypatch, "--device", "cuda", "--finetune-steps", "9") == replace(gpu.GPU, device="cuda",
                                                                                           finetune_steps=9)
    # the GPU defaults: the sizes and budgets
    g = gpu.GPU
    assert (g.model_size, g.model_batch, g.model_seq_len) == ("base", 32, 128)
    assert (g.pretrain_size, g.pretrain_seq_len, g.pretrain_batch, g.pretrain_minutes) == ("6x256x2", 128, 128, 3.0)
    assert g.dtype == "auto" and g.goal_minutes == 8.0 and g.min_pretrain_ratio == 2.0


def test_pretraining_settings_reach_the_recipe(tmp_path):
    """The check's sizes go into pretrain-zh-tiny on the workspace lexicon; --pretrain-set wins over them."""
    data = write_corpus(tmp_path / "data") / "pd98"
    ws = Workspace.at(tmp_path / "ws")
    for f in (ws.vocab, ws.ngram, ws.lexicon_summary):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x\n", encoding="utf-8")
    cpu = gpu.resolve_device("cpu", "gpu")
    cfg = gpu.pretrain_config(gpu.GPU, ws, data, cpu)
    m, t = cfg.model, cfg.train
    assert (m.num_hidden_layers, m.hidden_size, m.num_attention_heads, m.intermediate_size) == (6, 256, 4, 1024)
    assert (cfg.data.max_seq_len, cfg.data.dupe_factor, t.batch_size, t.warmup_steps) == (128, 6, 128, 300)
    assert (t.max_minutes, t.dtype, t.overwrite, t.lr) == (3.0, "auto", True, 1e-3)
    assert cfg.data.vocab == ws.vocab and cfg.data.corpus == [data / "raw" / "train.txt"]
    assert t.output_dir == ws.pretrain_dir
    mine = gpu.pretrain_config(replace(gpu.GPU, pretrain_sets=["train.warmup_steps=50", "model.hidden_size=128"]),
                               ws, data, cpu)
    assert mine.train.warmup_steps == 50 and mine.model.hidden_size == 128


def test_bad_input_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.delenv("ZEN_DATA", raising=False)
    monkeypatch.setenv("ZEN_CACHE_DIR", str(tmp_path / "cache"))
    out = ["--output", str(tmp_path / "out")]
    message = error("bench", "gpu", "--tiny", *out)  # no corpus anywhere: how to get it, nothing downloaded
    assert "zen data fetch pd98" in message and "--data" in message
    assert "not a directory" in error("bench", "gpu", "--tiny", "--data", str(tmp_path / "nowhere"), *out)
    assert "--pretrain-size" in error("bench", "gpu", "--tiny", "--pretrain-size", "2x64", *out)
    assert "--predict-lines" in error("bench", "gpu", "--tiny", "--predict-lines", "0", *out)
    assert "--device" in error("bench", "gpu", "--tiny", "--device", "tpu", *out)
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "--tiny" in error("bench", "gpu", *out)  # the GPU sizes on a CPU: only when asked for
    assert "no CUDA GPU" in error("bench", "gpu", "--device", "cuda", *out)
    assert not (tmp_path / "out").exists()


def test_the_library_layer_imports_neither_the_cli_nor_typer():
    code = ("import sys; import zencli.bench.gpu, zencli.jobs.lexicon, zencli.jobs.pretrain, zencli.jobs.finetune, "
            "zencli.jobs.workspace; "
            "bad = sorted(m for m in sys.modules if m.startswith('zencli.cli') or m == 'typer'); "
            "print(bad); sys.exit(1 if bad else 0)")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
