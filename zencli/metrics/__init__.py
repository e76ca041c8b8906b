"""Evaluation metrics, one module per kind of task, each agreeing with its benchmark's official scorer
(see docs/metrics.md). Metrics take already-read items (word lists, label lists, rows), never
files, and return a result with exact counts, `main_score`, `to_dict()` (JSON) and `tables()`.

Main score per metric (the one `evaluate` headlines and fine-tuning selects checkpoints on):
cws: word F1; ner: entity F1 (micro); pos: joint word F1 (span and tag); classification: accuracy;
ranking (DBQA): MRR; mrc (CMRC 2018, or SQuAD v1.1 with `metric="squad"`): the average of EM and F1, as the
CMRC 2018 script reports it.
"""

from zencli.metrics.classification import ClassificationResult, score_classification
from zencli.metrics.cws import CwsResult, score_cws, split_words
from zencli.metrics.mrc import MrcResult, score_mrc
from zencli.metrics.ner import NerResult, detect_scheme, score_ner
from zencli.metrics.pos import PosResult, score_pos, score_pos_words
from zencli.metrics.ranking import RankingResult, score_ranking
from zencli.metrics.result import PRF, MetricResult, Table, rich_tables

MAIN_SCORE: dict[str, str] = {
    "cws": "f1",
    "ner": "f1",
    "pos": "f1",
    "classification": "accuracy",
    "ranking": "mrr",
    "mrc": "average",
}

__all__ = [
    "MAIN_SCORE",
    "PRF",
    "ClassificationResult",
    "CwsResult",
    "MetricResult",
    "MrcResult",
    "NerResult",
    "PosResult",
    "RankingResult",
    "Table",
    "detect_scheme",
    "rich_tables",
    "score_classification",
    "score_cws",
    "score_mrc",
    "score_ner",
    "score_pos",
    "score_pos_words",
    "score_ranking",
    "split_words",
]
