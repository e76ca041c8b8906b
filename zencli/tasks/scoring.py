"""Scoring predictions against gold data for any fine-tuning task, the way `zen evaluate` does it.

Two steps, so that predictions can come from a file or from a model in memory:

    gold = read_gold("dev.tsv", "ner")                            # GoldData: examples + ReadInfo
    preds = read_predictions("pred.tsv", gold)                    # or a model's output, see below
    evaluation = score_predictions(gold, preds.items, pred_name=preds.path, pred_format=preds.format)

Alignment is checked before anything is scored: a different number of sentences/examples is an error
naming both files and both counts; a tagging sentence whose characters differ names both lines.
Predicted labels that the gold data never uses (or, for a model, that its label set lacks) are counted
per label in `Evaluation.unseen_labels`; they score as errors and never crash anything.

More: docs/design.md, "Scoring predictions".
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zencli.data.readers import (
    TASKS,
    ReadInfo,
    TaggedSentence,
    labels_from_spans,
    read_task_file,
    spans_from_labels,
)
from zencli.data.readers.common import load_json_file, looks_like_json_lines, sample_lines, show
from zencli.data.readers.pairs import LABEL_ALIASES as NLILABEL_ALIASES
from zencli.data.readers.tagging import detect_tagging_format, read_tagging
from zencli.errors import ZenError, unknown_task, where
from zencli.metrics import (
    MetricResult,
    score_classification,
    score_cws,
    score_mrc,
    score_ner,
    score_pos,
    score_ranking,
)
from zencli.metrics.pos import score_word_tags
from zencli.text.reading import iter_lines

TAGGING = ("cws", "pos", "ner")
CLASSIFICATION = ("dc", "sa", "spm", "nli")
# The unit a count refers to in alignment messages.
_UNIT = {"cws": "sentences", "pos": "sentences", "ner": "sentences", "qa": "candidates"}
LABEL_LIST = "labels"  # format name of a one-label-per-line prediction file
SCORE_LIST = "scores"  # format name of a one-score-per-line prediction file
PRED_JSON = "json"  # format name of an MRC prediction file
QA_THRESHOLD = 0.5
_SCHEME_PREFIXES = {"BIO": "BI", "IOBES": "BIES", "BMES": "BMES"}  # position prefixes besides O


def check_task(task: str) -> str:
    if task not in TASKS:
        raise unknown_task(task, TASKS)
    return task


@dataclass
class GoldData:
    """A labelled file for `task`: the reader's examples and its report."""

    task: str
    path: str
    examples: list[Any]
    info: ReadInfo

    @property
    def labels(self) -> set[str]:
        """The labels the gold data can hold: those its file uses and, for ner/pos, every position
        prefix of its scheme with each entity type/POS tag it uses (a predicted `S-PER` is no surprise
        when the gold file only has longer persons)."""
        used = set(self.info.label_counts)
        if self.task not in ("ner", "pos") or (self.task == "pos" and self.info.level == "word"):
            return used
        prefixes = _SCHEME_PREFIXES[self.info.scheme or "BIO"]
        types = {lab.split("-", 1)[1] for lab in used if "-" in lab}
        return used | {f"{p}-{t}" for p in prefixes for t in types} | ({"O"} if self.task == "ner" else set())


@dataclass
class Predictions:
    """Predictions read from a file, `items` as `score_predictions` takes them."""

    path: str
    format: str
    items: Any
    notes: list[str] = field(default_factory=list)


@dataclass
class Evaluation:
    """A metric result plus what it was computed from and what to warn about."""

    task: str
    result: MetricResult
    gold: str
    prediction: str
    gold_format: str
    prediction_format: str
    train_words: str | None = None
    unseen_labels: dict[str, int] = field(default_factory=dict)  # predicted labels outside the known set
    notes: list[str] = field(default_factory=list)
    # a model's predictions: the compute dtype it ran in (fp32, bf16, int8)
    inference_dtype: str | None = None

    @property
    def main_score(self) -> float:
        return self.result.main_score

    def to_dict(self) -> dict[str, Any]:
        scores = self.result.to_dict()
        metric = scores.pop("task")
        out: dict[str, Any] = {
            "task": self.task,
            "metric": metric,
            "gold_file": self.gold,
            "prediction_file": self.prediction,
            "gold_format": self.gold_format,
            "prediction_format": self.prediction_format,
        }
        if self.inference_dtype is not None:
            out["inference_dtype"] = self.inference_dtype
        if self.train_words is not None:
            out["train_words_file"] = self.train_words
        out["main_score"] = self.main_score
        out.update(scores)
        out["unseen_labels"] = self.unseen_labels
        out["unseen_label_count"] = sum(self.unseen_labels.values())
        out["notes"] = self.notes
        return out


