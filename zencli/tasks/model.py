"""The fine-tuned task model — an encoder with a task head — and the directory it lives in.

Encoders (`encoder` below; `chte` may sit on top of it, or stand alone):
- ZEN 2.0 / ZEN 1.0 / BERT (`ZenModel`): built from scratch with a recipe's sizes, vocab.txt and ngram.txt,
  or loaded from `model.pretrained` — a zen model directory (`zen pretrain` output, or another fine-tuned
  model whose encoder is reused), a released ZEN directory, or a BERT-Chinese directory (for zen2/zen1 its
  weights become the character encoder and the n-gram side starts fresh);
- CHTE: from characters + bigrams, or on the hidden states of a pretrained encoder (the paper's "+BERT").

A fine-tuned model directory (everything `zen predict` needs, nothing else):

    config.json        the encoder's ZenConfig (zen format: `zen_format`, `architecture: TaskModel`)
    model.safetensors  all weights: encoder.*, chte.*, head.*
    vocab.txt          the char/WordPiece vocabulary;  ngram.txt: the n-gram lexicon (ZEN encoders)
    bigrams.json       CHTE from characters: its bigram table
    task.json          task name and settings, the task's state (labels, scheme), input settings
                       (case, matching rules, slot cap, max_seq_len), encoder kind, CHTE config
    dev_scores.json / test_scores.json   written by `zen finetune` beside the model
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from zencli.atomic_write import atomic_write_path, atomic_write_text
from zencli.config.finetune import FinetuneConfig, ModelSection, TaskSection
from zencli.config.loading import from_dict, to_dict
from zencli.data.features import CharIds, unmatchable_ngrams
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.model.checkpoint import (
    CONFIG_NAME,
    FORMAT_VERSION,
    NGRAM_NAME,
    VOCAB_NAME,
    WEIGHTS_NAME,
    check_text_files,
    load_strict,
    read_zen_config,
)
from zencli.model.chte import ChteConfig, ChteEncoder
from zencli.model.config import ZenConfig, read_json
from zencli.model.encoder import ZenModel
from zencli.tasks.base import Task, task_class
from zencli.tasks.inputs import BIGRAMS_NAME, BigramTable, InputPipeline, InputSettings, LeaveOneOut, spell_units
from zencli.text.tokenizer import sidecar_normalize
from zencli.text.vocab import SPECIAL_TOKENS, UNK, Vocab, read_sidecar

TASK_NAME = "task.json"
TASK_FORMAT = "zen-task-model"
TASK_VERSION = 1
ARCHITECTURE = "TaskModel"
ENCODER_KEYS = ("input_ids", "token_type_ids", "attention_mask", "ngram_ids", "ngram_token_type_ids",
                "ngram_attention_mask", "ngram_starts", "ngram_lengths", "ngram_freqs")


# --- the module ---------------------------------------------------------------------------------------

@dataclass
class Encoded:
    """The encoder's view of a batch, what task heads consume."""

    hidden: Tensor  # [B, L, H] per token (CHTE output when CHTE is on top)
    pooled: Tensor | None  # [B, H] pooled [CLS] of ZEN/BERT; None for CHTE from characters
    mask: Tensor  # [B, L] bool: real tokens, [CLS]/[SEP] included


def inner_mask(attention_mask: Tensor) -> Tensor:
    """[B, L] attention mask → bool mask of the tokens between [CLS] (position 0) and the final [SEP]."""
    mask = attention_mask.bool().clone()
    mask[:, 0] = False
    last = attention_mask.long().sum(1) - 1  # [B]
    mask[torch.arange(mask.shape[0], device=mask.device), last.clamp(min=0)] = False
    return mask


