"""Sentence(-pair) classification scores: accuracy (the main score), macro-F1, per-class P/R/F1 and
the confusion counts.

Labels are strings. The label set is `labels` when given (a gold label outside it is an error),
otherwise the sorted set of gold labels. A predicted label outside the label set is simply wrong:
it is a miss for the gold class, counts in no class's precision, and is counted in
`unknown_predictions`. Macro-F1 is the unweighted mean of the per-class F1 over the label set,
i.e. scikit-learn's `f1_score(gold, pred, labels=label_set, average="macro", zero_division=0)`;
a class with neither gold nor predicted examples has F1 = 0 and still counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zencli.errors import ZenError
from zencli.metrics.result import PRF, PRF_COLUMNS, Table, pct, prf_row, ratio


@dataclass(frozen=True)
class ClassificationResult:
    correct: int
    total: int
    per_class: dict[str, PRF]  # in label-set order
    confusion: dict[str, dict[str, int]]  # gold label -> predicted label -> count (nonzero only)
    unknown_predictions: int
    task: str = "classification"
    main: str = "accuracy"

    @property
    def accuracy(self) -> float:
        return ratio(self.correct, self.total)

    @property
    def macro_f1(self) -> float:
        return ratio(sum(prf.f1 for prf in self.per_class.values()), len(self.per_class))

    @property
    def main_score(self) -> float:
        return self.accuracy

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "main": self.main,
            "accuracy": self.accuracy,
            "macro_f1": self.macro_f1,
            "correct": self.correct,
            "total": self.total,
            "unknown_predictions": self.unknown_predictions,
            "per_class": {label: prf.to_dict() for label, prf in self.per_class.items()},
            "confusion": self.confusion,
        }

    def tables(self) -> list[Table]:
        summary = Table(
            "Classification",
            ["", "score", "count"],
            [
                ["accuracy", pct(self.accuracy), f"{self.correct}/{self.total}"],
                ["macro-F1", pct(self.macro_f1), str(len(self.per_class)) + " classes"],
            ],
        )
        per_class = Table("Per class", PRF_COLUMNS, [prf_row(label, prf) for label, prf in self.per_class.items()])
        predicted = list(self.per_class)
        extra = sorted({p for row in self.confusion.values() for p in row} - set(predicted))
        confusion = Table(
            "Confusion (rows: gold, columns: predicted)",
            ["gold \\ pred", *predicted, *extra],
            [[g, *(str(self.confusion.get(g, {}).get(p, 0)) for p in [*predicted, *extra])] for g in self.per_class],
        )
        return [summary, per_class, confusion]


def score_classification(
    gold: Sequence[str],
    pred: Sequence[str],
    labels: Sequence[str] | None = None,
    *,
    gold_name: str = "gold",
    pred_name: str = "prediction",
) -> ClassificationResult:
    """Score predicted labels against gold ones, example by example."""
    if len(gold) != len(pred):
        raise ZenError(f"{pred_name} has {len(pred)} labels but {gold_name} has {len(gold)}; "
                       f"expected one prediction per gold example")
    if not gold:
        raise ZenError(f"{gold_name}: no examples to score")
    if labels is None:
        label_set = sorted(set(gold))
    else:
        label_set = list(dict.fromkeys(labels))
        known = set(label_set)
        for i, g in enumerate(gold):
            if g not in known:
                raise ZenError(f"{gold_name}: example {i + 1} has label {g!r}, which is not in the label set "
                               f"({', '.join(label_set)})")
    known = set(label_set)
    pairs = Counter(zip(gold, pred))
    gold_count = Counter(gold)
    pred_count = Counter(pred)
    per_class = {c: PRF(pairs[(c, c)], pred_count[c], gold_count[c]) for c in label_set}
    confusion: dict[str, dict[str, int]] = {}
    for (g, p), n in sorted(pairs.items()):
        confusion.setdefault(g, {})[p] = n
    correct = sum(pairs[(c, c)] for c in label_set)
    unknown = sum(n for p, n in pred_count.items() if p not in known)
    return ClassificationResult(correct, len(gold), per_class, confusion, unknown)


def roc_auc(scores: Any, labels: Any) -> float | None:
    """Area under the ROC curve of binary `labels` (1 = positive) ranked by `scores` (higher = more
    positive): the probability that a random positive scores above a random negative, ties counting
    half (the Mann-Whitney U statistic over average ranks; scikit-learn's `roc_auc_score`). None when
    one class is absent (the AUC is undefined)."""
    s = np.asarray(scores, np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1).astype(bool)
    if s.shape != y.shape:
        raise ValueError(f"{len(s)} scores but {len(y)} labels")
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    order = np.argsort(s, kind="stable")
    sorted_s = s[order]
    # Average rank (1-based) of each run of equal scores.
    starts = np.flatnonzero(np.concatenate([[True], sorted_s[1:] != sorted_s[:-1]]))
    ends = np.concatenate([starts[1:], [len(s)]])
    avg = (starts + ends + 1) / 2.0  # mean of ranks starts+1 .. ends
    ranks = np.empty(len(s), np.float64)
    ranks[order] = np.repeat(avg, ends - starts)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))
