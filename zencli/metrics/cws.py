"""Chinese word segmentation scores, as the SIGHAN bakeoff scorer defines them.

A predicted word is correct iff the same character span [start, end) is a word in the gold
sentence. Precision = correct / predicted words and recall = correct / gold words, both summed over
the whole file before dividing (micro); F = 2PR/(P+R). Given the training word list, gold words
split into OOV (not in the training data) and IV ones, giving the OOV rate (share of gold words that
are OOV), OOV recall and IV recall. Both sides must hold the same characters, sentence by sentence:
anything else is a misaligned prediction file and is reported, never scored.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from zencli.errors import ZenError
from zencli.metrics.result import PRF, PRF_COLUMNS, Table, check_sentence_counts, pct, prf_row, ratio


def split_words(line: str) -> list[str]:
    """Words of one segmented line. `str.split()` splits on every Unicode space, U+3000 included."""
    return line.split()


def word_spans(words: Sequence[str]) -> list[tuple[int, int]]:
    """Character spans [start, end) of consecutive words."""
    spans = []
    start = 0
    for w in words:
        end = start + len(w)
        spans.append((start, end))
        start = end
    return spans


@dataclass(frozen=True)
class OovStats:
    """Gold words split by whether the training data has them, and how many of each were found."""

    gold_oov: int
    correct_oov: int
    gold_iv: int
    correct_iv: int

    @property
    def oov_rate(self) -> float:
        return ratio(self.gold_oov, self.gold_oov + self.gold_iv)

    @property
    def oov_recall(self) -> float:
        return ratio(self.correct_oov, self.gold_oov)

    @property
    def iv_recall(self) -> float:
        return ratio(self.correct_iv, self.gold_iv)


@dataclass(frozen=True)
class CwsResult:
    words: PRF
    sentences: int
    oov: OovStats | None  # None when no training word list was given
    task: str = "cws"
    main: str = "f1"

    @property
    def main_score(self) -> float:
        return self.words.f1

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"task": self.task, "main": self.main, "sentences": self.sentences}
        d.update(self.words.to_dict())
        if self.oov is not None:
            d.update(
                oov_rate=self.oov.oov_rate,
                oov_recall=self.oov.oov_recall,
                iv_recall=self.oov.iv_recall,
                gold_oov=self.oov.gold_oov,
                correct_oov=self.oov.correct_oov,
                gold_iv=self.oov.gold_iv,
                correct_iv=self.oov.correct_iv,
            )
        return d

    def tables(self) -> list[Table]:
        out = [Table("Segmentation (words)", PRF_COLUMNS, [prf_row("words", self.words)])]
        if self.oov is not None:
            o = self.oov
            out.append(
                Table(
                    "OOV / IV (gold words)",
                    ["", "rate", "recall", "correct", "gold"],
                    [
                        ["OOV", pct(o.oov_rate), pct(o.oov_recall), str(o.correct_oov), str(o.gold_oov)],
                        ["IV", pct(ratio(o.gold_iv, o.gold_oov + o.gold_iv)), pct(o.iv_recall), str(o.correct_iv),
                         str(o.gold_iv)],
                    ],
                )
            )
        return out


def _first_difference(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def check_same_text(gold: str, pred: str, line: int, gold_name: str, pred_name: str) -> None:
    """Raise a ZenError showing where line `line` of the two sides stops having the same characters."""
    if gold == pred:
        return
    k = _first_difference(gold, pred)
    lo = max(0, k - 5)
    raise ZenError(
        f"{pred_name}:{line}: text differs from {gold_name}:{line} at character {k + 1} "
        f"(gold {len(gold)} chars '{gold[lo:k + 6]}', prediction {len(pred)} chars '{pred[lo:k + 6]}'); "
        f"expected the same characters, only the spaces between words may differ"
    )


def _check_words(words: Sequence[str], line: int, name: str) -> None:
    for i, w in enumerate(words):
        if not w or any(ch.isspace() for ch in w):
            raise ZenError(f"{name}:{line}: word {i + 1} ({w!r}) is empty or holds a space; expected words "
                           f"as split_words() gives them")


def score_cws(
    gold: Sequence[Sequence[str]],
    pred: Sequence[Sequence[str]],
    train_words: Collection[str] | None = None,
    *,
    gold_name: str = "gold",
    pred_name: str = "prediction",
) -> CwsResult:
    """Score predicted segmentations against gold ones: one word list per sentence (line), aligned.

    Sentence i is line i + 1 of both files (blank lines included) in error messages. `train_words`
    (a set, ideally) enables the OOV/IV figures.
    """
    check_sentence_counts(gold, pred, gold_name, pred_name, "line")
    correct = predicted = total_gold = 0
    gold_oov = correct_oov = gold_iv = correct_iv = 0
    for i, (g_words, p_words) in enumerate(zip(gold, pred)):
        line = i + 1
        _check_words(g_words, line, gold_name)
        _check_words(p_words, line, pred_name)
        check_same_text("".join(g_words), "".join(p_words), line, gold_name, pred_name)
        p_spans = set(word_spans(p_words))
        predicted += len(p_words)
        total_gold += len(g_words)
        for w, span in zip(g_words, word_spans(g_words)):
            hit = int(span in p_spans)
            correct += hit
            if train_words is not None:
                if w in train_words:
                    gold_iv += 1
                    correct_iv += hit
                else:
                    gold_oov += 1
                    correct_oov += hit
    oov = OovStats(gold_oov, correct_oov, gold_iv, correct_iv) if train_words is not None else None
    return CwsResult(PRF(correct, predicted, total_gold), len(gold), oov)