class TaskModel(nn.Module):
    """encoder (ZEN/BERT) and/or chte (CHTE), then the task's head. `forward(batch)` → (loss, metrics),
    as the training loop needs; `encode(batch)` → `Encoded` for prediction."""

    def __init__(self, task: Task, head: nn.Module, encoder: ZenModel | None = None,
                 chte: ChteEncoder | None = None):
        super().__init__()
        if encoder is None and chte is None:
            raise ValueError("a task model needs an encoder, a CHTE encoder, or both")
        self.task = task  # plain attribute: the task's settings and state, not parameters
        self.encoder = encoder
        self.chte = chte
        self.head = head

    @staticmethod
    def output_size(encoder: ZenModel | None, chte: ChteEncoder | None) -> int:
        return chte.output_size if chte is not None else encoder.config.hidden_size

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def encode(self, batch: dict[str, Tensor]) -> Encoded:
        mask = batch["attention_mask"].bool()
        pooled = None
        if self.encoder is not None:
            out = self.encoder(**{k: batch[k] for k in ENCODER_KEYS if k in batch})
            hidden, pooled = out.sequence_output, out.pooled_output  # [B, L, H], [B, H]
            if self.chte is not None:
                hidden = self.chte(mask, features=hidden).hidden  # [B, L, chte output]
        else:
            # CHTE from characters sees the characters only: [CLS]/[SEP] are masked like padding
            # (zeroed before its convolutions, never attended), and collate pads the bigram ids with -100.
            hidden = self.chte(inner_mask(mask), char_ids=batch["input_ids"],
                               bigram_next_ids=batch["bigram_next_ids"].clamp(min=0),
                               bigram_prev_ids=batch["bigram_prev_ids"].clamp(min=0)).hidden
        return Encoded(hidden, pooled, mask)

    def forward(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Any]]:
        return self.task.loss(self, self.encode(batch), batch)


# --- what is saved beside the weights -------------------------------------------------------------------

@dataclass
class ModelSpec:
    """The architecture and inputs of a task model (task.json, with the task's settings and state)."""

    encoder: str | None  # zen2 / zen1 / bert; None: CHTE from characters alone
    chte: dict[str, Any] | None  # ChteConfig fields; None: no CHTE
    inputs: InputSettings
    source: str = ""  # where the encoder's weights came from
    notes: list[str] = field(default_factory=list)

    def chte_config(self) -> ChteConfig | None:
        if self.chte is None:
            return None
        d = dict(self.chte)
        if "cnn_windows" in d:
            d["cnn_windows"] = tuple(d["cnn_windows"])
        return ChteConfig(**d)


@dataclass
class LoadedModel:
    """A task model ready to predict: module (eval mode), task, inputs, spec, directory."""

    model: TaskModel
    task: Task
    inputs: InputPipeline
    spec: ModelSpec
    path: Path


# --- building ---------------------------------------------------------------------------------------------

@dataclass
class EncoderSource:
    encoder: ZenModel | None
    vocab: Path | None  # None: CHTE from characters builds its vocabulary from the training data
    ngram: Path | None
    description: str
    inputs: InputSettings | None = None  # a fine-tuned model's own input settings (its vocab has no sidecar)


def _text_file(d: Path, name: str, given: Path | None, key: str) -> Path | None:
    """`d/name` when the directory has one, else the recipe's file; both is an error (which one?)."""
    own = d / name
    if own.is_file():
        if given is not None:
            raise ZenError(f"{key}: {d} has its own {name}, which must be used with its weights; "
                           f"remove {key}")
        return own
    return given


