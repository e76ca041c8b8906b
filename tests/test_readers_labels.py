"""Label schemes (detection, strict spans, conversion) and LabelSet (order, UNK counting, save/load)."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zencli.data.readers import (
    LabelSet,
    detect_scheme,
    is_well_formed,
    labels_from_spans,
    spans_from_labels,
    words_from_labels,
)
from zencli.errors import ZenError

# --- schemes -----------------------------------------------------------------------------------


def test_detect_scheme():
    assert detect_scheme(["O", "B-PER", "I-PER"]) == "BIO"
    assert detect_scheme(["B-PER", "I-PER", "E-PER", "S-LOC", "O"]) == "IOBES"
    assert detect_scheme(["B-PER", "M-PER", "E-PER", "O"]) == "BMES"
    assert detect_scheme(["B-PER", "E-PER", "S-LOC"]) == "IOBES"  # no inside label: IOBES == BMES
    assert detect_scheme(["O", "O"]) == "BIO"
    with pytest.raises(ValueError, match="mix I- and M-"):
        detect_scheme(["B-PER", "I-PER", "M-PER", "E-PER"])


def test_strict_spans_do_not_repair_broken_chunks():
    assert spans_from_labels(["B-PER", "I-PER", "O", "B-LOC"], "BIO") == [(0, 2, "PER"), (3, 4, "LOC")]
    assert spans_from_labels(["O", "I-PER", "I-PER"], "BIO") == []
    assert spans_from_labels(["B-PER", "I-LOC"], "BIO") == [(0, 1, "PER")]
    assert spans_from_labels(["B-PER", "M-PER", "E-PER", "S-LOC"], "BMES") == [(0, 3, "PER"), (3, 4, "LOC")]
    assert spans_from_labels(["B-PER", "M-PER", "O"], "BMES") == []  # never closed
    assert spans_from_labels(["M-PER", "E-PER"], "BMES") == []  # never opened
    assert spans_from_labels(["B-PER", "E-LOC"], "IOBES") == []  # type changes inside


def test_scheme_conversion():
    bmes = ["B-PER", "M-PER", "E-PER", "O", "S-LOC"]
    spans = spans_from_labels(bmes, "BMES")
    assert labels_from_spans(5, spans, "BIO") == ["B-PER", "I-PER", "I-PER", "O", "B-LOC"]
    assert labels_from_spans(5, spans, "IOBES") == ["B-PER", "I-PER", "E-PER", "O", "S-LOC"]
    assert labels_from_spans(5, spans, "BMES") == bmes


def test_segmentation_words_and_well_formedness():
    assert words_from_labels(list("我爱北京"), ["S", "S", "B", "E"]) == ["我", "爱", "北京"]
    assert words_from_labels(list("我爱北京"), ["S-r", "S-v", "B-ns", "E-ns"]) == ["我", "爱", "北京"]
    assert is_well_formed(["S", "B", "M", "E"], "BMES")
    assert not is_well_formed(["S", "B", "M"], "BMES")
    assert not is_well_formed(["B-n", "E-v"], "BMES")


_TYPES = st.sampled_from(["PER", "LOC", "ORG"])
_LABEL = st.one_of(st.just("O"), st.builds(lambda p, t: f"{p}-{t}", st.sampled_from("BIES"), _TYPES))


@given(st.lists(_LABEL, max_size=12), st.sampled_from(["BIO", "IOBES"]))
def test_well_formed_iff_spans_round_trip(labels, scheme):
    if scheme == "BIO":
        labels = [lab if lab[0] in "BIO" else "O" for lab in labels]
    round_trip = labels_from_spans(len(labels), spans_from_labels(labels, scheme), scheme)
    assert is_well_formed(labels, scheme) == (round_trip == labels)


@given(st.lists(st.tuples(st.integers(1, 4), _TYPES, st.booleans()), max_size=6),
       st.sampled_from(["BIO", "IOBES", "BMES"]))
def test_spans_survive_any_scheme(chunks, scheme):
    spans, pos = [], 0
    for length, etype, gap in chunks:
        pos += gap
        spans.append((pos, pos + length, etype))
        pos += length
    labels = labels_from_spans(pos, spans, scheme)
    assert spans_from_labels(labels, scheme) == spans and is_well_formed(labels, scheme)


# --- LabelSet ----------------------------------------------------------------------------------


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
