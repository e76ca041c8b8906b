"""End to end: the readers on the real PD98 and sentiment dev files agree with their published stats."""

import json
from collections import Counter

import pytest

from tests.conftest import DATA, SENTIMENT, needs_data
from zencli.data.readers import read_task_file
from zencli.text.labels import parse_label

needs_pd98 = needs_data(DATA / "pd98" / "stats.json")


@pytest.fixture(scope="module")
def pd98_dev() -> dict:
    return json.loads((DATA / "pd98" / "stats.json").read_text(encoding="utf-8"))["splits"]["dev"]


@needs_pd98
def test_pd98_cws_pos_raw_dev(pd98_dev):
    cws, cinfo = read_task_file(DATA / "pd98" / "cws" / "dev.txt", "cws")
    pos, pinfo = read_task_file(DATA / "pd98" / "pos" / "dev.tsv", "pos")
    raw, rinfo = read_task_file(DATA / "pd98" / "raw" / "dev.txt", "cws")
    assert (cinfo.format, pinfo.format, rinfo.format) == ("sighan", "conll", "raw")
    for info in (cinfo, pinfo, rinfo):
        assert (info.examples, info.tokens) == (pd98_dev["sentences"], pd98_dev["chars"])
    assert cinfo.words == pinfo.words == pd98_dev["words"]
    assert cinfo.ill_formed == pinfo.ill_formed == 0
    assert pinfo.labels == sorted(pd98_dev["pos_label_set"])
    # One word per B-/S- label, so those counts are the per-tag word counts.
    tags = Counter()
    for label, n in pinfo.label_counts.items():
        prefix, tag = parse_label(label)
        if prefix in "BS":
            tags[tag] += n
    assert tags == pd98_dev["pos_tags"]
    # The three files hold the same text sentence by sentence, and the same words in cws and pos.
    assert [s.text for s in raw] == [s.text for s in cws] == [s.text for s in pos]
    assert all(c.words == p.words for c, p in zip(cws, pos))
    assert len({w for s in cws for w in s.words}) == pd98_dev["word_types"]


@needs_pd98
@pytest.mark.parametrize("folder,scheme,prefixes", [("ner", "BMES", "BMES"), ("ner-bio", "BIO", "BI")])
def test_pd98_ner_dev(pd98_dev, folder, scheme, prefixes):
    sents, info = read_task_file(DATA / "pd98" / folder / "dev.tsv", "ner")
    assert info.format == "conll" and info.scheme == scheme
    assert (info.examples, info.tokens, info.ill_formed) == (pd98_dev["sentences"], pd98_dev["chars"], 0)
    assert info.entities == pd98_dev["entities"]
    allowed = {"O"} | {f"{p}-{t}" for p in prefixes for t in ("PER", "LOC", "ORG")}
    assert "O" in info.labels and set(info.labels) <= allowed


@needs_data(SENTIMENT / "stats.json")
def test_sentiment_dev():
    stats = json.loads((DATA / "sentiment" / "stats.json").read_text(encoding="utf-8"))["splits"]["dev"]
    ex, info = read_task_file(DATA / "sentiment" / "dev.tsv", "sa")
    assert (info.format, info.header, info.columns) == ("tsv", False, ["label", "text"])
    assert info.examples == stats["texts"] and info.tokens == stats["chars"]
    assert info.label_counts == {"0": stats["neg"], "1": stats["pos"]}
    assert max(len(e.text) for e in ex) == stats["max_chars"]
