"""Sentence, pair and QA readers: column and header detection, JSON lines, file:line errors."""

import json
from pathlib import Path

import pytest

from tests.conftest import write
from zencli.data.readers import read_task_file
from zencli.data.readers.classification import detect_label_column
from zencli.errors import ZenError


def _jsonl(tmp_path: Path, name: str, records: list) -> Path:
    return write(tmp_path / name, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def _error(path: Path, task: str, fmt: str = "auto") -> str:
    with pytest.raises(ZenError) as e:
        read_task_file(path, task, fmt)
    assert "\n" not in str(e.value)
    return str(e.value)


# --- DC / SA -----------------------------------------------------------------------------------

def test_label_text_without_header(tmp_path):
    p = write(tmp_path / "sa.tsv", "1\t这个手机很好用\n0\t电池太差了\n\n1\t物流很快，包装完好\n")
    ex, info = read_task_file(p, "sa")
    assert (info.format, info.header, info.columns) == ("tsv", False, ["label", "text"])
    assert [(e.label, e.line) for e in ex] == [("1", 1), ("0", 2), ("1", 4)]
    assert ex[1].text == "电池太差了"
    assert info.label_counts == {"0": 1, "1": 2} and info.blank_lines == 1
    assert info.tokens == sum(len(e.text) for e in ex)


def test_text_label_order_detected(tmp_path):
    p = write(tmp_path / "dc.tsv", "球队昨晚赢了比赛\t体育\n股市今天大涨\t财经\n新赛季即将开始\t体育\n")
    ex, info = read_task_file(p, "dc")
    assert info.columns == ["text", "label"] and not info.header
    assert [e.label for e in ex] == ["体育", "财经", "体育"]


def test_label_column_rule_on_ties():
    # Same number of distinct values: the shorter column is the label; full tie: column 1.
    assert detect_label_column([["好", "正面"], ["差", "负面"]]) == 0
    assert detect_label_column([["正面", "好"], ["负面", "差"]]) == 1
    assert detect_label_column([["a", "b"], ["c", "d"]]) == 0


@pytest.mark.parametrize("head", ["label\ttext", "Label\tSentence", "text_a\tlabel", "类别\t评论"])
def test_named_header_detected(tmp_path, head):
    rows = ["1\t好评"] if head.split("\t")[0].lower() in ("label", "类别") else ["好评\t1"]
    p = write(tmp_path / "h.tsv", head + "\n" + "\n".join(rows) + "\n")
    ex, info = read_task_file(p, "sa")
    assert info.header and len(ex) == 1 and ex[0].label == "1" and ex[0].text == "好评" and ex[0].line == 2


def test_unnamed_header_detected_from_integer_labels(tmp_path):
    p = write(tmp_path / "h.tsv", "polarity_x\treview_body\n1\t很好\n0\t不好\n")
    ex, info = read_task_file(p, "sa")
    assert info.header and [e.label for e in ex] == ["1", "0"]


def test_header_wider_file_picks_named_columns(tmp_path):
    p = write(tmp_path / "h.tsv", "qid\tlabel\ttext_a\n7\t1\t不错\n8\t0\t很糟\n")
    ex, info = read_task_file(p, "sa")
    assert info.columns == ["-", "label", "text"]
    assert [(e.label, e.text) for e in ex] == [("1", "不错"), ("0", "很糟")]


def test_header_override(tmp_path):
    p = write(tmp_path / "h.tsv", "正\t好看\n负\t难看\n")
    ex, info = read_task_file(p, "sa", header=True)
    assert info.header and len(ex) == 1 and ex[0].line == 2


def test_explicit_column_order(tmp_path):
    p = write(tmp_path / "o.tsv", "好\t正面\n差\t负面\n")
    ex, _ = read_task_file(p, "sa", fmt="text-label")
    assert [e.label for e in ex] == ["正面", "负面"]


def test_wrong_column_count_names_line(tmp_path):
    p = write(tmp_path / "sa.tsv", "1\t很好\n0\t不好\n1\t还行\t多余\n")
    msg = _error(p, "sa")
    assert f"{p}:3:" in msg and "expected 2 TAB-separated columns" in msg and "got 3" in msg


def test_empty_label_names_line(tmp_path):
    p = write(tmp_path / "sa.tsv", "1\t很好\n0\t不好\n \t还行\n")
    msg = _error(p, "sa")
    assert f"{p}:3:" in msg and "empty label" in msg


def test_jsonl_text_keys_and_labels(tmp_path):
    p = _jsonl(tmp_path, "sa.jsonl", [{"text": "好", "label": 1}, {"sentence": "差", "label": "0"},
                                      {"content": "一般", "label": 1}])
    ex, info = read_task_file(p, "sa")
    assert info.format == "jsonl" and info.labelled
    assert [(e.text, e.label, e.line) for e in ex] == [("好", "1", 1), ("差", "0", 2), ("一般", "1", 3)]


def test_jsonl_bad_line_names_line(tmp_path):
    p = write(tmp_path / "sa.jsonl", '{"text": "好", "label": 1}\n{"text": "差", "label": 0\n')
    msg = _error(p, "sa")
    assert f"{p}:2:" in msg and "invalid JSON" in msg


def test_jsonl_mixed_labelled_and_unlabelled_is_an_error(tmp_path):
    p = _jsonl(tmp_path, "sa.jsonl", [{"text": "好", "label": 1}, {"text": "差"}])
    msg = _error(p, "sa")
    assert f"{p}:2:" in msg and "all labelled or all unlabelled" in msg


def test_jsonl_missing_text_names_line(tmp_path):
    p = _jsonl(tmp_path, "sa.jsonl", [{"text": "好"}, {"body": "差"}])
    assert f"{p}:2:" in _error(p, "sa")


def test_unlabelled_text_keeps_empty_lines(tmp_path):
    p = write(tmp_path / "pred.txt", "很好\n\n不好\n")
    ex, info = read_task_file(p, "sa")
    assert info.format == "text" and not info.labelled
    assert [(e.text, e.label, e.line) for e in ex] == [("很好", None, 1), ("", None, 2), ("不好", None, 3)]


# --- SPM / NLI ---------------------------------------------------------------------------------

def test_lcqmc_pairs(tmp_path):
    p = write(tmp_path / "lcqmc.tsv", "今天天气如何\t今天天气怎么样\t1\n我想买手机\t哪里修电脑\t0\n")
    ex, info = read_task_file(p, "spm")
    assert (info.format, info.header, info.columns) == ("tsv", False, ["a", "b", "label"])
    assert [(e.a, e.b, e.label, e.line) for e in ex] == [
        ("今天天气如何", "今天天气怎么样", "1", 1), ("我想买手机", "哪里修电脑", "0", 2)]


def test_xnli_header_and_contradictory(tmp_path):
    p = write(tmp_path / "xnli.tsv", "premise\thypo\tlabel\n他在跑步\t他在运动\tentailment\n"
                                     "他在跑步\t他在睡觉\tcontradictory\n他在跑步\t他很开心\tneutral\n")
    ex, info = read_task_file(p, "nli")
    assert info.header and [e.label for e in ex] == ["entailment", "contradiction", "neutral"]
    assert ex[0].line == 2
    assert info.label_counts == {"contradiction": 1, "entailment": 1, "neutral": 1}
    assert any("contradictory" in n for n in info.notes)


def test_pair_header_detected_from_label_values(tmp_path):
    p = write(tmp_path / "h.tsv", "s_one\ts_two\tgold\n甲\t乙\t1\n丙\t丁\t0\n")
    ex, info = read_task_file(p, "spm")
    assert info.header and len(ex) == 2


def test_original_xnli_wide_header(tmp_path):
    head = "language\tgold_label\tsentence1_binary_parse\tsentence1\tsentence2\tpairID"
    p = write(tmp_path / "x.tsv", head + "\nzh\tneutral\t( x )\t他来了\t他很高兴\t1\n")
    ex, info = read_task_file(p, "nli")
    assert [(e.a, e.b, e.label) for e in ex] == [("他来了", "他很高兴", "neutral")]


def test_bq_jsonl_gold_label_or_label(tmp_path):
    p = _jsonl(tmp_path, "bq.jsonl", [{"sentence1": "怎么还款", "sentence2": "如何还钱", "gold_label": "1"},
                                      {"sentence1": "额度多少", "sentence2": "利息多少", "label": 0}])
    ex, info = read_task_file(p, "spm")
    assert info.format == "jsonl" and [e.label for e in ex] == ["1", "0"]


def test_unlabelled_pairs(tmp_path):
    p = write(tmp_path / "p.tsv", "甲乙\t丙丁\n")
    ex, info = read_task_file(p, "spm")
    assert not info.labelled and ex[0].label is None


def test_pair_wrong_columns_and_bad_json(tmp_path):
    p = write(tmp_path / "p.tsv", "甲\t乙\t1\n丙\t0\n")
    msg = _error(p, "spm")
    assert f"{p}:2:" in msg and "expected 3" in msg
    q = write(tmp_path / "p.jsonl", '{"sentence1": "甲", "sentence2": "乙", "label": 1}\n[1, 2]\n')
    msg = _error(q, "spm")
    assert f"{q}:2:" in msg and "JSON object" in msg


# --- QA ----------------------------------------------------------------------------------------

def test_dbqa_four_columns(tmp_path):
    p = write(tmp_path / "qa.tsv", "0\t长江有多长\t长江全长6300公里\t1\n0\t长江有多长\t长江流经上海\t0\n"
                                   "1\t谁写了红楼梦\t曹雪芹著\t1\n")
    ex, info = read_task_file(p, "qa")
    assert info.columns == ["qid", "question", "answer", "label"] and not info.header
    assert [(e.qid, e.label, e.line) for e in ex] == [("0", "1", 1), ("0", "0", 2), ("1", "1", 3)]


def test_dbqa_without_label_for_prediction(tmp_path):
    p = write(tmp_path / "qa.tsv", "q7\t长江有多长\t长江全长6300公里\nq7\t长江有多长\t流经上海\n")
    ex, info = read_task_file(p, "qa")
    assert not info.labelled and info.columns == ["qid", "question", "answer"]
    assert ex[1].qid == "q7" and ex[1].label is None


def test_dbqa_original_three_columns_derives_qids(tmp_path):
    p = write(tmp_path / "qa.tsv", "长江有多长\t长江全长\t1\n谁写的\t曹雪芹\t1\n长江有多长\t流经上海\t0\n")
    ex, info = read_task_file(p, "qa")
    assert info.columns == ["question", "answer", "label"]
    assert [e.qid for e in ex] == ["0", "1", "0"]  # the same question gets the same qid
    assert any("no qid column" in n for n in info.notes)


def test_dbqa_header_and_bad_row(tmp_path):
    p = write(tmp_path / "qa.tsv", "qid\ttext_a\ttext_b\tlabel\n0\t问\t答\t1\n0\t问\t答\n")
    msg = _error(p, "qa")
    assert f"{p}:3:" in msg and "expected 4" in msg
