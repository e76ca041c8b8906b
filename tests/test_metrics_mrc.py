import json

import pytest

from zencli.errors import ZenError
from zencli.metrics.mrc import (
    PUNCTUATION,
    em_score,
    f1_score,
    longest_common_run,
    mixed_segmentation,
    remove_punctuation,
    score_mrc,
    treebank_tokenize,
)


def test_treebank_tokenizer_rules():
    assert treebank_tokenize("don't stop") == ["do", "n't", "stop"]
    assert treebank_tokenize('"hi" there') == ["``", "hi", "''", "there"]
    assert treebank_tokenize("1,000 and 3.5") == ["1,000", "and", "3.5"]
    assert treebank_tokenize("a, b") == ["a", ",", "b"]
    assert treebank_tokenize("end.") == ["end", "."]
    assert treebank_tokenize("u.s. army") == ["u.s.", "army"]  # only a final period is split
    assert treebank_tokenize("cannot (yes)?") == ["can", "not", "(", "yes", ")", "?"]
    assert treebank_tokenize("a...b $5") == ["a", "...", "b", "$", "5"]
    assert treebank_tokenize("——") == ["——"]  # NLTK 3.3: dashes are not split (3.5+ splits them)
    assert treebank_tokenize("  ") == []


def test_mixed_segmentation():
    assert mixed_segmentation("1.5亿元") == ["1.5", "亿", "元"]
    assert mixed_segmentation(" Hello World中国 ") == ["hello", "world", "中", "国"]
    assert mixed_segmentation("《哈利·波特》") == ["《", "哈", "利", "·", "波", "特", "》"]
    assert mixed_segmentation("《哈利·波特》", remove_punctuation=True) == ["哈", "利", "波", "特"]
    # Punctuation splits a run, but removed punctuation does not: it is skipped before segmenting.
    assert mixed_segmentation("ab-cd") == ["ab", "-", "cd"]
    assert mixed_segmentation("ab-cd", remove_punctuation=True) == ["abcd"]
    # ASCII ',' is not in the list: it survives removal and NLTK splits it off.
    assert mixed_segmentation("a,b中", remove_punctuation=True) == ["a", ",", "b", "中"]


def test_punctuation_list_quirks():
    assert "," not in PUNCTUATION and "(" not in PUNCTUATION and "." not in PUNCTUATION
    assert "（" in PUNCTUATION and "·" in PUNCTUATION
    # '……' is one two-character entry in the official list, so a single '…' never matches it.
    assert remove_punctuation("……") == "……"
    assert remove_punctuation(" 《ABC》 ") == "abc"
    # strip() runs before the punctuation goes, so a space behind a quote mark stays.
    assert remove_punctuation("《 abc") == " abc"


def test_longest_common_run_is_contiguous():
    assert longest_common_run(list("abcd"), list("xbcy")) == 2
    assert longest_common_run(list("abcd"), list("dcba")) == 1  # a bag of tokens would give 4
    assert longest_common_run([], list("ab")) == 0


def test_f1_hand_computed():
    # lcs 2 of prediction 2 and answer 4 tokens: P 1, R 1/2 -> 2/3
    assert f1_score(["北京大学"], "北京") == pytest.approx(2 / 3)
    # best over answers: vs 北京大学 lcs 4, P 4/6, R 1 -> 0.8; vs 清华 0
    assert f1_score(["清华", "北京大学"], "北京大学附中") == pytest.approx(0.8)
    # contiguous run: 甲乙丙丁 vs 丁丙乙甲 share runs of length 1 only -> P = R = 1/4
    assert f1_score(["甲乙丙丁"], "丁丙乙甲") == pytest.approx(0.25)
    # '1.5' is one token: lcs 1, P 1, R 1/2
    assert f1_score(["1.5亿"], "1.5") == pytest.approx(2 / 3)
    assert f1_score(["北京"], "") == 0.0


def test_em():
    assert em_score(["《红楼梦》"], "红楼梦") == 1
    assert em_score(["Apple"], " apple ") == 1
    assert em_score(["a, b"], "a b") == 0  # ASCII comma is not punctuation here
    assert em_score(["x", "红楼梦"], "红楼梦。") == 1
    # Official quirk kept: an answer that is only punctuation matches an empty prediction (F1 stays 0).
    assert em_score(["《》"], "") == 1 and f1_score(["《》"], "") == 0.0


def test_score_mrc_aggregate_like_the_official_printout():
    gold = [("q1", ["北京"]), ("q2 ", ["北京大学"]), ("q3", ["上海"])]
    predictions = {"q1": "北京", "q2": "北京", "q9": "无关"}
    r = score_mrc(gold, predictions)
    # q1: EM 1, F1 1; q2 (id stripped): EM 0, F1 2/3; q3 unanswered: 0, 0
    assert (r.em_sum, r.total, r.skipped, r.extra_predictions) == (1, 3, 1, 1)
    assert r.f1_sum == pytest.approx(1 + 2 / 3)
    assert r.to_dict()["official"] == {"AVERAGE": "44.444", "F1": "55.556", "EM": "33.333", "TOTAL": 3, "SKIP": 1}
    assert r.main_score == pytest.approx((1 / 3 + 5 / 9) / 2)
    assert r.tables()[0].rows[0] == ["EM", "33.333", "3"]
    json.dumps(r.to_dict())


def test_score_mrc_accepts_a_mapping_and_reports_bad_gold():
    assert score_mrc({"a": ["好"]}, {"a": "好"}).em == 1.0
    with pytest.raises(ZenError, match="question a has no gold answer"):
        score_mrc({"a": []}, {"a": "x"})
    with pytest.raises(ZenError, match="no questions"):
        score_mrc([], {})
