"""Answer selection (qa, NLPCC-DBQA): every (question, candidate answer) pair gets a score, and each
question's candidates are ranked by it.

Reading: `zencli.data.readers.qa` (qid<TAB>question<TAB>answer<TAB>label and the 3- / 2-column layouts;
without a qid column questions are numbered in order of appearance). Labels are 0 / 1.

Model: the pair `[CLS] question [SEP] candidate [SEP]` → pooled [CLS] → `CandidateRankingHead` (two
outputs, trained with cross-entropy on each candidate's own label). The score is the probability of the
positive class; long pairs are windowed like sentence pairs (zencli.tasks.classification: the shorter
side whole when it fits in half the room, nothing truncated) and the score is the mean of the windows'
positive probabilities. Scoring groups candidates by question id: MRR (the main score), MAP, and F1 of
the positive class at score >= 0.5 (zencli.metrics.ranking).

Prediction input: one `question<TAB>candidate` per line. Output (`zen predict --format`):
- text: the score alone, one per line, written exactly (shortest round-trip float), which is the
  NLPCC-DBQA prediction format that `zen evaluate --task qa --gold GOLD --pred FILE` scores;
- json: `{"question": …, "answer": …, "score": …}`.
An empty input line gives an empty output line (json: score null).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from zencli.data.readers import QaExample
from zencli.errors import ZenError, where
from zencli.model.heads import CandidateRankingHead
from zencli.tasks.base import register
from zencli.tasks.classification import WindowedTask
from zencli.tasks.scoring import Evaluation, GoldData, score_predictions

LABELS = ["0", "1"]


@register
class QaTask(WindowedTask):
    name = "qa"
    description = "answer selection (NLPCC-DBQA: a score per question/candidate pair; MRR, MAP, F1)"
    main_metric = "mrr"
    output_formats: ClassVar[tuple[str, ...]] = ("text", "json")
    pair = True

    # --- state: the two fixed classes -------------------------------------------------------------------
    @classmethod
    def build_state(cls, settings, train: GoldData) -> dict[str, Any]:
        if not any(e.label == "1" for e in train.examples):
            raise ZenError(f"{train.path}: no candidate is labelled 1; a ranking model needs correct answers "
                           f"to learn from")
        return {"labels": list(LABELS)}

    def load_state(self, state: dict[str, Any]) -> None:
        if state.get("labels") != LABELS:
            raise ZenError(f"task {self.name}: state 'labels': expected {LABELS}, got {state.get('labels')!r}")

    def state(self) -> dict[str, Any]:
        return {"labels": list(LABELS)}

    def n_classes(self) -> int:
        return 2

    def texts(self, example: QaExample) -> tuple[str, str]:
        return example.question, example.answer

    def label_ids(self, examples: Sequence[QaExample]) -> list[int]:
        return [int(e.label) for e in examples]

    # --- data -------------------------------------------------------------------------------------------
    def parse_input(self, text: str, source: str, line: int) -> QaExample:
        if not text.strip():
            return QaExample("", "", "", None, line)
        fields = text.split("\t")
        if len(fields) != 2:
            raise ZenError(f"{where(source, line)}: expected question<TAB>candidate (2 TAB-separated fields), "
                           f"got {len(fields)}")
        if not fields[0].strip() or not fields[1].strip():
            side = "question" if not fields[0].strip() else "candidate"
            raise ZenError(f"{where(source, line)}: empty {side}; expected a question and a candidate answer "
                           f"separated by a TAB")
        return QaExample("", fields[0], fields[1], None, line)

    # --- model ------------------------------------------------------------------------------------------
    def build_head(self, hidden_size: int) -> CandidateRankingHead:
        return CandidateRankingHead(hidden_size, dropout=self.settings.dropout, loss="binary")

    @torch.no_grad()
    def predict(self, model, inputs, examples, batch_size=None) -> list[float | None]:
        """P(positive) per candidate (mean over its windows); None for an empty input line."""
        batch_size = batch_size or self.settings.eval_batch_size
        probs = self._predicting(model, lambda: self.probabilities(model, inputs, examples, batch_size))
        return [None if p is None else float(p[1]) for p in probs]

    # --- scoring ----------------------------------------------------------------------------------------
    def evaluate(self, gold: GoldData, predictions: Sequence[float | None], *, name: str = "model",
                 train: GoldData | None = None) -> Evaluation:
        scores = [float("nan") if p is None else p for p in predictions]  # gold candidates are never empty
        if any(np.isnan(scores)):
            raise ValueError("a gold candidate got no score")
        return score_predictions(gold, scores, pred_name=name, pred_format="model", notes=self.data_notes(gold))

    # --- output -----------------------------------------------------------------------------------------
    def format_prediction(self, example: QaExample, prediction: float | None, fmt: str) -> str:
        if fmt == "json":
            return json.dumps({"question": example.question, "answer": example.answer, "score": prediction},
                              ensure_ascii=False)
        return "" if prediction is None else repr(prediction)
