"""ONNX export and the ONNX Runtime engine (`zen model export --format onnx`, `zen predict --engine onnx`), at tiny
size: the graph's scores equal torch's within 1e-4 at any batch size, length and slot count; `zen predict` writes
the same output with either engine (long lines read in windows, lines without n-grams); the int8 export runs and
mostly agrees; the export mode's rewrites compute the same numbers; a missing onnxruntime is a one-line error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tests.conftest import write
from tests.test_tasks_classification import keyword_lines, pair_lines, tiny_task
from tests.test_tasks_mrc import ANSWER, QUESTION, train_file
from tests.test_tasks_tagging import LONG, tiny_model
from zencli.cli.app import app, main
from zencli.data.collate import collate
from zencli.model.export_mode import exporting
from zencli.model.relative_attention import position_tables, rotation_tables, skew, skew_by_gather
from zencli.tasks.engine import FILES, MODEL_INPUTS, ONNX_CONFIG, export_onnx, load_onnx
from zencli.tasks.model_dir import load_task_model, save_task_model

runner = CliRunner()

# A normal line, an empty one, one windowed many times (max_seq_len 16), one whose chars match no n-gram, a space.
TAGGING_LINES = ["北京大学的学生在图书馆学习", "", LONG, "abc xyz", "他在 北京"]
TEXT_LINES = ["北京大学的学生在图书馆学习", "", LONG, "abc xyz", "新政策"]
PAIR_LINES = ["北京大学的学生\t在图书馆学习", LONG + "\t" + LONG[:20], "abc\t北京"]
MRC_LINES = [json.dumps({"question": QUESTION, "context": c}, ensure_ascii=False)
             for c in ("他在" + ANSWER + "学习", LONG + ANSWER + LONG, "abc")]

MODELS = {  # name: (task, how to build it, input lines, --format that compares exactly)
    "ner-crf": ("ner", TAGGING_LINES, "conll"),
    "cws-zen1": ("cws", TAGGING_LINES, "text"),
    "pos-bert": ("pos", TAGGING_LINES, "text"),
    "cws-chte": ("cws", TAGGING_LINES, "text"),
    "pos-relproj": ("pos", TAGGING_LINES, "text"),
    "sa-bag": ("sa", TEXT_LINES, "label"),
    "spm": ("spm", PAIR_LINES, "label"),
    "mrc": ("mrc", MRC_LINES, "json"),
}


def _build(tmp: Path, name: str):
    if name == "ner-crf":
        return tiny_model(tmp, "ner", decoder="crf")
    if name == "cws-zen1":
        return tiny_model(tmp, "cws", encoder="zen1")
    if name == "pos-bert":
        return tiny_model(tmp, "pos", encoder="bert")
    if name == "cws-chte":
        return tiny_model(tmp, "cws", encoder="chte")
    if name == "pos-relproj":
        return tiny_model(tmp, "pos", "model.relative_projection=true")
    if name == "sa-bag":
        t, model, inputs, spec, gold = tiny_task(tmp, "sa", write(tmp / "train.tsv", keyword_lines(20, 0)),
                                                 "task.ngram_bag=true")
        with torch.no_grad():  # a bag that adds something (it starts at zero), some features unseen (idf 0)
            model.head.bag.table.weight.normal_(0, 0.5)
            model.head.bag.idf.uniform_(-1.0, 3.0).clamp_(min=0.0)
            model.head.bag.bias.normal_(0, 0.5)
        return t, model, inputs, spec, gold
    if name == "spm":
        return tiny_task(tmp, "spm", write(tmp / "train.tsv", pair_lines(10, 0)))
    return tiny_task(tmp, "mrc", train_file(tmp))


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """Per model kind: (the torch model directory, its ONNX export folder)."""
    out = {}
    for name in MODELS:
        tmp = tmp_path_factory.mktemp(name)
        _, model, inputs, spec, _ = _build(tmp, name)
        model_dir = save_task_model(model, inputs, spec, tmp / "model")
        out[name] = (model_dir, export_onnx(model_dir, tmp / "onnx"))
    return out


def _batches(loaded, lines: list[str]):
    """Batches of 1, 2 and 3 windows of different lengths, as the task's predict makes them."""
    inputs = loaded.inputs
    sentences = [list(x) for x in lines if x] + [list(LONG[:60])]
    for size in (1, 2, 3):
        part = sentences[-size:]
        room = inputs.max_seq_len - 2
        records = [r[0] for r in inputs.char_windows(part, [[(0, min(len(s), room))] for s in part])]
        yield {k: v for k, v in collate(records, pad_id=inputs.pad_id).items() if k in MODEL_INPUTS}
    records = inputs.char_windows([list("abc")], [[(0, 3)]])[0]  # no n-gram matched: no slot at all (M = 0)
    yield {k: v for k, v in collate(records, pad_id=inputs.pad_id).items() if k in MODEL_INPUTS}


