"""`model.training_ngrams`: a ZEN encoder's lexicon grows by what the training data marks as units (words,
entities: `Task.lexicon_units`) or, for tasks without such labels, by the PMI n-grams of the training text
(`Task.training_texts`). New n-grams are appended to the lexicon, so the pretrained rows keep their ids
and the new ones get fresh embedding rows."""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zencli.data.features import CharIds
from zencli.errors import ZenError
from zencli.lexicon.extract import build
from zencli.lexicon.ngram_file import Lexicon
from zencli.lexicon.settings import LexiconConfig
from zencli.tasks.inputs import InputPipeline, InputSettings, LeaveOneOut, spell_units
from zencli.text.vocab import UNK, Vocab

if TYPE_CHECKING:
    from zencli.tasks.base import Task


def grow_lexicon(lexicon: Lexicon, min_count: int, task: Task, train_examples: Sequence[Any], vocab: Vocab,
                 settings: InputSettings, *, vocab_path: Path, side: dict[str, Any] | None, word_level: bool
                 ) -> tuple[Lexicon, LeaveOneOut | None, list[str]]:
    """`lexicon` with the training n-grams seen >= `min_count` times appended; the leave-one-out matcher
    when they are labelled units (None for PMI n-grams), and notes for the user."""
    before = len(lexicon)
    units = task.lexicon_units(train_examples)
    texts = task.training_texts(train_examples) if units is None else None
    leave_one_out = None
    if units is not None:
        char_ids = CharIds(vocab, settings.lowercase, settings.strip_accents, normalize=settings.normalize)
        # Word-level units are spelled with the pieces the model reads them as.
        tokenizer = InputPipeline(vocab, settings).tokenizer if word_level else None
        lexicon, added = add_training_ngrams(lexicon, units, char_ids, min_count, tokenizer=tokenizer)
        leave_one_out = LeaveOneOut(lexicon, before + 1, min_count, char_ids, tokenizer)
        what = f"training {'entities' if task.name == 'ner' else 'words'} seen >= {min_count} times"
    elif texts is not None:
        language = side.get("language", "zh") if side else "zh"
        found = text_ngrams(texts, vocab_path, lowercase=settings.lowercase, min_count=min_count,
                            language=language if language in ("zh", "ar") else "zh")
        lexicon, added = add_ngrams(lexicon, found, min_count)
        what = f"PMI n-grams of the training text seen >= {min_count} times"
    else:
        raise ZenError(f"model.training_ngrams: task {task.name} has neither labelled words nor training texts "
                       f"to take n-grams from; remove the key")
    notes = [f"n-gram lexicon: {added:,} {what} added to the {before:,} n-grams (new embedding rows)"]
    if leave_one_out is not None:
        notes.append(f"a training sentence matches the added n-grams that the other training sentences hold "
                     f">= {min_count} times (as a test sentence does), not its own")
    return lexicon, leave_one_out, notes


def text_ngrams(texts: Sequence[str], vocab: Path, *, lowercase: bool, min_count: int, language: str
                ) -> Counter[tuple[str, ...]]:
    """The PMI n-grams (2..8 tokens, the language's PMI threshold, seen >= min_count times) of `texts`,
    counted over the tokens the model reads (`zen lexicon` with the model's vocabulary), without [UNK]."""
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
