"""Sentence-level classification: document classification (dc), sentiment analysis (sa), sentence pair
matching (spm) and natural language inference (nli). One label per text (or text pair), predicted from
the pooled [CLS] vector of `[CLS] text [SEP]` (or `[CLS] A [SEP] B [SEP]`, token types 0 / 1).

Reading: the sentence readers of `zencli.data.readers` (label<TAB>text or text<TAB>label with or without a
header, JSON lines; pairs a<TAB>b<TAB>label or JSON lines). Labels come from the training data (sorted,
numerically when they are all integers) and are saved with the model; a gold label the model never saw
is counted in the evaluation notes and scores as an error (the model cannot predict it).

Tokens: the model's WordPiece tokenizer (one token per Chinese character; white space and control
characters carry no token). Long inputs are never truncated — they are read in windows:
- one text longer than max_seq_len − 2 tokens: in training it is cut into ceil(n / room) windows of
  near-equal length that do not overlap, and each window is one training input labelled like the whole
  text (so every token is trained on once); in prediction windows of room tokens start every `stride`
  tokens (task.stride, default half a window), and the text's class probabilities are the *mean of the
  windows' softmax probabilities*;
- a pair longer than max_seq_len − 3 tokens: the shorter side stays whole when it takes at most half
  the room and the longer side is windowed in the rest; when both sides are longer than that, each
  side gets half the room and every window of A meets every window of B (nothing is left out, at the
  cost of more inputs for such rare pairs). Training and prediction window as for single texts, and the
  probabilities of all windows of a pair are averaged the same way.
`WindowedTask` holds this machinery; the QA task (zencli.tasks.ranking) shares it.

More: docs/design.md, "Sentence classification".
"""

from __future__ import annotations

import itertools
import json
from abc import abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from zencli.data.collate import collate
from zencli.data.readers import LabelSet, PairExample, TextExample
from zencli.data.windows import Window, plan_windows
from zencli.errors import ZenError, where
from zencli.model.heads import (
    SentencePairClassificationHead,
    SequenceClassificationHead,
)
from zencli.tasks.base import Record, Task, register
from zencli.tasks.scoring import Evaluation, GoldData, score_predictions

# Examples per featurizing pass when predicting: bounds the memory of the feature records.
PREDICT_CHUNK = 2048
ENCODE_CHUNK = 2048  # windows per featurizer call
PROBABILITY_DIGITS = 6  # json output


# --- windows ----------------------------------------------------------------------------------------