def load_encoder(m: ModelSection, max_seq_len: int) -> EncoderSource:
    """The ZEN/BERT encoder (None for CHTE from characters), with its vocab and lexicon files."""
    from zencli.model.checkpoint import load_zen_model
    from zencli.model.pretraining import ZenForPreTraining
    from zencli.model.sources import checkpoint_kind, load_pretrained

    if m.pretrained is None:
        kind = m.encoder or "zen2"
        if kind == "chte":
            return EncoderSource(None, m.vocab, None, "CHTE from characters (new)")
        if m.vocab is None:
            raise ZenError("model.vocab: a model built from scratch needs a vocab.txt (zen vocab build); or "
                           "give model.pretrained (--model DIR)")
        if kind != "bert" and m.ngram is None:
            raise ZenError(f"model.ngram: a {kind} model built from scratch needs an ngram.txt (zen lexicon build)")
        vocab_rows = len(Vocab.load(m.vocab))
        word_size = len(Lexicon.load(m.ngram)) + 1 if kind != "bert" else 1
        try:
            config = ZenConfig(
                vocab_size=vocab_rows, hidden_size=m.hidden_size, num_hidden_layers=m.num_hidden_layers,
                num_attention_heads=m.num_attention_heads, intermediate_size=m.intermediate_size,
                max_position_embeddings=m.max_position_embeddings, word_size=word_size,
                num_hidden_word_layers=m.num_hidden_word_layers if kind != "bert" else 0, encoder=kind,
                relative_projection=m.relative_projection)
        except ZenError as e:
            raise ZenError(f"model: {str(e).removeprefix('config: ')}") from None
        _check_positions(config, max_seq_len, "model.max_position_embeddings")
        encoder = ZenModel(config)  # ZenConfig's dropout (0.1) unless the recipe sets it
        encoder.set_dropout(m.hidden_dropout_prob, m.attention_probs_dropout_prob)
        word = m.num_hidden_word_layers
        sizes = f"{m.num_hidden_layers} × {m.hidden_size}" + (
            f", {word} n-gram layer{'s' if word != 1 else ''}" if kind != "bert" else "")
        return EncoderSource(encoder, m.vocab, m.ngram if kind != "bert" else None, f"new {kind} encoder ({sizes})")

    d = Path(m.pretrained)
    want = m.encoder
    if m.relative_projection:
        raise ZenError("model.relative_projection: only for an encoder built from scratch; a pretrained model "
                       "brings its own attention")
    if (d / TASK_NAME).is_file():
        kind = "task"
    else:
        kind = checkpoint_kind(d)
    own_inputs = None
    if kind == "bert":
        built = "bert" if want in (None, "chte") else want
        if built != "bert" and m.ngram is None:
            raise ZenError(f"model.ngram: a {built} model built around BERT needs an n-gram lexicon (ngram.txt)")
        loaded = load_pretrained(d, encoder=built, ngram=m.ngram if built != "bert" else None,
                                 num_hidden_word_layers=m.num_hidden_word_layers)
        encoder = loaded.model.bert
        vocab = _text_file(d, VOCAB_NAME, m.vocab, "model.vocab")
        if vocab is None:
            raise ZenError(f"model.vocab: {d} has no vocab.txt; give the BERT model's vocab.txt")
        ngram = m.ngram if built != "bert" else None
        fresh = sum(1 for n in loaded.notes if n.startswith("initialised"))
        what = (f"BERT directory {d}" + (f" as a new {built} encoder" if built != "bert" else "")
                + (f" ({fresh} tensors initialised fresh)" if fresh else ""))
    else:
        if kind == "task":
            loaded_task = load_task_model(d)
            encoder, own_inputs = loaded_task.model.encoder, loaded_task.spec.inputs
            if encoder is None:
                raise ZenError(f"{d}: a CHTE model from characters has no ZEN/BERT encoder to fine-tune from")
            what = f"the encoder of fine-tuned model {d}"
        elif kind == "zen":
            loaded_zen = load_zen_model(d)
            encoder = loaded_zen.bert if isinstance(loaded_zen, ZenForPreTraining) else loaded_zen
            what = f"zen model {d}"
        else:
            encoder = load_pretrained(d).model.bert
            what = f"released {encoder.config.encoder.upper()} directory {d}"
        have = encoder.config.encoder
        if want not in (None, "chte", have):
            raise ZenError(f"model.encoder: {want}, but {d} holds a {have} encoder; set model.encoder to {have} "
                           f"(or chte to put CHTE on it), or use a BERT directory to build a new {want} model")
        vocab = _text_file(d, VOCAB_NAME, m.vocab, "model.vocab")
        ngram = _text_file(d, NGRAM_NAME, m.ngram, "model.ngram") if encoder.config.has_ngrams else None
        if vocab is None:
            raise ZenError(f"model.vocab: {d} has no vocab.txt (released fine-tuned directories do not); give the "
                           f"pretrained model's vocab.txt")
        if encoder.config.has_ngrams and ngram is None:
            raise ZenError(f"model.ngram: {d} has no ngram.txt; give the pretrained model's ngram.txt")
        check_text_files(encoder.config, vocab, ngram)
    _check_positions(encoder.config, max_seq_len, f"task.max_seq_len ({d})")
    encoder.set_dropout(m.hidden_dropout_prob, m.attention_probs_dropout_prob)
    return EncoderSource(encoder, Path(vocab), None if ngram is None else Path(ngram), what, own_inputs)


