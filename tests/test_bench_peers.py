"""benchmarks/peers.py without peers installed: zen's own encoders, the ratios, and the one-line errors."""

from __future__ import annotations

import pytest

from benchmarks.peers import app as peers_app
from benchmarks.peers import load_released, run
from zencli.bench.model import parse_size
from zencli.errors import ZenError


def test_run_times_zen_encoders_and_reports_ratios() -> None:
    report = run(sizes=[parse_size("1x64x1")], released=None, hf=False, modes=["infer", "train"], steps=1, warmup=0,
                 batch=2, seq_len=16, slots=8, ngram_rows=200, vocab_size=300, threads=1, seed=0,
                 dtype="fp32")
    row = report["results"][0]
    for mode in ("infer", "train"):
        assert {m["model"] for m in row[mode]} == {"zen zen2", "zen bert"}
        assert all(m["tokens_per_s"] > 0 for m in row[mode])
        assert set(row[mode + "_ratios"]) == {"zen2 vs zen bert, fp32"}
    assert report["settings"]["clock"] == "cpu"


def test_dtype_axis_times_int8_for_zen_inference_only() -> None:
    report = run(sizes=[parse_size("1x64x1")], released=None, hf=False, modes=["infer", "train"], steps=1, warmup=0,
                 batch=2, seq_len=16, slots=8, ngram_rows=200, vocab_size=300, threads=1, seed=0)
    assert report["settings"]["dtypes"] == ["fp32", "bf16", "int8"]  # the CPU default
    row = report["results"][0]
    infer = {(m["model"], m["dtype"]) for m in row["infer"]}
    assert infer == {(n, p) for n in ("zen zen2", "zen bert") for p in ("fp32", "bf16", "int8")}
    assert {m["dtype"] for m in row["train"]} == {"fp32", "bf16"}
    assert "zen2 vs zen bert, int8" in row["infer_ratios"] and "zen2 vs zen bert, int8" not in row["train_ratios"]


def test_released_folder_without_the_released_code_is_a_one_line_error(tmp_path) -> None:
    with pytest.raises(ZenError, match="ZEN2/modeling.py"):
        load_released(tmp_path)


def test_cli_rejects_unknown_mode() -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(peers_app, ["--modes", "fly", "--sizes", "1x64x1"])
    assert isinstance(result.exception, ZenError)  # main() prints it as one line, exit 2
    assert "--modes" in str(result.exception)


def test_bf16_autocast_and_bad_dtype() -> None:
    report = run(sizes=[parse_size("1x64x1")], released=None, hf=False, modes=["infer"], steps=1, warmup=0,
                 batch=2, seq_len=16, slots=8, ngram_rows=200, vocab_size=300, threads=1, seed=0, dtype="bf16")
    assert report["settings"]["dtypes"] == ["bf16"]
    assert all(m["dtype"] == "bf16" and m["tokens_per_s"] > 0 for m in report["results"][0]["infer"])
    with pytest.raises(ZenError, match="--dtype"):
        run(sizes=[parse_size("1x64x1")], released=None, hf=False, modes=["infer"], steps=1, warmup=0, batch=2,
            seq_len=16, slots=8, ngram_rows=200, vocab_size=300, threads=1, seed=0, dtype="fp8")
