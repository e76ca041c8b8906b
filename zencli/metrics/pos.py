"""Joint segmentation and part-of-speech tagging scores.

Input is one label per character, `B-TAG`, `M-TAG`, `E-TAG` or `S-TAG` (`I-TAG` is read as `M-TAG`),
or words with tags, which `words_to_char_labels` turns into those labels. Reported:

- joint word P/R/F1 (the main score): a word is correct iff its character span AND its tag match;
- segmentation P/R/F1: spans only;
- tag accuracy: per character, the tag of the word it belongs to (the part after `X-`), compared;
- label accuracy: per character, the full joint label (`B-NN` vs `M-NN`) compared.

Decoding labels into words. Every character belongs to exactly one word, so a predicted sequence
that breaks BMES order cannot be dropped the way an ill-formed NER chunk is; it is cut into words by
one deterministic rule, applied to gold and prediction alike. A new word starts at character i
(i > 0) iff
    label i is B- or S-,  or  label i-1 is E- or S-,  or  the tag of label i differs from label i-1's.
Otherwise (M-/E- after B-/M- of the same tag) character i continues the current word. So
`M-n E-n` at the start of a sentence is one word `n`, `S-v M-n` are two words, `B-n E-v` are two.
A word's tag is then the tag shared by all its characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zencli.errors import ZenError
from zencli.metrics.cws import check_same_text
from zencli.metrics.result import PRF, PRF_COLUMNS, Table, pct, prf_row, ratio

WordSpan = tuple[int, int, str]  # [start, end) and tag

_PREFIXES = {"B": "B", "M": "M", "I": "M", "E": "E", "S": "S"}


def parse_pos_label(label: str) -> tuple[str, str]:
    """`B-NN` -> ('B', 'NN'); `I-NN` -> ('M', 'NN'). Raises ValueError on anything else."""
    if len(label) > 2 and label[1] == "-" and label[0] in _PREFIXES:
        return _PREFIXES[label[0]], label[2:]
    raise ValueError(label)


def _parse_all(labels: Sequence[str], name: str, sentence: int) -> list[tuple[str, str]]:
    out = []
    for j, label in enumerate(labels):
        try:
            out.append(parse_pos_label(label))
        except ValueError:
            raise ZenError(
                f"{name}: sentence {sentence}, character {j + 1}: label {label!r} is not a joint "
                f"segmentation/POS label; expected B-, M-, E- or S- followed by a tag (e.g. S-NN)"
            ) from None
    return out


def decode_words(labels: Sequence[tuple[str, str]]) -> list[WordSpan]:
    """Cut parsed (prefix, tag) character labels into tagged words by the module's rule."""
    words: list[WordSpan] = []
    start = 0
    for i in range(1, len(labels) + 1):
        if i == len(labels):
            boundary = True
        else:
            prefix, tag = labels[i]
            prev_prefix, prev_tag = labels[i - 1]
            boundary = prefix in "BS" or prev_prefix in "ES" or tag != prev_tag
        if boundary:
            words.append((start, i, labels[start][1]))
            start = i
    return words


def words_to_char_labels(words: Sequence[tuple[str, str]]) -> list[str]:
    """[(word, tag), ...] -> one joint label per character (S- for a 1-char word, else B- M-* E-)."""
    labels = []
    for word, tag in words:
        if len(word) == 1:
            labels.append(f"S-{tag}")
        else:
            labels.append(f"B-{tag}")
            labels.extend(f"M-{tag}" for _ in range(len(word) - 2))
            labels.append(f"E-{tag}")
    return labels


