"""MRC reader: SQuAD/CMRC JSON and JSON lines, answer location, repair and unusable counting."""

import json
from pathlib import Path

import pytest

from zencli.data.readers import locate_answer, read_task_file
from zencli.errors import ZenError

CONTEXT = "北京是中国的首都。上海是中国最大的城市。北京有故宫。"


def _squad(tmp_path: Path, qas: list, context: str = CONTEXT, indent: int | None = None) -> Path:
    doc = {"version": "v1.0", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}
    p = tmp_path / "cmrc.json"
    p.write_text(json.dumps(doc, ensure_ascii=False, indent=indent), encoding="utf-8")
    return p


def test_locate_answer_statuses():
    assert locate_answer(CONTEXT, "北京", 0) == ("北京", 0, "ok")
    # Wrong start: the nearest occurrence wins (20 is nearer to 17 than 0 is).
    assert locate_answer(CONTEXT, "北京", 17) == ("北京", 20, "repaired")
    assert locate_answer(CONTEXT, "北京", 2) == ("北京", 0, "repaired")
    assert locate_answer(CONTEXT, "北京", None) == ("北京", 0, "located")
    assert locate_answer(CONTEXT, " 上海 ", 8) == ("上海", 9, "repaired")  # found once stripped
    assert locate_answer(CONTEXT, "广州", 0) == ("广州", None, "missing")
    assert locate_answer(CONTEXT, "", 0) == ("", None, "missing")


def test_squad_answers_checked_repaired_and_unusable(tmp_path):
    qas = [
        {"id": "q1", "question": "首都是哪里？", "answers": [{"text": "北京", "answer_start": 0}]},
        {"id": "q2", "question": "最大城市？", "answers": [{"text": "上海", "answer_start": 3}]},
        {"id": "q3", "question": "有什么？", "answers": [{"text": "长城", "answer_start": 5},
                                                      {"text": "天坛", "answer_start": 1}]},
        {"id": "q4", "question": "哪里有故宫？", "answers": [{"text": "颐和园", "answer_start": 0},
                                                        {"text": "北京", "answer_start": 20}]},
        {"id": "q5", "question": "没有答案？", "answers": []},
    ]
    ex, info = read_task_file(_squad(tmp_path, qas, indent=2), "mrc")
    assert info.format == "squad" and info.labelled and info.examples == 5
    assert [e.qid for e in ex] == ["q1", "q2", "q3", "q4", "q5"]
    assert ex[0].answers == [("北京", 0)] and ex[0].trainable
    assert ex[1].answers == [("上海", 9)] and ex[1].trainable
    assert ex[2].answers == [("长城", None), ("天坛", None)] and not ex[2].trainable
    assert ex[2].train_answer is None  # kept for evaluation, unusable for training
    assert ex[3].trainable and ex[3].train_answer == ("北京", 20)
    assert not ex[4].trainable  # a question without an answer in a training file: kept, not trainable
    assert (info.repaired_answers, info.unusable_answers, info.unusable_examples) == (1, 3, 2)
    for e in ex:
        for text, start in e.answers:
            if start is not None:
                assert e.context[start:start + len(text)] == text


def test_squad_without_answers_is_unlabelled(tmp_path):
    ex, info = read_task_file(_squad(tmp_path, [{"id": 5, "question": "首都？"}]), "mrc")
    assert not info.labelled and ex[0].qid == "5" and ex[0].answers == [] and info.unusable_examples == 0


def test_squad_bad_json_names_line_and_column(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"data": [\n  {"paragraphs": [}\n]}\n', encoding="utf-8")
    with pytest.raises(ZenError) as e:
        read_task_file(p, "mrc")
    assert f"{p}:2:" in str(e.value) and "invalid JSON" in str(e.value)


def test_squad_structure_errors_name_the_key_path(tmp_path):
    p = _squad(tmp_path, [{"id": "q1", "question": 3, "answers": []}])
    with pytest.raises(ZenError, match=r"data\[0\]\.paragraphs\[0\]\.qas\[0\]\.question: expected a string"):
        read_task_file(p, "mrc")
    q = _squad(tmp_path, [{"id": "q1", "question": "问", "answers": [{"text": "北京", "answer_start": "0"}]}])
    with pytest.raises(ZenError, match=r"answers\[0\]\.answer_start: expected an integer"):
        read_task_file(q, "mrc")


def test_duplicate_ids_are_an_error(tmp_path):
    qas = [{"id": "q1", "question": "问一", "answers": []}, {"id": "q1", "question": "问二", "answers": []}]
    with pytest.raises(ZenError, match="duplicate question id 'q1'"):
        read_task_file(_squad(tmp_path, qas), "mrc")


def test_jsonl_for_prediction_and_with_answers(tmp_path):
    p = tmp_path / "mrc.jsonl"
    rows = [{"id": "a", "question": "首都？", "context": CONTEXT},
            {"question": "最大城市？", "context": CONTEXT, "answers": ["上海"]},
            {"question": "有什么？", "context": CONTEXT, "answer": "故宫"}]
    p.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    ex, info = read_task_file(p, "mrc")
    assert info.format == "jsonl"
    assert [(e.qid, e.line) for e in ex] == [("a", 1), ("2", 2), ("3", 3)]
    assert ex[0].answers == [] and ex[1].answers == [("上海", 9)] and ex[2].answers == [("故宫", 23)]
    assert info.repaired_answers == 0


def test_jsonl_bad_line_names_line(tmp_path):
    p = tmp_path / "mrc.jsonl"
    p.write_text('{"question": "问", "context": "文"}\n{"question": "问", "context": }\n', encoding="utf-8")
    with pytest.raises(ZenError) as e:
        read_task_file(p, "mrc")
    assert f"{p}:2:" in str(e.value)
    q = tmp_path / "mrc2.jsonl"
    q.write_text('{"question": "问", "context": "文"}\n{"question": "问"}\n', encoding="utf-8")
    with pytest.raises(ZenError) as e:
        read_task_file(q, "mrc")
    assert f"{q}:2:" in str(e.value) and "context" in str(e.value)
