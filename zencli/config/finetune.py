"""`FinetuneConfig`: the recipe of `zen finetune` — what to train on, which model, which task, how.

    job: finetune
    task:  {name: ner, decoder: crf, max_seq_len: 128, ...}       # TaskSection
    data:  {train: ..., dev: ..., test: ..., format: auto}         # DataSection
    model: {encoder: zen2, pretrained: DIR | null, vocab, ngram, sizes, chte: {...}}   # ModelSection
    train: {lr: auto, batch_size: 32, output_dir: runs/x, ...}     # TrainSettings (fine-tuning defaults)
    epochs: 3          # or train.max_steps: the step count is ceil(epochs × training inputs / batch_size);
                       # auto (also when neither is given): from the data size (auto_epochs)
    warmup_ratio: 0.1  # or train.warmup_steps: sets train.warmup_ratio (a share of the planned steps, also
                       # of those a time budget fits)

Each pair sets one thing: with `epochs` the recipe's `train.max_steps` is null (computed when the data is
read), a step count typed on the command line (`--max-steps`, `--set train.max_steps=N`) replaces the recipe's
epochs (and the other way round, as `train.warmup_steps` and `warmup_ratio` do), and both in one recipe or
both typed is an error naming the two keys. `warmup_ratio` beside `train.warmup_ratio` is an error too.

Fine-tuning evaluates on dev at `train.eval_every: auto` (about once per epoch, between 5 and 50 evaluations
a run: zencli.train.schedule.eval_interval) when there is a dev file (the dev score is what picks the best
checkpoint), and reads `train.best_metric: null` as the task's main score. This module imports
nothing heavy, so `zen recipe show` stays fast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

from zencli.errors import ZenError
from zencli.model.config import EncoderSizes
from zencli.text.reading import EncodingErrors
from zencli.train.schedule import MAX_EVALS, MIN_EVALS
from zencli.train.settings import TrainSettings, check_patience

Encoder = Literal["zen2", "zen1", "bert", "chte"]
ENCODERS: tuple[str, ...] = ("zen2", "zen1", "bert", "chte")


@dataclass
class TaskSection:
    """The task and how its inputs are cut and decoded."""

    name: str | None = None  # a registered task: cws, pos, ner, ... (required)
    decoder: Literal["softmax", "crf"] | None = None  # token tasks; None: crf for ner and with CHTE, else softmax
    constrained: bool = True  # token tasks: decode only label sequences the scheme allows (BMES, BIO, ...)
    max_seq_len: int = 128  # tokens per model input, [CLS] and [SEP] included
    stride: int | None = None  # longer inputs: windows start every `stride` tokens; None: half a window
    dropout: float = 0.1  # before the task head's linear layer
    eval_batch_size: int = 64  # windows per forward pass when evaluating and predicting
    # word-level tagging data (a word → several pieces): label only each word's first piece (the others
    # skipped by the loss and the CRF), or every piece ("continuation": the word's POS tag, or the I-/M-/E-
    # continuation of its entity); one label per word comes back either way. null: first (measured better,
    # zencli/tasks/tagging.py)
    word_labels: Literal["first", "continuation"] | None = None
    metric: str | None = None  # mrc: cmrc2018 (CMRC 2018 script) or squad (SQuAD v1.1 script); null: cmrc2018
    # dc / sa / spm / nli: add a linear model on the text's hashed char 1-3-grams and matched lexicon n-grams
    # to the classifier's logits (zencli.model.heads.NgramBag); null: the task's default (on for dc and sa, where
    # it was measured to help: docs/results.md, "An n-gram channel for sentence classification")
    ngram_bag: bool | None = None

    def validate(self) -> None:
        if self.name is not None and not self.name.strip():
            raise ZenError("name: expected a task name such as cws, pos or ner")
        if self.max_seq_len < 3:
            raise ZenError(f"max_seq_len: expected >= 3 ([CLS], one token, [SEP]), got {self.max_seq_len}")
        room = self.max_seq_len - 2
        if self.stride is not None and not 1 <= self.stride <= room:
            raise ZenError(f"stride: expected 1..{room} (max_seq_len - 2) or null, got {self.stride}")
        if not 0.0 <= self.dropout < 1.0:
            raise ZenError(f"dropout: expected a probability in [0, 1), got {self.dropout}")
        if self.eval_batch_size < 1:
            raise ZenError(f"eval_batch_size: expected >= 1, got {self.eval_batch_size}")

    @property
    def window_stride(self) -> int:
        """The stride windows actually use (`stride`, or half a window)."""
        room = self.max_seq_len - 2
        return self.stride if self.stride is not None else max(1, room // 2)


@dataclass
class DataSection:
    """Labelled files; `format` is any format the task's reader accepts ("auto": detected per file)."""

    train: Path | None = None
    dev: Path | None = None  # evaluated during training: picks the best checkpoint, drives early stopping
    test: Path | None = None  # evaluated once, with the final (best) model
    format: str = "auto"
    # invalid UTF-8 in the text read: "strict" an error naming the file, line and byte; "replace" each undecodable
    # sequence as one U+FFFD, with a count of the lines and sequences replaced (--encoding-errors)
    encoding_errors: EncodingErrors = "strict"


