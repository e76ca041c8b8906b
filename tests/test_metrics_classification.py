import json

import pytest

from zencli.errors import ZenError
from zencli.metrics.classification import score_classification


def test_hand_computed_with_an_unseen_predicted_label():
    gold = ["a", "a", "b", "b", "c"]
    pred = ["a", "b", "b", "b", "x"]  # 'x' is not a class: wrong, no crash
    r = score_classification(gold, pred)
    assert (r.correct, r.total) == (3, 5)
    assert r.accuracy == pytest.approx(0.6)
    a, b, c = r.per_class["a"], r.per_class["b"], r.per_class["c"]
    assert (a.correct, a.predicted, a.gold) == (1, 1, 2)  # P 1, R 1/2, F 2/3
    assert (b.correct, b.predicted, b.gold) == (2, 3, 2)  # P 2/3, R 1, F 4/5
    assert (c.correct, c.predicted, c.gold) == (0, 0, 1)  # F 0
    assert a.f1 == pytest.approx(2 / 3) and b.f1 == pytest.approx(0.8) and c.f1 == 0.0
    assert r.macro_f1 == pytest.approx((2 / 3 + 0.8 + 0.0) / 3)
    assert r.unknown_predictions == 1
    assert r.confusion == {"a": {"a": 1, "b": 1}, "b": {"b": 2}, "c": {"x": 1}}
    assert r.main_score == r.accuracy


def test_given_label_set_counts_absent_classes_in_macro_f1():
    r = score_classification(["a", "a"], ["a", "a"], labels=["a", "b"])
    assert r.accuracy == 1.0
    assert list(r.per_class) == ["a", "b"]
    assert r.macro_f1 == pytest.approx(0.5)  # b: no gold, no prediction -> F1 0


def test_gold_label_outside_label_set_is_an_error():
    with pytest.raises(ZenError, match="example 2 has label 'z'"):
        score_classification(["a", "z"], ["a", "a"], labels=["a", "b"])


def test_length_mismatch_and_empty():
    with pytest.raises(ZenError, match="1 labels but gold has 2"):
        score_classification(["a", "b"], ["a"])
    with pytest.raises(ZenError, match="no examples"):
        score_classification([], [])


def test_all_wrong():
    r = score_classification(["a", "b"], ["b", "a"])
    assert r.accuracy == 0.0 and r.macro_f1 == 0.0


def test_to_dict_and_tables():
    r = score_classification(["pos", "neg", "neg"], ["pos", "pos", "?"])
    d = json.loads(json.dumps(r.to_dict()))
    assert d["main"] == "accuracy" and d["correct"] == 1 and d["unknown_predictions"] == 1
    summary, per_class, confusion = r.tables()
    assert summary.rows[0][1] == "33.33"
    assert confusion.columns == ["gold \\ pred", "neg", "pos", "?"]
    assert confusion.rows == [["neg", "0", "1", "1"], ["pos", "0", "1", "0"]]
    assert all(len(row) == len(t.columns) for t in r.tables() for row in t.rows)
