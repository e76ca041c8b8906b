"""SQuAD v1.1 answer scores, computed the way the official `evaluate-v1.1.py` does (the scorer of
Arabic-SQuAD / ARCD results, e.g. ZEN 2.0's Arabic MRC numbers).

Per question (answers: the gold answer strings; prediction: one string):

- Normalisation (`normalize_answer`), in this order: `lower()`; delete every character of Python's
  `string.punctuation` (the 32 ASCII marks `!"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~`); replace the English
  articles `a`, `an`, `the` standing as whole words (`\\b(a|an|the)\\b`) by a space; collapse white space
  (`' '.join(text.split())`).
- EM: 1 iff the normalised prediction equals a normalised gold answer.
- F1: over the white-space tokens of the normalised strings, a bag-of-tokens overlap (multiset
  intersection, `Counter(pred) & Counter(gold)`): P = overlap/len(pred), R = overlap/len(gold), 0 when the
  overlap is 0 (so an empty prediction scores F1 0 even against an empty normalised answer, while its EM
  is 1 there).
- Both are maxima over the gold answers; a question missing from the predictions scores 0 and still counts.
  Question ids are matched as they are (the script does not strip them).
- Reported: EM and F1 as percentages of the question count (`100.0 * sum / total`).

Nothing else is normalised, on purpose: this is what makes zen's numbers comparable with published SQuAD-style
ones. For Arabic that means diacritics, tatweel and alef/yaa variants count as written (zen's Arabic
tokenizer settings are not applied to answers) and Arabic punctuation (`،` `؛` `؟`) is kept, as the script
keeps every non-ASCII mark. The script runs under Python 3 here: `\\b` and `split()` are Unicode-aware, so
an article is only removed between non-word characters of any script (under Python 2, whose `\\b` was
ASCII-only, `the` directly between Arabic letters would also have gone — text that has no such runs
scores the same).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower case, ASCII punctuation and English articles removed, white space collapsed (SQuAD v1.1)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _f1(prediction: str, answer: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(answer).split()
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_f1(answers: Sequence[str], prediction: str) -> float:
    """Best bag-of-tokens F1 of `prediction` over the gold `answers` (a fraction)."""
    return max(_f1(prediction, a) for a in answers)


def squad_em(answers: Sequence[str], prediction: str) -> int:
    """1 iff the normalised prediction equals a normalised gold answer."""
    pred = normalize_answer(prediction)
    return int(any(normalize_answer(a) == pred for a in answers))
