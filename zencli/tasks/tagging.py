"""Character tagging: Chinese word segmentation (cws), joint segmentation + POS tagging (pos) and named
entity recognition (ner). One label per character, so every input character is one token
(`CharIds`), and the three tasks differ only in their labels, their metric and how output is written.

Reading: any tagging format of `zencli.data.readers.tagging` (SIGHAN lines, char-level CoNLL, \\x02,
word/TAG ...). Labels come from the training data (sorted), with their scheme (BMES for cws/pos; BIO,
IOBES or BMES for ner); both are saved with the model.

Head: `TokenClassificationHead` over the characters (not [CLS]/[SEP]), decoded by softmax or a CRF. With
`task.constrained` (the default) decoding only produces label sequences the scheme allows
(`allowed_transitions`), for softmax too (Viterbi over the per-char probabilities).

Long sentences are never truncated: they are read in windows of at most max_seq_len − 2 characters, cut at
word/entity boundaries for training and overlapping for prediction, where each character is scored in the
window that gives it the most context and the whole sentence is decoded in one pass (so the output is well
formed across window edges too).

Word-level data (one label per word, e.g. Arabic CoNLL NER): each word becomes its tokenizer pieces and the
label sits on the first piece (`task.word_labels: first`, the default: it measured better) or on every piece
(`continuation`).

Output (`zen predict --format`): text (cws: spaced words; pos: `word/TAG`; ner: `[entity]/TYPE` inline), json
(character offsets) or conll (char<TAB>label).

More: docs/design.md, "Character tagging".
"""

from __future__ import annotations

import functools
import json
from abc import abstractmethod
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from zencli.data.collate import IGNORE_INDEX, collate
from zencli.data.readers import LabelSet, TaggedSentence
from zencli.data.readers.tagging import LEVELS
from zencli.data.windows import merge_token_predictions, plan_windows
from zencli.errors import ZenError, where
from zencli.model.crf import allowed_transitions
from zencli.model.heads import TokenClassificationHead
from zencli.tasks.base import Record, Task, register
from zencli.tasks.scoring import Evaluation, GoldData, score_predictions
from zencli.text.labels import (
    SCHEME_PREFIXES,
    SCHEMES,
    continuation_labels,
    detect_scheme,
    labels_from_spans,
    scheme_labels,
    scheme_name,
    spans_from_labels,
    word_label_of_pieces,
    word_spans,
)
from zencli.text.tokenizer import BasicTokenizer

Span = tuple[int, int, str]
WORD_LABELS = ("first", "continuation")  # `task.word_labels`
DEFAULT_WORD_LABELS = "first"  # what `task.word_labels: null` means (measured: docs/design.md, "Character tagging")