def even_windows(n: int, size: int) -> list[Window]:
    """ceil(n / size) non-overlapping windows of near-equal length covering 0..n ([(0, n)] if it fits)."""
    if n <= size:
        return [(0, n)]
    k = -(-n // size)
    bounds = [i * n // k for i in range(k + 1)]  # each window has floor or ceil of n / k <= size tokens
    return list(itertools.pairwise(bounds))


def pair_budget(len_a: int, len_b: int, room: int) -> tuple[int, int]:
    """Tokens per window for A and for B when `[CLS] A [SEP] B [SEP]` has `room` tokens for the texts:
    both whole if they fit; else a side that needs at most half the room stays whole and the other gets
    the rest; else each side gets half."""
    if len_a + len_b <= room:
        return len_a, len_b
    half = room // 2
    if len_a <= half:
        return len_a, room - len_a
    if len_b <= room - half:
        return room - len_b, len_b
    return half, room - half


def side_windows(n: int, size: int, stride: int | None) -> list[Window]:
    """Windows of at most `size` tokens over n tokens: non-overlapping (training, stride None) or
    starting every `stride` tokens (prediction)."""
    if n <= size:
        return [(0, n)]
    if stride is None:
        return even_windows(n, size)
    return plan_windows(n, size, min(stride, size))


# --- predictions ------------------------------------------------------------------------------------

@dataclass
class Classified:
    """A predicted label with its probability and the whole distribution (None for an empty input)."""

    label: str | None
    probability: float | None
    probabilities: np.ndarray | None  # [C], in the model's label order


# --- shared machinery of windowed sentence(-pair) tasks ---------------------------------------------------

class WindowedTask(Task):
    """A task that reads one text or a text pair per example, windows long inputs (module docstring) and
    decides from the pooled [CLS] vector; subclasses give the head, the labels and the outputs."""

    pair: ClassVar[bool] = False
    uses_pooled: ClassVar[bool] = True
    supports_chte: ClassVar[bool] = False  # CHTE encodes characters for tagging; it has no pooled vector

    def _check_length(self) -> None:
        need = 5 if self.pair else 3
        if self.settings.max_seq_len < need:
            raise ZenError(f"task.max_seq_len: task {self.name} needs at least {need} tokens per input "
                           f"({'[CLS] A [SEP] B [SEP]' if self.pair else '[CLS] text [SEP]'}), got "
                           f"{self.settings.max_seq_len}")

    @abstractmethod
    def n_classes(self) -> int:
        """Outputs of the head (probabilities per window are averaged over this many classes)."""

    @abstractmethod
    def label_ids(self, examples: Sequence[Any]) -> list[int]:
        """The class id of each training example."""

    # --- examples -----------------------------------------------------------------------------------
    def texts(self, example: Any) -> tuple[str, str | None]:
        """(text, None) or (text A, text B) of an example."""
        return (example.a, example.b) if self.pair else (example.text, None)

    def training_texts(self, examples: Sequence[Any]) -> list[str]:
        return [t for e in examples for t in self.texts(e) if t]

    def is_empty(self, example: Any) -> bool:
        """An empty input line of `zen predict`: nothing to classify."""
        a, b = self.texts(example)
        return not a.strip() and (b is None or not b.strip())

    # --- windows and records ------------------------------------------------------------------------
    def plan(self, len_a: int, len_b: int | None, training: bool) -> list[tuple[Window, Window | None]]:
        """The (A window, B window) inputs of one example (module docstring)."""

        def windows(n: int, size: int) -> list[Window]:
            if training:
                return side_windows(n, size, None)
            stride = self.settings.stride if self.settings.stride is not None else max(1, size // 2)
            return side_windows(n, size, stride)

        if len_b is None:
            return [(w, None) for w in windows(len_a, self.settings.max_seq_len - 2)]
        size_a, size_b = pair_budget(len_a, len_b, self.settings.max_seq_len - 3)
        return list(itertools.product(windows(len_a, size_a), windows(len_b, size_b)))

    def token_ids(self, inputs, text: str) -> np.ndarray:
        return np.asarray(inputs.tokenizer.encode(text), np.int32)

    def windowed_records(self, examples: Sequence[Any], inputs, *, training: bool
                         ) -> tuple[list[Record], np.ndarray, list[int]]:
        """Feature records of every window of every example, the example index of each record, and the
        number of windows per example."""
        self._check_length()
        firsts: list[np.ndarray] = []
        seconds: list[np.ndarray | None] = []
        owner: list[int] = []
        counts: list[int] = []
        for i, example in enumerate(examples):
            a_text, b_text = self.texts(example)
            a = self.token_ids(inputs, a_text)
            b = None if b_text is None else self.token_ids(inputs, b_text)
            plan = self.plan(len(a), None if b is None else len(b), training)
            for wa, wb in plan:
                firsts.append(a[wa[0]:wa[1]])
                seconds.append(None if b is None else b[wb[0]:wb[1]])
                owner.append(i)
            counts.append(len(plan))
        records: list[Record] = []
        for c0 in range(0, len(firsts), ENCODE_CHUNK):  # the featurizer pads a whole call to its widest input
            records += inputs.encode(firsts[c0:c0 + ENCODE_CHUNK],
                                     seconds[c0:c0 + ENCODE_CHUNK] if self.pair else None)
        return records, np.asarray(owner, np.int64), counts

    def window_notes(self, counts: Sequence[int], what: str) -> list[str]:
        long = [c for c in counts if c > 1]
        if not long:
            return []
        limit = self.settings.max_seq_len - (3 if self.pair else 2)
        note = (f"{len(long)} {what} longer than {limit} tokens were read as {sum(long)} windows, each "
                f"labelled like its {'pair' if self.pair else 'text'} (nothing is truncated)")
        return [note]

    def training_records(self, examples: Sequence[Any], inputs) -> tuple[list[Record], list[str]]:
        records, owner, counts = self.windowed_records(examples, inputs, training=True)
        ids = self.label_ids(examples)
        for rec, i in zip(records, owner.tolist()):
            rec["labels"] = np.asarray(ids[i], np.int64)
        return records, self.window_notes(counts, "training pairs" if self.pair else "training texts")

    # --- model --------------------------------------------------------------------------------------
    @staticmethod
    def bag_inputs(model, batch) -> dict[str, Any]:
        """The head's keyword arguments beside the pooled vector: the batch, for a head with an n-gram bag."""
        return {"batch": batch} if getattr(model.head, "bag", None) is not None else {}

    def loss(self, model, encoded, batch):
        labels = batch["labels"]  # [B]
        out = model.head(encoded.pooled, labels, **self.bag_inputs(model, batch))
        with torch.no_grad():
            correct = (out.logits.argmax(-1) == labels).sum()
        return out.loss, {"acc": (correct, labels.numel())}

    def head_outputs(self, head, encoded, batch):
        bag = {"batch": batch} if getattr(head, "bag", None) is not None else {}
        return (head(encoded.pooled, **bag).logits,)  # [B, C]

    @torch.no_grad()
    def probabilities(self, model, inputs, examples: Sequence[Any], batch_size: int) -> list[np.ndarray | None]:
        """Per example the class probabilities [C] averaged over its windows; None for an empty input."""
        out: list[np.ndarray | None] = [None] * len(examples)
        device = model.device
        for c0 in range(0, len(examples), PREDICT_CHUNK):
            part = examples[c0:c0 + PREDICT_CHUNK]
            keep = [i for i, x in enumerate(part) if not self.is_empty(x)]
            if not keep:
                continue
            records, owner, counts = self.windowed_records([part[i] for i in keep], inputs, training=False)
            sums = np.zeros((len(keep), self.n_classes()), np.float64)
            order = np.argsort([-len(r["input_ids"]) for r in records], kind="stable")  # little padding
            for b0 in range(0, len(order), batch_size):
                idx = order[b0:b0 + batch_size]
                batch = {k: v.to(device) for k, v in collate([records[i] for i in idx], pad_id=inputs.pad_id).items()}
                logits = model.outputs(batch)[0]  # [b, C]
                np.add.at(sums, owner[idx], logits.float().softmax(-1).cpu().numpy())
            for j, i in enumerate(keep):
                out[c0 + i] = (sums[j] / counts[j]).astype(np.float32)
        return out

    def _predicting(self, model, fn):
        was_training = model.training
        model.eval()
        try:
            return fn()
        finally:
            model.train(was_training)


# --- classification -------------------------------------------------------------------------------------

class ClassificationTask(WindowedTask):
    """dc / sa (one text) and spm / nli (a pair): labels from training, accuracy and macro-F1."""

    main_metric: ClassVar[str] = "accuracy"
    output_formats: ClassVar[tuple[str, ...]] = ("text", "json", "label")
    ngram_bag_default: ClassVar[bool | None] = False

    @classmethod
    def build_state(cls, settings, train: GoldData) -> dict[str, Any]:
        try:
            labels = LabelSet.build(e.label for e in train.examples)
        except ZenError as e:
            raise ZenError(f"{train.path}: {e}") from None
        if len(labels) < 2:
            raise ZenError(f"{train.path}: every training example has label {labels.labels[0]!r}; a classifier "
                           f"needs at least two labels")
        return {"labels": labels.labels}

    def load_state(self, state: dict[str, Any]) -> None:
        labels = state.get("labels")
        if not isinstance(labels, list) or len(labels) < 2 or not all(isinstance(x, str) and x for x in labels):
            raise ZenError(f"task {self.name}: state 'labels': expected a list of at least two label strings")
        self.labels = LabelSet(labels)

    def state(self) -> dict[str, Any]:
        return {"labels": list(self.labels.labels)}

    def n_classes(self) -> int:
        return len(self.labels)

    def label_ids(self, examples):
        return self.labels.encode_all(e.label for e in examples)

    # --- data ---------------------------------------------------------------------------------------
    def parse_input(self, text: str, source: str, line: int) -> TextExample | PairExample:
        if not self.pair:
            return TextExample(text, None, line)
        if not text.strip():
            return PairExample("", "", None, line)
        fields = text.split("\t")
        if len(fields) != 2:
            raise ZenError(f"{where(source, line)}: expected text_a<TAB>text_b (2 TAB-separated fields), "
                           f"got {len(fields)}")
        if not fields[0].strip() or not fields[1].strip():
            side = "text_a" if not fields[0].strip() else "text_b"
            raise ZenError(f"{where(source, line)}: empty {side}; expected two non-empty texts separated by a TAB")
        return PairExample(fields[0], fields[1], None, line)

    def unseen_labels(self, gold: GoldData) -> dict[str, int]:
        counts = Counter(e.label for e in gold.examples if e.label is not None and e.label not in self.labels)
        return dict(sorted(counts.items()))

    def baseline_predictions(self, train: GoldData, examples: Sequence[Any]) -> tuple[str, list[Classified]]:
        """Every example labelled with the most frequent training label (ties: first in sorted order)."""
        counts = Counter(e.label for e in train.examples if e.label is not None)
        label = min(counts, key=lambda lab: (-counts[lab], lab))
        return f"always {label!r}, the most frequent training label", [Classified(label, None, None)
                                                                      for _ in examples]

    # --- model --------------------------------------------------------------------------------------
    def build_head(self, hidden_size: int) -> SequenceClassificationHead:
        cls = SentencePairClassificationHead if self.pair else SequenceClassificationHead
        # A saved model whose task.json predates task.ngram_bag reads it as null: no bag.
        return cls(hidden_size, len(self.labels), dropout=self.settings.dropout,
                   ngram_bag=bool(self.settings.ngram_bag))

    @torch.no_grad()
    def predict(self, model, inputs, examples, batch_size=None) -> list[Classified]:
        batch_size = batch_size or self.settings.eval_batch_size
        probs = self._predicting(model, lambda: self.probabilities(model, inputs, examples, batch_size))
        out = []
        for p in probs:
            if p is None:
                out.append(Classified(None, None, None))
            else:
                k = int(np.argmax(p))
                out.append(Classified(self.labels.labels[k], float(p[k]), p))
        return out

    # --- scoring ------------------------------------------------------------------------------------
    def evaluate(self, gold: GoldData, predictions: Sequence[Classified], *, name: str = "model",
                 train: GoldData | None = None) -> Evaluation:
        notes = self.evaluation_notes(gold)
        # A gold example is never empty (the readers refuse empty texts), so every prediction has a label.
        labels = [p.label if p.label is not None else "" for p in predictions]
        return score_predictions(gold, labels, pred_name=name, pred_format="model",
                                 known_labels=self.labels.labels, notes=notes)

    # --- output -------------------------------------------------------------------------------------
    def format_prediction(self, example, prediction: Classified, fmt: str) -> str:
        if fmt == "json":
            texts = {"a": example.a, "b": example.b} if self.pair else {"text": example.text}
            probs = None if prediction.probabilities is None else {
                lab: round(float(p), PROBABILITY_DIGITS)
                for lab, p in zip(self.labels.labels, prediction.probabilities)}
            return json.dumps({**texts, "label": prediction.label,
                               "probability": None if prediction.probability is None
                               else round(prediction.probability, PROBABILITY_DIGITS),
                               "probabilities": probs}, ensure_ascii=False)
        if prediction.label is None:
            return ""
        if fmt == "label":
            return prediction.label
        return f"{prediction.label}\t{prediction.probability:.4f}"


@register
class DcTask(ClassificationTask):
    name = "dc"
    description = "document classification (one label per text; accuracy, macro-F1)"
    ngram_bag_default = True  # a linear model on the n-grams beside the encoder (docs/results.md)


@register
class SaTask(ClassificationTask):
    name = "sa"
    description = "sentiment analysis (one polarity label per text; accuracy, macro-F1)"
    ngram_bag_default = True


@register
class SpmTask(ClassificationTask):
    name = "spm"
    description = "sentence pair matching (same meaning or not, per text pair; accuracy)"
    pair = True


@register
class NliTask(ClassificationTask):
    name = "nli"
    description = "natural language inference (entailment / neutral / contradiction per pair; accuracy)"
    pair = True