# --- gold -----------------------------------------------------------------------------------------


def read_gold(path: str | Path, task: str, fmt: str = "auto") -> GoldData:
    """Read a labelled file for `task`; an unlabelled one is an error (there is nothing to score on)."""
    check_task(task)
    if task == "cws" and fmt == "auto" and detect_tagging_format(path, "cws") == "raw":
        raise ZenError(f"{path}: no word boundaries in the first lines (no spaces, no char<TAB>label lines); "
                       f"expected a segmented gold file (SIGHAN lines or char-level BMES), or pass --format")
    examples, info = read_task_file(path, task, fmt)
    if not info.labelled:
        raise ZenError(f"{path}: format {info.format!r} has no gold labels for task {task}; expected a "
                       f"labelled file")
    if task == "qa":
        for e in examples:
            if e.label not in ("0", "1"):
                raise ZenError(f"{where(path, e.line)}: label {e.label!r}; expected 0 or 1")
    return GoldData(task, str(path), examples, info)


# --- predictions from files -----------------------------------------------------------------------


def _list_lines(path: str | Path, what: str) -> list[tuple[int, str]]:
    """The lines of a one-item-per-line file: trailing blank lines dropped, inner ones refused."""
    lines = [(n, t.strip()) for n, t in iter_lines(path)]
    while lines and not lines[-1][1]:
        lines.pop()
    for n, t in lines:
        if not t:
            raise ZenError(f"{where(path, n)}: empty line; expected one {what} per line (a blank line "
                           f"would shift every later prediction)")
    if not lines:
        raise ZenError(f"{path}: only blank lines; expected one {what} per line")
    return lines


def is_label_list(path: str | Path) -> bool:
    """True for a file whose lines each hold one field: no TAB anywhere, and not JSON lines."""
    if looks_like_json_lines(sample_lines(path)):
        return False
    return not any("\t" in t for _, t in iter_lines(path))


def read_predictions(path: str | Path, gold: GoldData, fmt: str = "auto") -> Predictions:
    """Read a prediction file for `gold.task` (formats: docs/design.md, "Scoring predictions"); `fmt` overrides the
    detection where the task has formats to choose from (tagging and classification files)."""
    task, p = gold.task, str(path)
    if task in TAGGING:
        return _read_tagging_predictions(p, gold, fmt)
    if task in CLASSIFICATION:
        # A TAB-less file cannot be TAB-separated, so a forced tsv format still reads it as labels.
        if fmt == LABEL_LIST or (fmt in ("auto", "tsv", "label-text", "text-label") and is_label_list(p)):
            aliases = NLILABEL_ALIASES if task in ("spm", "nli") else {}
            lines = _list_lines(p, "label")
            return Predictions(p, LABEL_LIST, [aliases.get(t, t) for _, t in lines])
        examples, info = read_task_file(p, task, fmt)
        if not info.labelled:
            raise ZenError(f"{p}: format {info.format!r} has no labels; expected one label per line or a "
                           f"labelled file in the gold file's format")
        _check_texts(gold, examples, p)
        return Predictions(p, info.format, [e.label for e in examples], [f"{p}: {n}" for n in info.notes])
    if task == "qa":
        if fmt not in ("auto", SCORE_LIST):
            raise ZenError(f"format {fmt!r} for a qa prediction file: expected '{SCORE_LIST}' (one score "
                           f"per line)")
        lines = _list_lines(p, "score")
        scores = []
        for n, t in lines:
            try:
                s = float(t)
            except ValueError:
                s = math.nan
            if not math.isfinite(s):
                raise ZenError(f"{where(p, n)}: {show(t)} is not a score; expected one number per line "
                               f"(the positive class's score for gold candidate {n})")
            scores.append(s)
        return Predictions(p, SCORE_LIST, scores)
    if fmt not in ("auto", PRED_JSON):
        raise ZenError(f"format {fmt!r} for an mrc prediction file: expected '{PRED_JSON}' "
                       f"({{question id: answer text}})")
    return Predictions(p, PRED_JSON, read_mrc_predictions(p))


