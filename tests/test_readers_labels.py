"""LabelSet: order, UNK counting, save/load. (Label schemes are tested in test_labels.py.)"""

import json

import pytest

from zencli.data.readers import LabelSet
from zencli.errors import ZenError


def test_build_sorts_deterministically():
    assert LabelSet.build(["neutral", "entailment", None, "contradiction", "neutral"]).labels == [
        "contradiction", "entailment", "neutral"]
    assert LabelSet.build(["10", "2", "1", "2"]).labels == ["1", "2", "10"]  # integers numerically
    assert LabelSet.build(["O", "B-PER", "E-PER"]).labels == ["B-PER", "E-PER", "O"]


def test_unseen_labels_map_to_unk_and_are_counted():
    ls = LabelSet.build(["S-n", "B-v", "E-v"])
    assert ls.encode_all(["B-v", "S-Yg", "S-n", "S-Yg", "S-na"]) == [0, 3, 2, 3, 3]
    assert ls.unk_id == len(ls) == 3
    assert ls.unseen == {"S-Yg": 2, "S-na": 1} and ls.unseen_total == 3
    assert ls.decode(0) == "B-v" and ls.decode(ls.unk_id) == "[UNK]"
    with pytest.raises(IndexError):
        ls.decode(4)


def test_save_load_round_trip_keeps_order(tmp_path):
    ls = LabelSet(["entailment", "neutral", "contradiction"])  # a given order is kept
    p = tmp_path / "labels.json"
    ls.save(p)
    assert json.loads(p.read_text(encoding="utf-8")) == ["entailment", "neutral", "contradiction"]
    assert LabelSet.load(p) == ls


def test_load_errors_name_the_file(tmp_path):
    p = tmp_path / "labels.json"
    p.write_text('["a", "b"', encoding="utf-8")
    with pytest.raises(ZenError, match=f"{p}:1: invalid JSON"):
        LabelSet.load(p)
    p.write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(ZenError, match="expected a JSON list"):
        LabelSet.load(p)
    p.write_text('["a", "a"]', encoding="utf-8")
    with pytest.raises(ZenError, match="occurs twice"):
        LabelSet.load(p)
    with pytest.raises(ZenError, match="no such file"):
        LabelSet.load(tmp_path / "missing.json")
    with pytest.raises(ZenError, match="no labels"):
        LabelSet.build([None, None])
