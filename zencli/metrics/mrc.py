"""CMRC 2018 span-extraction scores, computed the way the official `cmrc2018_evaluate.py` does.

Per question (answers: the gold answer strings; prediction: one string):

- Normalisation: `lower()` then `strip()`.
- Mixed segmentation: each character in U+4E00..U+9FA5 and each character of `PUNCTUATION` is its
  own token; each maximal run of other characters is tokenised like NLTK's `word_tokenize`
  (`treebank_tokenize` below). For F1, punctuation characters are dropped *before* segmenting, so
  they do not break a run: 'ab-cd' is one token there.
- F1: the longest common contiguous run of tokens (not a bag-of-tokens overlap) between the answer
  and the prediction, P = lcs/len(prediction), R = lcs/len(answer), 0 when lcs = 0; the maximum
  over the gold answers.
- EM: 1 iff, after lower/strip and deleting the punctuation characters, the prediction equals some
  gold answer as a string.
- A question missing from the predictions scores 0 on both and counts as skipped.
- Reported: EM, F1 and AVERAGE = (EM + F1) / 2, as percentages of the question count.

`score_mrc(..., metric="squad")` scores with SQuAD v1.1's script instead (`zencli.metrics.squad`: its
normalisation, bag-of-tokens F1, ids unstripped), the scorer of Arabic-SQuAD / ARCD numbers; the result then
prints the script's `exact_match` / `f1`, and AVERAGE stays zen's score for picking checkpoints.

More: docs/design.md, "CMRC 2018 scores".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zencli.errors import ZenError
from zencli.metrics.result import Table, ratio
from zencli.metrics.squad import squad_em, squad_f1

MRC_METRICS = ("cmrc2018", "squad")  # `task.metric` of mrc: the first is the default

# The official list, in its order; '……' is deliberately one (never matching) entry, see above.
PUNCTUATION: frozenset[str] = frozenset(
    ["-", ":", "_", "*", "^", "/", "\\", "~", "`", "+", "=",
     "，", "。", "：", "？", "！", "“", "”", "；", "’", "《", "》", "……", "·", "、",
     "「", "」", "（", "）", "－", "～", "『", "』"]
)

# --- NLTK 3.3 word_tokenize (improved Treebank rules), applied in this order -----------------------
_A = re.ASCII  # NLTK compiled these without re.U: under Python 2 \d \s \S \b were ASCII-only
_STARTING_QUOTES = [
    (re.compile("([«“‘„]|[`]+)"), r" \1 "),
    (re.compile(r'^"', _A), "``"),
    (re.compile(r"(``)", _A), r" \1 "),
    (re.compile(r"([ (\[{<])(\"|'{2})", _A), r"\1 `` "),
]
_PUNCTUATION_RULES = [
    (re.compile(r"([^.])(\.)([\])}>\"'»”’ ]*)\s*$"), r"\1 \2 \3 "),  # final period (Unicode rule)
    (re.compile(r"([:,])([^\d])", _A), r" \1 \2"),  # ':' ',' unless before a digit ('1,000')
    (re.compile(r"([:,])$", _A), r" \1 "),
    (re.compile(r"\.\.\.", _A), r" ... "),
    (re.compile(r"[;@#$%&]", _A), r" \g<0> "),
    (re.compile(r"([^.])(\.)([\])}>\"']*)\s*$", _A), r"\1 \2\3 "),
    (re.compile(r"[?!]", _A), r" \g<0> "),
    (re.compile(r"([^'])' ", _A), r"\1 ' "),
]
_BRACKETS = (re.compile(r"[\]\[(){}<>]", _A), r" \g<0> ")
_DOUBLE_DASH = (re.compile(r"--", _A), r" -- ")
_ENDING_QUOTES = [
    (re.compile("([»”’])"), r" \1 "),
    (re.compile(r'"', _A), " '' "),
    (re.compile(r"(\S)('')", _A), r"\1 \2 "),
    (re.compile(r"([^' ])('[sS]|'[mM]|'[dD]|') ", _A), r"\1 \2 "),
    (re.compile(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", _A), r"\1 \2 "),
]
_CONTRACTIONS = [
    re.compile(p, _A)
    for p in (
        r"(?i)\b(can)(not)\b",
        r"(?i)\b(d)('ye)\b",
        r"(?i)\b(gim)(me)\b",
        r"(?i)\b(gon)(na)\b",
        r"(?i)\b(got)(ta)\b",
        r"(?i)\b(lem)(me)\b",
        r"(?i)\b(mor)('n)\b",
        r"(?i)\b(wan)(na)\s",
        r"(?i) ('t)(is)\b",
        r"(?i) ('t)(was)\b",
    )
]


def treebank_tokenize(text: str) -> list[str]:
    """Word tokens of `text` by NLTK 3.3's word tokenizer rules (without Punkt, see module doc)."""
    for pattern, repl in _STARTING_QUOTES + _PUNCTUATION_RULES + [_BRACKETS, _DOUBLE_DASH]:
        text = pattern.sub(repl, text)
    text = f" {text} "
    for pattern, repl in _ENDING_QUOTES:
        text = pattern.sub(repl, text)
    for pattern in _CONTRACTIONS:
        text = pattern.sub(r" \1 \2 ", text)
    return text.split()


def _is_cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fa5"


def mixed_segmentation(text: str, remove_punctuation: bool = False) -> list[str]:
    """Tokens of a normalised string: CJK characters and punctuation alone, other runs tokenised."""
    tokens: list[str] = []
    run: list[str] = []
    for ch in text.lower().strip():
        if remove_punctuation and ch in PUNCTUATION:
            continue
        if _is_cjk(ch) or ch in PUNCTUATION:
            if run:
                tokens.extend(treebank_tokenize("".join(run)))
                run = []
            tokens.append(ch)
        else:
            run.append(ch)
    if run:
        tokens.extend(treebank_tokenize("".join(run)))
    return tokens


