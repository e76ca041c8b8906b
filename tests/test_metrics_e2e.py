"""End to end: the metrics on the real PD98 dev files agree with the published stats and with seqeval."""

import json
import random
import warnings
from collections import Counter
from pathlib import Path

import pytest
from seqeval.metrics import classification_report
from seqeval.scheme import IOBES

from tests.conftest import PD98, needs_data
from zencli.metrics import score_cws, score_ner, score_pos, split_words
from zencli.text.labels import spans_from_labels, word_spans

needs_pd98 = needs_data(PD98 / "stats.json")


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _blocks(path: Path) -> list[list[tuple[str, str]]]:
    """char<TAB>label lines, one blank line after each sentence."""
    out: list[list[tuple[str, str]]] = []
    cur: list[tuple[str, str]] = []
    for line in _lines(path):
        if line:
            ch, label = line.split("\t")
            cur.append((ch, label))
        else:
            out.append(cur)
            cur = []
    return out


@pytest.fixture(scope="module")
def dev_stats() -> dict:
    return json.loads((PD98 / "stats.json").read_text(encoding="utf-8"))["splits"]["dev"]


@needs_pd98
def test_cws_oov_rate_matches_published_stats(dev_stats):
    train = {w for line in _lines(PD98 / "cws" / "train.txt") for w in split_words(line)}
    gold = [split_words(line) for line in _lines(PD98 / "cws" / "dev.txt")]
    r = score_cws(gold, gold, train)
    assert r.words.f1 == 1.0
    assert (r.sentences, r.words.gold) == (dev_stats["sentences"], dev_stats["words"])
    assert round(r.oov.oov_rate, 4) == dev_stats["oov_rate_vs_train"]


@needs_pd98
def test_pos_labels_decode_to_the_cws_words():
    gold_words = [split_words(line) for line in _lines(PD98 / "cws" / "dev.txt")]
    pos = _blocks(PD98 / "pos" / "dev.tsv")
    assert len(pos) == len(gold_words)
    for sent, words in zip(pos, gold_words):
        text = "".join(ch for ch, _ in sent)
        spans = word_spans([label for _, label in sent])
        assert [text[s:e] for s, e, _ in spans] == words
    r = score_pos([[lab for _, lab in s] for s in pos], [[lab for _, lab in s] for s in pos])
    assert (r.joint.f1, r.tag_accuracy, r.label_accuracy) == (1.0, 1.0, 1.0)


@needs_pd98
def test_ner_bmes_and_bio_files_hold_the_same_entities_and_match_seqeval(dev_stats):
    bmes = [[lab for _, lab in s] for s in _blocks(PD98 / "ner" / "dev.tsv")]
    bio = [[lab for _, lab in s] for s in _blocks(PD98 / "ner-bio" / "dev.tsv")]
    counts: Counter[str] = Counter()
    for a, b in zip(bmes, bio, strict=True):
        spans = spans_from_labels(a, "BMES")
        assert spans == spans_from_labels(b, "IOB2")
        counts.update(t for _, _, t in spans)
    assert dict(counts) == dev_stats["entities"]
    # A noisy prediction (3% of labels replaced at random, so many ill-formed chunks): exact agreement
    # with seqeval's strict IOBES mode after M- -> I-.
    rng = random.Random(0)
    labels = sorted({lab for s in bmes for lab in s})
    pred = [[rng.choice(labels) if rng.random() < 0.03 else lab for lab in s] for s in bmes]
    r = score_ner(bmes, pred)
    assert r.scheme == "BMES" and r.pred_orphan_labels > 0

    def conv(seqs):
        return [["I" + lab[1:] if lab.startswith("M-") else lab for lab in s] for s in seqs]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = classification_report(conv(bmes), conv(pred), mode="strict", scheme=IOBES, output_dict=True)
    micro = report["micro avg"]
    assert (r.overall.precision, r.overall.recall, r.overall.f1) == (
        micro["precision"], micro["recall"], micro["f1-score"])
    for t, prf in r.per_type.items():
        assert (prf.precision, prf.recall, prf.f1, prf.gold) == (
            report[t]["precision"], report[t]["recall"], report[t]["f1-score"], report[t]["support"])
