import json

import pytest

from zencli.errors import ZenError
from zencli.metrics.pos import score_pos, score_pos_words, words_to_char_labels


def test_words_to_char_labels():
    labels = words_to_char_labels([("我", "r"), ("北京市", "ns"), ("好", "a")])
    assert labels == ["S-r", "B-ns", "M-ns", "E-ns", "S-a"]


def test_hand_computed_joint_segmentation_and_tag_scores():
    # 我/r 爱/v 北京/ns | 你好/l
    gold = [["S-r", "S-v", "B-ns", "E-ns"], ["B-l", "E-l"]]
    pred = [["S-r", "S-n", "B-ns", "E-n"], ["S-l", "S-l"]]
    # predicted words: (0,1,r) (1,2,n) (2,3,ns) (3,4,n) | (0,1,l) (1,2,l)
    r = score_pos(gold, pred)
    # joint: only (0,1,r) is right -> 1 correct / 6 predicted / 4 gold
    assert (r.joint.correct, r.joint.predicted, r.joint.gold) == (1, 6, 4)
    # spans: (0,1) and (1,2) of sentence 1 -> 2 / 6 / 4
    assert (r.segmentation.correct, r.segmentation.predicted, r.segmentation.gold) == (2, 6, 4)
    assert r.segmentation.f1 == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))
    # tags per char: r=r, v!=n, ns=ns, ns!=n, l=l, l=l -> 4/6; full labels: S-r, B-ns, (none of B-l/E-l) -> 2/6
    assert (r.chars, r.tag_correct_chars, r.label_correct_chars) == (6, 4, 2)
    assert r.tag_accuracy == pytest.approx(4 / 6)
    assert r.label_accuracy == pytest.approx(2 / 6)
    assert r.main_score == r.joint.f1


def test_same_span_different_tag_counts_for_segmentation_only():
    r = score_pos([["B-n", "E-n"]], [["B-v", "E-v"]])
    assert r.joint.correct == 0 and r.segmentation.correct == 1
    assert r.tag_accuracy == 0.0


def test_word_level_input_agrees_with_char_level():
    gold = [[("我", "r"), ("爱", "v"), ("北京", "ns")]]
    pred = [[("我", "r"), ("爱北京", "v")]]
    a = score_pos_words(gold, pred)
    b = score_pos([["S-r", "S-v", "B-ns", "E-ns"]], [["S-r", "B-v", "M-v", "E-v"]])
    assert a == b
    assert (a.joint.correct, a.joint.predicted, a.joint.gold) == (1, 2, 3)


def test_word_level_characters_must_match():
    with pytest.raises(ZenError, match="p:1: text differs from g:1 at character 2"):
        score_pos_words([[("我", "r"), ("爱", "v")]], [[("我", "r"), ("恨", "v")]], gold_name="g", pred_name="p")


def test_errors():
    with pytest.raises(ZenError, match="sentence 1, character 2: label 'X-n'"):
        score_pos([["S-n", "S-n"]], [["S-n", "X-n"]])
    with pytest.raises(ZenError, match="label 'S'"):
        score_pos([["S"]], [["S-n"]])
    with pytest.raises(ZenError, match="sentence 1 has 1 labels but gold has 2"):
        score_pos([["S-n", "S-n"]], [["S-n"]])
    with pytest.raises(ZenError, match="0 sentences"):
        score_pos([["S-n"]], [])
    with pytest.raises(ZenError, match="empty word or tag"):
        score_pos_words([[("我", "")]], [[("我", "r")]])


def test_empty_sentences():
    r = score_pos([[]], [[]])
    assert (r.joint.f1, r.tag_accuracy, r.label_accuracy) == (0.0, 0.0, 0.0)


def test_to_dict_and_tables():
    r = score_pos([["B-n", "E-n", "S-v"]], [["B-n", "E-n", "S-n"]])
    d = json.loads(json.dumps(r.to_dict()))
    assert d["main"] == "f1" and d["correct"] == 1 and d["segmentation"]["correct"] == 2
    words, chars = r.tables()
    assert words.rows[0][3] == "50.00" and words.rows[1][3] == "100.00"
    assert chars.rows[0][1] == "66.67"