def remove_punctuation(text: str) -> str:
    """Normalise (lower, strip), then delete the punctuation characters."""
    return "".join(ch for ch in text.lower().strip() if ch not in PUNCTUATION)


def longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common contiguous run of tokens (longest common substring)."""
    best = 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                cur[j + 1] = prev[j] + 1
                if cur[j + 1] > best:
                    best = cur[j + 1]
        prev = cur
    return best


def f1_score(answers: Sequence[str], prediction: str) -> float:
    """Best LCS-based F1 of `prediction` over the gold `answers` (a fraction)."""
    pred_tokens = mixed_segmentation(prediction, remove_punctuation=True)
    best = 0.0
    for answer in answers:
        ans_tokens = mixed_segmentation(answer, remove_punctuation=True)
        lcs = longest_common_run(ans_tokens, pred_tokens)
        if lcs == 0:
            continue
        precision = 1.0 * lcs / len(pred_tokens)
        recall = 1.0 * lcs / len(ans_tokens)
        best = max(best, (2 * precision * recall) / (precision + recall))
    return best


def em_score(answers: Sequence[str], prediction: str) -> int:
    """1 iff the prediction equals a gold answer after normalisation and punctuation removal."""
    pred = remove_punctuation(prediction)
    return int(any(remove_punctuation(a) == pred for a in answers))


@dataclass(frozen=True)
class MrcResult:
    em_sum: int
    f1_sum: float  # sum of per-question F1 fractions, in gold order (as the official script sums)
    total: int
    skipped: int  # gold questions without a prediction
    extra_predictions: int  # predictions whose id is not a gold question (ignored)
    task: str = "mrc"
    main: str = "average"
    metric: str = "cmrc2018"  # whose script computed em/f1: cmrc2018 or squad

    # Percentages exactly as the official script computes them: 100.0 * sum / total.
    @property
    def em_percent(self) -> float:
        return 100.0 * self.em_sum / self.total if self.total else 0.0

    @property
    def f1_percent(self) -> float:
        return 100.0 * self.f1_sum / self.total if self.total else 0.0

    @property
    def average_percent(self) -> float:
        return (self.em_percent + self.f1_percent) * 0.5

    @property
    def em(self) -> float:
        return ratio(self.em_sum, self.total)

    @property
    def f1(self) -> float:
        return ratio(self.f1_sum, self.total)

    @property
    def average(self) -> float:
        return (self.em + self.f1) * 0.5

    @property
    def main_score(self) -> float:
        return self.average

    def to_dict(self) -> dict[str, Any]:
        if self.metric == "squad":  # evaluate-v1.1.py prints {"exact_match": …, "f1": …}
            official: dict[str, Any] = {"exact_match": self.em_percent, "f1": self.f1_percent}
        else:
            official = {"AVERAGE": f"{self.average_percent:.3f}", "F1": f"{self.f1_percent:.3f}",
                        "EM": f"{self.em_percent:.3f}", "TOTAL": self.total, "SKIP": self.skipped}
        return {
            "task": self.task,
            "main": self.main,
            "metric": self.metric,
            "average": self.average,
            "em": self.em,
            "f1": self.f1,
            "total": self.total,
            "skipped": self.skipped,
            "extra_predictions": self.extra_predictions,
            "em_sum": self.em_sum,
            "f1_sum": self.f1_sum,
            "official": official,  # the official script's own printout, for a side-by-side check
        }

    def tables(self) -> list[Table]:
        return [
            Table(
                "SQuAD v1.1" if self.metric == "squad" else "CMRC 2018",
                ["", "score", "questions"],
                [
                    ["EM", f"{self.em_percent:.3f}", str(self.total)],
                    ["F1", f"{self.f1_percent:.3f}", str(self.total)],
                    ["average", f"{self.average_percent:.3f}", str(self.total)],
                    ["unanswered", "-", str(self.skipped)],
                ],
            )
        ]


def score_mrc(
    gold: Sequence[tuple[str, Sequence[str]]] | Mapping[str, Sequence[str]],
    predictions: Mapping[str, str],
    *,
    gold_name: str = "gold",
    metric: str = "cmrc2018",
) -> MrcResult:
    """Score predictions (question id -> answer text) against gold (question id, answers) in order, with
    the CMRC 2018 script's EM/F1 (`metric="cmrc2018"`) or SQuAD v1.1's (`"squad"`).

    cmrc2018 strips gold ids, as its script does before looking them up; squad's script does not.
    """
    if metric not in MRC_METRICS:
        raise ZenError(f"mrc metric {metric!r}: expected one of {', '.join(MRC_METRICS)}")
    f1_of, em_of = (squad_f1, squad_em) if metric == "squad" else (f1_score, em_score)
    items = list(gold.items()) if isinstance(gold, Mapping) else list(gold)
    if not items:
        raise ZenError(f"{gold_name}: no questions to score")
    em_sum = 0
    f1_sum = 0.0
    skipped = 0
    seen: set[str] = set()
    for qid, answers in items:
        if metric == "cmrc2018":
            qid = qid.strip()
        seen.add(qid)
        if not answers:
            raise ZenError(f"{gold_name}: question {qid} has no gold answer; expected at least one")
        if qid not in predictions:
            skipped += 1
            continue
        prediction = str(predictions[qid])
        f1_sum += f1_of(answers, prediction)
        em_sum += em_of(answers, prediction)
    extra = sum(1 for qid in predictions if qid not in seen)
    return MrcResult(em_sum, f1_sum, len(items), skipped, extra, metric=metric)