def _read_tagging_predictions(p: str, gold: GoldData, fmt: str) -> Predictions:
    notes: list[str] = []
    if gold.task == "cws" and fmt == "auto" and detect_tagging_format(p, "cws") == "raw":
        fmt = "sighan"
        notes.append(f"{p}: no spaces in the first lines; read as SIGHAN lines (one word per line where "
                     f"there is no space)")
    sentences, info = read_tagging(p, gold.task, fmt)
    if not info.labelled:
        raise ZenError(f"{p}: format {info.format!r} has no labels; expected predictions in a labelled "
                       f"{gold.task} format")
    if gold.task == "ner" and info.ill_formed:
        notes.append(f"{p}: {info.ill_formed} sentences have ill-formed label sequences ({info.scheme}); "
                     f"their broken chunks count as no entity")
    notes.extend(f"{p}: {n}" for n in info.notes)
    if gold.task == "ner" and info.scheme != gold.info.scheme:
        changed = _convert_scheme(sentences, info.scheme, gold.info.scheme)
        if changed:
            notes.append(f"{p}: entities read in its {info.scheme} scheme and written in the gold file's "
                         f"{gold.info.scheme} ({changed} sentences relabelled; broken chunks stay dropped)")
    return Predictions(p, info.format, sentences, notes)


def _convert_scheme(sentences: list[TaggedSentence], source: str | None, target: str | None) -> int:
    """Relabel NER sentences from scheme `source` into `target` through their strictly read entities, so
    a BIO prediction scores against BMES gold without repairing anything; returns how many changed."""
    if source is None or target is None:
        return 0
    changed = 0
    for s in sentences:
        assert s.labels is not None  # read_tagging labels every sentence of a labelled format
        labels = labels_from_spans(len(s.labels), spans_from_labels(s.labels, source), target)
        if labels != s.labels:
            s.labels = labels
            changed += 1
    return changed


def _check_texts(gold: GoldData, examples: Sequence[Any], pred_path: str) -> None:
    """A prediction file in the gold format must hold the gold texts, example by example."""
    _check_count(gold, len(examples), pred_path)
    pairs = gold.task in ("spm", "nli")
    for g, e in zip(gold.examples, examples):
        same = (g.a, g.b) == (e.a, e.b) if pairs else g.text == e.text
        if not same:
            shown = (lambda x: show(x.a + " | " + x.b)) if pairs else (lambda x: show(x.text))
            raise ZenError(f"{where(pred_path, e.line)}: text {shown(e)} differs from {where(gold.path, g.line)} "
                           f"{shown(g)}; expected the gold examples in the gold order")


def read_mrc_predictions(path: str | Path) -> dict[str, str]:
    """A CMRC 2018 prediction file: one JSON object mapping question ids to answer strings."""
    data = load_json_file(path)
    if not isinstance(data, dict):
        raise ZenError(f"{path}: expected a JSON object {{question id: answer text}} (the CMRC 2018 "
                       f"prediction format), got {type(data).__name__}")
    out: dict[str, str] = {}
    for qid, answer in data.items():
        if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
            raise ZenError(f"{path}: question {qid!r}: expected the answer as a string, got "
                           f"{type(answer).__name__}")
        out[qid] = str(answer)  # the official script scores str(prediction)
    return out


# --- training words (CWS OOV figures) -------------------------------------------------------------

_COUNT = re.compile(r"[0-9]+\Z")