@dataclass
class ChteSection:
    """CHTE encoder settings. `setting` starts from the paper's (ChteConfig.paper: weibo, resume, bert);
    every other key left null keeps that setting's (or ChteConfig's default) value."""

    setting: Literal["weibo", "resume", "bert"] | None = None
    n_heads: int | None = None
    n_linear_heads: int | None = None
    cnn_windows: list[int] | None = None
    head_dim: int | None = None
    ffn_size: int | None = None
    n_layers: int | None = None
    pool_size: int | None = None
    embed_dropout: float | None = None
    fc_dropout: float | None = None
    attn_dropout: float | None = None
    gated_residual: bool | None = None
    concat_embeddings: bool | None = None
    char_dim: int | None = None
    bigram_dim: int | None = None
    min_count: int = 2  # from characters: chars / bigrams seen fewer times in training share the [UNK] row

    def overrides(self) -> dict:
        """The explicitly set architecture keys (for ChteConfig / ChteConfig.paper)."""
        keys = ("n_heads", "n_linear_heads", "cnn_windows", "head_dim", "ffn_size", "n_layers", "pool_size",
                "embed_dropout", "fc_dropout", "attn_dropout", "gated_residual", "concat_embeddings",
                "char_dim", "bigram_dim")
        out = {k: getattr(self, k) for k in keys if getattr(self, k) is not None}
        if "cnn_windows" in out:
            out["cnn_windows"] = tuple(out["cnn_windows"])
        return out

    def validate(self) -> None:
        if self.min_count < 1:
            raise ZenError(f"min_count: expected >= 1, got {self.min_count}")


@dataclass
class ModelSection(EncoderSizes):  # the sizes: hidden_size, num_hidden_layers, … (model/config.py)
    """The encoder: built from scratch (sizes below + `vocab`/`ngram` files) or loaded from `pretrained`
    (a zen model directory, a released ZEN 1.0/2.0 directory, or a BERT-Chinese directory).

    `encoder`: zen2 | zen1 | bert | chte; null: zen2 from scratch, the pretrained model's own kind
    otherwise. With a BERT directory, zen2/zen1 build a ZEN model around BERT's weights (needs `ngram`).
    chte without `pretrained`: CHTE from characters and bigrams; with it: CHTE on the pretrained encoder.
    """

    encoder: Encoder | None = None
    pretrained: Path | None = None
    vocab: Path | None = None  # from scratch: required (vocab.txt); CHTE from characters: null builds it from training
    ngram: Path | None = None  # from scratch zen2/zen1, or around BERT: required (ngram.txt)
    lowercase: bool | None = None  # char lookup; None: the vocab.json sidecar's setting, else True
    # dropout of the encoder, from scratch or pretrained; null: 0.1 from scratch, a pretrained model's own
    hidden_dropout_prob: float | None = None
    attention_probs_dropout_prob: float | None = None
    max_position_embeddings: int = 512  # zen1/bert absolute positions: must cover task.max_seq_len
    relative_projection: bool = False  # ZEN 2.0 paper's trainable W_r (the released model has none)
    # n-gram slots
    ngram_rules: Literal["zen", "released"] = "zen"
    max_ngrams: int | None = None  # slots per input; None: task.max_seq_len
    # add n-grams of the training data seen at least this many times to the n-gram lexicon (new embedding
    # rows; frequency = count in training): cws/pos the words, ner the entities, sentence tasks the PMI
    # n-grams of the training texts; 2..8 tokens; null: off
    training_ngrams: int | None = None
    # add the characters / word pieces of the training data that the vocabulary lacks and that are seen at
    # least this many times (new char embedding rows: zencli.tasks.training_vocab); null: off
    extend_vocab: int | None = None
    # re-initialise the top K char layers of the pretrained encoder (and the n-gram layers feeding them)
    # before fine-tuning (zencli.tasks.transfer); 0: keep every pretrained layer
    reinit_top_layers: int = 0
    chte: ChteSection = field(default_factory=ChteSection)

    def validate(self) -> None:
        for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                    "max_position_embeddings"):
            if getattr(self, key) < 1:
                raise ZenError(f"{key}: expected an integer >= 1, got {getattr(self, key)}")
        if self.num_hidden_word_layers < 0:
            raise ZenError(f"num_hidden_word_layers: expected >= 0, got {self.num_hidden_word_layers}")
        if self.max_ngrams is not None and self.max_ngrams < 0:
            raise ZenError(f"max_ngrams: expected >= 0 or null, got {self.max_ngrams}")
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            p = getattr(self, key)
            if p is not None and not 0.0 <= p < 1.0:
                raise ZenError(f"{key}: expected a probability in [0, 1) or null, got {p}")
        if self.training_ngrams is not None and self.training_ngrams < 1:
            raise ZenError(f"training_ngrams: expected a minimum count >= 1 or null, got {self.training_ngrams}")
        if self.extend_vocab is not None and self.extend_vocab < 1:
            raise ZenError(f"extend_vocab: expected a minimum count >= 1 or null, got {self.extend_vocab}")
        if self.reinit_top_layers < 0:
            raise ZenError(f"reinit_top_layers: expected an integer >= 0, got {self.reinit_top_layers}")
        if self.reinit_top_layers and self.pretrained is None:
            raise ZenError("reinit_top_layers: re-initialises layers of a pretrained encoder; this model is trained "
                           "from scratch (give model.pretrained, or remove the key)")


