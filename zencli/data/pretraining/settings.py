"""What decides the bytes of the shards (`PretrainDataSettings`), and the checks that turn a vocabulary or
lexicon unfit for pretraining into a one-line ZenError before any work starts."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from zencli.data.features import RULES
from zencli.data.shards import MAX_SEQ_LEN_LIMIT
from zencli.errors import ZenError
from zencli.lexicon.matcher import RELEASED_VERSIONS
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.vocab import SPECIAL_TOKENS, Vocab

MASKING = ("ngram", "char")
LAYOUTS = ("auto", "blank-line", "line")
MERGE_MAX_N = 8  # longest unit (in tokens) that merging segmenter pieces may build; the lexicon's limit
MATCH_MAX_N = 8  # longest n-gram the matcher finds (the "zen" rules' default)
# How a shard's random choices are drawn from its seeds (in the fingerprint: other draws, other bytes). 2: a
# shard's examples masked and corrupted all at once (`ExampleMaker.make`); before, example by example.
DRAWS = 2
_UNUSED = re.compile(r"\[unused\d+\]")


@dataclass(frozen=True)
class PretrainDataSettings:
    """Everything that decides the bytes of the shards (all of it enters the fingerprint)."""

    max_seq_len: int = 128
    dupe_factor: int = 1  # rounds over the corpus, each with fresh pairs and masks
    masking: str = "ngram"  # "ngram": whole n-gram masking (ZEN 2.0); "char": per token (ZEN 1.0 / BERT)
    segmenter: str = "lexicon"  # lexicon | jieba | model:DIR (used by ngram masking)
    mask_rate: float = 0.15
    short_seq_prob: float = 0.1
    # N-gram slots per example; None: max_seq_len (the released density, 128 slots at 128 tokens). Rarely
    # reached (PD98 at 128 tokens: median 35 matches, 99th percentile 133); the "zen" rules then keep the
    # longest, most frequent n-grams.
    max_ngrams: int | None = None
    ngram_rules: str = "zen"  # "zen" or "released" (see zencli.data.features)
    released_version: str = "zen2"
    seed: int = 0
    examples_per_shard: int = 10_000
    layout: str = "auto"

    def validate(self) -> None:
        if not 5 <= self.max_seq_len <= MAX_SEQ_LEN_LIMIT:
            raise ZenError(f"max_seq_len: expected 5..{MAX_SEQ_LEN_LIMIT}, got {self.max_seq_len}")
        if self.dupe_factor < 1:
            raise ZenError(f"dupe_factor: expected >= 1, got {self.dupe_factor}")
        if self.masking not in MASKING:
            raise ZenError(f"masking: expected one of {', '.join(MASKING)}, got {self.masking!r}")
        if not 0.0 < self.mask_rate < 1.0:
            raise ZenError(f"mask_rate: expected a fraction in (0, 1), got {self.mask_rate}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ZenError(f"short_seq_prob: expected a probability in [0, 1], got {self.short_seq_prob}")
        if self.max_ngrams is not None and self.max_ngrams < 0:
            raise ZenError(f"max_ngrams: expected >= 0 or none, got {self.max_ngrams}")
        if self.ngram_rules not in RULES:
            raise ZenError(f"ngram_rules: expected one of {', '.join(RULES)}, got {self.ngram_rules!r}")
        if self.released_version not in RELEASED_VERSIONS:
            raise ZenError(f"released_version: expected one of {', '.join(RELEASED_VERSIONS)}, "
                           f"got {self.released_version!r}")
        if self.seed < 0:
            raise ZenError(f"seed: expected an integer >= 0, got {self.seed}")
        if self.examples_per_shard < 1:
            raise ZenError(f"examples_per_shard: expected >= 1, got {self.examples_per_shard}")
        if self.layout not in LAYOUTS:
            raise ZenError(f"layout: expected one of {', '.join(LAYOUTS)}, got {self.layout!r}")


def check_lexicon_vocab(lexicon: Lexicon, vocab: Vocab, lexicon_name: str = "the lexicon") -> int:
    """The number of lexicon n-grams holding a token the vocabulary lacks (they can never match).

    More than half such n-grams means the two files do not belong together: a ZenError.
    """
    ids = vocab.token_ids
    unmatched = sum(1 for g in lexicon.ngrams if any(t not in ids for t in g))
    if len(lexicon) and unmatched * 2 > len(lexicon):
        raise ZenError(
            f"{lexicon_name}: lexicon does not match the vocabulary: {unmatched} of {len(lexicon)} n-grams contain "
            f"tokens not in {vocab.source}; build the lexicon with this vocabulary (or pass the matching vocab)"
        )
    return unmatched


def random_token_ids(vocab: Vocab) -> np.ndarray:
    """Ids a random replacement may draw: every token except [PAD]/[UNK]/[CLS]/[SEP]/[MASK] and [unusedN]."""
    keep = [i for i, t in enumerate(vocab) if t not in SPECIAL_TOKENS and not _UNUSED.fullmatch(t)]
    if not keep:
        raise ZenError(f"{vocab.source}: the vocabulary holds only special tokens; nothing to pretrain on")
    return np.array(keep, np.int64)
