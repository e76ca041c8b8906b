import json
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from seqeval.metrics import classification_report
from seqeval.metrics import f1_score as seqeval_f1
from seqeval.scheme import IOB2, IOBES, Entities

from zencli.errors import ZenError
from zencli.metrics.ner import detect_scheme, score_ner
from zencli.text.labels import spans_from_labels

# --- scores ----------------------------------------------------------------------------------------


def test_hand_computed_iob2():
    gold = [
        ["B-PER", "I-PER", "O", "B-LOC"],
        ["B-ORG", "I-ORG", "I-ORG", "O", "B-PER"],
    ]
    pred = [
        ["B-PER", "I-PER", "O", "B-ORG"],  # PER right, LOC typed as ORG
        ["B-ORG", "I-ORG", "O", "O", "B-PER"],  # ORG too short, PER right
    ]
    r = score_ner(gold, pred)
    assert r.scheme == "IOB2"
    # gold: PER x2, LOC, ORG = 4; predicted: PER x2, ORG x2 = 4; correct: PER x2 = 2.
    assert (r.overall.correct, r.overall.predicted, r.overall.gold) == (2, 4, 4)
    assert r.overall.f1 == pytest.approx(0.5)
    assert list(r.per_type) == ["LOC", "ORG", "PER"]
    assert (r.per_type["PER"].correct, r.per_type["PER"].predicted, r.per_type["PER"].gold) == (2, 2, 2)
    assert (r.per_type["ORG"].correct, r.per_type["ORG"].predicted, r.per_type["ORG"].gold) == (0, 2, 1)
    assert (r.per_type["LOC"].correct, r.per_type["LOC"].predicted, r.per_type["LOC"].gold) == (0, 0, 1)
    assert r.per_type["LOC"].precision == 0.0 and r.per_type["LOC"].f1 == 0.0


def test_ill_formed_bmes_prediction_is_not_repaired():
    gold = [["O", "B-PER", "M-PER", "E-PER", "O", "S-LOC"]]
    pred = [["O", "O", "M-PER", "E-PER", "O", "S-LOC"]]  # M-PER after O
    r = score_ner(gold, pred)
    assert r.scheme == "BMES"
    assert (r.overall.correct, r.overall.predicted, r.overall.gold) == (1, 1, 2)
    assert r.overall.precision == 1.0 and r.overall.recall == 0.5
    assert r.overall.f1 == pytest.approx(2 / 3)
    assert r.pred_orphan_labels == 2 and r.gold_orphan_labels == 0


def test_ill_formed_type_change_in_iob2_is_not_an_entity():
    r = score_ner([["B-PER", "I-PER"]], [["B-PER", "I-LOC"]])
    # Predicted: PER(0,1) only; I-LOC starts nothing.
    assert (r.overall.correct, r.overall.predicted, r.overall.gold) == (0, 1, 1)
    assert "LOC" not in r.per_type


def test_empty_prediction_and_no_entities_at_all():
    r = score_ner([["B-PER", "O"]], [["O", "O"]])
    assert (r.overall.precision, r.overall.recall, r.overall.f1) == (0.0, 0.0, 0.0)
    r = score_ner([["O"]], [["O"]])
    assert r.overall.f1 == 0.0 and r.per_type == {}


def test_seqeval_default_mode_misreads_bmes():
    gold = [["O", "B-PER", "E-PER"]]
    pred = [["O", "M-PER", "E-PER"]]  # ill-formed: no B
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns "M-PER seems not to be NE tag"
        assert seqeval_f1(gold, pred) == 1.0  # default mode repairs it into the gold entity
    assert score_ner(gold, pred).overall.f1 == 0.0


# --- scheme detection ------------------------------------------------------------------------------


def test_detect_scheme():
    assert detect_scheme([["B-A", "I-A", "O"]]) == "IOB2"
    assert detect_scheme([["B-A"]]) == "IOB2"
    assert detect_scheme([["B-A", "E-A", "S-B"]]) == "IOBES"
    assert detect_scheme([["B-A", "I-A", "E-A"]]) == "IOBES"
    assert detect_scheme([["B-A", "M-A", "E-A"]]) == "BMES"
    # Gold with only O defers to the prediction.
    assert detect_scheme([["O", "O"]], [["S-A", "O"]]) == "IOBES"
    # Gold IOBES without I- and a prediction using M-: both read as BMES.
    assert detect_scheme([["B-A", "E-A", "S-B"]], [["B-A", "M-A", "E-A"]]) == "BMES"


