"""Answer-selection scores for NLPCC-DBQA: MRR (the main score), MAP and F1 of the positive class.

Input rows are (question id, gold label 0/1, model score for the positive class), one per candidate
answer, in file order. Candidates are grouped by question id over the whole input (ids need not be
contiguous or sorted), and each question's candidates are ranked by score, highest first.

Ties: candidates with equal scores keep their input order (a stable sort), so the earlier candidate
ranks higher. This is deterministic, and neither optimistic nor pessimistic on purpose: it is what
`sorted(..., key=score, reverse=True)` over the file order gives.

- MRR: mean over questions of 1/rank of the first positive; a question without a positive adds 0
  and still counts in the denominator.
- MAP: mean over questions of the average of precision@rank at each positive's rank (0 without a
  positive), reported alongside because DBQA results are often given with it.
- F1: binary F1 of the positive class over all candidates, predicted positive iff score >= threshold
  (0.5 by default, the score being a probability), or from explicit predicted labels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zencli.errors import ZenError
from zencli.metrics.result import PRF, PRF_COLUMNS, Table, pct, prf_row


@dataclass(frozen=True)
class RankingResult:
    mrr: float
    map: float
    questions: int
    questions_without_positive: int
    candidates: int
    positive: PRF  # binary F1 of the positive class
    threshold: float | None  # None when predicted labels were given
    task: str = "ranking"
    main: str = "mrr"

    @property
    def main_score(self) -> float:
        return self.mrr

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "main": self.main,
            "mrr": self.mrr,
            "map": self.map,
            "f1": self.positive.f1,
            "precision": self.positive.precision,
            "recall": self.positive.recall,
            "correct": self.positive.correct,
            "predicted": self.positive.predicted,
            "gold": self.positive.gold,
            "questions": self.questions,
            "questions_without_positive": self.questions_without_positive,
            "candidates": self.candidates,
            "threshold": self.threshold,
        }

    def tables(self) -> list[Table]:
        ranking = Table(
            "Ranking",
            ["", "score", "questions", "without positive"],
            [
                ["MRR", pct(self.mrr), str(self.questions), str(self.questions_without_positive)],
                ["MAP", pct(self.map), str(self.questions), str(self.questions_without_positive)],
            ],
        )
        title = "Positive class" + (f" (score >= {self.threshold:g})" if self.threshold is not None else "")
        return [ranking, Table(title, PRF_COLUMNS, [prf_row("positive", self.positive)])]


def score_ranking(
    rows: Sequence[tuple[Any, int, float]],
    *,
    predicted_labels: Sequence[int] | None = None,
    threshold: float = 0.5,
    name: str = "input",
) -> RankingResult:
    """Score (qid, label, score) rows; `predicted_labels` (0/1 per row) overrides the threshold."""
    if not rows:
        raise ZenError(f"{name}: no candidates to score")
    if predicted_labels is not None and len(predicted_labels) != len(rows):
        raise ZenError(f"{name}: {len(predicted_labels)} predicted labels for {len(rows)} candidates; "
                       f"expected one per candidate")
    groups: dict[Any, list[tuple[float, int]]] = {}
    tp = n_pred = n_gold = 0
    for i, (qid, label, score) in enumerate(rows):
        if label not in (0, 1):
            raise ZenError(f"{name}: candidate {i + 1} (question {qid}) has label {label!r}; expected 0 or 1")
        try:
            score = float(score)
        except (TypeError, ValueError):
            score = math.nan
        if math.isnan(score):
            raise ZenError(f"{name}: candidate {i + 1} (question {qid}) has score {rows[i][2]!r}; expected a number")
        if predicted_labels is None:
            guess = int(score >= threshold)
        else:
            guess = predicted_labels[i]
            if guess not in (0, 1):
                raise ZenError(f"{name}: predicted label {i + 1} is {guess!r}; expected 0 or 1")
        tp += int(label == 1 and guess == 1)
        n_pred += int(guess == 1)
        n_gold += int(label == 1)
        groups.setdefault(qid, []).append((score, int(label)))
    reciprocal_ranks: list[float] = []
    average_precisions: list[float] = []
    for qid in sorted(groups, key=str):
        # Stable: equal scores keep input order.
        ranked = sorted(groups[qid], key=lambda c: c[0], reverse=True)
        ranks = [r for r, (_, label) in enumerate(ranked, start=1) if label == 1]
        reciprocal_ranks.append(1.0 / ranks[0] if ranks else 0.0)
        average_precisions.append(
            sum((k + 1) / r for k, r in enumerate(ranks)) / len(ranks) if ranks else 0.0
        )
    n_q = len(groups)
    return RankingResult(
        mrr=math.fsum(reciprocal_ranks) / n_q,
        map=math.fsum(average_precisions) / n_q,
        questions=n_q,
        questions_without_positive=sum(rr == 0.0 for rr in reciprocal_ranks),
        candidates=len(rows),
        positive=PRF(tp, n_pred, n_gold),
        threshold=threshold if predicted_labels is None else None,
    )
