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
                 batch=2, seq_len=16, slots=8, ngram_rows=200, vocab_size=300, threads=1, seed=0, dtype="bf16",
                 profile=True)
    assert report["settings"]["dtypes"] == ["bf16"]
    prof = report["results"][0]["profile"]
    assert set(prof) == {"zen zen2 bf16", "zen bert bf16"}
    ops = {o["op"] for o in prof["zen zen2 bf16"]}
    assert any("addmm" in o or "linear" in o or "mm" in o for o in ops)
    assert 0.99 < sum(o["share"] for o in prof["zen zen2 bf16"]) <= 1.0 or len(prof["zen zen2 bf16"]) == 10
    assert all(m["dtype"] == "bf16" and m["tokens_per_s"] > 0 for m in report["results"][0]["infer"])
    with pytest.raises(ZenError, match="--dtype"):
        run(sizes=[parse_size("1x64x1")], released=None, hf=False, modes=["infer"], steps=1, warmup=0, batch=2,
            seq_len=16, slots=8, ngram_rows=200, vocab_size=300, threads=1, seed=0, dtype="fp8")


def test_onnx_engine_rows_match_torch_outputs(tmp_path) -> None:
    import numpy as np
    import torch

    from benchmarks.peers import ort_encoders
    from zencli.bench.encoder_batches import encoder_inputs, make_batches, synthetic_chars
    from zencli.bench.model import Variant, model_config
    from zencli.model.pretraining import ZenForPreTraining

    report = run(sizes=[parse_size("1x64x1")], released=None, hf=False, modes=["infer"], steps=1, warmup=0,
                 batch=2, seq_len=16, slots=8, ngram_rows=200, vocab_size=300, threads=1, seed=0,
                 dtype="fp32,int8", engines=["torch", "onnx"])
    row = report["results"][0]
    assert {(m["model"], m["dtype"]) for m in row["infer"]} >= {("zen zen2 ort", "fp32"), ("zen zen2 ort", "int8")}
    assert {"zen zen2 ort fp32 vs zen zen2 fp32", "zen zen2 ort int8 vs zen zen2 fp32"} <= set(row["infer_ratios"])
    assert report["settings"]["engines"] == ["torch", "onnx"] and report["settings"]["onnxruntime"]

    # the graph computes what the torch encoder does, at another batch size and length than it was traced at
    torch.manual_seed(0)
    model = ZenForPreTraining(model_config(parse_size("1x64x1"), "zen2", vocab_size=300, ngram_rows=200))
    v = Variant("zen zen2", model, True, torch.device("cpu"))
    trace, other = (make_batches(1, batch=b, seq_len=n, slots=8, ngram_rows=200, vocab_size=300,
                                 chars=synthetic_chars(200, 300, np.random.default_rng(s)), matcher=None,
                                 ngram_rate=0.4, seed=s)[0] for b, n, s in ((2, 16, 0), (3, 12, 1)))
    ort = ort_encoders({"zen zen2": v}, trace, 16, tmp_path, 1)["zen zen2 ort"]
    model.eval()
    with torch.no_grad():
        want = model.bert(other["input_ids"], **encoder_inputs(other, True)).sequence_output.numpy()
    assert abs(ort.outputs(other, "fp32") - want).max() < 1e-4
    assert abs(ort.outputs(other, "int8") - want).max() < 0.5  # int8 weights: close, not equal

    with pytest.raises(ZenError, match="--engines"):
        run(sizes=[parse_size("1x64x1")], released=None, hf=False, modes=["infer"], steps=1, warmup=0, batch=2,
            seq_len=16, slots=8, ngram_rows=200, vocab_size=300, threads=1, seed=0, engines=["tvm"])