def _check_positions(config: ZenConfig, max_seq_len: int, key: str) -> None:
    if config.encoder != "zen2" and max_seq_len > config.max_position_embeddings:
        raise ZenError(f"{key}: task.max_seq_len {max_seq_len} exceeds the {config.encoder} encoder's "
                       f"{config.max_position_embeddings} absolute positions")


def chte_config(m: ModelSection, *, feature_size: int | None, char_vocab_size: int | None,
                bigram_vocab_size: int | None) -> ChteConfig:
    """ChteConfig from the recipe: the paper setting (if any), explicit keys over it, and the input sizes."""
    c = m.chte
    inputs: dict[str, Any] = ({"feature_size": feature_size} if feature_size is not None else
                              {"char_vocab_size": char_vocab_size, "bigram_vocab_size": bigram_vocab_size})
    overrides = {**c.overrides(), **inputs}
    try:
        # Input sizes override the setting's: the paper's "bert" feature_size 768 is BERT-base's width.
        config = ChteConfig.paper(c.setting, **overrides) if c.setting else ChteConfig(**overrides)
        config.validate()
    except ZenError as e:
        raise ZenError(f"model.chte.{e}") from None
    return config


def text_ngrams(texts: Sequence[str], vocab: Path, *, lowercase: bool, min_count: int, language: str
                ) -> Counter[tuple[str, ...]]:
    """The PMI n-grams (2..8 tokens, the language's PMI threshold, seen >= min_count times) of `texts`,
    counted over the tokens the model reads (`zen lexicon` with the model's vocabulary), without [UNK]."""
    import tempfile

    from zencli.lexicon.extract import build
    from zencli.lexicon.settings import LexiconConfig

    with tempfile.TemporaryDirectory(prefix="zen-training-ngrams-") as tmp:
        corpus = Path(tmp) / "train.txt"
        corpus.write_text("".join(" ".join(t.split()) + "\n" for t in texts), encoding="utf-8")
        cfg = LexiconConfig(corpus=[corpus], output=Path(tmp) / "ngram.txt", language=language, vocab=vocab,
                            lowercase=lowercase, min_freq=min_count, workers=1)
        lexicon = build(cfg).lexicon
    # A run of unknown chars is not an n-gram of the text: it would match any other such run.
    return Counter({g: n for g, n in zip(lexicon.ngrams, lexicon.freqs) if UNK not in g})