@dataclass(frozen=True)
class PosResult:
    joint: PRF  # span and tag
    segmentation: PRF  # span only
    chars: int
    tag_correct_chars: int
    label_correct_chars: int
    sentences: int
    task: str = "pos"
    main: str = "f1"

    @property
    def tag_accuracy(self) -> float:
        return ratio(self.tag_correct_chars, self.chars)

    @property
    def label_accuracy(self) -> float:
        return ratio(self.label_correct_chars, self.chars)

    @property
    def main_score(self) -> float:
        return self.joint.f1

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"task": self.task, "main": self.main, "sentences": self.sentences}
        d.update(self.joint.to_dict())
        d["segmentation"] = self.segmentation.to_dict()
        d.update(
            tag_accuracy=self.tag_accuracy,
            label_accuracy=self.label_accuracy,
            chars=self.chars,
            tag_correct_chars=self.tag_correct_chars,
            label_correct_chars=self.label_correct_chars,
        )
        return d

    def tables(self) -> list[Table]:
        return [
            Table(
                "Words",
                PRF_COLUMNS,
                [prf_row("word + tag", self.joint), prf_row("segmentation", self.segmentation)],
            ),
            Table(
                "Characters",
                ["", "accuracy", "correct", "chars"],
                [
                    ["tag", pct(self.tag_accuracy), str(self.tag_correct_chars), str(self.chars)],
                    ["joint label", pct(self.label_accuracy), str(self.label_correct_chars), str(self.chars)],
                ],
            ),
        ]


def score_pos(
    gold: Sequence[Sequence[str]],
    pred: Sequence[Sequence[str]],
    *,
    gold_name: str = "gold",
    pred_name: str = "prediction",
) -> PosResult:
    """Score per-character joint labels (one list per sentence, same length on both sides)."""
    if len(gold) != len(pred):
        raise ZenError(f"{pred_name} has {len(pred)} sentences but {gold_name} has {len(gold)}; "
                       f"expected one predicted sentence per gold sentence")
    joint = seg = PRF(0, 0, 0)
    chars = tag_ok = label_ok = 0
    for i, (g_raw, p_raw) in enumerate(zip(gold, pred)):
        if len(g_raw) != len(p_raw):
            raise ZenError(f"{pred_name}: sentence {i + 1} has {len(p_raw)} labels but {gold_name} has "
                           f"{len(g_raw)}; expected one label per character")
        g = _parse_all(g_raw, gold_name, i + 1)
        p = _parse_all(p_raw, pred_name, i + 1)
        chars += len(g)
        tag_ok += sum(gt == pt for (_, gt), (_, pt) in zip(g, p))
        label_ok += sum(gl == pl for gl, pl in zip(g, p))
        g_words, p_words = decode_words(g), decode_words(p)
        joint += PRF(len(set(g_words) & set(p_words)), len(p_words), len(g_words))
        g_spans = {(s, e) for s, e, _ in g_words}
        seg += PRF(sum((s, e) in g_spans for s, e, _ in p_words), len(p_words), len(g_words))
    return PosResult(joint, seg, chars, tag_ok, label_ok, len(gold))


def score_pos_words(
    gold: Sequence[Sequence[tuple[str, str]]],
    pred: Sequence[Sequence[tuple[str, str]]],
    *,
    gold_name: str = "gold",
    pred_name: str = "prediction",
) -> PosResult:
    """Score tagged words ([(word, tag), ...] per sentence); each sentence's characters must match."""
    if len(gold) != len(pred):
        raise ZenError(f"{pred_name} has {len(pred)} sentences but {gold_name} has {len(gold)}; "
                       f"expected one predicted line per gold line")
    for i, (g, p) in enumerate(zip(gold, pred)):
        for words, name in ((g, gold_name), (p, pred_name)):
            for j, (w, t) in enumerate(words):
                if not w or not t:
                    raise ZenError(f"{name}:{i + 1}: word {j + 1} ({w!r}/{t!r}) has an empty word or tag")
        check_same_text("".join(w for w, _ in g), "".join(w for w, _ in p), i + 1, gold_name, pred_name)
    return score_pos(
        [words_to_char_labels(s) for s in gold],
        [words_to_char_labels(s) for s in pred],
        gold_name=gold_name,
        pred_name=pred_name,
    )
