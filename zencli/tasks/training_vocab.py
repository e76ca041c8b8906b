"""`model.extend_vocab`: the vocabulary grows by the characters / word pieces of the training data that it
lacks, and the [UNK] check that names the setting.

A model pretrained on other text (classical Arabic, a cut character set) reads the user's words as [UNK]:
those tokens all share one embedding row, so the model cannot tell them apart. With `model.extend_vocab: K`,
every missing piece seen at least K times in training is appended to the vocabulary (ids of the pretrained
tokens are kept, as `model.training_ngrams` appends n-grams) and gets a new row of the char embedding table.

What is missing depends on how the task reads its text (`Task.vocab_units`):
- chars (char-level tagging, one id per char, `CharIds`): a char no form of which is in the vocabulary; the
  token added is the form looked up first (`CharIds.normal_form`: lower-cased, normalised as the model is);
- words (word-level tagging) or texts (sentence tasks, cut into the tokenizer's basic tokens): a word that
  WordPiece makes [UNK]; the tokens added are its missing single-char pieces (`c` at the start of the
  word, `##c` after it), so that the word can be spelled. Adding single chars never changes how a word the
  vocabulary already covers is split: longest-match-first prefers the longer pieces it matched before.

A new row starts as the row of the same char in its other position (`c` for `##c`, and back) when the
pretrained vocabulary has that one, else as the mean of the pretrained table (a char with no pieces to
average: its neighbours in the table are as good a guess as any, and the mean keeps the new row's scale).
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from zencli.errors import ZenError
from zencli.tasks.inputs import InputPipeline, InputSettings
from zencli.text.vocab import UNK, Vocab

if TYPE_CHECKING:
    from zencli.model.encoder import ZenModel
    from zencli.tasks.base import Task

UNK_WARN_SHARE = 0.02  # more training words than this starting with [UNK]: the run warns (names extend_vocab)
CONTINUATION = "##"


@dataclass
class Coverage:
    """How much of the training text a vocabulary reads as [UNK], and the pieces that would fix it."""

    unit: str  # "characters" or "words": what `total` counts
    total: int  # training units (occurrences)
    unknown: int  # units that are, or start with, [UNK]
    missing: Counter[str]  # tokens the vocabulary lacks → occurrences in training units

    @property
    def verb(self) -> str:
        return "read as" if self.unit == "characters" else "starting with"

    @property
    def share(self) -> float:
        return self.unknown / self.total if self.total else 0.0

    def describe(self) -> str:
        return (f"{self.unknown:,} of {self.total:,} training {self.unit} ({self.share:.1%}) "
                f"{'are' if self.unit == 'characters' else 'start with'} [UNK]")


def coverage(task: Task, examples: Sequence[Any], vocab: Vocab, settings: InputSettings) -> Coverage | None:
    """The training data's [UNK] share under `vocab` and what is missing; None when the task cannot say how
    its examples become tokens (`Task.vocab_units`)."""
    found = task.vocab_units(examples)
    if found is None:
        return None
    kind, units = found
    inputs = InputPipeline(vocab, settings)
    if kind == "chars":
        return _char_coverage(units, inputs)
    tok = inputs.tokenizer
    if kind == "texts":  # running text: the basic tokens WordPiece sees are its words
        words: Counter[str] = Counter()
        for text, n in units.items():
            for w in tok.basic.split(text):
                words[w] += n
        units = words
    known = vocab.token_ids
    missing: Counter[str] = Counter()
    total = unknown = 0
    for word, n in units.items():
        total += n
        if (tok.tokens(word) or [UNK])[0] != UNK:
            continue
        unknown += n
        for basic in tok.basic.split(word):
            if tok.tokens(basic) != [UNK]:
                continue
            for piece in tok.basic.char_pieces(basic):
                if piece not in known and _addable(piece.removeprefix(CONTINUATION)):
                    missing[piece] += n
    return Coverage("words", total, unknown, missing)


def _char_coverage(chars: Counter[str], inputs: InputPipeline) -> Coverage:
    ids = inputs.char_ids
    missing: Counter[str] = Counter()
    total = unknown = 0
    for c, n in chars.items():
        total += n
        if int(ids([c])[0]) != ids.unk_id:
            continue
        unknown += n
        form = ids.normal_form(c) or c
        if _addable(form):
            missing[form] += n
    return Coverage("characters", total, unknown, missing)


def _addable(text: str) -> bool:
    """A token a vocabulary line can hold and the tokenizer can produce: no white space or control char."""
    return bool(text) and not any(c.isspace() or unicodedata.category(c).startswith("C") for c in text)


def extend_vocab(vocab: Vocab, found: Coverage, min_count: int) -> tuple[Vocab, list[str]]:
    """`vocab` with the missing tokens seen at least `min_count` times appended (most frequent first) and
    the tokens added."""
    new = sorted((t for t, n in found.missing.items() if n >= min_count and t not in vocab),
                 key=lambda t: (-found.missing[t], t))
    if not new:
        return vocab, []
    return Vocab([*vocab.tokens, *new], source=f"{vocab.source} + {len(new)} training tokens"), new


def grow_char_table(encoder: ZenModel, vocab: Vocab, old_rows: int) -> None:
    """Append rows for the tokens of `vocab` from id `old_rows` on to the encoder's char embedding table (rows
    in the module docstring); `config.vocab_size` follows."""
    old = encoder.embeddings.char_embeddings
    if old.num_embeddings != old_rows:
        raise ValueError(f"the char table has {old.num_embeddings} rows, the vocabulary had {old_rows}")
    rows = len(vocab)
    if rows == old_rows:
        return
    new = nn.Embedding(rows, old.embedding_dim, padding_idx=old.padding_idx, device=old.weight.device,
                       dtype=old.weight.dtype)
    ids = vocab.token_ids
    with torch.no_grad():
        new.weight[:old_rows] = old.weight
        mean = old.weight.mean(0)
        for i in range(old_rows, rows):
            t = vocab.id_to_token(i)
            other = t[len(CONTINUATION):] if t.startswith(CONTINUATION) else CONTINUATION + t
            j = ids.get(other)
            new.weight[i] = old.weight[j] if j is not None and j < old_rows else mean
    encoder.embeddings.char_embeddings = new
    encoder.config.vocab_size = rows


def apply_extend_vocab(encoder: ZenModel | None, vocab: Vocab, min_count: int, task: Task,
                       examples: Sequence[Any], settings: InputSettings) -> tuple[Vocab, list[str]]:
    """`model.extend_vocab`: the grown vocabulary (the encoder's table grown to match) and notes."""
    if encoder is None:
        raise ZenError("model.extend_vocab: CHTE from characters builds its char table from the training data "
                       "(model.chte.min_count); remove the key")
    found = coverage(task, examples, vocab, settings)
    if found is None:
        raise ZenError(f"model.extend_vocab: task {task.name} cannot list the tokens of its training text; "
                       f"remove the key")
    grown, added = extend_vocab(vocab, found, min_count)
    grow_char_table(encoder, grown, len(vocab))
    shown = " ".join(added[:8]) + (" …" if len(added) > 8 else "")
    after = coverage(task, examples, grown, settings) if added else found
    assert after is not None
    notes = [f"vocabulary: {len(added):,} tokens of the training data seen >= {min_count} times added to the "
             f"{len(vocab):,} (new char embedding rows{': ' + shown if added else ''}); training {found.unit} "
             f"{found.verb} [UNK]: {found.share:.2%} → {after.share:.2%}"]
    return grown, notes


def unk_warning(found: Coverage | None, extend_vocab_key: int | None) -> str | None:
    """The start-of-run warning when more than UNK_WARN_SHARE of the training words start with [UNK]."""
    if found is None or found.share <= UNK_WARN_SHARE:
        return None
    distinct = len(found.missing)
    what = f"{found.describe()}: the vocabulary does not cover this text, and all of them share one embedding row"
    if extend_vocab_key is None:
        return (f"{what}. model.extend_vocab: K (e.g. --set model.extend_vocab=2) adds the {distinct:,} missing "
                f"tokens seen at least K times to the vocabulary")
    return (f"{what}, after model.extend_vocab: {extend_vocab_key} added the tokens seen that often; a smaller "
            f"minimum count adds more of the {distinct:,} still missing")