def add_ngrams(lexicon: Lexicon, ngrams: Counter[tuple[str, ...]], min_count: int, min_len: int = 2,
               max_len: int = 8) -> tuple[Lexicon, int]:
    """`lexicon` with the `ngrams` of min_len..max_len tokens seen at least `min_count` times appended,
    most frequent first, their count as frequency; n-grams already in the lexicon keep their id and
    frequency (ids are line numbers, so the lexicon's own lines stay first). A raw-style (ZEN 1.0)
    lexicon cannot spell a `##` continuation piece, so such n-grams are left out of it."""
    raw = lexicon.style == "raw"
    new = sorted((g for g, n in ngrams.items() if n >= min_count and min_len <= len(g) <= max_len
                  and not lexicon.id(g) and not (raw and any(t.startswith("##") for t in g))),
                 key=lambda g: (-ngrams[g], g))
    if not new:
        return lexicon, 0
    return Lexicon([*lexicon.ngrams, *new], [*lexicon.freqs, *(ngrams[g] for g in new)], lexicon.style), len(new)


def add_training_ngrams(lexicon: Lexicon, units: Counter[str], char_ids: CharIds, min_count: int,
                        min_len: int = 2, max_len: int = 8, tokenizer=None) -> tuple[Lexicon, int]:
    """`lexicon` with the training `units` (words or entities, `spell_units`) added (`add_ngrams`)."""
    return add_ngrams(lexicon, spell_units(units, char_ids, tokenizer), min_count, min_len, max_len)


