"""Joint segmentation and part-of-speech tagging scores.

Input is one label per character, `B-TAG`, `M-TAG`, `E-TAG` or `S-TAG` (`I-TAG` is read as `M-TAG`),
or words with tags, which `words_to_char_labels` turns into those labels. Reported:

- joint word P/R/F1 (the main score): a word is correct iff its character span AND its tag match;
- segmentation P/R/F1: spans only;
- tag accuracy: per character, the tag of the word it belongs to (the part after `X-`), compared;
- label accuracy: per character, the full joint label (`B-NN` vs `M-NN`) compared.

Every character belongs to exactly one word, so a predicted sequence that breaks BMES order cannot be
dropped the way an ill-formed NER chunk is: gold and prediction alike are cut into words by the one
deterministic rule of `zencli.text.labels.decode_words` (a word also ends where the tag changes, so
`B-n E-v` is two words), and a word's tag is the tag shared by all its characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zencli.errors import ZenError
from zencli.metrics.cws import check_same_text
from zencli.metrics.result import PRF, PRF_COLUMNS, Table, check_sentence_counts, pct, prf_row, ratio
from zencli.text.labels import decode_words, parse_segment_label, segment_labels


def _parse_all(labels: Sequence[str], name: str, sentence: int) -> list[tuple[str, str]]:
    out = []
    for j, label in enumerate(labels):
        try:
            out.append(parse_segment_label(label, True))
        except ValueError:
            raise ZenError(
                f"{name}: sentence {sentence}, character {j + 1}: label {label!r} is not a joint "
                f"segmentation/POS label; expected B-, M-, E- or S- followed by a tag (e.g. S-NN)"
            ) from None
    return out


def words_to_char_labels(words: Sequence[tuple[str, str]]) -> list[str]:
    """[(word, tag), ...] -> one joint label per character (S- for a 1-char word, else B- M-* E-)."""
    return [label for word, tag in words for label in segment_labels(len(word), tag)]


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
    check_sentence_counts(gold, pred, gold_name, pred_name)
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
    check_sentence_counts(gold, pred, gold_name, pred_name, "line")
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


@dataclass(frozen=True)
class WordTagResult:
    """Word-level POS tagging (words given, one tag each, as on the Arabic treebanks): word accuracy,
    and per tag how many of its gold words got it."""

    words: int
    correct: int
    per_tag: dict[str, tuple[int, int]]  # tag → (gold words correctly tagged, gold words)
    sentences: int
    task: str = "pos"
    main: str = "accuracy"

    @property
    def accuracy(self) -> float:
        return ratio(self.correct, self.words)

    @property
    def main_score(self) -> float:
        return self.accuracy

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "main": self.main, "level": "word", "sentences": self.sentences,
                "accuracy": self.accuracy, "correct": self.correct, "words": self.words,
                "per_tag": {t: {"accuracy": ratio(c, n), "correct": c, "gold": n}
                            for t, (c, n) in self.per_tag.items()}}

    def tables(self) -> list[Table]:
        rows = [[t, pct(ratio(c, n)), str(c), str(n)] for t, (c, n) in self.per_tag.items()]
        rows.append(["all words", pct(self.accuracy), str(self.correct), str(self.words)])
        return [Table("Words (one tag each)", ["tag", "accuracy", "correct", "words"], rows)]


def score_word_tags(
    gold: Sequence[Sequence[str]],
    pred: Sequence[Sequence[str]],
    *,
    gold_name: str = "gold",
    pred_name: str = "prediction",
) -> WordTagResult:
    """Word accuracy of predicted tags against gold tags (one list of tags per sentence, one per word)."""
    check_sentence_counts(gold, pred, gold_name, pred_name)
    per_tag: dict[str, list[int]] = {}
    words = correct = 0
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise ZenError(f"{pred_name}: sentence {i + 1} has {len(p)} tags but {gold_name} has {len(g)}; "
                           f"expected one tag per word")
        for a, b in zip(g, p):
            row = per_tag.setdefault(a, [0, 0])
            row[0] += a == b
            row[1] += 1
        words += len(g)
        correct += sum(a == b for a, b in zip(g, p))
    return WordTagResult(words, correct, {t: (c, n) for t, (c, n) in sorted(per_tag.items())}, len(gold))