def read_train_words(path: str | Path) -> tuple[set[str], str]:
    """The training vocabulary for OOV/IV figures, and the kind of file it was read as:

    - `conll` / `x02`: a char-level BMES training file (its words);
    - `word-list-tab`: every line has a TAB (e.g. `word<TAB>count`): the first field is the word;
    - `word-counts`: every line is `word count`: the word;
    - `sighan` / `word-list`: otherwise every whitespace-separated token of every line is a word, which
      reads a SIGHAN training file (words separated by spaces) and a one-word-per-line list alike.
    Kinds are decided on the first 50 non-blank lines.
    """
    sample = [t for _, t in sample_lines(path)]
    fmt = detect_tagging_format(path, "cws")
    if fmt in ("conll", "x02"):
        sentences, _ = read_tagging(path, "cws", fmt)
        return {w for s in sentences for w in (s.words or [])}, fmt
    if all("\t" in t for t in sample):
        words: set[str] = set()
        for n, t in iter_lines(path):
            if t.strip():
                w = t.split("\t", 1)[0].strip()
                if not w:
                    raise ZenError(f"{where(path, n)}: empty word in column 1; expected word<TAB>…")
                words.add(w)
        return words, "word-list-tab"
    if all(len(f := t.split()) == 2 and _COUNT.match(f[1]) for t in sample):
        words: set[str] = set()
        for n, t in iter_lines(path):
            f = t.split()
            if not f:
                continue
            if len(f) != 2:
                raise ZenError(f"{where(path, n)}: expected 'word count' like the lines before it, got "
                               f"{show(t)}")
            words.add(f[0])
        return words, "word-counts"
    words: set[str] = set()
    multi = False
    for _, t in iter_lines(path):
        f = t.split()
        multi |= len(f) > 1
        words.update(f)
    return words, "sighan" if multi else "word-list"


# --- scoring --------------------------------------------------------------------------------------


def _check_count(gold: GoldData, n_pred: int, pred_name: str) -> None:
    n_gold = len(gold.examples)
    if n_pred == n_gold:
        return
    unit = _UNIT.get(gold.task, "examples")
    hint = ""
    if gold.task in TAGGING and gold.info.empty:
        hint = (f" (the gold file has {gold.info.empty} empty sentences, which blank-line-separated formats "
                f"cannot hold)")
    elif abs(n_pred - n_gold) == 1:
        hint = " (a header line?)"
    raise ZenError(f"{pred_name} has {n_pred} {unit} but {gold.path} has {n_gold}{hint}; expected one "
                   f"prediction per gold {unit[:-1]}, in the same order")


def _check_chars(gold: Sequence[TaggedSentence], pred: Sequence[TaggedSentence], pred_name: str) -> None:
    for i, (g, p) in enumerate(zip(gold, pred)):
        if g.chars == p.chars:
            continue
        k = next((j for j, (a, b) in enumerate(zip(g.chars, p.chars)) if a != b),
                 min(len(g.chars), len(p.chars)))
        lo = max(0, k - 5)
        unit = "word" if g.level == "word" else "char"
        sep = " " if unit == "word" else ""
        gs, ps = sep.join(g.chars[lo:k + 6]), sep.join(p.chars[lo:k + 6])
        raise ZenError(f"{where(pred_name, p.line)}: sentence {i + 1} differs from {where(g.source, g.line)} at "
                       f"{'character' if unit == 'char' else 'word'} {k + 1} (gold {len(g.chars)} {unit}s '{gs}', "
                       f"prediction {len(p.chars)} {unit}s '{ps}'); expected the same {unit}s, sentence by sentence")


def _unseen(predicted: Counter[str], known: Collection[str]) -> dict[str, int]:
    return {lab: n for lab, n in sorted(predicted.items()) if lab not in known}


