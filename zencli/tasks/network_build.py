"""Building a new task model for `zen finetune`: the encoder, CHTE, the inputs and the task's head.

Encoders (`encoder` below; `chte` may sit on top of it, or stand alone):
- ZEN 2.0 / ZEN 1.0 / BERT (`ZenModel`): built from scratch with a recipe's sizes, vocab.txt and ngram.txt,
  or loaded from `model.pretrained` — a zen model directory (`zen pretrain` output, or another fine-tuned
  model whose encoder is reused), a released ZEN directory, or a BERT-Chinese directory (for zen2/zen1 its
  weights become the character encoder and the n-gram side starts fresh);
- CHTE: from characters + bigrams, or on the hidden states of a pretrained encoder (the paper's "+BERT").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from zencli.config.finetune import FinetuneConfig, ModelSection
from zencli.data.features import unmatchable_ngrams
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.model.checkpoint import NGRAM_NAME, VOCAB_NAME, check_text_files, load_zen_model
from zencli.model.chte import ChteConfig, ChteEncoder
from zencli.model.config import ZenConfig
from zencli.model.encoder import ZenModel
from zencli.model.pretraining import ZenForPreTraining
from zencli.model.sources import checkpoint_kind, load_pretrained
from zencli.tasks.base import Task
from zencli.tasks.inputs import BigramTable, InputPipeline, InputSettings
from zencli.tasks.model_dir import TASK_NAME, ModelSpec, load_task_model
from zencli.tasks.network import TaskModel
from zencli.tasks.training_ngrams import grow_lexicon
from zencli.tasks.training_vocab import apply_extend_vocab
from zencli.tasks.transfer import reinit_top_layers
from zencli.text.tokenizer import sidecar_normalize
from zencli.text.vocab import SPECIAL_TOKENS, Vocab, read_sidecar


def build_task_model(cfg: FinetuneConfig, task: Task, train_examples: Sequence[Any] | None = None
                     ) -> tuple[TaskModel, InputPipeline, ModelSpec]:
    """A new task model for `cfg` (weights: pretrained where given, fresh elsewhere; seed first).

    The task's `train_examples` give CHTE from characters its char and bigram tables,
    `model.training_ngrams` its words, entities or texts (`Task.lexicon_units`, `Task.training_texts`), and
    `model.extend_vocab` the tokens its vocabulary lacks (`Task.vocab_units`)."""
    m = cfg.model
    word_level = getattr(task, "level", "char") == "word"
    if word_level and m.encoder == "chte" and m.pretrained is None:
        raise ZenError("model.encoder: CHTE from characters reads char-level data, and the training data has one "
                       "label per word; put CHTE on a pretrained encoder (model.pretrained) or use zen2/zen1/bert")
    chte_chars = m.encoder == "chte" and train_examples is not None
    train_sentences = [s.chars for s in train_examples] if chte_chars else None
    source = load_encoder(m, cfg.task.max_seq_len)
    notes: list[str] = []
    vocab, side = _vocab(m, source, train_sentences, notes)
    settings = _input_settings(cfg, source, side)
    if m.extend_vocab is not None:
        if train_examples is None:
            raise ValueError("model.extend_vocab needs the training examples")
        vocab, grown_vocab = apply_extend_vocab(source.encoder, vocab, m.extend_vocab, task, train_examples,
                                                settings)
        notes += grown_vocab
    lexicon = Lexicon.load(source.ngram) if source.ngram is not None else None
    if lexicon is not None:
        notes += _unmatchable_note(lexicon, vocab, source)
    leave_one_out = None
    if m.training_ngrams is not None:
        if lexicon is None or source.encoder is None:
            raise ZenError("model.training_ngrams: adds n-grams to a ZEN encoder's lexicon; this model has none "
                           "(BERT, or CHTE from characters); remove the key or use zen2/zen1")
        if train_examples is None:
            raise ValueError("model.training_ngrams needs the training examples")
        lexicon, leave_one_out, grown = grow_lexicon(lexicon, m.training_ngrams, task, train_examples, vocab,
                                                     settings, vocab_path=source.vocab, side=side,
                                                     word_level=word_level)
        source.encoder.resize_ngram_table(len(lexicon) + 1)
        notes += grown
    chte, bigrams = _chte(m, source, vocab, train_sentences, notes)
    inputs = InputPipeline(vocab, settings, lexicon, bigrams)
    inputs.leave_one_out = leave_one_out
    head = task.build_head(TaskModel.output_size(source.encoder, chte))
    model = TaskModel(task, head, source.encoder, chte)
    if m.reinit_top_layers:
        layers = source.encoder.config.num_hidden_layers if source.encoder is not None else 0
        if m.reinit_top_layers > layers:
            raise ZenError(f"model.reinit_top_layers: {m.reinit_top_layers}, but the encoder has {layers} char layers")
        reinit_top_layers(model, m.reinit_top_layers)
        notes.append(f"re-initialised the top {m.reinit_top_layers} of the encoder's {layers} char layers")
    spec = ModelSpec(
        encoder=None if source.encoder is None else source.encoder.config.encoder,
        chte=None if chte is None else _chte_dict(chte.config), inputs=settings, source=source.description,
        notes=notes)
    return model, inputs, spec


def _vocab(m: ModelSection, source: EncoderSource, train_sentences: list | None,
           notes: list[str]) -> tuple[Vocab, dict[str, Any] | None]:
    """The vocabulary and its sidecar settings (case, accents, normalisation; None: unknown): the encoder's
    vocab.txt, or for CHTE from characters the training characters (a note on `notes`)."""
    if source.vocab is not None:
        vocab = Vocab.load(source.vocab)
        side = read_sidecar(source.vocab)
        if side is None and source.inputs is not None:
            side = {k: getattr(source.inputs, k) for k in ("lowercase", "strip_accents", "normalize")}
        return vocab, side
    if train_sentences is None:
        raise ValueError("CHTE from characters without a vocab.txt needs the training sentences")
    vocab = char_vocab(train_sentences, m.chte.min_count)
    notes.append(f"CHTE char table: {len(vocab) - len(SPECIAL_TOKENS):,} chars seen >= {m.chte.min_count} "
                 f"times in training (others share [UNK])")
    return vocab, {"lowercase": False}  # the training characters exactly as written


def _input_settings(cfg: FinetuneConfig, source: EncoderSource, side: dict[str, Any] | None) -> InputSettings:
    """How text becomes model inputs: the recipe's keys over what the vocabulary was built with."""
    m = cfg.model
    lowercase, strip_accents = m.lowercase, None
    if side is not None:
        if lowercase is None:
            lowercase = bool(side.get("lowercase", True))
        if isinstance(side.get("strip_accents"), bool):
            strip_accents = side["strip_accents"]
    # Released matching rules differ by version: ZEN 1.0 draws its slots at random, ZEN 2.0 keeps the smallest ids.
    released_version = "zen1" if source.encoder is not None and source.encoder.config.encoder == "zen1" else "zen2"
    return InputSettings(max_seq_len=cfg.task.max_seq_len, lowercase=True if lowercase is None else lowercase,
                         strip_accents=strip_accents, ngram_rules=m.ngram_rules, max_ngrams=m.max_ngrams,
                         released_version=released_version,
                         normalize=sidecar_normalize(side, source.vocab))  # as the vocabulary was built