@dataclass
class FinetuneTrainSettings(TrainSettings):
    """TrainSettings with fine-tuning defaults: the learning rate by rule, one kept checkpoint (each holds the
    optimizer moments, 3× the model), evaluation about once per epoch (eval_every auto), early stopping."""

    # auto: 1e-3 from scratch; for a pretrained encoder a rate falling with its width (zencli.tasks.transfer)
    lr: float | Literal["auto"] = "auto"
    # the rate of each encoder layer is this times the rate of the layer above (the top layer, the pooler
    # and the head: 1; the embeddings: decay ** layers); 1: one rate for all
    layer_lr_decay: float = 1.0
    head_lr_scale: float = 1.0  # the rate of what fine-tuning adds (the head; CHTE on a pretrained encoder) × this
    max_steps: int | None = None  # null: from `epochs`; neither given: epochs auto
    # a share of the planned steps without a better dev score that ends the run (never inside the warm-up
    # nor before a quarter of the run: zencli.train.early_stopping); 0: no early stopping
    patience: float = 0.2
    eval_every: int | Literal["auto"] = "auto"
    warmup_steps: int | None = 0  # null: from the recipe's `warmup_ratio`
    batch_size: int = 32
    save_every: int = 500
    keep_last: int = 1
    output_dir: Path = Path("runs/finetune")

    def validate(self) -> None:
        # counts left null are derived once the data is read (FinetuneConfig.step_counts) and checked then
        warmup = 0 if self.warmup_steps is None else self.warmup_steps
        if not 0.0 < self.layer_lr_decay <= 1.0:
            raise ZenError(f"layer_lr_decay: expected a factor in (0, 1], got {self.layer_lr_decay}")
        if not self.head_lr_scale > 0.0:
            raise ZenError(f"head_lr_scale: expected a factor > 0, got {self.head_lr_scale}")
        check_patience(self.patience)
        if self.eval_every == 0:  # what fine-tuning read as "once per epoch" before: not reinterpreted
            raise ZenError(f"eval_every: 0 (once per epoch, as fine-tuning read it before) is no longer a "
                           f"cadence here; write auto (about once per epoch, {MIN_EVALS} to {MAX_EVALS} "
                           "evaluations a run) or a step count")
        # best_metric null is the task's main score, set with the dev file at run time (patience watches it)
        TrainSettings.validate(replace(self, warmup_steps=warmup, lr=1.0 if self.lr == "auto" else self.lr,
                                       patience=self.patience if self.best_metric is not None else 0,
                                       max_steps=max(1, warmup) if self.max_steps is None else self.max_steps))

    def fingerprint_fields(self) -> dict[str, Any]:
        fields = TrainSettings.fingerprint_fields(self)
        for key in ("layer_lr_decay", "head_lr_scale"):  # only when set: older runs keep their fingerprints
            if getattr(self, key) != 1.0:
                fields[key] = getattr(self, key)
        return fields


# `epochs: auto`: a small training set needs more passes than a large one, and a few hundred updates at
# least, before dev stops improving (docs/results.md, "Fine-tuning for the user's data"); early stopping
# (train.patience) ends a run that no longer improves.
AUTO_MIN_STEPS = 600
AUTO_EPOCHS = (3, 20)  # at least, at most


