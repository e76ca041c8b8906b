"""Character labels (zencli.text.labels): grammar, scheme detection, strict spans, conversion, words."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zencli.text.labels import (
    decode_words,
    detect_scheme,
    is_well_formed,
    labels_from_spans,
    parse_entity_label,
    parse_label,
    parse_segment_label,
    scheme_name,
    scheme_of_prefixes,
    segment_labels,
    spans_from_labels,
    tagged_words,
    word_spans,
    words_from_labels,
)

# --- one label -----------------------------------------------------------------------------------


def test_parse_label():
    assert parse_label("B-PER") == ("B", "PER")
    assert parse_label("S-NR-x") == ("S", "NR-x")  # the type is everything after the first "-"
    assert parse_label("M-v") == ("M", "v")
    assert parse_label("B") == ("B", "")  # CWS
    assert parse_label("O") == ("O", "")


@pytest.mark.parametrize("label", ["X-PER", "B-", "B_PER", "B-P ER", "", "OO", "O-PER", "b-PER", "BE"])
def test_parse_label_rejects(label):
    with pytest.raises(ValueError, match="expected O, a position tag"):
        parse_label(label)


def test_entity_and_segment_labels():
    assert parse_entity_label("O") == ("O", "") and parse_entity_label("I-LOC") == ("I", "LOC")
    with pytest.raises(ValueError, match="expected O or an entity label .* got 'B'"):
        parse_entity_label("B")  # a CWS label is no entity label
    assert parse_segment_label("S", tagged=False) == ("S", "")
    assert parse_segment_label("I", tagged=False) == ("M", "")  # B/I/E/S means B/M/E/S for segmentation
    assert parse_segment_label("I-n", tagged=True) == ("M", "n")
    assert parse_segment_label("E-n") == ("E", "n") and parse_segment_label("E") == ("E", "")
    with pytest.raises(ValueError, match="segmentation label B, M, E or S .* got 'B-n'"):
        parse_segment_label("B-n", tagged=False)
    with pytest.raises(ValueError, match="joint label B-TAG.* got 'S'"):
        parse_segment_label("S", tagged=True)
    with pytest.raises(ValueError, match="got 'O'"):
        parse_segment_label("O")


def test_scheme_names():
    assert [scheme_name(s) for s in ("iob2", "BIO", "bioes", "IOBES", "BMESO", "bmes")] == [
        "BIO", "BIO", "IOBES", "IOBES", "BMES", "BMES"]
    with pytest.raises(ValueError, match="scheme: expected one of .* got 'BILOU'"):
        scheme_name("BILOU")


# --- schemes -------------------------------------------------------------------------------------


def test_detect_scheme():
    assert detect_scheme(["O", "B-PER", "I-PER"]) == "BIO"
    assert detect_scheme(["B-PER", "I-PER", "E-PER", "S-LOC", "O"]) == "IOBES"
    assert detect_scheme(["B-PER", "M-PER", "E-PER", "O"]) == "BMES"
    assert detect_scheme(["B-PER", "E-PER", "S-LOC"]) == "IOBES"  # no inside label: IOBES == BMES
    assert detect_scheme(["O", "O"]) == "BIO"
    assert detect_scheme(["B", "M", "E", "S"]) == "BMES"
    with pytest.raises(ValueError, match="mix I- and M-"):
        detect_scheme(["B-PER", "I-PER", "M-PER", "E-PER"])
    with pytest.raises(ValueError, match="'X-PER'"):
        detect_scheme(["O", "X-PER"])


def test_scheme_of_prefixes_says_nothing_without_chunks():
    assert scheme_of_prefixes({"O"}) is None and scheme_of_prefixes(set()) is None
    assert scheme_of_prefixes({"I"}) == "BIO" and scheme_of_prefixes({"S", "O"}) == "IOBES"


# --- strict spans ----------------------------------------------------------------------------------


def test_bio_extraction():
    labels = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "I-PER", "I-ORG", "O"]
    # I-PER after I-LOC and I-ORG after it start nothing in strict IOB2.
    assert spans_from_labels(labels, "IOB2") == [(0, 2, "PER"), (3, 4, "LOC"), (4, 6, "LOC")]
    assert spans_from_labels(labels, "BIO") == spans_from_labels(labels, "IOB2")
    assert spans_from_labels(["B-PER", "I-PER", "O", "B-LOC"], "BIO") == [(0, 2, "PER"), (3, 4, "LOC")]
    assert spans_from_labels(["O", "I-PER", "I-PER"], "BIO") == []
    assert spans_from_labels(["B-PER", "I-LOC"], "BIO") == [(0, 1, "PER")]


def test_iobes_extraction_is_strict():
    assert spans_from_labels(["B-PER", "I-PER", "E-PER", "S-LOC"], "IOBES") == [(0, 3, "PER"), (3, 4, "LOC")]
    assert spans_from_labels(["B-PER", "I-PER", "O"], "IOBES") == []  # never closed
    assert spans_from_labels(["B-PER", "I-PER"], "IOBES") == []  # sentence ends inside
    assert spans_from_labels(["O", "E-PER"], "IOBES") == []  # E without B
    assert spans_from_labels(["B-PER", "E-LOC"], "IOBES") == []  # type changes
    assert spans_from_labels(["B-PER", "B-PER", "E-PER"], "IOBES") == [(1, 3, "PER")]
    assert spans_from_labels(["B-PER", "I-PER", "S-LOC"], "IOBES") == [(2, 3, "LOC")]
    # M- is BMES's inside label, not IOBES's: read as IOBES it breaks the chunk.
    assert spans_from_labels(["B-PER", "M-PER", "E-PER"], "IOBES") == []
    assert not is_well_formed(["B-PER", "M-PER", "E-PER"], "IOBES")


def test_bmes_extraction():
    assert spans_from_labels(["B-PER", "M-PER", "E-PER", "O", "S-LOC"], "BMES") == [(0, 3, "PER"), (4, 5, "LOC")]
    assert spans_from_labels(["B-PER", "M-PER", "E-PER", "S-LOC"], "BMES") == [(0, 3, "PER"), (3, 4, "LOC")]
    assert spans_from_labels(["O", "M-PER", "E-PER"], "BMES") == []  # never opened
    assert spans_from_labels(["B-PER", "M-PER", "O"], "BMES") == []  # never closed
    assert spans_from_labels(["B-PER", "I-PER", "E-PER"], "BMES") == []
    assert spans_from_labels(["B", "M", "E", "S"], "BMES") == [(0, 3, ""), (3, 4, "")]  # untyped


def test_span_errors():
    with pytest.raises(ValueError, match="scheme"):
        spans_from_labels(["O"], "BILOU")
    with pytest.raises(ValueError, match="'X-PER'"):
        spans_from_labels(["O", "X-PER"], "BIO")


def test_scheme_conversion():
    bmes = ["B-PER", "M-PER", "E-PER", "O", "S-LOC"]
    spans = spans_from_labels(bmes, "BMES")
    assert labels_from_spans(5, spans, "BIO") == ["B-PER", "I-PER", "I-PER", "O", "B-LOC"]
    assert labels_from_spans(5, spans, "IOBES") == ["B-PER", "I-PER", "E-PER", "O", "S-LOC"]
    assert labels_from_spans(5, spans, "BMES") == bmes
    with pytest.raises(ValueError, match="not inside a sentence of 5 labels"):
        labels_from_spans(5, [(4, 6, "PER")], "BIO")
    with pytest.raises(ValueError, match="overlaps"):
        labels_from_spans(5, [(0, 2, "PER"), (1, 3, "LOC")], "BIO")


_TYPES = st.sampled_from(["PER", "LOC", "ORG"])
_LABEL = st.one_of(st.just("O"), st.builds(lambda p, t: f"{p}-{t}", st.sampled_from("BIMES"), _TYPES))


@given(st.lists(_LABEL, max_size=12), st.sampled_from(["BIO", "IOBES", "BMES"]))
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


# --- segmentation words ----------------------------------------------------------------------------


def _decode(labels):
    return decode_words([parse_segment_label(x, tagged=True) for x in labels])


def test_segment_labels():
    assert segment_labels(1) == ["S"] and segment_labels(3) == ["B", "M", "E"]
    assert segment_labels(2, "ns") == ["B-ns", "E-ns"]
    with pytest.raises(ValueError, match="at least one char"):
        segment_labels(0)


def test_decoding_well_formed():
    assert _decode(["S-r", "B-ns", "M-ns", "E-ns", "S-a"]) == [(0, 1, "r"), (1, 4, "ns"), (4, 5, "a")]
    assert _decode([]) == []


def test_decoding_rule_on_ill_formed_sequences():
    assert _decode(["M-n", "E-n"]) == [(0, 2, "n")]  # no B: still one word
    assert _decode(["S-v", "M-n"]) == [(0, 1, "v"), (1, 2, "n")]  # S ends a word
    assert _decode(["B-n", "E-v"]) == [(0, 1, "n"), (1, 2, "v")]  # tag change cuts
    assert _decode(["B-n", "B-n"]) == [(0, 1, "n"), (1, 2, "n")]  # B starts a word
    assert _decode(["E-n", "M-n"]) == [(0, 1, "n"), (1, 2, "n")]  # E ends a word
    assert _decode(["B-n", "M-n"]) == [(0, 2, "n")]  # unterminated: ends with the sentence
    assert _decode(["B-n", "I-n", "E-n"]) == [(0, 3, "n")]  # I- read as M-


def test_segmentation_words_and_well_formedness():
    assert words_from_labels(list("我爱北京"), ["S", "S", "B", "E"]) == ["我", "爱", "北京"]
    assert words_from_labels(list("我爱北京"), ["S-r", "S-v", "B-ns", "E-ns"]) == ["我", "爱", "北京"]
    assert tagged_words(list("我爱北京"), ["S-r", "S-v", "B-ns", "E-ns"]) == [("我", "r"), ("爱", "v"),
                                                                             ("北京", "ns")]
    # The readers cut words by the scorer's rule: a tag change inside a "word" makes two.
    assert tagged_words(list("北京"), ["B-n", "E-v"]) == [("北", "n"), ("京", "v")]
    assert word_spans(["S", "I", "E"]) == [(0, 1, ""), (1, 3, "")]
    assert is_well_formed(["S", "B", "M", "E"], "BMES")
    assert not is_well_formed(["S", "B", "M"], "BMES")
    assert not is_well_formed(["B-n", "E-v"], "BMES")
    with pytest.raises(ValueError, match="got 'O'"):
        words_from_labels(list("我爱"), ["S", "O"])
    with pytest.raises(ValueError, match="2 chars but 1 labels"):
        words_from_labels(list("我爱"), ["S"])


@given(st.lists(st.tuples(st.integers(1, 4), st.sampled_from(["n", "v", None])), max_size=6))
def test_words_survive_labels(words):
    labels = [lab for n, tag in words for lab in segment_labels(n, tag)]
    assert word_spans(labels) == [(s, s + n, tag or "") for s, (n, tag) in
                                  zip([sum(n for n, _ in words[:k]) for k in range(len(words))], words)]
    assert is_well_formed(labels, "BMES")