def build_task_model(cfg: FinetuneConfig, task: Task, train_examples: Sequence[Any] | None = None
                     ) -> tuple[TaskModel, InputPipeline, ModelSpec]:
    """A new task model for `cfg` (weights: pretrained where given, fresh elsewhere; seed first).

    The task's `train_examples` give CHTE from characters its char and bigram tables, and
    `model.training_ngrams` its words, entities or texts (`Task.lexicon_units`, `Task.training_texts`)."""
    m = cfg.model
    word_level = getattr(task, "level", "char") == "word"
    if word_level and m.encoder == "chte" and m.pretrained is None:
        raise ZenError("model.encoder: CHTE from characters reads char-level data, and the training data has one "
                       "label per word; put CHTE on a pretrained encoder (model.pretrained) or use zen2/zen1/bert")
    chte_chars = m.encoder == "chte" and train_examples is not None
    train_sentences = [s.chars for s in train_examples] if chte_chars else None
    source = load_encoder(m, cfg.task.max_seq_len)
    notes: list[str] = []
    if source.vocab is not None:
        vocab = Vocab.load(source.vocab)
        side = read_sidecar(source.vocab)
        if side is None and source.inputs is not None:
            side = {k: getattr(source.inputs, k) for k in ("lowercase", "strip_accents", "normalize")}
    else:
        if train_sentences is None:
            raise ValueError("CHTE from characters without a vocab.txt needs the training sentences")
        vocab = char_vocab(train_sentences, m.chte.min_count)
        side = {"lowercase": False}  # the training characters exactly as written
        notes.append(f"CHTE char table: {len(vocab) - len(SPECIAL_TOKENS):,} chars seen >= {m.chte.min_count} "
                     f"times in training (others share [UNK])")
    lexicon = Lexicon.load(source.ngram) if source.ngram is not None else None
    if lexicon is not None:
        notes += _unmatchable_note(lexicon, vocab, source)
    lowercase, strip_accents = m.lowercase, None
    if side is not None:
        if lowercase is None:
            lowercase = bool(side.get("lowercase", True))
        if isinstance(side.get("strip_accents"), bool):
            strip_accents = side["strip_accents"]
    # Released matching rules differ by version: ZEN 1.0 draws its slots at random, ZEN 2.0 keeps the smallest ids.
    released_version = "zen1" if source.encoder is not None and source.encoder.config.encoder == "zen1" else "zen2"
    settings = InputSettings(max_seq_len=cfg.task.max_seq_len, lowercase=True if lowercase is None else lowercase,
                             strip_accents=strip_accents, ngram_rules=m.ngram_rules, max_ngrams=m.max_ngrams,
                             released_version=released_version,
                             normalize=sidecar_normalize(side, source.vocab))  # as the vocabulary was built
    leave_one_out = None
    if m.training_ngrams is not None:
        if lexicon is None or source.encoder is None:
            raise ZenError("model.training_ngrams: adds n-grams to a ZEN encoder's lexicon; this model has none "
                           "(BERT, or CHTE from characters); remove the key or use zen2/zen1")
        if train_examples is None:
            raise ValueError("model.training_ngrams needs the training examples")
        before = len(lexicon)
        units = task.lexicon_units(train_examples)
        texts = task.training_texts(train_examples) if units is None else None
        if units is not None:
            char_ids = CharIds(vocab, settings.lowercase, settings.strip_accents, normalize=settings.normalize)
            # Word-level units are spelled with the pieces the model reads them as.
            tokenizer = InputPipeline(vocab, settings).tokenizer if word_level else None
            lexicon, added = add_training_ngrams(lexicon, units, char_ids, m.training_ngrams, tokenizer=tokenizer)
            leave_one_out = LeaveOneOut(lexicon, before + 1, m.training_ngrams, char_ids, tokenizer)
            what = f"training {'entities' if task.name == 'ner' else 'words'} seen >= {m.training_ngrams} times"
        elif texts is not None:
            language = side.get("language", "zh") if side else "zh"
            found = text_ngrams(texts, source.vocab, lowercase=settings.lowercase, min_count=m.training_ngrams,
                                language=language if language in ("zh", "ar") else "zh")
            lexicon, added = add_ngrams(lexicon, found, m.training_ngrams)
            what = f"PMI n-grams of the training text seen >= {m.training_ngrams} times"
        else:
            raise ZenError(f"model.training_ngrams: task {task.name} has neither labelled words nor training texts "
                           f"to take n-grams from; remove the key")
        source.encoder.resize_ngram_table(len(lexicon) + 1)
        notes.append(f"n-gram lexicon: {added:,} {what} added to the {before:,} n-grams (new embedding rows)")
        if leave_one_out is not None:
            notes.append(f"a training sentence matches the added n-grams that the other training sentences hold "
                         f">= {m.training_ngrams} times (as a test sentence does), not its own")
    chte = None
    bigrams = None
    if m.encoder == "chte":
        if source.encoder is None:
            if train_sentences is None:
                raise ValueError("CHTE from characters needs the training sentences for its bigram table")
            bigrams = BigramTable.build(train_sentences, m.chte.min_count)
            config = chte_config(m, feature_size=None, char_vocab_size=len(vocab), bigram_vocab_size=len(bigrams))
            notes.append(f"CHTE bigram table: {len(bigrams.bigrams):,} bigrams seen >= {m.chte.min_count} "
                         f"times in training (others share the unknown row)")
        else:
            config = chte_config(m, feature_size=source.encoder.config.hidden_size, char_vocab_size=None,
                                 bigram_vocab_size=None)
        chte = ChteEncoder(config)
    inputs = InputPipeline(vocab, settings, lexicon, bigrams)
    inputs.leave_one_out = leave_one_out
    head = task.build_head(TaskModel.output_size(source.encoder, chte))
    model = TaskModel(task, head, source.encoder, chte)
    spec = ModelSpec(
        encoder=None if source.encoder is None else source.encoder.config.encoder,
        chte=None if chte is None else _chte_dict(chte.config), inputs=settings, source=source.description,
        notes=notes)
    return model, inputs, spec


def _unmatchable_note(lexicon: Lexicon, vocab: Vocab, source: EncoderSource) -> list[str]:
    """A note when n-grams of the lexicon use tokens the vocabulary lacks: they can never match, so the model
    trains (and predicts) without those words — all of them with a lexicon built for another vocabulary."""
    rows, missing = unmatchable_ngrams(lexicon, vocab)
    if not rows:
        return []
    sep = " " if lexicon.style == "tokens" else ""
    examples = ", ".join(repr(sep.join(lexicon.ngrams[i])) for i in rows[:3])
    tokens = ", ".join(repr(t) for t, _ in missing.most_common(5))
    return [(f"{source.ngram}: {len(rows):,} of {len(lexicon):,} n-grams use tokens missing from {source.vocab} "
             f"({len(missing):,} distinct, most often {tokens}) and can never match, e.g. {examples}: build the "
             f"vocabulary and the lexicon from the same text (or the lexicon with zen lexicon build --vocab)")]