class TaggingTask(Task):
    """Shared by cws, pos and ner: labels per char, windows, softmax/CRF decoding."""

    output_formats: ClassVar[tuple[str, ...]] = ("text", "json", "conll")
    main_metric: ClassVar[str] = "f1"
    uses_pooled: ClassVar[bool] = False
    word_level: ClassVar[bool] = True  # pos, ner (cws labels characters)

    # --- state: labels and their scheme -----------------------------------------------------------------
    @classmethod
    def build_state(cls, settings, train: GoldData) -> dict[str, Any]:
        labels = LabelSet.build(lab for s in train.examples for lab in (s.labels or []))
        level = train.info.level
        if level == "word" and cls.name == "cws":
            raise ZenError(f"{train.path}: word-level data for cws; segmentation labels characters (words "
                           f"separated by spaces need no segmenting)")
        if level == "char" and settings.word_labels is not None:
            raise ZenError(f"task.word_labels: applies to word-level data; {train.path} is read as char-level "
                           f"{train.info.format} data (one label per char); remove the setting")
        mode = settings.word_labels or DEFAULT_WORD_LABELS
        word = {"level": level, "word_labels": mode} if level == "word" else {}
        if level == "word" and cls.name == "pos":
            return {"labels": labels.labels, "scheme": None, **word}  # plain tags: no scheme
        try:
            scheme = detect_scheme(labels.labels)
        except ValueError as e:
            raise ZenError(f"{train.path}: {e}") from None
        if word and mode == "continuation":  # pieces may need continuation labels no word has (I-X of B-X)
            types = sorted({t for lab in labels.labels if lab != "O" for t in [lab.split("-", 1)[1]]})
            labels = LabelSet.build([*labels.labels, *scheme_labels(types, scheme)])
        return {"labels": labels.labels, "scheme": scheme, **word}

    def load_state(self, state: dict[str, Any]) -> None:
        labels, scheme = state.get("labels"), state.get("scheme")
        level = state.get("level", "char")  # models from before word-level data tag chars
        if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
            raise ZenError(f"task {self.name}: state 'labels': expected a non-empty list of label strings")
        if level not in LEVELS:
            raise ZenError(f"task {self.name}: state 'level': expected one of {', '.join(LEVELS)}, got {level!r}")
        self.labels = LabelSet(labels)
        self.level: str = level
        # word level: which pieces carry labels; models from before the setting labelled first pieces
        self.word_labels: str = state.get("word_labels", "first") if level == "word" else "first"
        if self.word_labels not in WORD_LABELS:
            raise ZenError(f"task {self.name}: state 'word_labels': expected one of {', '.join(WORD_LABELS)}, "
                           f"got {self.word_labels!r}")
        if level == "word" and self.name == "pos":
            if scheme is not None:
                raise ZenError(f"task {self.name}: state 'scheme': word-level POS tags have none, got {scheme!r}")
            self.scheme = None
            self._may_start = np.ones(len(labels), bool)
            self.constraints = None
            return
        if scheme not in SCHEMES:
            raise ZenError(f"task {self.name}: state 'scheme': expected one of {', '.join(SCHEMES)}, got {scheme!r}")
        self.scheme = scheme
        allowed = allowed_transitions(labels, scheme)
        self._may_start = allowed.start.numpy()  # [C] bool, by label id
        self.constraints = allowed if self.settings.constrained else None

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {"labels": list(self.labels.labels), "scheme": self.scheme}
        if self.level != "char":
            out["level"] = self.level
            out["word_labels"] = self.word_labels
        return out

    def check_level(self, gold: GoldData) -> None:
        """A word-level model scores word-level files only, and a char-level one char-level files."""
        if gold.info.level != self.level:
            raise ZenError(f"{gold.path}: read as {gold.info.level}-level {gold.info.format} data, but the model "
                           f"tags one label per {self.level}; expected a {self.level}-level file"
                           + (" (word<TAB>label lines: --format conll-word)" if self.level == "word" else ""))

    # --- data -------------------------------------------------------------------------------------------
    def parse_input(self, text: str, source: str, line: int) -> TaggedSentence:
        if self.level == "word":
            # Words as the tokenizer cuts running text: at white space, and each punctuation char alone
            # (the boundaries do not depend on case or normalisation settings).
            toks = _word_splitter().split_with_offsets(text)
            return TaggedSentence([text[t.start:t.end] for t in toks], None, source, line, "word", text,
                                  [(t.start, t.end) for t in toks])
        # White space is no token (the model was trained on none, and no word or entity holds it): the
        # model reads the other chars, and output puts their labels back at their places in the line.
        kept = [i for i, c in enumerate(text) if not c.isspace()]
        return TaggedSentence([text[i] for i in kept], None, source, line, "char", text, [(i, i + 1) for i in kept])

    def data_notes(self, gold: GoldData) -> list[str]:
        notes = super().data_notes(gold)
        info = gold.info
        if info.ill_formed:
            notes.append(f"{gold.path}: {info.ill_formed} sentences have label sequences the {info.scheme} scheme "
                         f"does not allow (kept as they are)")
        return notes

    def lexicon_units(self, examples: Sequence[TaggedSentence]) -> Counter[str]:
        """Words (cws, pos) or entities (ner) of the labelled sentences, by how often they occur (word
        level: the words of a unit joined by spaces)."""
        sep = " " if self.level == "word" else ""
        return Counter(sep.join(s.chars[a:b]) for s in examples if s.labels for a, b, _ in self.units(s.labels))

    def vocab_units(self, examples: Sequence[TaggedSentence]) -> tuple[str, Counter[str]]:
        return ("words" if self.level == "word" else "chars"), Counter(c for s in examples for c in s.chars)

    def baseline_predictions(self, train: GoldData, examples: Sequence[TaggedSentence]
                             ) -> tuple[str, list[list[str]]]:
        """Each token (char, or word) tagged with its most frequent training label; unseen ones with the most
        frequent label overall (ties: the label first in sorted order)."""
        counts: dict[str, Counter[str]] = {}
        overall: Counter[str] = Counter()
        for s in train.examples:
            for c, lab in zip(s.chars, s.labels or []):
                counts.setdefault(c, Counter())[lab] += 1
                overall[lab] += 1

        def top(c: Counter[str]) -> str:
            return min(c, key=lambda lab: (-c[lab], lab))

        best = {c: top(n) for c, n in counts.items()}
        default = top(overall) if overall else "O"
        unit = "word" if self.level == "word" else "char"
        return (f"most frequent training tag of each {unit}",
                [[best.get(c, default) for c in s.chars] for s in examples])

    def units(self, labels: Sequence[str]) -> list[Span]:
        """The (start, end, tag) units that labels mark: words; entities for ner."""
        if self.level == "word":
            return [(i, i + 1, tag) for i, tag in enumerate(labels)]
        return word_spans(labels)

    def unseen_labels(self, gold: GoldData) -> dict[str, int]:
        """Gold labels the model does not know (never predicted, so always scored as errors)."""
        counts = Counter(lab for s in gold.examples for lab in (s.labels or []) if lab not in self.labels)
        return dict(sorted(counts.items()))

    # --- model ------------------------------------------------------------------------------------------
    def build_head(self, hidden_size: int) -> TokenClassificationHead:
        return TokenClassificationHead(hidden_size, len(self.labels), dropout=self.settings.dropout,
                                       decoder=self.settings.decoder or "softmax", constraints=self.constraints)

    def _windows(self, n: int) -> list[tuple[int, int]]:
        return plan_windows(n, self.settings.max_seq_len - 2, self.settings.window_stride)

    def training_windows(self, ids: np.ndarray, starts: np.ndarray | None = None) -> list[tuple[int, int]]:
        """Windows of at most max_seq_len − 2 chars covering a labelled sentence, each cut before a char
        whose label may start a sequence (a word or entity boundary), so every window's labels stand on
        their own; a window is cut mid-chunk only when a chunk is longer than a whole window. Positions
        labelled IGNORE_INDEX, and word pieces other than `starts` (each word's first), are never cut before."""
        room = self.settings.max_seq_len - 2
        n = len(ids)
        if n <= room:
            return [(0, n)]
        labelled = ids >= 0
        if starts is not None:
            at_start = np.zeros(n, bool)
            at_start[starts] = True
            labelled &= at_start
        # [n] bool: a new word / entity / O may begin at this position
        boundary = labelled & self._may_start[np.where(labelled, ids, 0)]
        out, start = [], 0
        while start < n:
            end = min(start + room, n)
            if end < n:
                cuts = np.flatnonzero(boundary[start + 1:end + 1])
                if len(cuts):
                    end = start + 1 + int(cuts[-1])
            out.append((start, end))
            start = end
        return out

    def _piece_ids(self, inputs, sentences: Sequence[Sequence[str]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Word level: per sentence of words, (piece ids [n], first piece of each word [w])."""
        return [inputs.word_pieces(words) for words in sentences]

    def training_records(self, examples: Sequence[TaggedSentence], inputs) -> tuple[list[Record], list[str]]:
        self.check_level_of(examples)
        sentences = [s for s in examples if s.chars]
        label_ids = [np.asarray(self.labels.encode_all(s.labels), np.int64) for s in sentences]
        pieces = None
        if self.level == "word":
            pieces = self._piece_ids(inputs, [s.chars for s in sentences])
            for k, (s, (ids, first)) in enumerate(zip(sentences, pieces)):
                if self.word_labels == "continuation":  # every piece: the word's label spread over its pieces
                    lengths = np.diff(first, append=len(ids))
                    spread = [lab for w, n in zip(s.labels, lengths)
                              for lab in continuation_labels(w, int(n), self.scheme)]
                    label_ids[k] = np.asarray(self.labels.encode_all(spread), np.int64)
                    continue
                lab = np.full(len(ids), IGNORE_INDEX, np.int64)  # continuation pieces: no label
                lab[first] = label_ids[k]
                label_ids[k] = lab
        windows = [self.training_windows(ids, None if pieces is None else pieces[k][1])
                   for k, ids in enumerate(label_ids)]
        crf_trim = self.settings.decoder == "crf" and self.constraints is not None
        loo = inputs.leave_one_out
        excluded = None if loo is None else [loo.excluded(self.lexicon_units([s])) for s in sentences]
        records: list[Record] = []
        trimmed = 0
        chunk = 2048
        for c0 in range(0, len(sentences), chunk):
            part, part_windows = sentences[c0:c0 + chunk], windows[c0:c0 + chunk]
            part_excluded = None if excluded is None else excluded[c0:c0 + chunk]
            if pieces is None:
                encoded = inputs.char_windows([s.chars for s in part], part_windows, part_excluded)
            else:
                encoded = inputs.id_windows([ids for ids, _ in pieces[c0:c0 + chunk]], part_windows, part_excluded)
            for ids, ws, recs in zip(label_ids[c0:c0 + chunk], part_windows, encoded):
                for (a, b), rec in zip(ws, recs):
                    lo, hi = a, b
                    if crf_trim:
                        # A window cut inside a chunk would start (end) with a label a constrained CRF forbids
                        # there: its chain starts at the first label allowed to start (ends at the last one
                        # allowed to end); the chars left out still give the encoder context.
                        start_ok, end_ok = self.constraints.start, self.constraints.end
                        if a > 0:
                            while lo < hi and not (ids[lo] >= 0 and bool(start_ok[ids[lo]])):
                                lo += 1
                        if b < len(ids):
                            while hi > lo and not (ids[hi - 1] >= 0 and bool(end_ok[ids[hi - 1]])):
                                hi -= 1
                        trimmed += (lo - a) + (b - hi)
                    lab = np.full(b - a + 2, IGNORE_INDEX, np.int64)  # [CLS] chars [SEP]
                    lab[1 + lo - a:1 + hi - a] = ids[lo:hi]
                    rec["labels"] = lab
                    records.append(rec)
        notes = []
        if len(sentences) < len(examples):
            notes.append(f"{len(examples) - len(sentences)} empty training sentences have nothing to learn from")
        unit = "chars" if self.level == "char" else "word pieces"
        n_cut = sum(len(ws) > 1 for ws in windows)
        if n_cut:
            notes.append(f"{n_cut} training sentences longer than {self.settings.max_seq_len - 2} {unit} were cut at "
                         f"word/entity boundaries into {sum(len(ws) for ws in windows if len(ws) > 1)} windows"
                         + (f"; {trimmed} {unit} of chunks longer than a window were left unlabelled"
                            if trimmed else ""))
        if pieces is not None:
            n_words = sum(len(first) for _, first in pieces)
            n_pieces = sum(len(ids) for ids, _ in pieces)
            where_ = "the first" if self.word_labels == "first" else "every one (continuation labels)"
            # words starting with [UNK]: a warning of zen finetune when many (zencli.tasks.training_vocab)
            notes.append(f"{n_words:,} training words became {n_pieces:,} word pieces "
                         f"({n_pieces / max(n_words, 1):.2f} per word; the label sits on {where_})")
        return records, notes

    def check_level_of(self, examples: Sequence[TaggedSentence]) -> None:
        for s in examples:
            if s.level != self.level:
                raise ZenError(f"{where(s.source, s.line)}: a {s.level}-level sentence, but the model tags one label "
                               f"per {self.level}; expected {self.level}-level data")

    def loss(self, model, encoded, batch):
        labels = batch["labels"]  # [B, L]: IGNORE_INDEX at [CLS]/[SEP], padding and trimmed chars
        mask = labels != IGNORE_INDEX
        out = model.head(encoded.hidden, mask, labels)
        if model.head.crf is not None:  # a CRF's emissions alone are not its decisions: no per-token accuracy
            return out.loss, {}
        with torch.no_grad():
            correct = ((out.logits.argmax(-1) == labels) & mask).sum()
        return out.loss, {"acc": (correct, mask.sum())}

    @torch.no_grad()
    def emissions(self, model, inputs, sentences: Sequence[Sequence[str]], batch_size: int,
                  pieces: list[tuple[np.ndarray, np.ndarray]] | None = None) -> list[np.ndarray]:
        """Per sentence, emission scores [n, C] float32 merged over its windows (word level: [w, C], the
        scores of each word's first piece; given the sentences' `pieces`: [n pieces, C])."""
        all_pieces = pieces is not None
        if self.level == "word":
            pieces = pieces or self._piece_ids(inputs, sentences)
            windows = [self._windows(len(ids)) if len(ids) else [] for ids, _ in pieces]
            records = inputs.id_windows([ids for ids, _ in pieces], windows)
            lengths = [len(ids) for ids, _ in pieces]
        else:
            pieces = None
            windows = [self._windows(len(chars)) if chars else [] for chars in sentences]
            records = inputs.char_windows(sentences, windows)
            lengths = [len(chars) for chars in sentences]
        flat = [(i, w, rec) for i, recs in enumerate(records) for w, rec in enumerate(recs)]
        flat.sort(key=lambda x: -len(x[2]["input_ids"]))  # similar lengths together: little padding
        per_window: list[list[np.ndarray | None]] = [[None] * len(ws) for ws in windows]
        device = model.device
        for b0 in range(0, len(flat), batch_size):
            part = flat[b0:b0 + batch_size]
            batch = {k: v.to(device) for k, v in collate([r for _, _, r in part], pad_id=inputs.pad_id).items()}
            logits = model.outputs(batch)[0].float().cpu().numpy()  # [B, L, C]
            for row, (i, w, rec) in enumerate(part):
                n = len(rec["input_ids"]) - 2
                per_window[i][w] = logits[row, 1:1 + n]
        out = []
        for k, (n, ws, preds) in enumerate(zip(lengths, windows, per_window)):
            if not n:
                out.append(np.zeros((0, len(self.labels)), np.float32))
                continue
            merged = merge_token_predictions(ws, preds, n, reduce="best").astype(np.float32)
            out.append(merged if pieces is None or all_pieces else merged[pieces[k][1]])
        return out

    def head_outputs(self, head, encoded, batch):
        return (head(encoded.hidden).logits,)  # [B, L, C]

    @torch.no_grad()
    def predict(self, model, inputs, examples: Sequence[TaggedSentence], batch_size: int | None = None
                ) -> list[list[str]]:
        batch_size = batch_size or self.settings.eval_batch_size
        self.check_level_of(examples)
        was_training = model.training
        model.eval()
        try:
            sentences = [s.chars for s in examples]
            if self.level == "word" and self.word_labels == "continuation":
                # Every piece is decoded (the CRF chain runs over all pieces, as in training); each word's
                # label comes back from its pieces' (`word_label_of_pieces`).
                pieces = self._piece_ids(inputs, sentences)
                decoded = self.decode(model, self.emissions(model, inputs, sentences, batch_size, pieces), batch_size)
                return [[word_label_of_pieces(labels[a:b], self.scheme)
                         for a, b in zip(first, [*first[1:], len(ids)])]
                        for labels, (ids, first) in zip(decoded, pieces)]
            scores = self.emissions(model, inputs, sentences, batch_size)
            return self.decode(model, scores, batch_size)
        finally:
            model.train(was_training)

    def decode(self, model, scores: Sequence[np.ndarray], batch_size: int) -> list[list[str]]:
        """Labels per sentence from merged emissions, decoded over the whole sentence (CRF / constraints)."""
        out: list[list[str]] = [[] for _ in scores]
        order = sorted((i for i, s in enumerate(scores) if len(s)), key=lambda i: -len(scores[i]))
        n_labels = len(self.labels)
        names = self.labels.labels
        for b0 in range(0, len(order), batch_size):
            part = order[b0:b0 + batch_size]
            width = len(scores[part[0]])
            em = np.zeros((len(part), width, n_labels), np.float32)
            mask = np.zeros((len(part), width), bool)
            for row, i in enumerate(part):
                em[row, :len(scores[i])] = scores[i]
                mask[row, :len(scores[i])] = True
            device = model.device
            ids = model.head.decode(torch.from_numpy(em).to(device), torch.from_numpy(mask).to(device)).tolist()
            for row, i in enumerate(part):
                out[i] = [names[k] for k in ids[row][:len(scores[i])]]
        return out

    # --- scoring ----------------------------------------------------------------------------------------
    def evaluate(self, gold: GoldData, predictions: Sequence[Sequence[str]], *, name: str = "model",
                 train: GoldData | None = None) -> Evaluation:
        self.check_level(gold)
        items = [TaggedSentence(g.chars, list(p), name, g.line, g.level) for g, p in zip(gold.examples, predictions)]
        notes = self.evaluation_notes(gold)
        train_words = None
        if self.name == "cws" and train is not None:
            train_words = {w for s in train.examples for w in (s.words or [])}
        return score_predictions(gold, items, pred_name=name, pred_format="model", train_words=train_words,
                                 train_words_name=None if train is None else train.path,
                                 known_labels=self.known_labels(gold), notes=notes)

    def known_labels(self, gold: GoldData) -> Sequence[str]:
        """The labels the model can predict, as its predictions of `gold` are scored."""
        return self.labels.labels

    # --- output -----------------------------------------------------------------------------------------
    def format_prediction(self, example: TaggedSentence, prediction: Sequence[str], fmt: str) -> str:
        chars = example.chars
        if fmt == "conll":
            return "".join(f"{c}\t{lab}\n" for c, lab in zip(chars, prediction))
        text = example.text
        spans = self._spans(example, prediction)
        if fmt == "json":
            fields = self._json_fields(text, spans)
            if example.level == "word" and self.name == "ner":
                fields = {"words": [{"text": w, "start": s, "end": e, "label": lab} for w, (s, e), lab
                                    in zip(chars, example.word_offsets(), prediction)], **fields}
            return json.dumps({"text": text, **fields}, ensure_ascii=False)
        return self._text(text, spans)

    def _spans(self, example: TaggedSentence, labels: Sequence[str]) -> list[Span]:
        """What the output shows — words, tagged words or entities — as (start, end, tag) character spans
        of `example.text`; at char level the input's white space cuts them (none holds or is only white
        space)."""
        offsets = example.word_offsets()
        spans = [(offsets[a][0], offsets[b - 1][1], t) for a, b, t in self.units(labels)]
        return spans if example.level == "word" else cut_at_space(example.text, spans)

    @abstractmethod
    def _json_fields(self, text: str, spans: Sequence[Span]) -> dict[str, Any]:
        """The task's JSON fields of one prediction (words, tagged words or entities with offsets)."""

    @abstractmethod
    def _text(self, text: str, spans: Sequence[Span]) -> str:
        """The task's plain-text rendering of one prediction."""


@functools.cache
def _word_splitter():
    return BasicTokenizer(lowercase=False, strip_accents=False)


def cut_at_space(text: str, spans: Sequence[Span]) -> list[Span]:
    """`spans` of `text` cut at white space, white-space-only pieces dropped."""
    out: list[Span] = []
    for start, end, tag in spans:
        piece_start = None
        for i in range(start, end + 1):
            space = i == end or text[i].isspace()
            if space and piece_start is not None:
                out.append((piece_start, i, tag))
                piece_start = None
            elif not space and piece_start is None:
                piece_start = i
    return out


@register
class CwsTask(TaggingTask):
    name = "cws"
    word_level = False
    description = "Chinese word segmentation (B/M/E/S per char; SIGHAN word P/R/F1, OOV recall)"

    def _json_fields(self, text, spans):
        return {"words": [{"text": text[s:e], "start": s, "end": e} for s, e, _ in spans]}

    def _text(self, text, spans):
        return " ".join(text[s:e] for s, e, _ in spans)


@register
class PosTask(TaggingTask):
    name = "pos"
    description = ("joint word segmentation + POS tagging (B-TAG … per char; word+tag F1), or one tag per word "
                   "(word-level files; word accuracy)")

    def _json_fields(self, text, spans):
        return {"words": [{"text": text[s:e], "start": s, "end": e, "tag": t} for s, e, t in spans]}

    def _text(self, text, spans):
        return " ".join(f"{text[s:e]}/{t}" for s, e, t in spans)


@register
class NerTask(TaggingTask):
    name = "ner"
    description = ("named entity recognition (BIO/IOBES/BMES per char, strict entity F1; or per word, "
                   "conlleval entity F1)")
    # entities are spans: a CRF's transitions score them whole (Weibo, 2 seeds: +3.4 F1 over softmax;
    # docs/results.md), as the built-in NER recipes already chose
    decoder_default = "crf"

    def units(self, labels: Sequence[str]) -> list[Span]:
        return spans_from_labels(labels, self.scheme)  # entities, at either level

    def evaluate(self, gold, predictions, *, name="model", train=None):
        if gold.info.scheme and gold.info.scheme != self.scheme:
            # Same entities, written in the gold file's scheme (strictly read: nothing is repaired).
            predictions = [labels_from_spans(len(p), spans_from_labels(p, self.scheme), gold.info.scheme)
                           for p in predictions]
        return super().evaluate(gold, predictions, name=name, train=train)

    def known_labels(self, gold):
        if gold.info.scheme and gold.info.scheme != self.scheme:
            # predictions are scored written in the gold file's scheme: its labels of the model's types
            prefixes = sorted(SCHEME_PREFIXES[scheme_name(gold.info.scheme)] - {"O"})
            return ["O", *(f"{p}-{t}" for t in sorted(self._types()) for p in prefixes)]
        return super().known_labels(gold)

    def _types(self) -> set[str]:
        return {lab.split("-", 1)[1] for lab in self.labels.labels if "-" in lab}

    def unseen_labels(self, gold):
        if gold.info.scheme and gold.info.scheme != self.scheme:
            types = self._types()
            counts = Counter(lab for s in gold.examples for lab in (s.labels or [])
                             if lab != "O" and lab.split("-", 1)[-1] not in types)
            return dict(sorted(counts.items()))
        return super().unseen_labels(gold)

    def _json_fields(self, text, spans):
        return {"entities": [{"text": text[s:e], "start": s, "end": e, "type": t} for s, e, t in spans]}

    def _text(self, text, spans):
        parts, pos = [], 0
        for s, e, t in spans:
            parts += [text[pos:s], f"[{text[s:e]}]/{t}"]
            pos = e
        parts.append(text[pos:])
        return "".join(parts)
