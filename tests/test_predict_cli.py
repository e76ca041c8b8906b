"""`zen predict MODEL`: the three output formats per task, empty and very long lines, stdin/stdout and
files, chunked streaming in input order, careful input decoding, a model directory on its own, and
`evaluate_model` (the API behind `zen evaluate MODEL --data FILE`)."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import write
from tests.test_tasks_tagging import (
    LONG,
    NGRAM,
    TINY,
    VOCAB,
    write_task_data,
)
from zencli.cli.app import app
from zencli.errors import ZenError
from zencli.tasks.inference import load_for_inference
from zencli.tasks.model_dir import load_task_model
from zencli.tasks.predict import evaluate_model, predict_chunks, read_stream
from zencli.text.labels import labels_from_spans

runner = CliRunner()


# A normal line, an empty one, one much longer than max_seq_len (16 tokens: 14 chars a window), one with a
# space (kept in the output, but no token) and a last one without a final newline.
LINES = ["北京大学的学生在图书馆学习", "", LONG, "他在 北京", "中国人民银行"]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """One tiny trained model per task."""
    tmp = tmp_path_factory.mktemp("models")
    out = {}
    for task, decoder in (("cws", "softmax"), ("pos", "softmax"), ("ner", "crf")):
        data = write_task_data(tmp, task)
        sets = [x for s in TINY for x in ("--set", s)]
        r = runner.invoke(app, ["finetune", "--task", task, "--train", str(data), "--dev", str(data), "--vocab",
                                str(VOCAB), "--ngram", str(NGRAM), "--decoder", decoder, "-o", str(tmp / task),
                                "--max-steps", "20", "--quiet", *sets], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        out[task] = tmp / task / "model"
    return out


def predict(model: Path, lines: list[str] | bytes, *args: str) -> list[str]:
    data = lines if isinstance(lines, bytes) else "\n".join(lines).encode("utf-8")
    r = runner.invoke(app, ["predict", str(model), *args], input=data, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout.split("\n")[:-1]  # every record ends with a newline


def _strip_ner(line: str) -> str:
    return re.sub(r"\[([^\]]*)\]/[A-Z]+", r"\1", line)


def test_text_output_has_one_line_per_input_line_covering_every_char(models):
    cws = predict(models["cws"], LINES)
    assert len(cws) == len(LINES) and cws[1] == ""
    for line, out in zip(LINES, cws):
        assert out.replace(" ", "") == line.replace(" ", "")  # words cover the text; nothing is dropped
    assert "北京" in cws[3].split()  # the space is a boundary: no word spans it

    pos = predict(models["pos"], LINES)
    for line, out in zip(LINES, pos):
        words = [tok.rsplit("/", 1) for tok in out.split()]
        assert "".join(w for w, _ in words) == line.replace(" ", "")
        assert all(tag for _, tag in words)

    ner = predict(models["ner"], LINES)
    assert [_strip_ner(x) for x in ner] == LINES  # inline markup over the text as it was


def test_json_output_gives_character_offsets(models):
    for task, key in (("cws", "words"), ("pos", "words"), ("ner", "entities")):
        out = [json.loads(x) for x in predict(models[task], LINES, "--format", "json")]
        assert [o["text"] for o in out] == LINES
        for o in out:
            spans = o[key]
            for item in spans:
                assert o["text"][item["start"]:item["end"]] == item["text"]
            assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(spans))
            if key == "words":
                assert "".join(w["text"] for w in spans) == o["text"].replace(" ", "")
            else:
                assert all(e["type"] in ("PER", "LOC", "ORG") for e in spans)
        assert out[1][key] == []


def test_conll_output_has_a_line_per_char_and_a_blank_line_per_sentence(models):
    out = predict(models["ner"], LINES, "--format", "conll")
    sentences, current = [], []
    for line in out:
        if line == "":
            sentences.append(current)
            current = []
        else:
            current.append(line.split("\t"))
    assert current == [] and len(sentences) == len(LINES)
    for line, rows in zip(LINES, sentences):
        assert [c for c, _ in rows] == list(line.replace(" ", ""))  # white space is no token
        assert all(re.fullmatch(r"O|[BMES]-(PER|LOC|ORG)", lab) for _, lab in rows)


def test_white_space_is_never_a_token_an_entity_or_a_word(models):
    for task in ("cws", "pos", "ner"):  # nothing tags a line of spaces (ner tagged it `[   ]/PER`)
        assert predict(models[task], ["   ", " \u3000\t"], "--format", "conll") == ["", ""]
        assert predict(models[task], ["   "]) == ["   " if task == "ner" else ""]
        # the model reads the chars around white space as if it were not there
        conll = predict(models[task], ["他在 北京", "他在北京"], "--format", "conll")
        assert conll[:len(conll) // 2] == conll[len(conll) // 2:]
    assert json.loads(predict(models["ner"], ["   "], "--format", "json")[0]) == {"text": "   ", "entities": []}
    task = load_task_model(models["ner"]).task
    x = task.parse_input(" 王 小明 ", "in.txt", 1)
    assert x.chars == list("王小明") and x.text == " 王 小明 "
    b, m, e = (labels_from_spans(3, [(0, 3, "PER")], task.scheme))
    assert task.format_prediction(x, [b, m, e], "text") == " [王]/PER [小明]/PER "  # cut where the line has space
    assert json.loads(task.format_prediction(x, [b, m, e], "json"))["entities"] == [
        {"text": "王", "start": 1, "end": 2, "type": "PER"}, {"text": "小明", "start": 3, "end": 5, "type": "PER"}]
    assert task.format_prediction(x, [b, m, e], "conll") == f"王\t{b}\n小\t{m}\n明\t{e}\n"


def test_files_crlf_bom_and_chunking_give_the_same_output(models, tmp_path):
    expected = predict(models["pos"], LINES)
    src = tmp_path / "in.txt"
    src.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(LINES).encode("utf-8") + b"\r\n")
    out = tmp_path / "sub" / "out.txt"
    r = runner.invoke(app, ["predict", str(models["pos"]), "--input", str(src), "--output", str(out)],
                      catch_exceptions=False)
    assert r.exit_code == 0 and r.stdout == ""
    assert out.read_text(encoding="utf-8").split("\n")[:-1] == expected
    assert not list(out.parent.glob(".*tmp*"))
    assert predict(models["pos"], LINES, "--chunk-lines", "1", "--batch-size", "1") == expected

    loaded = load_for_inference(models["pos"], device="cpu")  # auto, as the command above
    lines = list(enumerate(LINES, 1))
    chunks = list(predict_chunks(loaded, lines, chunk_lines=2))
    assert [len(c) for c in chunks] == [2, 2, 1] and [x for c in chunks for x in c] == expected


def test_streaming_reads_lazily(models):
    """A chunk is written before the next input line is read (a pipe sees output as input arrives)."""
    loaded = load_task_model(models["cws"])
    seen = []

    def lines():
        for i, text in enumerate(LINES, 1):
            seen.append(i)
            yield i, text

    gen = predict_chunks(loaded, lines(), chunk_lines=1)
    first = next(gen)
    assert len(first) == 1 and seen == [1]


def test_bad_input_and_options_are_one_line_errors(models, tmp_path):
    r = runner.invoke(app, ["predict", str(models["cws"])], input=b"ok\n\xff\xfe\n")
    assert isinstance(r.exception, ZenError)
    assert str(r.exception).startswith("<stdin>:2: invalid UTF-8 at byte offset 3")
    r = runner.invoke(app, ["predict", str(models["cws"]), "--format", "xml"], input=b"x\n")
    assert isinstance(r.exception, ZenError) and "cws writes text, json, conll" in str(r.exception)
    r = runner.invoke(app, ["predict", str(tmp_path)], input=b"x\n")
    assert isinstance(r.exception, ZenError) and "not a fine-tuned zen model" in str(r.exception)
    r = runner.invoke(app, ["predict", str(models["cws"]), "--input", str(tmp_path / "missing.txt")])
    assert isinstance(r.exception, ZenError) and "no such file" in str(r.exception)
    assert list(read_stream(iter([b"a\rb\n", b"c"]))) == [(1, "a"), (2, "b"), (3, "c")]
    assert list(read_stream(iter(["\ufeffa\n", "b"]))) == [(1, "a"), (2, "b")]  # a text stream


def test_a_model_directory_works_on_its_own_through_a_real_pipe(models, tmp_path):
    copy = tmp_path / "elsewhere" / "my-ner"
    shutil.copytree(models["ner"], copy)
    expected = predict(models["ner"], LINES)
    src = write(tmp_path / "in.txt", LINES)
    with open(src, "rb") as stdin:
        p = subprocess.run([sys.executable, "-m", "zencli", "predict", str(copy)], stdin=stdin, cwd=tmp_path,
                           capture_output=True, check=False)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.decode("utf-8").split("\n")[:-1] == expected


def test_evaluate_model_scores_like_finetune_did(models, tmp_path):
    dev = models["ner"].parents[1] / "ner.tsv"  # the file the model was evaluated on while training
    evaluation = evaluate_model(load_for_inference(models["ner"], device="cpu"), dev)  # as train.eval_dtype auto
    saved = json.loads((models["ner"] / "dev_scores.json").read_text(encoding="utf-8"))
    assert evaluation.task == "ner" and evaluation.main_score == pytest.approx(saved["main_score"])
    unseen = write(tmp_path / "unseen.tsv", ["北\tB-GPE", "京\tE-GPE", "的\tO", ""])
    evaluation = evaluate_model(models["ner"], unseen)
    assert evaluation.result.overall.gold == 1 and evaluation.result.overall.correct == 0
    assert any("2 gold labels (2 distinct: B-GPE, E-GPE)" in n for n in evaluation.notes)