def char_vocab(sentences: list, min_count: int) -> Vocab:
    """The specials, then the characters seen at least `min_count` times, most frequent first."""
    counts = Counter(c for chars in sentences for c in chars)
    chars = sorted((c for c, n in counts.items() if n >= min_count and c not in SPECIAL_TOKENS),
                   key=lambda c: (-counts[c], c))
    return Vocab([*SPECIAL_TOKENS, *chars], source="training characters")


def _chte_dict(config: ChteConfig) -> dict[str, Any]:
    d = asdict(config)
    d["cnn_windows"] = list(d["cnn_windows"])
    return d


# --- saving and loading -----------------------------------------------------------------------------------

def save_task_model(model: TaskModel, inputs: InputPipeline, spec: ModelSpec, directory: str | Path) -> Path:
    """Write the model directory (layout in the module docstring); task.json is written last."""
    from safetensors.torch import save_file

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    task = model.task
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    metadata = {"zen_format": str(FORMAT_VERSION), "architecture": ARCHITECTURE, "task": task.name}
    atomic_write_path(out / WEIGHTS_NAME, lambda p: save_file(state, str(p), metadata=metadata))
    if model.encoder is not None:
        cfg = {**model.encoder.config.to_dict(), "zen_format": FORMAT_VERSION, "architecture": ARCHITECTURE}
    else:  # no ZEN config: a key zen's encoder loaders reject with a clear message
        cfg = {"zen_format": FORMAT_VERSION, "architecture": ARCHITECTURE, "encoder": "chte"}
    atomic_write_text(out / CONFIG_NAME, json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    inputs.vocab.save(out / VOCAB_NAME)
    if inputs.lexicon is not None:
        inputs.lexicon.save(out / NGRAM_NAME)
    else:
        (out / NGRAM_NAME).unlink(missing_ok=True)
    if inputs.bigrams is not None:
        inputs.bigrams.save(out / BIGRAMS_NAME)
    else:
        (out / BIGRAMS_NAME).unlink(missing_ok=True)
    meta = {
        "format": TASK_FORMAT, "version": TASK_VERSION,
        "task": to_dict(task.settings), "state": task.state(),
        "encoder": spec.encoder, "chte": spec.chte, "inputs": spec.inputs.to_dict(), "source": spec.source,
    }
    atomic_write_text(out / TASK_NAME, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return out


def resolve_model_dir(path: str | Path) -> Path:
    """The model directory itself, or the `model/` folder of a `zen finetune` output directory."""
    p = Path(path)
    if (p / TASK_NAME).is_file():
        return p
    if (p / "model" / TASK_NAME).is_file():
        return p / "model"
    if not p.exists():
        raise ZenError(f"{p}: no such model directory")
    raise ZenError(f"{p}: not a fine-tuned zen model (no {TASK_NAME}); expected a directory written by "
                   f"`zen finetune` (its model/ folder)")


def read_spec(directory: Path) -> tuple[dict[str, Any], TaskSection, ModelSpec]:
    """task.json → (raw data, task settings, model spec), checked."""
    path = directory / TASK_NAME
    meta = read_json(path)
    src = str(path)
    if not isinstance(meta, dict) or meta.get("format") != TASK_FORMAT:
        raise ZenError(f"{src}: not a zen task model description (expected format {TASK_FORMAT!r})")
    if meta.get("version") != TASK_VERSION:
        raise ZenError(f"{src}: version {meta.get('version')!r} is not supported (expected {TASK_VERSION})")
    for key in ("task", "state", "inputs"):
        if not isinstance(meta.get(key), dict):
            raise ZenError(f"{src}: key {key!r}: expected a JSON object")
    settings = from_dict(TaskSection, meta["task"], source=src, prefix="task.")
    if settings.name is None:
        raise ZenError(f"{src}: missing key 'task.name'")
    encoder = meta.get("encoder")
    if encoder not in (None, "zen2", "zen1", "bert"):
        raise ZenError(f"{src}: key 'encoder': expected zen2, zen1, bert or null, got {encoder!r}")
    chte = meta.get("chte")
    if chte is not None and not isinstance(chte, dict):
        raise ZenError(f"{src}: key 'chte': expected a JSON object or null")
    if encoder is None and chte is None:
        raise ZenError(f"{src}: neither 'encoder' nor 'chte': the model has no encoder")
    spec = ModelSpec(encoder, chte, InputSettings.from_dict(meta["inputs"], src), str(meta.get("source", "")))
    return meta, settings, spec


def load_task_model(path: str | Path, device: str | torch.device = "cpu") -> LoadedModel:
    """Rebuild a fine-tuned model from its directory (or a `zen finetune` output directory), in eval mode."""
    from safetensors import SafetensorError, safe_open

    d = resolve_model_dir(path)
    meta, settings, spec = read_spec(d)
    try:
        task = task_class(settings.name)(settings, meta["state"])
    except ZenError as e:
        raise ZenError(f"{d / TASK_NAME}: {e}") from None

    encoder = None
    if spec.encoder is not None:
        config, architecture = read_zen_config(d)
        if architecture != ARCHITECTURE:
            raise ZenError(f"{d / CONFIG_NAME}: architecture {architecture!r}; expected {ARCHITECTURE}")
        if config.encoder != spec.encoder:
            raise ZenError(f"{d}: config.json says encoder {config.encoder}, task.json says {spec.encoder}")
        encoder = ZenModel(config)
    vocab_path = d / VOCAB_NAME
    ngram_path = d / NGRAM_NAME if (encoder is not None and encoder.config.has_ngrams) else None
    if ngram_path is not None and not ngram_path.is_file():
        raise ZenError(f"{ngram_path}: no such file; the model's n-gram table needs its lexicon")
    if encoder is not None:
        check_text_files(encoder.config, vocab_path, ngram_path)
    vocab = Vocab.load(vocab_path)
    lexicon = Lexicon.load(ngram_path) if ngram_path is not None else None
    bigrams = None
    chte = None
    if spec.chte is not None:
        try:
            config = spec.chte_config()
        except (TypeError, ZenError) as e:
            raise ZenError(f"{d / TASK_NAME}: key 'chte': {e}") from None
        if encoder is None:
            bigrams = BigramTable.load(d / BIGRAMS_NAME)
            if (config.char_vocab_size, config.bigram_vocab_size) != (len(vocab), len(bigrams)):
                raise ZenError(f"{d}: CHTE tables ({config.char_vocab_size} chars, {config.bigram_vocab_size} "
                               f"bigrams) do not fit vocab.txt ({len(vocab)}) and bigrams.json ({len(bigrams)})")
        chte = ChteEncoder(config)
    inputs = InputPipeline(vocab, spec.inputs, lexicon, bigrams)
    head = task.build_head(TaskModel.output_size(encoder, chte))
    model = TaskModel(task, head, encoder, chte)

    weights = d / WEIGHTS_NAME
    if not weights.is_file():
        raise ZenError(f"{weights}: no such file")
    try:
        with safe_open(str(weights), framework="pt") as f:
            state = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not a dict)
    except (SafetensorError, OSError, ValueError) as e:
        raise ZenError(f"{weights}: cannot read weights ({e}); the file is truncated or not safetensors") from None
    load_strict(model, state, str(weights))
    model.to(device).eval()
    return LoadedModel(model, task, inputs, spec, d)