def _chte(m: ModelSection, source: EncoderSource, vocab: Vocab, train_sentences: list | None,
          notes: list[str]) -> tuple[ChteEncoder | None, BigramTable | None]:
    """CHTE when `model.encoder` is chte: on the encoder's hidden states, or from characters with a bigram
    table of the training sentences (a note on `notes`)."""
    if m.encoder != "chte":
        return None, None
    bigrams = None
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
    return ChteEncoder(config), bigrams


# --- the encoder ------------------------------------------------------------------------------------------

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
    if m.pretrained is None:
        return _new_encoder(m, max_seq_len)
    d = Path(m.pretrained)
    if m.relative_projection:
        raise ZenError("model.relative_projection: only for an encoder built from scratch; a pretrained model "
                       "brings its own attention")
    kind = "task" if (d / TASK_NAME).is_file() else checkpoint_kind(d)
    source = _encoder_around_bert(d, m) if kind == "bert" else _reused_encoder(d, m, kind)
    _check_positions(source.encoder.config, max_seq_len, f"task.max_seq_len ({d})")
    source.encoder.set_dropout(m.hidden_dropout_prob, m.attention_probs_dropout_prob)
    return source


def _new_encoder(m: ModelSection, max_seq_len: int) -> EncoderSource:
    """An encoder built from scratch with the recipe's sizes (none for CHTE from characters)."""
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
    ngram_layers = m.num_hidden_word_layers
    sizes = f"{m.num_hidden_layers} × {m.hidden_size}" + (
        f", {ngram_layers} n-gram layer{'s' if ngram_layers != 1 else ''}" if kind != "bert" else "")
    return EncoderSource(encoder, m.vocab, m.ngram if kind != "bert" else None, f"new {kind} encoder ({sizes})")


def _encoder_around_bert(d: Path, m: ModelSection) -> EncoderSource:
    """A BERT directory: the BERT encoder itself, or the character encoder of a new zen2/zen1 encoder whose
    n-gram side starts fresh."""
    built = "bert" if m.encoder in (None, "chte") else m.encoder
    if built != "bert" and m.ngram is None:
        raise ZenError(f"model.ngram: a {built} model built around BERT needs an n-gram lexicon (ngram.txt)")
    loaded = load_pretrained(d, encoder=built, ngram=m.ngram if built != "bert" else None,
                             ngram_layers=m.num_hidden_word_layers)
    encoder = loaded.model.bert
    vocab = _text_file(d, VOCAB_NAME, m.vocab, "model.vocab")
    if vocab is None:
        raise ZenError(f"model.vocab: {d} has no vocab.txt; give the BERT model's vocab.txt")
    ngram = m.ngram if built != "bert" else None
    fresh = sum(1 for n in loaded.notes if n.startswith("initialised"))
    what = (f"BERT directory {d}" + (f" as a new {built} encoder" if built != "bert" else "")
            + (f" ({fresh} tensors initialised fresh)" if fresh else ""))
    return EncoderSource(encoder, Path(vocab), None if ngram is None else Path(ngram), what)


def _reused_encoder(d: Path, m: ModelSection, kind: str) -> EncoderSource:
    """The encoder of a fine-tuned model (`kind` task), a zen model directory or a released ZEN directory,
    with the directory's vocab.txt and ngram.txt (the recipe's only where the directory has none)."""
    want = m.encoder
    own_inputs = None
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

