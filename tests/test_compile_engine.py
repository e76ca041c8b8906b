"""`--engine torch-compile`: the encoder compiled by torch.compile predicts what eager torch does (tiny NER
model with a CRF, lines windowed many times and lines without n-grams), `zen bench predict` times it, and
what it cannot run is a one-line error."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

from tests.conftest import write
from tests.test_onnx_engine import TAGGING_LINES
from tests.test_tasks_tagging import tiny_model
from zencli.bench.predict import run as bench_predict
from zencli.cli.app import app
from zencli.tasks.model_dir import save_task_model

runner = CliRunner()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compile")
    _, model, inputs, spec, _ = tiny_model(tmp, "ner", decoder="crf")
    return save_task_model(model, inputs, spec, tmp / "model")


def test_compiled_predictions_equal_eager(model_dir, tmp_path):
    data = write(tmp_path / "in.txt", TAGGING_LINES)

    def predict(engine: str) -> str:
        r = runner.invoke(app, ["predict", str(model_dir), "--engine", engine, "--dtype", "fp32", "--input", str(data),
                                "--format", "conll"], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return r.stdout

    eager = predict("torch")
    assert eager.count("\n") > 40 and predict("torch-compile") == eager


def test_bench_predict_times_the_compiled_engine(model_dir, tmp_path):
    data = write(tmp_path / "in.txt", TAGGING_LINES)
    report = bench_predict(model_dir, data, dtypes=["fp32", "int8"], engines=["torch", "torch-compile"], rounds=1,
                           warmup=1)
    rows = {(r["engine"], r["dtype"]) for r in report["rows"]}
    assert rows == {("torch", "fp32"), ("torch", "int8"), ("torch-compile", "fp32")}  # no int8 compiled
    assert all(r["chars_per_s"] > 0 and 0 < r["encoder_share"] <= 1 for r in report["rows"])


def test_what_the_compiled_engine_cannot_run_is_one_line(model_dir, monkeypatch):
    import torch

    from zencli.tasks.engine import load_engine

    compiled = load_engine(model_dir, engine="torch-compile", device="cpu", dtype="fp32").model.encoder
    assert isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule)  # compiled on its first batch
    r = runner.invoke(app, ["predict", str(model_dir), "--engine", "torch-compile", "--dtype", "int8"], input="北京\n")
    assert "--engine torch-compile: runs fp32 or bf16" in str(r.exception)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    r = runner.invoke(app, ["predict", str(model_dir), "--engine", "torch-compile", "--dtype", "fp32"], input="北京\n")
    assert "needs a C++ compiler (g++ or clang++)" in str(r.exception)