def score_predictions(
    gold: GoldData,
    items: Any,
    *,
    pred_name: str = "prediction",
    pred_format: str = "memory",
    train_words: Collection[str] | None = None,
    train_words_name: str | None = None,
    known_labels: Collection[str] | None = None,
    notes: Sequence[str] = (),
    metric: str | None = None,
) -> Evaluation:
    """Score predictions (shapes: docs/design.md, "Scoring predictions") against gold data with the task's metric.

    `train_words` (cws only) adds the OOV/IV figures. `known_labels` is the label set unseen predicted
    labels are counted against: by default `gold.labels` (a model passes its own label set). `metric`
    (mrc only): cmrc2018 (the default) or squad.
    """
    task = gold.task
    if train_words is not None and task != "cws":
        raise ZenError(f"training words (OOV figures) apply to task cws only, not {task}")
    if metric is not None and task != "mrc":
        raise ZenError(f"metric {metric!r}: task {task} has one metric; a choice of metric applies to mrc only")
    known = set(known_labels) if known_labels is not None else gold.labels
    unseen: dict[str, int] = {}
    result: MetricResult
    if task in TAGGING:
        _check_count(gold, len(items), pred_name)
        _check_chars(gold.examples, items, pred_name)
        if task == "cws":
            result = score_cws([s.words for s in gold.examples], [s.words for s in items], train_words,
                               gold_name=gold.path, pred_name=pred_name)
        else:
            unseen = _unseen(Counter(lab for s in items for lab in s.labels), known)
            labels = ([s.labels for s in gold.examples], [s.labels for s in items])
            if gold.info.level == "word":  # one label per word: conlleval entities, word accuracy
                if task == "pos":
                    result = score_word_tags(*labels, gold_name=gold.path, pred_name=pred_name)
                else:
                    result = score_ner(*labels, gold_name=gold.path, pred_name=pred_name, chunking="conlleval")
            else:
                scorer = score_pos if task == "pos" else score_ner
                result = scorer(*labels, gold_name=gold.path, pred_name=pred_name)
    elif task in CLASSIFICATION:
        _check_count(gold, len(items), pred_name)
        unseen = _unseen(Counter(items), known)
        result = score_classification([e.label for e in gold.examples], list(items),
                                      gold_name=gold.path, pred_name=pred_name)
    elif task == "qa":
        _check_count(gold, len(items), pred_name)
        rows = [(e.qid, int(e.label), s) for e, s in zip(gold.examples, items)]
        result = score_ranking(rows, threshold=QA_THRESHOLD, name=gold.path)
    else:
        predictions: Mapping[str, str] = items
        gold_ids = {e.qid.strip() for e in gold.examples}
        if predictions and not gold_ids & set(predictions):
            first = next(iter(predictions))
            raise ZenError(f"{pred_name}: none of its {len(predictions)} question ids is in {gold.path} "
                           f"(prediction id {first!r}, gold id {gold.examples[0].qid!r}); expected "
                           f"{{question id: answer text}} for the gold questions")
        result = score_mrc([(e.qid, [t for t, _ in e.answers]) for e in gold.examples], predictions,
                           gold_name=gold.path, metric=metric or "cmrc2018")
    all_notes = list(notes)
    if unseen:
        all_notes.append(f"{sum(unseen.values())} predicted labels ({len(unseen)} distinct) are not in the "
                         f"{'gold' if known_labels is None else 'known'} label set; scored as errors")
    return Evaluation(task, result, gold.path, pred_name, gold.info.format, pred_format,
                      train_words_name, unseen, all_notes)


def score_files(
    task: str,
    gold_path: str | Path,
    pred_path: str | Path,
    *,
    fmt: str = "auto",
    pred_fmt: str | None = None,
    train_words_path: str | Path | None = None,
    metric: str | None = None,
) -> Evaluation:
    """`zen evaluate --task T --gold GOLD --pred PRED`: read both files, check them, score them.
    `fmt` applies to the gold file and, unless `pred_fmt` is given, to the prediction file; `metric`: mrc's
    cmrc2018 (default) or squad."""
    check_task(task)
    if train_words_path is not None and task != "cws":
        raise ZenError(f"--train-words applies to task cws only, not {task}")
    gold = read_gold(gold_path, task, fmt)
    if pred_fmt is None:
        # qa/mrc predictions have their own formats (scores, a JSON object), not the gold file's.
        pred_fmt = fmt if task in TAGGING or task in CLASSIFICATION else "auto"
    preds = read_predictions(pred_path, gold, pred_fmt)
    train_words = None
    notes = [f"{gold.path}: {n}" for n in gold.info.notes] + preds.notes
    if train_words_path is not None:
        train_words, kind = read_train_words(train_words_path)
        notes.append(f"{train_words_path}: {len(train_words)} training words (read as {kind})")
    return score_predictions(gold, preds.items, pred_name=preds.path, pred_format=preds.format,
                             train_words=train_words,
                             train_words_name=None if train_words_path is None else str(train_words_path),
                             notes=notes, metric=metric)
