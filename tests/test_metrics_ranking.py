import json
import random

import pytest

from zencli.errors import ZenError
from zencli.metrics.ranking import score_ranking

# Question ids interleaved on purpose: q1's candidates are not contiguous.
ROWS = [
    ("q1", 0, 0.9),
    ("q2", 1, 0.8),
    ("q1", 1, 0.7),
    ("q3", 0, 0.2),
    ("q2", 0, 0.95),
    ("q1", 0, 0.1),
    ("q3", 0, 0.6),
    ("q1", 1, 0.5),
]


def test_hand_computed_mrr_map_f1():
    r = score_ranking(ROWS)
    # q1 ranked: 0.9(-) 0.7(+) 0.5(+) 0.1(-): first positive at 2 -> 1/2; AP = (1/2 + 2/3) / 2 = 7/12
    # q2 ranked: 0.95(-) 0.8(+): 1/2; AP = 1/2
    # q3: no positive -> 0, still counted
    assert r.questions == 3 and r.questions_without_positive == 1 and r.candidates == 8
    assert r.mrr == pytest.approx((0.5 + 0.5 + 0.0) / 3)
    assert r.map == pytest.approx((7 / 12 + 0.5 + 0.0) / 3)
    # predicted positive iff score >= 0.5: 0.9 0.8 0.7 0.95 0.6 0.5 -> 6, of which 0.8 0.7 0.5 are positive
    assert (r.positive.correct, r.positive.predicted, r.positive.gold) == (3, 6, 3)
    assert r.positive.f1 == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert r.main_score == r.mrr


def test_row_order_does_not_matter_beyond_ties():
    shuffled = ROWS[:]
    random.Random(0).shuffle(shuffled)
    assert score_ranking(shuffled).mrr == pytest.approx(score_ranking(ROWS).mrr)


def test_ties_keep_input_order():
    assert score_ranking([("q", 0, 0.5), ("q", 1, 0.5)]).mrr == 0.5
    assert score_ranking([("q", 1, 0.5), ("q", 0, 0.5)]).mrr == 1.0


def test_question_without_positive_counts_in_denominator():
    r = score_ranking([("a", 1, 0.1), ("b", 0, 0.9), ("c", 0, 0.3)])
    assert r.mrr == pytest.approx(1 / 3)
    assert r.positive.predicted == 1 and r.positive.correct == 0 and r.positive.f1 == 0.0


def test_integer_ids_and_explicit_predicted_labels():
    rows = [(2, 0, 0.9), (10, 1, 0.2), (2, 1, 0.8)]
    r = score_ranking(rows, predicted_labels=[0, 1, 1])
    assert r.mrr == pytest.approx((0.5 + 1.0) / 2)
    assert (r.positive.correct, r.positive.predicted, r.positive.gold) == (2, 2, 2)
    assert r.threshold is None


def test_threshold():
    r = score_ranking([("q", 1, 0.3), ("q", 0, 0.1)], threshold=0.2)
    assert (r.positive.correct, r.positive.predicted) == (1, 1)


def test_errors():
    with pytest.raises(ZenError, match="candidate 2 \\(question q\\) has label 2"):
        score_ranking([("q", 0, 0.1), ("q", 2, 0.3)])
    with pytest.raises(ZenError, match="has score nan"):
        score_ranking([("q", 0, float("nan"))])
    with pytest.raises(ZenError, match="no candidates"):
        score_ranking([])
    with pytest.raises(ZenError, match="1 predicted labels for 2 candidates"):
        score_ranking([("q", 0, 0.1), ("q", 1, 0.3)], predicted_labels=[1])
    with pytest.raises(ZenError, match="predicted label 1 is 3"):
        score_ranking([("q", 0, 0.1)], predicted_labels=[3])


def test_to_dict_and_tables():
    r = score_ranking(ROWS)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["main"] == "mrr" and d["questions"] == 3 and d["threshold"] == 0.5
    ranking, positive = r.tables()
    assert ranking.rows[0][:2] == ["MRR", "33.33"]
    assert positive.title == "Positive class (score >= 0.5)"


def test_non_numeric_score_is_an_error():
    with pytest.raises(ZenError, match="candidate 1 \\(question q\\) has score 'high'"):
        score_ranking([("q", 1, "high")])
    assert score_ranking([("q", 1, 0.7)]).mrr == 1.0
