"""`--dtype auto|fp32|bf16|int8` for running a trained model: what auto picks, the one-line errors, the
model files left alone, and bf16 / int8 predictions agreeing with fp32 on a briefly trained model."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tests.test_tasks_tagging import NGRAM, SENTENCES, TINY, VOCAB, write_task_data
from zencli.cli.app import app
from zencli.errors import ZenError
from zencli.tasks.inference import load_for_inference, resolve_device
from zencli.tasks.predict import predict_examples
from zencli.train.dtype import inference_model, resolve_inference_dtype

runner = CliRunner()
CPU = torch.device("cpu")
AMX = frozenset({"avx512f", "amx_bf16", "amx_tile"})
AVX2 = frozenset({"avx2", "fma"})


def test_auto_picks_bf16_only_on_cpus_with_bf16_instructions_and_says_why():
    assert resolve_inference_dtype("auto", CPU, AMX) == ("bf16", "this CPU has amx_bf16")
    assert resolve_inference_dtype("auto", CPU, frozenset({"avx512_bf16"}))[0] == "bf16"
    chosen, why = resolve_inference_dtype("auto", CPU, AVX2)
    assert chosen == "fp32" and "no bf16" in why
    for p in ("fp32", "bf16", "int8"):  # an explicit choice is kept, with no reason to give
        assert resolve_inference_dtype(p, CPU, AVX2) == (p, "")


def test_unknown_dtype_and_device_are_one_line_errors_naming_the_option():
    with pytest.raises(ZenError, match=r"^--dtype: expected one of auto, fp32, bf16, int8, got 'fp16'$"):
        resolve_inference_dtype("fp16", CPU, key="--dtype")
    with pytest.raises(ZenError, match=r"^--device: expected auto, cpu or cuda, got 'gpu'$"):
        resolve_device("gpu")
    assert resolve_device("cpu") == CPU


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer on a machine without CUDA")
def test_cuda_without_a_gpu_is_an_error():
    with pytest.raises(ZenError, match="--device: cuda requested but torch sees no CUDA GPU"):
        resolve_device("cuda")


def test_int8_on_cuda_and_bf16_on_a_gpu_without_it_are_errors(monkeypatch):
    gpu = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Tesla T4")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    with pytest.raises(ZenError, match=r"^train.eval_dtype: int8 \(dynamic quantization\) runs on CPUs only"):
        resolve_inference_dtype("int8", gpu, key="train.eval_dtype")
    with pytest.raises(ZenError, match="bf16 is not supported by Tesla T4; use fp32"):
        resolve_inference_dtype("bf16", gpu)
    assert resolve_inference_dtype("auto", gpu) == ("fp32", "Tesla T4 has no bf16")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_inference_dtype("auto", gpu)[0] == "bf16"


def test_int8_quantizes_a_copy_and_leaves_the_model_alone():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    q = inference_model(model, "int8")
    assert q is not model and not any(isinstance(m, torch.nn.Linear) for m in q.modules())
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert inference_model(model, "bf16") is model and inference_model(model, "fp32") is model
    x = torch.randn(4, 8)
    assert torch.allclose(q(x), model(x), atol=0.05)


# --- on a briefly trained model ---------------------------------------------------------------------------

# Larger than the tagging tests' TINY model, so its linear layers hold enough weights to quantize.
SMALL = [*TINY, "model.hidden_size=64", "model.intermediate_size=128", "model.num_attention_heads=4"]


@pytest.fixture(scope="module")
def ner_model(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("dtype")
    data = write_task_data(tmp, "ner", SENTENCES * 3)
    sets = [x for s in SMALL for x in ("--set", s)]
    r = runner.invoke(app, ["finetune", "--task", "ner", "--train", str(data), "--vocab", str(VOCAB), "--ngram",
                            str(NGRAM), "-o", str(tmp / "ner"), "--max-steps", "40", "--quiet", *sets],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return tmp / "ner" / "model"


def _made_up_lines(n: int) -> list[str]:
    """Lines of the fixture sentences' words in a random order (not the training sentences)."""
    words = [w for s in SENTENCES for w, _, _ in s]
    rng = random.Random(0)
    return ["".join(rng.choice(words) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def test_bf16_and_int8_predictions_agree_with_fp32_on_99_percent_of_labels(ner_model):
    loaded = {p: load_for_inference(ner_model, device="cpu", dtype=p) for p in ("fp32", "bf16", "int8")}
    task = loaded["fp32"].task
    examples = [task.parse_input(line, "made-up", i + 1) for i, line in enumerate(_made_up_lines(200))]
    labels = {p: [x for labels in predict_examples(m, examples) for x in labels] for p, m in loaded.items()}
    n = len(labels["fp32"])
    assert n > 1000
    # bf16 prediction holds the Linear weights in bf16 (cast once, zencli.model.inference)
    assert loaded["bf16"].model.encoder.pooler.dense.weight.dtype == torch.bfloat16
    for p in ("bf16", "int8"):
        same = sum(a == b for a, b in zip(labels["fp32"], labels[p])) / n
        assert same >= 0.99, f"{p}: {same:.4f} of {n} labels agree with fp32"


def test_predict_and_evaluate_take_dtype_and_never_change_the_model_files(ner_model, tmp_path):
    digest = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in ner_model.iterdir()}
    r = runner.invoke(app, ["predict", str(ner_model), "--dtype", "int8"], input="北京大学的学生\n")
    assert r.exit_code == 0, r.output
    assert r.stdout.count("\n") == 1
    r = runner.invoke(app, ["predict", str(ner_model)], input="北京大学的学生\n")  # auto: one line says what
    assert r.exit_code == 0 and "dtype: " in r.stderr and "(auto: " in r.stderr, r.output
    data = write_task_data(tmp_path, "ner")
    r = runner.invoke(app, ["evaluate", str(ner_model), "--data", str(data), "--dtype", "bf16", "--json", "-"])
    assert r.exit_code == 0, r.output
    assert '"inference_dtype": "bf16"' in r.stdout
    r = runner.invoke(app, ["evaluate", str(ner_model), "--data", str(data), "--dtype", "fp16"])
    assert isinstance(r.exception, ZenError)
    assert str(r.exception) == "--dtype: expected one of auto, fp32, bf16, int8, got 'fp16'"
    assert {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in ner_model.iterdir()} == digest


def test_bench_predict_times_each_dtype_end_to_end_and_splits_the_phases(ner_model, tmp_path):
    from zencli.bench.predict import run

    data = tmp_path / "in.txt"
    data.write_text("".join(line + "\n" for line in _made_up_lines(30)), encoding="utf-8")
    report = run(ner_model, data, dtypes=["fp32", "int8"], size="2x32x1", max_lines=20, rounds=1, warmup=0,
                 profile=True)
    assert report["settings"]["lines"] == 20 and report["settings"]["encoder"]["layers"] == 2
    assert [r["dtype"] for r in report["rows"]] == ["fp32", "int8"]
    for r in report["rows"]:
        assert r["chars_per_s"] > 0 and 0 < r["encoder_share"] < 1
    phases = report["phases"]["fp32"]
    assert phases["encoder"] > 0 and phases["windows + n-gram matching"] > 0 and phases["formatting"] > 0
    assert sum(v for k, v in phases.items() if k != "total") == pytest.approx(phases["total"], rel=1e-6)
    with pytest.raises(ZenError, match="--dtype"):
        run(ner_model, data, dtypes=["fp16"])


def test_train_eval_dtype_sets_the_dtype_of_training_evaluations(tmp_path):
    data = write_task_data(tmp_path, "cws")
    sets = [x for s in TINY for x in ("--set", s)]
    args = ["finetune", "--task", "cws", "--train", str(data), "--dev", str(data), "--test", str(data), "--vocab",
            str(VOCAB), "--ngram", str(NGRAM), "-o", str(tmp_path / "cws"), "--max-steps", "4", "--quiet", *sets]
    r = runner.invoke(app, [*args, "--set", "train.eval_dtype=fp16"])
    assert isinstance(r.exception, ZenError) and "train.eval_dtype" in str(r.exception)
    r = runner.invoke(app, [*args, "--set", "train.eval_dtype=int8"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    for split in ("dev", "test"):
        scores = (tmp_path / "cws" / "model" / f"{split}_scores.json").read_text(encoding="utf-8")
        assert '"inference_dtype": "int8"' in scores
