"""Text → model inputs for fine-tuned models: vocabulary lookup, n-gram slots, CHTE bigrams.

`InputPipeline` holds what a task model needs to turn text into feature records (zencli.data.features)
and is saved with the model (vocab.txt, ngram.txt, bigrams.json and the `inputs` settings of task.json),
so training and prediction build exactly the same inputs:

- token ids: char-level tasks look each character up on its own (`CharIds`: one id per char, so labels
  stay aligned); word-level tagging tokenizes each word into its pieces (`word_pieces`: the label goes on
  the first piece); sentence-level tasks use `tokenizer` (WordPiece with offsets);
- n-gram slots: `NgramFeaturizer` with the model's lexicon and matching rules (zen or released), at most
  `max_ngrams` slots per input (default: max_seq_len; an uncapped input would pad every batch to its
  most n-gram-dense member);
- CHTE from characters: per character the ids of the bigram starting at it and of the one ending at it
  (`BigramTable`), computed over the whole sentence before it is cut into windows, so a window edge
  sees its true neighbours.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from zencli.atomic_write import atomic_write_text
from zencli.data.features import CharIds, NgramFeaturizer, Record
from zencli.data.readers.common import load_json_file
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.tokenizer import Tokenizer, check_normalize
from zencli.text.vocab import Vocab

BIGRAMS_NAME = "bigrams.json"
BIGRAM_KEYS = ("bigram_next_ids", "bigram_prev_ids")


@dataclass
class InputSettings:
    """How text becomes inputs; saved in task.json (`inputs`)."""

    max_seq_len: int = 128
    lowercase: bool = True
    strip_accents: bool | None = None
    ngram_rules: str = "zen"
    max_ngrams: int | None = None  # None: max_seq_len
    released_version: str = "zen2"  # released rules: zen1 draws slots at random, zen2 keeps the smallest ids
    normalize: list[str] = field(default_factory=list)  # Arabic normalisations (zencli.text.tokenizer); [] = none

    @property
    def slot_cap(self) -> int:
        return self.max_seq_len if self.max_ngrams is None else self.max_ngrams

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any, source: str) -> InputSettings:
        if not isinstance(d, dict):
            raise ZenError(f"{source}: key 'inputs': expected a JSON object")
        known = set(cls.__dataclass_fields__)
        for key in d:
            if key not in known:
                raise ZenError(f"{source}: inputs: unknown key {key!r}; expected {', '.join(sorted(known))}")
        try:
            out = cls(**d)
        except TypeError as e:
            raise ZenError(f"{source}: inputs: {e}") from None
        if not isinstance(out.max_seq_len, int) or out.max_seq_len < 3:
            raise ZenError(f"{source}: inputs.max_seq_len: expected an integer >= 3, got {out.max_seq_len!r}")
        if out.ngram_rules not in ("zen", "released"):
            raise ZenError(f"{source}: inputs.ngram_rules: expected zen or released, got {out.ngram_rules!r}")
        try:
            if not isinstance(out.normalize, list):
                raise ValueError(f"expected a list of names, got {out.normalize!r}")
            out.normalize = check_normalize(out.normalize)
        except ValueError as e:
            raise ZenError(f"{source}: inputs.normalize: {str(e).removeprefix('normalize: ')}") from None
        return out


class BigramTable:
    """Character bigrams of CHTE's input layer: id 0 is padding, 1 the unknown bigram, 2.. the bigrams.

    Sentence ends are marked with BOS / EOS (`<s>` / `</s>`, never a single character), so the first
    char's "previous" bigram is (<s>, c0) and the last char's "next" bigram is (cn, </s>).
    """

    BOS, EOS = "<s>", "</s>"
    PAD_ID, UNK_ID = 0, 1

    def __init__(self, bigrams: Sequence[tuple[str, str]]):
        self.bigrams = [tuple(b) for b in bigrams]
        self.index = {b: i + 2 for i, b in enumerate(self.bigrams)}
        if len(self.index) != len(self.bigrams):
            raise ZenError("bigram table: a bigram occurs twice; expected distinct bigrams")

    def __len__(self) -> int:
        """Rows of the embedding table: the bigrams plus padding and unknown."""
        return len(self.bigrams) + 2

    @classmethod
    def pairs(cls, chars: Sequence[str]) -> list[tuple[str, str]]:
        """The n + 1 bigrams of a sentence of n chars, boundary markers included."""
        padded = [cls.BOS, *chars, cls.EOS]
        return list(itertools.pairwise(padded))

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_count: int = 1) -> BigramTable:
        """Bigrams seen at least `min_count` times, most frequent first (ties in code-point order)."""
        counts: Counter[tuple[str, str]] = Counter()
        for chars in sentences:
            if chars:
                counts.update(cls.pairs(chars))
        kept = sorted((b for b, n in counts.items() if n >= min_count), key=lambda b: (-counts[b], b))
        return cls(kept)

    def ids(self, chars: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(next [n], prev [n]) int32: id of the bigram starting at each char and of the one ending there."""
        get = self.index.get
        ids = np.fromiter((get(b, self.UNK_ID) for b in self.pairs(chars)), np.int32, len(chars) + 1)
        return ids[1:], ids[:-1]

    def save(self, path: str | Path) -> None:
        atomic_write_text(path, json.dumps([list(b) for b in self.bigrams], ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> BigramTable:
        data = load_json_file(path)
        if not isinstance(data, list) or not all(
                isinstance(b, list) and len(b) == 2 and all(isinstance(x, str) and x for x in b) for b in data):
            raise ZenError(f"{path}: expected a JSON list of [left, right] string pairs")
        try:
            return cls([tuple(b) for b in data])
        except ZenError as e:
            raise ZenError(f"{path}: {e}") from None


def spell_units(units: Counter[str], char_ids: CharIds, tokenizer=None) -> Counter[tuple[str, ...]]:
    """Training words or entities spelled with the tokens their characters get as model input
    (`char_ids`), so each matches exactly where the text has it. A unit with white space or an unknown
    char is left out (it could only ever match [UNK]s). Word-level units (words joined by spaces) are
    spelled with the pieces `tokenizer` makes of them, as `InputPipeline.word_pieces` does."""
    vocab, unk = char_ids.vocab, char_ids.unk_id
    out: Counter[tuple[str, ...]] = Counter()
    for text, n in units.items():
        if tokenizer is not None:
            ids = np.asarray(tokenizer.encode(text), np.int64)
            if len(ids) == 0 or (ids == unk).any():
                continue
            out[tuple(vocab.id_to_token(int(i)) for i in ids)] += n
            continue
        if any(c.isspace() for c in text):
            continue
        ids = char_ids(list(text))
        if (ids == unk).any():
            continue
        out[tuple(vocab.id_to_token(int(i)) for i in ids)] += n
    return out


@dataclass
class LeaveOneOut:
    """What a training sentence may see of the n-grams `model.training_ngrams` took from the training labels.

    A test sentence finds its words in that lexicon only if they occur in the training data; a training
    sentence would find every one of its own words there, and a model trained so learns that a word is
    exactly a lexicon match and misses unknown words (measured: docs/design.md, "Leave-one-out n-grams"). So
    each training sentence sees an added n-gram only if the *other* training
    sentences hold it at least `min_count` times: its count minus the sentence's own occurrences, the
    condition a test sentence meets. N-grams of the lexicon the model came with are never hidden.
    """

    lexicon: Lexicon
    first_id: int  # ids >= first_id were added from the training labels; their frequency is their count
    min_count: int
    char_ids: CharIds
    tokenizer: Any = None  # word-level data: units are spelled with its pieces

    def excluded(self, units: Counter[str]) -> np.ndarray | None:
        """Ids of the added n-grams that a training sentence holding `units` (its words or entities,
        counted) would not find in a lexicon built from the other sentences; None if there are none."""
        out = []
        for spelled, n in spell_units(units, self.char_ids, self.tokenizer).items():
            i = self.lexicon.id(spelled)
            if i >= self.first_id and self.lexicon.freqs[i - 1] - n < self.min_count:
                out.append(i)
        return np.array(sorted(out), np.int64) if out else None


class InputPipeline:
    """Vocabulary (+ lexicon, + bigrams) and settings → feature records."""

    def __init__(self, vocab: Vocab, settings: InputSettings, lexicon: Lexicon | None = None,
                 bigrams: BigramTable | None = None):
        self.vocab = vocab
        self.settings = settings
        self.lexicon = lexicon
        self.bigrams = bigrams
        self.char_ids = CharIds(vocab, settings.lowercase, settings.strip_accents, normalize=settings.normalize)
        self.pad_id = vocab.pad_id
        self.cls_id, self.sep_id = vocab.cls_id, vocab.sep_id
        # Set while fine-tuning with `model.training_ngrams` (not saved: only training inputs use it).
        self.leave_one_out: LeaveOneOut | None = None
        self.featurizer: NgramFeaturizer | None = None
        if lexicon is not None:
            self.featurizer = NgramFeaturizer(
                vocab, lexicon, rules=settings.ngram_rules, max_ngrams=settings.slot_cap,  # type: ignore[arg-type]
                max_seq_len=settings.max_seq_len, released_version=settings.released_version)
        self._tokenizer = None
        self._word_cache: dict[str, np.ndarray] = {}

    @property
    def max_seq_len(self) -> int:
        return self.settings.max_seq_len

    @property
    def tokenizer(self):
        """WordPiece tokenizer with the model's case settings (sentence-level tasks)."""
        if self._tokenizer is None:
            self._tokenizer = Tokenizer(self.vocab, lowercase=self.settings.lowercase,
                                        strip_accents=self.settings.strip_accents, normalize=self.settings.normalize)
        return self._tokenizer

    def encode(self, a: Sequence[np.ndarray], b: Sequence[np.ndarray | None] | None = None, *,
               excluded: Sequence[np.ndarray | None] | None = None) -> list[Record]:
        """Records for `[CLS] a [SEP]` (or `[CLS] a [SEP] b [SEP]`): token ids, types and n-gram slots.
        Each input must fit max_seq_len with its specials (cut long inputs into windows first).
        `excluded[i]`: n-gram ids input i may not use (`NgramFeaturizer.featurize_batch`)."""
        if self.featurizer is not None:
            return self.featurizer.featurize_batch(a, b, excluded=excluded)
        out = []
        for i, x in enumerate(a):
            y = None if b is None else b[i]
            parts = [np.array([self.cls_id], np.int32), np.asarray(x, np.int32), np.array([self.sep_id], np.int32)]
            types = [np.zeros(len(x) + 2, np.int8)]
            if y is not None:
                parts += [np.asarray(y, np.int32), np.array([self.sep_id], np.int32)]
                types.append(np.ones(len(y) + 1, np.int8))
            ids = np.concatenate(parts)
            if len(ids) > self.max_seq_len:
                raise ValueError(f"example {i} has {len(ids)} tokens with [CLS]/[SEP], more than max_seq_len="
                                 f"{self.max_seq_len}; cut long inputs into windows first")
            out.append({"input_ids": ids, "token_type_ids": np.concatenate(types)})
        return out

    def word_pieces(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Piece ids [n] int32 of a sentence given as words, and the index of each word's first piece [w].

        Each word is tokenized as the tokenizer reads it in running text (basic tokens — punctuation
        split off — then WordPiece, with the model's case and normalisation settings), so pieces and
        n-gram matches are those of pretraining. A word the tokenizer drops entirely (only control or
        format characters) becomes one [UNK], so every word keeps a piece to carry its label."""
        cache = self._word_cache
        parts = []
        for w in words:
            ids = cache.get(w)
            if ids is None:
                if len(cache) >= 1 << 16:
                    cache.clear()
                ids = cache[w] = np.asarray(self.tokenizer.encode(w) or [self.vocab.unk_id], np.int32)
            parts.append(ids)
        lengths = np.fromiter((len(x) for x in parts), np.int64, len(parts))
        first = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if len(parts) else lengths
        ids = np.concatenate(parts) if parts else np.zeros(0, np.int32)
        return ids, first

    def char_windows(self, sentences: Sequence[Sequence[str]], windows: Sequence[Sequence[tuple[int, int]]],
                     excluded: Sequence[np.ndarray | None] | None = None) -> list[list[Record]]:
        """Per sentence, the records of `[CLS] chars[s:e] [SEP]` for each of its windows (s, e), with CHTE
        bigram ids when the model has a bigram table (0 at [CLS]/[SEP]). One featurizer call for all.
        `excluded[j]`: n-gram ids no window of sentence j may use."""
        return self.id_windows([self.char_ids(chars) for chars in sentences], windows, excluded, sentences)

    def id_windows(self, ids: Sequence[np.ndarray], windows: Sequence[Sequence[tuple[int, int]]],
                   excluded: Sequence[np.ndarray | None] | None = None,
                   sentences: Sequence[Sequence[str]] | None = None) -> list[list[Record]]:
        """`char_windows` for token ids already looked up (e.g. `word_pieces`); CHTE bigrams need the
        `sentences` of chars the ids stand for."""
        per_window = None if excluded is None else [x for x, ws in zip(excluded, windows) for _ in ws]
        flat = self.encode([x[s:e] for x, ws in zip(ids, windows) for s, e in ws], excluded=per_window)
        out: list[list[Record]] = []
        k = 0
        zero = np.zeros(1, np.int32)
        for j, ws in enumerate(windows):
            records = flat[k:k + len(ws)]
            k += len(ws)
            if self.bigrams is not None:
                if sentences is None:
                    raise ValueError("CHTE bigram ids need the sentences' characters")
                chars = sentences[j]
                nxt, prv = self.bigrams.ids(chars)
                for rec, (s, e) in zip(records, ws):
                    rec["bigram_next_ids"] = np.concatenate([zero, nxt[s:e], zero])
                    rec["bigram_prev_ids"] = np.concatenate([zero, prv[s:e], zero])
            out.append(records)
        return out