def auto_epochs(inputs: int, batch_size: int) -> int:
    """The epochs of `epochs: auto` on `inputs` training inputs: enough for AUTO_MIN_STEPS updates, within
    AUTO_EPOCHS."""
    per_epoch = max(1, math.ceil(inputs / batch_size))
    low, high = AUTO_EPOCHS
    return min(high, max(low, math.ceil(AUTO_MIN_STEPS / per_epoch)))


@dataclass
class AdaptSection:
    """Adaptation to the user's domain before fine-tuning (zencli.tasks.adaptation): the lexicon grows by the
    n-grams of the task's training text and `text`, then masked-LM pretraining continues on that text."""

    minutes: float | None = None  # continued pretraining time, out of train.max_minutes when set; null: off
    text: list[Path] = field(default_factory=list)  # raw text of the user's domain, beside the training texts

    def validate(self) -> None:
        if self.minutes is not None and not self.minutes > 0:
            raise ZenError(f"minutes: expected minutes > 0 or null (no adaptation), got {self.minutes}")
        if self.text and self.minutes is None:
            raise ZenError("text: raw text for adaptation, which adapt.minutes turns on; set it (--adapt-minutes M)")


@dataclass
class FinetuneConfig:
    job: Literal["finetune"] = "finetune"
    task: TaskSection = field(default_factory=TaskSection)
    data: DataSection = field(default_factory=DataSection)
    model: ModelSection = field(default_factory=ModelSection)
    train: FinetuneTrainSettings = field(default_factory=FinetuneTrainSettings)
    adapt: AdaptSection = field(default_factory=AdaptSection)
    epochs: float | Literal["auto"] | None = None
    warmup_ratio: float | None = None

    # (key, the key it derives, what both set, how it is derived): zencli.config.loading.settle_alternatives
    ALTERNATIVES: ClassVar = (
        ("epochs", "train.max_steps", "the number of training steps", "counted when the data is read"),
        ("warmup_ratio", "train.warmup_steps", "the warm-up",
         "run as train.warmup_ratio: a share of the planned steps, also of those a time budget fits"))

    @property
    def epochs_auto(self) -> bool:
        """The step count comes from `auto_epochs`: `epochs: auto`, or neither epochs nor train.max_steps given."""
        return self.epochs == "auto" or (self.epochs is None and self.train.max_steps is None)

    def step_counts(self, inputs: int) -> tuple[int, int, float]:
        """(max_steps, warmup_steps, warmup_ratio) of a run on `inputs` training inputs. A warmup_ratio stays a
        ratio: the loop takes its share of the planned steps, which a time budget may shorten."""
        t = self.train
        if self.epochs is None and t.max_steps is not None:
            steps = t.max_steps
        else:
            epochs = auto_epochs(inputs, t.batch_size) if self.epochs_auto else self.epochs
            steps = max(1, math.ceil(epochs * inputs / t.batch_size))
        if self.warmup_ratio is not None:
            return steps, 0, self.warmup_ratio
        return steps, t.warmup_steps or 0, t.warmup_ratio

    def validate(self) -> None:
        if self.epochs is not None and self.epochs != "auto" and self.epochs <= 0:
            raise ZenError(f"epochs: expected a number > 0, auto or null, got {self.epochs}")
        if self.warmup_ratio is not None and not 0.0 <= self.warmup_ratio < 1.0:
            raise ZenError(f"warmup_ratio: expected a fraction in [0, 1) or null, got {self.warmup_ratio}")
        if self.warmup_ratio is not None:
            key = "warmup_steps" if self.train.warmup_steps else "warmup_ratio" if self.train.warmup_ratio else None
            if key:  # warmup_steps and warmup_ratio are settled when loading; a config built in code may hold both
                raise ZenError(f"warmup_ratio, train.{key}: set one warm-up, not both (warmup_ratio "
                               f"{self.warmup_ratio}, train.{key} {getattr(self.train, key)})")
        a, budget = self.adapt.minutes, self.train.max_minutes
        if a is not None and budget is not None and a >= budget:
            raise ZenError(f"adapt.minutes: {a:g} of the {budget:g}-minute budget (train.max_minutes) leaves no time "
                           f"to fine-tune; give adaptation less or the run more")
        m = self.model
        if m.encoder == "chte" and m.pretrained is None and m.ngram is not None:
            raise ZenError("model.ngram: CHTE from characters uses char and bigram embeddings, no n-gram "
                           "lexicon; remove model.ngram (or give model.pretrained to run CHTE on ZEN)")
        if m.chte.setting is not None and m.encoder != "chte":
            raise ZenError(f"model.chte.setting: only used with model.encoder chte, not {m.encoder or 'zen2'}")
