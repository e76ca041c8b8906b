"""Extractive machine reading comprehension (mrc, CMRC 2018): the answer to a question is a span of its
context, predicted as start and end token positions.

Reading: `zencli.data.readers.mrc` (CMRC 2018 / SQuAD JSON, or JSON lines); answers are located in
their context by character offsets, and a question none of whose answers could be located has
`trainable=False`: it is left out of training but kept (and scored against its answer texts) in
evaluation.

Training: the first located answer's characters map to a token span; each window whose context holds
the whole span is trained to point at it, every other window to [CLS] (position 0, as BERT does), so
the model learns which window holds the answer. Loss and decoding only consider context positions (and
[CLS] in training).

Prediction: every window is scored; a span (i, j) scores start_logit[i] + end_logit[j], must lie in
the context with i <= j < i + max_answer_length, and must start at a token for which this window is
the one with the most context around it (`max_context_masks`: a token seen by two overlapping windows is
judged by the window where it is farther from the edge). The best span over all windows is the answer,
cut from the original context by its character offsets. `max_answer_length` is learned from the
training data: the longest training answer in characters, used as the bound in tokens (a token covers at
least one character, so no span as long as a training answer is excluded); it is saved with the model.

More: docs/design.md, "Machine reading comprehension".
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from zencli.data.collate import collate
from zencli.data.readers import MrcExample
from zencli.data.readers.mrc import parse_mrc_line
from zencli.data.windows import (
    Window,
    char_span_to_tokens,
    context_offset,
    context_to_window,
    max_context_masks,
    mrc_windows,
    tokens_to_char_span,
    window_to_context,
)
from zencli.errors import ZenError
from zencli.metrics.mrc import MRC_METRICS
from zencli.model.heads import SpanExtractionHead
from zencli.tasks.base import Record, Task, register
from zencli.tasks.network import inner_mask
from zencli.tasks.scoring import Evaluation, GoldData, score_predictions

ENCODE_CHUNK = 1024  # windows per featurizer call (each up to max_seq_len tokens)
PREDICT_CHUNK = 1024  # questions per featurizing pass when predicting
_BREAKS = re.compile(r"[\t\r\n]")


@dataclass
class Answer:
    """A predicted answer: its text and character offsets [start, end) in the context (None for an empty
    input line; text "" and offsets None when the context has no token to answer with)."""

    text: str | None
    start: int | None
    end: int | None
    score: float | None = None  # start + end logit of the chosen span


@dataclass
class Document:
    """A question and its context as tokens, and the windows the context is read in."""

    question: np.ndarray  # [q] token ids
    context: np.ndarray  # [n] token ids
    offsets: np.ndarray  # [n, 2] each context token's [start, end) in the context text
    windows: list[Window]


def _is_blank(example: MrcExample) -> bool:
    return example.question == "" and example.context == ""


def _name(example: MrcExample) -> str:
    return f"question {example.qid!r}" + (f" (line {example.line})" if example.line is not None else "")


@register
class MrcTask(Task):
    name = "mrc"
    description = "extractive reading comprehension (CMRC 2018: the answer span in the context; EM, F1)"
    main_metric = "average"
    metrics = MRC_METRICS  # task.metric: cmrc2018 (default) or squad (SQuAD v1.1, for Arabic-SQuAD / ARCD)
    output_formats: ClassVar[tuple[str, ...]] = ("json", "text")
    uses_pooled = False
    supports_chte = False

    # --- state: the answer length bound ---------------------------------------------------------------------
    @classmethod
    def build_state(cls, settings, train: GoldData) -> dict[str, Any]:
        lengths = [len(t) for e in train.examples for t, s in e.answers if s is not None]
        if not lengths:
            raise ZenError(f"{train.path}: no answer could be located in its context; expected training "
                           f"questions with answers (text and answer_start)")
        return {"max_answer_length": max(lengths)}

    def load_state(self, state: dict[str, Any]) -> None:
        n = state.get("max_answer_length")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ZenError(f"task {self.name}: state 'max_answer_length': expected an integer >= 1, got {n!r}")
        self.max_answer_length = n

    def state(self) -> dict[str, Any]:
        return {"max_answer_length": self.max_answer_length}

    # --- data -----------------------------------------------------------------------------------------------
    def parse_input(self, text: str, source: str, line: int) -> MrcExample:
        return parse_mrc_line(source, line, text)

    def data_notes(self, gold: GoldData) -> list[str]:
        notes = super().data_notes(gold)
        info = gold.info
        if info.repaired_answers:
            notes.append(f"{gold.path}: {info.repaired_answers} answers were not at their answer_start and were "
                         f"found elsewhere in their context")
        if info.unusable_answers:
            notes.append(f"{gold.path}: {info.unusable_answers} answer texts do not occur in their context "
                         f"(evaluation still compares predictions with them)")
        if info.unusable_examples:
            notes.append(f"{gold.path}: {info.unusable_examples} questions have no answer located in the context: "
                         f"not trained on, still evaluated")
        return notes

    # --- inputs ---------------------------------------------------------------------------------------------
    def document(self, example: MrcExample, inputs) -> Document:
        tok = inputs.tokenizer
        question = np.asarray(tok.encode(example.question), np.int32)
        pieces = tok.tokenize(example.context)
        context = np.fromiter((t.id for t in pieces), np.int32, len(pieces))
        offsets = np.asarray([(t.start, t.end) for t in pieces], np.int64).reshape(-1, 2)
        max_len = self.settings.max_seq_len
        room = max_len - len(question) - 3
        stride = self.settings.stride if self.settings.stride is not None else max(1, room // 2)
        try:
            windows = mrc_windows(len(question), len(context), max_len, stride)
        except ZenError as e:
            raise ZenError(f"{_name(example)}: {e}") from None
        return Document(question, context, offsets, windows)

    def _encode(self, docs: Sequence[Document], inputs) -> list[list[Record]]:
        """Per document, the records of its windows."""
        pairs = [(d.question, d.context[s:e]) for d in docs for s, e in d.windows]
        flat: list[Record] = []
        for c0 in range(0, len(pairs), ENCODE_CHUNK):
            part = pairs[c0:c0 + ENCODE_CHUNK]
            flat += inputs.encode([q for q, _ in part], [c for _, c in part])
        out, k = [], 0
        for d in docs:
            out.append(flat[k:k + len(d.windows)])
            k += len(d.windows)
        return out

    # --- model ----------------------------------------------------------------------------------------------
    def build_head(self, hidden_size: int) -> SpanExtractionHead:
        return SpanExtractionHead(hidden_size)

    def training_records(self, examples: Sequence[MrcExample], inputs) -> tuple[list[Record], list[str]]:
        docs, spans = [], []
        untrainable = no_token = 0
        for e in examples:
            if not e.trainable:
                untrainable += 1
                continue
            text, start = e.train_answer
            doc = self.document(e, inputs)
            span = char_span_to_tokens(doc.offsets, start, start + len(text)) if len(doc.offsets) else None
            if span is None:  # the answer is white space or dropped characters only
                no_token += 1
                continue
            docs.append(doc)
            spans.append(span)
        records: list[Record] = []
        multi = multi_windows = split = 0
        for doc, (ts, te), recs in zip(docs, spans, self._encode(docs, inputs)):
            found = False
            for w, rec in zip(doc.windows, recs):
                pos = context_to_window(w, len(doc.question), ts, te)
                found |= pos is not None
                s, t = pos if pos is not None else (0, 0)  # no (whole) answer here: point at [CLS]
                rec["start_positions"] = np.asarray(s, np.int64)
                rec["end_positions"] = np.asarray(t, np.int64)
                records.append(rec)
            if len(doc.windows) > 1:
                multi += 1
                multi_windows += len(doc.windows)
            split += not found
        notes = []
        if untrainable:
            notes.append(f"{untrainable} training questions have no answer located in their context: not "
                         f"trained on")
        if no_token:
            notes.append(f"{no_token} training answers cover no token (white space or dropped characters only): "
                         f"not trained on")
        if multi:
            notes.append(f"{multi} training questions with contexts longer than one window were read as "
                         f"{multi_windows} windows (doc_stride {self.settings.stride or 'half a window'}); windows "
                         f"without the answer learn to point at [CLS]")
        if split:
            notes.append(f"{split} training answers lie in no single window (longer than the windows' overlap): "
                         f"their windows all point at [CLS]")
        return records, notes

    @staticmethod
    def context_mask(batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """[B, L] bool: the context tokens of `[CLS] question [SEP] context [SEP]` (type 1, final [SEP] out)."""
        return inner_mask(batch["attention_mask"]) & (batch["token_type_ids"] == 1)

    def loss(self, model, encoded, batch):
        mask = self.context_mask(batch)
        mask[:, 0] = True  # [CLS]: the target of windows without the answer
        starts, ends = batch["start_positions"], batch["end_positions"]  # [B]
        out = model.head(encoded.hidden, mask, starts, ends)
        with torch.no_grad():
            hit = (out.start_logits.argmax(-1) == starts) & (out.end_logits.argmax(-1) == ends)
        return out.loss, {"span_acc": (hit.sum(), starts.numel())}

    output_names = ("start_logits", "end_logits")

    def head_outputs(self, head, encoded, batch):
        out = head(encoded.hidden)  # unmasked: the context mask is applied after the engine (`predict`)
        return out.start_logits, out.end_logits  # [B, L] each

    @torch.no_grad()
    def predict(self, model, inputs, examples: Sequence[MrcExample], batch_size: int | None = None) -> list[Answer]:
        batch_size = batch_size or self.settings.eval_batch_size
        was_training = model.training
        model.eval()
        try:
            out: list[Answer] = []
            for c0 in range(0, len(examples), PREDICT_CHUNK):
                out += self._predict_chunk(model, inputs, examples[c0:c0 + PREDICT_CHUNK], batch_size)
            return out
        finally:
            model.train(was_training)

    def _predict_chunk(self, model, inputs, examples: Sequence[MrcExample], batch_size: int) -> list[Answer]:
        keep = [i for i, e in enumerate(examples) if not _is_blank(e)]
        docs = [self.document(examples[i], inputs) for i in keep]
        records = self._encode(docs, inputs)
        starts_ok = [max_context_masks(d.windows, len(d.context)) for d in docs]
        flat = [(k, w, rec) for k, recs in enumerate(records) for w, rec in enumerate(recs)]
        flat.sort(key=lambda x: -len(x[2]["input_ids"]))
        best: list[tuple[float, int, int] | None] = [None] * len(docs)  # (score, first token, last token)
        device = model.device
        for b0 in range(0, len(flat), batch_size):
            part = flat[b0:b0 + batch_size]
            batch = {k: v.to(device) for k, v in collate([r for _, _, r in part], pad_id=inputs.pad_id).items()}
            ctx = self.context_mask(batch)  # [b, L]
            out = SpanExtractionHead.masked(*model.outputs(batch), ctx)
            may_start = np.zeros(tuple(ctx.shape), bool)  # [b, L]: context tokens this window has most context for
            for row, (k, w, _) in enumerate(part):
                off = context_offset(len(docs[k].question))
                ok = starts_ok[k][w]
                may_start[row, off:off + len(ok)] = ok
            start = out.start_logits.masked_fill(~torch.from_numpy(may_start).to(ctx.device), float("-inf"))
            spans = SpanExtractionHead.best_spans(start, out.end_logits, ctx, self.max_answer_length)
            s, e, score = (t[:, 0].cpu().numpy() for t in spans)  # [b] each: the best span of each window
            for row, (k, w, _) in enumerate(part):
                value = float(score[row])
                if not np.isfinite(value) or (best[k] is not None and value <= best[k][0]):
                    continue
                span = window_to_context(docs[k].windows[w], len(docs[k].question), int(s[row]), int(e[row]))
                if span is not None:
                    best[k] = (value, *span)
        answers = [Answer(None, None, None) for _ in examples]
        for i, doc, b in zip(keep, docs, best):
            if b is None:  # no context token to answer with
                answers[i] = Answer("", None, None)
                continue
            cs, ce = tokens_to_char_span(doc.offsets, b[1], b[2])
            answers[i] = Answer(examples[i].context[cs:ce], cs, ce, b[0])
        return answers

    # --- scoring --------------------------------------------------------------------------------------------
    def evaluate(self, gold: GoldData, predictions: Sequence[Answer], *, name: str = "model",
                 train: GoldData | None = None) -> Evaluation:
        items = {e.qid: p.text or "" for e, p in zip(gold.examples, predictions)}
        return score_predictions(gold, items, pred_name=name, pred_format="model", notes=self.data_notes(gold),
                                 metric=self.settings.metric)

    # --- output ---------------------------------------------------------------------------------------------
    def format_prediction(self, example: MrcExample, prediction: Answer, fmt: str) -> str:
        if fmt == "json":
            qid = None if prediction.text is None else example.qid
            return json.dumps({"id": qid, "answer": prediction.text, "start": prediction.start,
                               "end": prediction.end}, ensure_ascii=False)
        if prediction.text is None:
            return ""
        start = "" if prediction.start is None else str(prediction.start)
        end = "" if prediction.end is None else str(prediction.end)
        return f"{_BREAKS.sub(' ', prediction.text)}\t{start}\t{end}"
