"""`PretrainConfig`: the recipe of `zen pretrain` — which text, which masking, which model, how to train.

    job: pretrain
    language: zh                 # zh: character vocabulary; ar: WordPiece (what a built vocab/lexicon uses)
    objective: mlm               # mlm: masked LM (+ NSP); rtd: replaced-token detection (ELECTRA)
    data:    {corpus: [...], heldout: [...], vocab, ngram, build_missing, max_seq_len, ...}   # DataSection
    masking: {scheme: ngram, segmenter: lexicon, rate: 0.15}                                 # MaskingSection
    model:   {encoder: zen2, hidden_size, num_hidden_layers, ...}                            # ModelSection
    rtd:     {generator_size: 0.25, discriminator_weight: 50, nsp: true}   # RtdSection (objective rtd)
    init:    {pretrained: DIR | null}                                                        # InitSection
    train:   {lr: 1e-4, warmup_steps, max_steps, batch_size, output_dir, ...}                # TrainSettings

Paths are relative to the current directory. `data.corpus` entries may be glob patterns (`corpus/*.txt`,
expanded in sorted order). This module imports nothing heavy, so `zen recipe show` stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from zencli.errors import ZenError
from zencli.model.config import (
    EncoderSizes,
    ZenConfig,  # no torch: config.py is plain Python
)
from zencli.text.reading import EncodingErrors
from zencli.train.settings import TrainSettings

# Imports inside `validate` are lazy on purpose: `zen recipe list` imports this module without numpy
# (zencli.data.pretraining) or the tokenizer.

Language = Literal["zh", "ar"]


@dataclass
class DataSection:
    """The corpus, the vocabulary and lexicon, and how pretraining examples are cut from the text."""

    corpus: list[Path] = field(default_factory=list)  # raw text (or glob patterns): one sentence per line
    heldout: list[Path] = field(default_factory=list)  # raw text never trained on: held-out MLM/NSP evaluation
    layout: Literal["auto", "blank-line", "line"] = "auto"  # documents: blank-line separated, or one per line
    # invalid UTF-8 in the text read: "strict" an error naming the file, line and byte; "replace" each undecodable
    # sequence as one U+FFFD, with a count of the lines and sequences replaced (--encoding-errors)
    encoding_errors: EncodingErrors = "strict"
    vocab: Path | None = None  # vocab.txt; null or missing: built from the corpus when build_missing
    ngram: Path | None = None  # ngram.txt (the n-gram lexicon); null or missing: built when build_missing
    build_missing: bool = False  # build a missing vocab/lexicon into the output dir (language defaults)
    vocab_size: int | None = None  # built vocab: zh cap (specials included) / ar WordPiece size (default 30000)
    vocab_min_freq: int = 1  # built zh vocab: keep characters seen at least this often
    ngram_min_freq: int | None = None  # built lexicon; null: the language default (zh 15, ar 20)
    ngram_min_pmi: float | None = None  # built lexicon; null: the language default (zh 3, ar 10)
    ngram_min_entropy: float | None = None  # built lexicon: left/right branching entropy filter (bits); null: off
    ngram_max_size: int | None = None  # built lexicon: at most this many n-grams, the most frequent; null: all
    lowercase: bool | None = None  # tokenizer; null: the vocab's vocab.json setting, else True
    # built vocab: Arabic normalisations (diacritics, tatweel, alef, yaa)
    normalize: list[str] = field(default_factory=list)
    max_seq_len: int = 128  # tokens per example, [CLS] and both [SEP] included
    dupe_factor: int = 1  # passes over the corpus, each with fresh NSP pairs and masks
    short_seq_prob: float = 0.1  # share of examples cut shorter than max_seq_len (BERT's)
    max_ngrams: int | None = None  # n-gram slots per example; null: max_seq_len
    ngram_rules: Literal["zen", "released"] = "zen"  # which matches fill the slots (zencli.data.features)
    released_version: Literal["zen1", "zen2"] = "zen2"  # with ngram_rules: released
    examples_per_shard: int = 10_000
    seed: int = 0  # pairs and masks (the shards' bytes); the model and data order use train.seed
    # processes counting the vocabulary, tokenizing and making shards; 0: one per CPU core (the same output)
    workers: int = 0
    heldout_examples: int = 2000  # evaluate on the first this many held-out examples
    eval_batch_size: int = 64

    def validate(self) -> None:
        from zencli.data.pretraining import PretrainDataSettings

        # Same names as the shard generator's settings, so its messages name the right key.
        PretrainDataSettings(
            max_seq_len=self.max_seq_len, dupe_factor=self.dupe_factor, short_seq_prob=self.short_seq_prob,
            max_ngrams=self.max_ngrams, ngram_rules=self.ngram_rules, released_version=self.released_version,
            seed=self.seed, examples_per_shard=self.examples_per_shard, layout=self.layout,
        ).validate()
        if self.vocab_size is not None and self.vocab_size <= 5:
            raise ZenError(f"vocab_size: expected > 5 (the special tokens) or null, got {self.vocab_size}")
        if self.vocab_min_freq < 1:
            raise ZenError(f"vocab_min_freq: expected >= 1, got {self.vocab_min_freq}")
        if self.ngram_min_freq is not None and self.ngram_min_freq < 1:
            raise ZenError(f"ngram_min_freq: expected >= 1 or null, got {self.ngram_min_freq}")
        if self.ngram_max_size is not None and self.ngram_max_size < 1:
            raise ZenError(f"ngram_max_size: expected an integer >= 1 or null, got {self.ngram_max_size}")
        if self.ngram_min_entropy is not None and not self.ngram_min_entropy >= 0:
            raise ZenError(f"ngram_min_entropy: expected a number of bits >= 0 or null, got {self.ngram_min_entropy}")
        if self.workers < 0:
            raise ZenError(f"workers: expected >= 0 (0: one per CPU core), got {self.workers}")
        if self.heldout_examples < 1:
            raise ZenError(f"heldout_examples: expected >= 1, got {self.heldout_examples}")
        if self.eval_batch_size < 1:
            raise ZenError(f"eval_batch_size: expected >= 1, got {self.eval_batch_size}")
        from zencli.text.tokenizer import check_normalize

        try:
            check_normalize(self.normalize)
        except ValueError as e:
            raise ZenError(str(e)) from None


@dataclass
class MaskingSection:
    """What is masked: whole n-grams (ZEN 2.0: segmenter pieces merged into lexicon n-grams) or single
    characters/pieces (ZEN 1.0, BERT); `rate` of the tokens, 80% [MASK] / 10% random / 10% kept."""

    scheme: Literal["ngram", "char"] = "ngram"
    segmenter: str = "lexicon"  # lexicon | jieba | model:DIR (whole n-gram masking only)
    rate: float = 0.15

    def validate(self) -> None:
        if not 0.0 < self.rate < 1.0:
            raise ZenError(f"rate: expected a fraction in (0, 1), got {self.rate}")
        spec = self.segmenter.strip()
        if spec not in ("lexicon", "jieba") and not spec.startswith("model:"):
            raise ZenError(f"segmenter: expected lexicon, jieba or model:DIR, got {self.segmenter!r}")


@dataclass
class ModelSection(EncoderSizes):  # the sizes: hidden_size, num_hidden_layers, … (model/config.py)
    """The encoder built from scratch (vocab_size and word_size come from vocab.txt and ngram.txt). With
    `init.pretrained` the sizes come from that checkpoint and these keys are ignored, except `encoder`
    and `num_hidden_word_layers` for a BERT checkpoint (the n-gram side built around it)."""

    encoder: Literal["zen2", "zen1", "bert"] = "zen2"
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512  # zen1/bert absolute positions: must cover data.max_seq_len
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    relative_projection: bool = False  # ZEN 2.0 paper's trainable W_r (the released model has none)
    # n-gram fusion weights: frequency (ZEN 2.0) or binary (ZEN 1.0); null: the encoder's own (ablations set it)
    ngram_weighting: Literal["frequency", "binary"] | None = None

    def zen_config_kwargs(self) -> dict:
        """The ZenConfig keys this section sets (vocab_size / word_size come from the files)."""
        keys = ("encoder", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "num_hidden_word_layers", "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob",
                "max_position_embeddings", "type_vocab_size", "initializer_range", "relative_projection",
                "ngram_weighting")
        return {k: getattr(self, k) for k in keys}

    def validate(self) -> None:
        try:
            ZenConfig(vocab_size=8, word_size=8, **self.zen_config_kwargs())
        except ZenError as e:  # "config: key 'hidden_size' must ..." → "hidden_size: must ..."
            msg = str(e).removeprefix("config: ")
            if msg.startswith("key '"):
                key, _, rest = msg[len("key '"):].partition("'")
                msg = f"{key}:{rest}"
            else:  # the one check without a key: the head size of relative attention
                msg = f"hidden_size: {msg}"
            raise ZenError(msg) from None


@dataclass
class RtdSection:
    """Replaced-token detection (ELECTRA; `objective: rtd`, zencli.model.electra): a small generator fills
    the masked positions with samples of its MLM softmax, and the encoder (the discriminator, the model
    the run saves) learns to tell, for every token, whether it was replaced."""

    # Generator width as a fraction of the encoder's (ELECTRA: 1/4-1/3): this fraction of the attention
    # heads (at least one) at the same head size; the same depth; no n-gram side.
    generator_size: float = 0.25
    discriminator_weight: float = 50.0  # λ in loss = generator MLM loss + λ · discriminator loss (ELECTRA: 50)
    nsp: bool = True  # next sentence prediction on the discriminator's pooled output (ELECTRA: none)

    def validate(self) -> None:
        if not 0.0 < self.generator_size <= 1.0:
            raise ZenError(f"generator_size: expected a fraction of the encoder's width in (0, 1], "
                           f"got {self.generator_size}")
        if not self.discriminator_weight > 0.0:
            raise ZenError(f"discriminator_weight: expected a weight > 0, got {self.discriminator_weight}")


@dataclass
class InitSection:
    """Where the weights start: null = from scratch (seeded by train.seed); a zen model directory, a
    released ZEN 1.0/2.0 directory, or a BERT(-Chinese) checkpoint directory (continue pretraining: its
    char encoder is kept and a fresh n-gram side is added). The checkpoint's vocab.txt (and, for ZEN, its
    ngram.txt) are used unless data.vocab / data.ngram are given, and must fit its embedding tables."""

    pretrained: Path | None = None


@dataclass
class PretrainTrainSettings(TrainSettings):
    """TrainSettings with pretraining defaults (the paper's optimiser: AdamW, peak 1e-4, linear decay)."""

    output_dir: Path = Path("runs/pretrain")
    save_every: int = 1000
    keep_last: int = 2


@dataclass
class PretrainConfig:
    job: Literal["pretrain"] = "pretrain"
    language: Language = "zh"
    objective: Literal["mlm", "rtd"] = "mlm"
    data: DataSection = field(default_factory=DataSection)
    masking: MaskingSection = field(default_factory=MaskingSection)
    model: ModelSection = field(default_factory=ModelSection)
    rtd: RtdSection = field(default_factory=RtdSection)
    init: InitSection = field(default_factory=InitSection)
    train: PretrainTrainSettings = field(default_factory=PretrainTrainSettings)

    def validate(self) -> None:
        m, d = self.model, self.data
        if m.encoder != "zen2" and self.init.pretrained is None and m.max_position_embeddings < d.max_seq_len:
            raise ZenError(f"model.max_position_embeddings: {m.encoder} has absolute positions, so it must "
                           f"cover data.max_seq_len ({d.max_seq_len}), got {m.max_position_embeddings}")
        if self.objective != "rtd" and self.rtd != RtdSection():
            raise ZenError("rtd: only used by objective: rtd; set objective: rtd or remove the rtd section")
        if self.masking.scheme == "char" and self.masking.segmenter.strip() != "lexicon":
            raise ZenError(f"masking.segmenter: only used by masking.scheme ngram; remove it for char masking "
                           f"(got {self.masking.segmenter!r})")
