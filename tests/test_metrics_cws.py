import json

import pytest

from zencli.errors import ZenError
from zencli.metrics import rich_tables
from zencli.metrics.cws import score_cws, split_words, word_spans


def test_split_words_splits_on_ideographic_space_and_tabs():
    assert split_words("他\u3000来到  了\t北京 ") == ["他", "来到", "了", "北京"]
    assert split_words("") == []


def test_word_spans():
    assert word_spans(["他", "来到", "了"]) == [(0, 1), (1, 3), (3, 4)]


def test_hand_computed_scores_and_oov():
    gold = [["他", "来到", "了", "北京"], ["清华大学"]]
    pred = [["他", "来", "到了", "北京"], ["清华", "大学"]]
    # gold spans (0,1)(1,3)(3,4)(4,6) | (0,4); predicted (0,1)(1,2)(2,4)(4,6) | (0,2)(2,4)
    # correct: (0,1) and (4,6) in sentence 1, none in sentence 2.
    r = score_cws(gold, pred, train_words={"他", "了", "北京", "清华"})
    assert (r.words.correct, r.words.predicted, r.words.gold) == (2, 6, 5)
    assert r.words.precision == pytest.approx(2 / 6)
    assert r.words.recall == pytest.approx(2 / 5)
    assert r.words.f1 == pytest.approx(4 / 11)  # 2PR/(P+R) = (4/15)/(11/15)
    # OOV gold words: 来到 (missed), 清华大学 (missed); IV: 他 (hit), 了 (missed), 北京 (hit).
    o = r.oov
    assert (o.gold_oov, o.correct_oov, o.gold_iv, o.correct_iv) == (2, 0, 3, 2)
    assert o.oov_rate == pytest.approx(0.4)
    assert o.oov_recall == 0.0
    assert o.iv_recall == pytest.approx(2 / 3)
    assert r.main_score == r.words.f1
    assert r.sentences == 2


def test_a_word_counts_only_at_the_same_span():
    # Both sides contain the string "a", but at different positions: no credit (a bag of words
    # would give one).
    r = score_cws([["a", "ba"]], [["ab", "a"]])
    assert r.words.correct == 0
    assert r.words.f1 == 0.0


def test_perfect_and_all_wrong():
    gold = [["中国", "人"], ["好"]]
    assert score_cws(gold, gold).words.f1 == 1.0
    r = score_cws([["中国人"]], [["中", "国", "人"]])
    assert (r.words.correct, r.words.predicted, r.words.gold) == (0, 3, 1)
    assert r.words.f1 == 0.0  # P + R = 0


def test_empty_sentences_score_zero_without_crashing():
    r = score_cws([[], []], [[], []], train_words=set())
    assert (r.words.precision, r.words.recall, r.words.f1) == (0.0, 0.0, 0.0)
    assert r.oov.oov_rate == 0.0 and r.oov.iv_recall == 0.0


def test_no_training_words_means_no_oov_figures():
    r = score_cws([["中国"]], [["中国"]])
    assert r.oov is None
    assert "oov_rate" not in r.to_dict()


def test_different_characters_name_line_and_position():
    gold = [["中国"], ["我们", "的", "家"]]
    pred = [["中国"], ["我们", "地", "家"]]
    with pytest.raises(ZenError) as e:
        score_cws(gold, pred, gold_name="g.txt", pred_name="p.txt")
    msg = str(e.value)
    assert "p.txt:2" in msg and "g.txt:2" in msg and "character 3" in msg
    assert "\n" not in msg


def test_prediction_longer_than_gold_is_reported():
    with pytest.raises(ZenError, match="character 3"):
        score_cws([["中国"]], [["中国", "人"]])


def test_sentence_count_mismatch():
    with pytest.raises(ZenError, match="2 sentences but gold has 1"):
        score_cws([["中国"]], [["中国"], ["人"]])


def test_words_with_spaces_or_empty_are_rejected():
    with pytest.raises(ZenError, match="word 2"):
        score_cws([["中", "国"]], [["中", ""]])


def test_to_dict_is_json_and_tables_render():
    r = score_cws([["他", "来到"]], [["他", "来", "到"]], train_words={"他"})
    d = json.loads(json.dumps(r.to_dict()))
    assert d["main"] == "f1" and d["correct"] == 1 and d["gold_oov"] == 1
    tables = r.tables()
    assert tables[0].rows[0][1:4] == ["33.33", "50.00", "40.00"]
    assert all(len(row) == len(t.columns) for t in tables for row in t.rows)
    assert len(rich_tables(r)) == 2