def test_scheme_conflicts_are_errors():
    with pytest.raises(ZenError, match="gold: labels mix I- and M-"):
        detect_scheme([["B-A", "I-A", "M-A", "E-A"]])
    with pytest.raises(ZenError, match="S- labels"):
        score_ner([["B-A", "I-A"]], [["S-A", "O"]])
    with pytest.raises(ZenError, match="M- labels"):
        score_ner([["B-A", "I-A", "E-A"]], [["B-A", "M-A", "E-A"]])
    with pytest.raises(ZenError, match="E- labels"):
        score_ner([["B-A", "E-A"]], [["B-A", "E-A"]], scheme="IOB2")


def test_bad_labels_and_lengths():
    with pytest.raises(ZenError, match="sentence 1, token 2: label 'X-PER'"):
        score_ner([["O", "B-PER"]], [["O", "X-PER"]])
    with pytest.raises(ZenError, match="label 'B'"):
        score_ner([["B"]], [["O"]])
    with pytest.raises(ZenError, match="sentence 2 has 1 labels but gold has 2"):
        score_ner([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ZenError, match="1 sentences but gold has 2"):
        score_ner([["O"], ["O"]], [["O"]])


def test_to_dict_and_tables():
    r = score_ner([["B-PER", "E-PER", "S-LOC"]], [["B-PER", "E-PER", "O"]])
    d = json.loads(json.dumps(r.to_dict()))
    assert d["main"] == "f1" and d["scheme"] == "IOBES"
    assert d["per_type"]["LOC"]["gold"] == 1 and d["per_type"]["PER"]["correct"] == 1
    (t,) = r.tables()
    assert [row[0] for row in t.rows] == ["LOC", "PER", "overall (micro)"]
    assert t.rows[-1][1:4] == ["100.00", "50.00", "66.67"]


# --- cross-check against seqeval strict mode on random (mostly ill-formed) sequences ---------------

TYPES = ["PER", "LOC"]


def _labels(prefixes: str):
    alphabet = ["O"] + [f"{p}-{t}" for p in prefixes for t in TYPES]
    sentence = st.lists(st.sampled_from(alphabet), min_size=0, max_size=8)
    return st.integers(1, 4).flatmap(
        lambda n: st.tuples(st.lists(sentence, min_size=n, max_size=n), st.lists(sentence, min_size=n, max_size=n))
    ).map(lambda gp: (gp[0], [p[: len(g)] + ["O"] * (len(g) - len(p)) for g, p in zip(gp[0], gp[1])]))


def _to_iobes(seqs):
    return [["I" + label[1:] if label.startswith("M-") else label for label in s] for s in seqs]


def _check_against_seqeval(gold, pred, scheme, seqeval_scheme):
    g_conv, p_conv = (_to_iobes(gold), _to_iobes(pred)) if scheme == "BMES" else (gold, pred)
    # Same entity spans, sentence by sentence.
    for seqs, conv in ((gold, g_conv), (pred, p_conv)):
        theirs = Entities(conv, seqeval_scheme).entities
        for i, s in enumerate(seqs):
            assert {(e.start, e.end, e.tag) for e in theirs[i]} == set(spans_from_labels(s, scheme))
    # Same P/R/F overall and per type.
    r = score_ner(gold, pred, scheme=scheme)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy: mean of an empty slice when there are no entities
        report = classification_report(g_conv, p_conv, mode="strict", scheme=seqeval_scheme, output_dict=True,
                                       zero_division=0)
    micro = report["micro avg"]
    assert r.overall.precision == pytest.approx(micro["precision"])
    assert r.overall.recall == pytest.approx(micro["recall"])
    assert r.overall.f1 == pytest.approx(micro["f1-score"])
    for t in TYPES:
        if t in report:
            assert r.per_type[t].gold == report[t]["support"]
            assert r.per_type[t].precision == pytest.approx(report[t]["precision"])
            assert r.per_type[t].recall == pytest.approx(report[t]["recall"])
            assert r.per_type[t].f1 == pytest.approx(report[t]["f1-score"])


@settings(max_examples=150, deadline=None)
@given(_labels("BI"))
def test_matches_seqeval_strict_iob2(gp):
    _check_against_seqeval(*gp, "IOB2", IOB2)


@settings(max_examples=150, deadline=None)
@given(_labels("BIES"))
def test_matches_seqeval_strict_iobes(gp):
    _check_against_seqeval(*gp, "IOBES", IOBES)


@settings(max_examples=150, deadline=None)
@given(_labels("BMES"))
def test_matches_seqeval_strict_bmes_converted(gp):
    _check_against_seqeval(*gp, "BMES", IOBES)