@pytest.mark.parametrize("name", list(MODELS))
def test_onnx_scores_equal_torch_at_any_batch_size_and_length(exported, name):
    model_dir, onnx_dir = exported[name]
    torch_model, onnx_model = load_task_model(model_dir), load_onnx(onnx_dir)
    config = json.loads((onnx_dir / ONNX_CONFIG).read_text(encoding="utf-8"))
    assert config["opset"] == 17 and set(config["files"]) == {"fp32", "int8"}
    assert all(axes[0] == "batch" for axes in config["inputs"].values())
    shapes = set()
    for batch in _batches(torch_model, TAGGING_LINES + ["他", "abc"]):
        with torch.no_grad():
            expected = torch_model.model.outputs(batch)
        got = onnx_model.model.outputs(batch)  # one loaded graph for every shape
        for e, g in zip(expected, got):
            assert e.shape == g.shape
            assert (e.float() - g).abs().max() < 1e-4
        shapes.add(tuple(batch["input_ids"].shape))
    assert len(shapes) >= 3


def _predict(model: Path, lines: list[str], *args: str) -> list[str]:
    r = runner.invoke(app, ["predict", str(model), *args], input="\n".join(lines).encode("utf-8"),
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout.split("\n")[:-1]


@pytest.mark.parametrize("name", ["ner-crf", "cws-chte", "sa-bag", "spm", "mrc"])
def test_zen_predict_writes_the_same_with_either_engine(exported, name):
    model_dir, onnx_dir = exported[name]
    _, lines, fmt = MODELS[name]
    expected = _predict(model_dir, lines, "--format", fmt, "--dtype", "fp32")
    assert _predict(onnx_dir, lines, "--engine", "onnx", "--format", fmt) == expected
    assert len([x for x in expected if x]) >= 2


def test_the_int8_export_loads_and_mostly_agrees(exported):
    model_dir, onnx_dir = exported["ner-crf"]
    import onnx

    ops = {n.op_type for n in onnx.load(str(onnx_dir / FILES["int8"])).graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops  # int8 weights, activations quantized per call
    fp32 = _predict(onnx_dir, TAGGING_LINES, "--engine", "onnx", "--format", "conll")
    int8 = _predict(onnx_dir, TAGGING_LINES, "--engine", "onnx", "--format", "conll", "--dtype", "int8")
    assert len(int8) == len(fp32)
    assert sum(a == b for a, b in zip(fp32, int8)) >= 0.8 * len(fp32)
    assert load_onnx(onnx_dir, dtype="int8").dtype == "int8"


def test_zen_evaluate_scores_the_same_with_either_engine(exported, tmp_path):
    model_dir, onnx_dir = exported["sa-bag"]
    data = write(tmp_path / "dev.tsv", keyword_lines(12, 5))

    def scores(*args: str) -> dict:
        r = runner.invoke(app, ["evaluate", *args, "--data", str(data), "--json", "-"], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    torch_scores = scores(str(model_dir), "--dtype", "fp32")
    onnx_scores = scores(str(onnx_dir), "--engine", "onnx")
    assert onnx_scores["total"] == torch_scores["total"] == 12
    for key in ("main_score", "accuracy", "macro_f1", "correct"):
        assert onnx_scores[key] == torch_scores[key], key
    int8 = scores(str(onnx_dir), "--engine", "onnx", "--dtype", "int8")
    assert int8["total"] == 12 and 0.0 <= int8["main_score"] <= 1.0
    r = runner.invoke(app, ["evaluate", "--task", "sa", "--gold", str(data), "--pred", str(data), "--engine", "onnx"])
    assert "--engine goes with MODEL --data FILE" in str(r.exception)


def test_engine_errors_are_one_line(exported, tmp_path):
    model_dir, onnx_dir = exported["ner-crf"]
    r = runner.invoke(app, ["predict", str(model_dir), "--engine", "onnx"], input=b"x")
    assert "not an ONNX export" in str(r.exception) and "zen model export --format onnx" in str(r.exception)
    r = runner.invoke(app, ["predict", str(onnx_dir), "--engine", "onnx", "--dtype", "bf16"], input=b"x")
    assert "fp32 or int8" in str(r.exception)
    r = runner.invoke(app, ["predict", str(onnx_dir), "--engine", "tensorrt"], input=b"x")
    assert "--engine: expected torch, torch-compile or onnx" in str(r.exception)
    r = runner.invoke(app, ["model", "export", str(model_dir), "-o", str(tmp_path / "x"), "--format", "tflite"])
    assert "--format: expected released or onnx" in str(r.exception)
    export_onnx(model_dir, tmp_path / "fp32-only", int8=False)
    with pytest.raises(Exception, match=r"no int8 model in this export"):
        load_onnx(tmp_path / "fp32-only", dtype="int8")


@pytest.mark.parametrize("argv", [["predict", "ONNX", "--engine", "onnx"], ["model", "export", "MODEL", "-o", "OUT",
                                                                            "--format", "onnx"]])
def test_without_onnxruntime_the_error_is_one_line_naming_the_extra(exported, tmp_path, monkeypatch, capsys, argv):
    model_dir, onnx_dir = exported["ner-crf"]
    paths = {"ONNX": str(onnx_dir), "MODEL": str(model_dir), "OUT": str(tmp_path / "out")}
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` raises ImportError
    monkeypatch.setattr(sys, "argv", ["zen", *(paths.get(a, a) for a in argv)])
    monkeypatch.setattr(sys, "stdin", open(write(tmp_path / "in.txt", ["北京"]), encoding="utf-8"))
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert "onnxruntime" in err and "pip install 'zencli[onnx]'" in err


def test_the_export_cli_writes_what_predict_needs(exported, tmp_path):
    model_dir, _ = exported["sa-bag"]
    r = runner.invoke(app, ["model", "export", str(model_dir), "-o", str(tmp_path / "x"), "--format", "onnx",
                            "--no-int8"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    names = {p.name for p in (tmp_path / "x").iterdir()}
    assert {"model.onnx", "onnx.json", "head.safetensors", "task.json", "vocab.txt", "ngram.txt"} <= names
    assert "model.int8.onnx" not in names and "model.safetensors" not in names


# --- the export mode's rewrites: the same numbers as the eager path -----------------------------------------

def test_export_mode_rewrites_compute_the_same_numbers():
    x = torch.randn(2, 3, 7, 13)  # [..., L, 2L−1]
    assert torch.equal(skew_by_gather(x), skew(x))
    with exporting(32):
        for length in (1, 7, 32):
            for a, b in zip(position_tables(length, 8), rotation_tables(length, 8)):
                assert torch.equal(a, b)


@pytest.mark.parametrize("extra", [(), ("model.relative_projection=true",)])
def test_a_model_in_export_mode_gives_the_eager_outputs(tmp_path, extra):
    """No value-dependent shortcut (mask of no padding, trimmed and packed slots) and the sliced tables:
    the same scores, to float rounding."""
    _, model, inputs, _, gold = tiny_model(tmp_path, "ner", *extra, decoder="crf")
    sentences = [s.chars[:14] for s in gold.examples[:3]]
    records = [r[0] for r in inputs.char_windows(sentences, [[(0, len(s))] for s in sentences])]
    batch = collate(records, pad_id=inputs.pad_id)
    with torch.no_grad():
        eager = model.outputs(batch)[0]
        with exporting(inputs.max_seq_len):
            traced_path = model.outputs(batch)[0]
    assert (eager - traced_path).abs().max() < 1e-5


def test_bench_predict_times_torch_and_onnx_in_one_run(exported, tmp_path):
    from zencli.bench.predict import run

    model_dir, _ = exported["ner-crf"]
    data = write(tmp_path / "in.txt", TAGGING_LINES * 3)
    report = run(model_dir, data, dtypes=["fp32", "bf16", "int8"], engines=["torch", "onnx"], size="2x32x1",
                 rounds=1, warmup=0, profile=True)
    assert [(r["engine"], r["dtype"]) for r in report["rows"]] == [
        ("torch", "fp32"), ("torch", "bf16"), ("torch", "int8"), ("onnx", "fp32"), ("onnx", "int8")]
    for r in report["rows"]:
        assert r["chars_per_s"] > 0 and 0 < r["encoder_share"] < 1 and r["speed_vs_fp32"] > 0
    assert report["phases"]["onnx fp32"]["encoder"] > 0  # the ONNX Runtime call
    assert report["settings"]["engines"] == ["torch", "onnx"]
    with pytest.raises(Exception, match="--engine"):
        run(model_dir, data, engines=["tvm"])
