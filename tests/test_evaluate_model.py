"""`zen evaluate MODEL --data FILE` end to end: for a tiny model of each task family trained with
`zen finetune`, the scores equal those of `zen evaluate --task T --gold FILE --pred P` on the model's
`zen predict` output (label list, score list, CMRC answer object, SIGHAN lines); `zen predict` keeps one
output line per input line (empty and very long lines included); unseen gold labels are reported and
scored as errors; argument errors are one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import REF, write
from tests.test_tasks_classification import keyword_lines, pair_lines
from tests.test_tasks_mrc import mrc_lines
from tests.test_tasks_ranking import qa_lines
from tests.test_tasks_tagging import NGRAM, TINY, VOCAB, write_task_data
from zencli.cli.app import app
from zencli.errors import ZenError

runner = CliRunner()


# Per task: training lines, dev lines (with one input much longer than a 16-token window), extra settings.
LONG_TEXT = "北京大学的学生在图书馆学习新政策" * 6  # 96 chars
# Built only where the fixture vocabulary exists (the made-up texts draw their characters from it).
DATA = {} if not REF.is_dir() else {
    "sa": (keyword_lines(40, 0), [*keyword_lines(12, 1), f"1\t很{LONG_TEXT}"], "tsv"),
    "spm": (pair_lines(40, 0), [*pair_lines(12, 1), f"中国\t{LONG_TEXT}\t0"], "tsv"),
    "qa": (qa_lines(10, 0), [*qa_lines(4, 1), f"q-long\t在哪\t{LONG_TEXT}\t1", "q-long\t在哪\t中国\t0"], "tsv"),
    "mrc": (mrc_lines(30, 0), mrc_lines(8, 1, lengths=(20, 40)), "jsonl"),
}


def _sets(sets: list[str]) -> list[str]:
    return [x for s in sets for x in ("--set", s)]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """task → (model directory, dev file), each trained for a few steps with `zen finetune`."""
    tmp = tmp_path_factory.mktemp("evaluate-model")
    out = {}
    for task, (train, dev, ext) in DATA.items():
        train_path = write(tmp / f"{task}-train.{ext}", train)
        dev_path = write(tmp / f"{task}-dev.{ext}", dev)
        r = runner.invoke(app, ["finetune", "--task", task, "--train", str(train_path), "--dev", str(dev_path),
                                "--vocab", str(VOCAB), "--ngram", str(NGRAM), "-o", str(tmp / task), "--max-steps",
                                "12", "--quiet", *_sets(TINY)], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        out[task] = (tmp / task / "model", dev_path)
    data = write_task_data(tmp, "cws")
    r = runner.invoke(app, ["finetune", "--task", "cws", "--train", str(data), "--vocab", str(VOCAB), "--ngram",
                            str(NGRAM), "-o", str(tmp / "cws"), "--max-steps", "8", "--quiet", *_sets(TINY)],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out["cws"] = (tmp / "cws" / "model", data)
    return out


def scores(*args: str) -> dict:
    r = runner.invoke(app, ["evaluate", *args, "--json", "-"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def predict(model: Path, lines: list[str], *args: str) -> list[str]:
    r = runner.invoke(app, ["predict", str(model), *args], input="\n".join(lines).encode("utf-8"),
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout.split("\n")[:-1]


def prediction_inputs(task: str, dev: Path) -> list[str]:
    """The unlabelled inputs of a gold file, one `zen predict` line each."""
    lines = [x for x in dev.read_text(encoding="utf-8").splitlines() if x]
    if task == "sa":
        return [x.split("\t", 1)[1] for x in lines]
    if task == "spm":
        return ["\t".join(x.split("\t")[:2]) for x in lines]
    if task == "qa":
        return ["\t".join(x.split("\t")[1:3]) for x in lines]
    if task == "cws":
        return [x.replace(" ", "") for x in lines]
    return lines  # mrc: the gold JSON lines themselves (answers are ignored)


def prediction_file(task: str, output: list[str], path: Path) -> Path:
    if task == "mrc":
        answers = {d["id"]: d["answer"] for d in map(json.loads, output)}
        path.write_text(json.dumps(answers, ensure_ascii=False), encoding="utf-8")
        return path
    return write(path, output)


FORMAT = {"sa": "label", "spm": "label", "qa": "text", "mrc": "json", "cws": "text"}


@pytest.mark.parametrize("task", ["sa", "spm", "qa", "mrc", "cws"])
def test_model_scores_equal_the_scores_of_its_prediction_file(models, tmp_path, task):
    model, dev = models[task]
    output = predict(model, prediction_inputs(task, dev), "--format", FORMAT[task])
    pred = prediction_file(task, output, tmp_path / "pred.txt")
    from_file = scores("--task", task, "--gold", str(dev), "--pred", str(pred))
    from_model = scores(str(model), "--data", str(dev))
    assert from_model["prediction_file"] == str(model) and from_model["prediction_format"] == "model"
    assert from_model.pop("inference_dtype") in ("fp32", "bf16")  # auto: what this machine runs
    for d in (from_file, from_model):
        for key in ("prediction_file", "prediction_format", "notes"):
            d.pop(key)
    assert from_model == from_file
    assert scores(str(model), "--data", str(dev), "--task", task)["main_score"] == from_file["main_score"]


@pytest.mark.parametrize("task", ["sa", "spm", "qa", "mrc"])
def test_predict_keeps_one_output_line_per_input_line(models, task):
    model, dev = models[task]
    inputs = prediction_inputs(task, dev)
    lines = [inputs[0], "", inputs[-1], inputs[1]]  # an empty line, and the longest input (windowed)
    for fmt in type_formats(task):
        out = predict(model, lines, "--format", fmt)
        assert len(out) == len(lines)
        if fmt == "json":
            assert all(json.loads(x) for x in out)
        else:
            assert out[1] == "" and all(out[i] for i in (0, 2, 3))


def type_formats(task: str) -> tuple[str, ...]:
    from zencli.tasks.base import task_class

    return task_class(task).output_formats


def test_rich_table_and_json_file_output(models, tmp_path):
    model, dev = models["sa"]
    report = tmp_path / "out" / "scores.json"
    r = runner.invoke(app, ["evaluate", str(model), "--data", str(dev), "--json", str(report)],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "main score (accuracy)" in r.stdout and "Classification" in r.stdout and str(report) in r.stdout
    saved = json.loads(report.read_text(encoding="utf-8"))
    assert saved["task"] == "sa" and saved["total"] == 13


def test_an_unseen_gold_label_is_reported_and_scored_as_an_error(models, tmp_path):
    model, _ = models["sa"]
    dev = write(tmp_path / "dev.tsv", ["1\t很北京", "0\t北京", "2\t中国", "2\t学生"])
    d = scores(str(model), "--data", str(dev))
    assert d["total"] == 4 and d["correct"] <= 2 and d["per_class"]["2"]["correct"] == 0
    assert any("2 gold labels (1 distinct: 2) are not in the model's label set" in n for n in d["notes"])


def _error(*args: str) -> str:
    r = runner.invoke(app, ["evaluate", *args])
    assert isinstance(r.exception, ZenError), r.output
    message = str(r.exception)
    assert "\n" not in message
    return message


def test_argument_errors_are_one_line(models, tmp_path):
    model, dev = models["sa"]
    assert "is a sa model; omit --task or give --task sa" in _error(str(model), "--data", str(dev), "--task", "qa")
    assert "missing --data" in _error(str(model))
    assert "not both" in _error(str(model), "--gold", str(dev), "--pred", str(dev))
    assert "--train-words goes with --gold/--pred" in _error(str(model), "--data", str(dev), "--train-words",
                                                             str(dev))
    missing = _error(str(tmp_path / "nope"), "--data", str(dev))
    assert "no such model directory" in missing and "zen finetune" in missing
    assert "not a fine-tuned zen model" in _error(str(tmp_path), "--data", str(dev))
    assert "--device: expected auto, cpu or cuda" in _error(str(model), "--data", str(dev), "--device", "tpu")
    bad = write(tmp_path / "bad.tsv", ["1\t很北京", "no label here"])
    assert "bad.tsv:2" in _error(str(model), "--data", str(bad))
