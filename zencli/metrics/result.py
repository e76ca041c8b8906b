"""What every metric returns: exact counts, the scores derived from them, and two renderings.

Scores are fractions in [0, 1] computed from integer counts the way the official scorers compute
them (F = 2PR/(P+R), 0 when P+R = 0; a ratio with a zero denominator is 0). Each result knows its
`main` score (the one a model is selected on), turns into plain JSON (`to_dict`) and into plain
tables (`tables`) that `rich_tables` turns into Rich tables; the rendering shows percentages.
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass, field
from typing import Any, Protocol

from rich.markup import escape
from rich.table import Table as RichTable

from zencli.errors import ZenError


def check_sentence_counts(gold: Sized, pred: Sized, gold_name: str, pred_name: str, unit: str = "sentence") -> None:
    """A scorer compares sentence i of the prediction with sentence i of the gold file: equal counts or a
    one-line error."""
    if len(gold) != len(pred):
        raise ZenError(f"{pred_name} has {len(pred)} sentences but {gold_name} has {len(gold)}; "
                       f"expected one predicted {unit} per gold {unit}")


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, or 0.0 when the denominator is 0 (no predictions, no gold items)."""
    return numerator / denominator if denominator else 0.0


def f_score(precision: float, recall: float) -> float:
    """Harmonic mean as the official scorers write it: 2PR/(P+R), 0 when P+R = 0."""
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


@dataclass(frozen=True)
class PRF:
    """Counts of one precision/recall comparison: `correct` items among `predicted` and `gold` ones."""

    correct: int
    predicted: int
    gold: int

    @property
    def precision(self) -> float:
        return ratio(self.correct, self.predicted)

    @property
    def recall(self) -> float:
        return ratio(self.correct, self.gold)

    @property
    def f1(self) -> float:
        return f_score(self.precision, self.recall)

    def __add__(self, other: PRF) -> PRF:
        return PRF(self.correct + other.correct, self.predicted + other.predicted, self.gold + other.gold)

    def to_dict(self) -> dict[str, float | int]:
        return {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "correct": self.correct,
            "predicted": self.predicted,
            "gold": self.gold,
        }


@dataclass
class Table:
    """A renderer-neutral table: a title, column names and rows of already-formatted cells."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)


class MetricResult(Protocol):
    """The interface every metric's result implements."""

    task: str  # "cws", "ner", ...
    main: str  # key of the main score in to_dict()

    @property
    def main_score(self) -> float: ...

    def to_dict(self) -> dict[str, Any]: ...

    def tables(self) -> list[Table]: ...


def pct(value: float | None, digits: int = 2) -> str:
    """A fraction as a percentage string ('97.35'); '-' for a score that does not apply."""
    return "-" if value is None else f"{100 * value:.{digits}f}"


def prf_row(name: str, prf: PRF, digits: int = 2) -> list[str]:
    """The cells [name, P, R, F1, correct, predicted, gold] shared by the P/R/F tables."""
    return [
        name,
        pct(prf.precision, digits),
        pct(prf.recall, digits),
        pct(prf.f1, digits),
        str(prf.correct),
        str(prf.predicted),
        str(prf.gold),
    ]


PRF_COLUMNS = ["", "P", "R", "F1", "correct", "predicted", "gold"]


def rich_tables(result: MetricResult) -> list[Any]:
    """Rich `Table` objects for a result (rich is imported here so the metrics stay import-light)."""
    # Cells are data (labels such as `[UNK]` or `[/x]`), never Rich markup.
    out = []
    for t in result.tables():
        rt = RichTable(title=escape(t.title))
        for i, col in enumerate(t.columns):
            rt.add_column(escape(col), justify="left" if i == 0 else "right")
        for row in t.rows:
            rt.add_row(*(escape(str(c)) for c in row))
        out.append(rt)
    return out
