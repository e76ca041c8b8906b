"""Build a vocabulary from a corpus: characters for Chinese, trained WordPiece for Arabic (or any language
that separates words by spaces).

Both stream the corpus through `iter_lines` and the same `BasicTokenizer` the model-side `Tokenizer` uses,
so every vocabulary entry is something the tokenizer can produce. Output order: the five specials
`[PAD] [UNK] [CLS] [SEP] [MASK]` (ids 0–4), then the learned tokens.

- char (zh): every piece of `char_pieces` with count >= min_freq, most frequent first, ties by string.
- wordpiece (ar): the `tokenizers` WordPiece trainer on the basic tokens. That trainer numbers `##`
  pieces in hash-map order and breaks ties between equally frequent merges by those numbers, so two runs
  can learn different vocabularies (huggingface/tokenizers#1794). Registering every `##c` up front and
  feeding word counts in sorted order makes it deterministic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zencli.cpus import in_processes
from zencli.errors import ZenError
from zencli.text.reading import (
    absolute_line_error,
    check_readable,
    decoding,
    encoding_errors,
    iter_lines,
    record_replaced,
    shard_byte_ranges,
)
from zencli.text.tokenizer import CONTINUATION, BasicTokenizer, Tokenizer
from zencli.text.vocab import SPECIAL_TOKENS, UNK, Vocab

LANGUAGES = {"zh": "char", "ar": "wordpiece"}
DEFAULT_WORDPIECE_SIZE = 30000
_PROGRESS_EVERY = 2000  # lines between progress callbacks

Progress = Callable[[int], None]  # called with the number of corpus bytes read since the last call


@dataclass
class CorpusStats:
    lines: int = 0
    chars: int = 0


@dataclass
class VocabBuild:
    vocab: Vocab
    info: dict[str, Any]  # what goes into the vocab.json sidecar


def build_vocab(
    corpus: Sequence[str | Path],
    *,
    language: str = "zh",
    min_freq: int = 1,
    size: int | None = None,
    lowercase: bool = True,
    strip_accents: bool | None = None,
    progress: Progress | None = None,
    normalize: Sequence[str] = (),
    workers: int = 1,
) -> VocabBuild:
    """Build the vocabulary of `language` ("zh": characters; "ar": WordPiece) from the corpus files.

    `strip_accents=None`: BERT's rule for zh (strip when lower-casing); never for ar, whose diacritics
    are part of the text. `size` caps the zh vocabulary (specials included) and sets the WordPiece size
    for ar (default 30000). `normalize`: Arabic normalisations (`zencli.text.tokenizer`), saved in the
    sidecar so that every tokenizer of this vocabulary applies them. `workers` > 1: zh counts byte ranges of
    the files in that many processes (the same counts)."""
    if language not in LANGUAGES:
        raise ZenError(f"unknown language {language!r}; expected one of {', '.join(LANGUAGES)}")
    if not corpus:
        raise ZenError("no corpus files given")
    if min_freq < 1:
        raise ZenError(f"min_freq must be >= 1, got {min_freq}")
    if size is not None and size <= len(SPECIAL_TOKENS):
        raise ZenError(f"size must be > {len(SPECIAL_TOKENS)} (the special tokens), got {size}")
    method = LANGUAGES[language]
    if strip_accents is None and method == "wordpiece":
        strip_accents = False
    try:
        basic = BasicTokenizer(lowercase, strip_accents, normalize)
    except ValueError as e:
        raise ZenError(str(e)) from None
    stats = CorpusStats()
    if method == "char":
        tokens, counts = _char_vocab(corpus, basic, min_freq, size, stats, progress, workers)
    else:
        tokens, counts = _wordpiece_vocab(corpus, basic, min_freq, size or DEFAULT_WORDPIECE_SIZE, stats, progress)
    vocab = Vocab([*SPECIAL_TOKENS, *tokens])
    corpus_tokens, unk_tokens = counts
    info = {
        "language": language,
        "method": method,
        "lowercase": lowercase,
        "strip_accents": basic.strip_accents,
        "normalize": basic.normalize,
        "min_freq": min_freq,
        "size": size,
        "corpus": [str(p) for p in corpus],
        "corpus_lines": stats.lines,
        "corpus_chars": stats.chars,
        "corpus_tokens": corpus_tokens,
        "unk_tokens": unk_tokens,
        "coverage": (corpus_tokens - unk_tokens) / corpus_tokens,
        "vocab_size": len(vocab),
    }
    return VocabBuild(vocab, info)


def _lines(corpus: Sequence[str | Path], stats: CorpusStats, progress: Progress | None) -> Iterator[str]:
    pending = 0
    for path in corpus:
        for _, text in iter_lines(path):
            stats.lines += 1
            stats.chars += len(text)
            if progress is not None:
                pending += len(text.encode("utf-8")) + 1
                if stats.lines % _PROGRESS_EVERY == 0:
                    progress(pending)
                    pending = 0
            yield text
    if progress is not None and pending:
        progress(pending)


def _batches(lines: Iterator[str], chars: int = 1 << 20) -> Iterator[str]:
    """Lines joined by newlines, about `chars` characters a batch (what `char_piece_counts` counts at once)."""
    batch: list[str] = []
    size = 0
    for text in lines:
        batch.append(text)
        size += len(text)
        if size >= chars:
            yield "\n".join(batch)
            batch, size = [], 0
    if batch:
        yield "\n".join(batch)


def _char_vocab(
    corpus: Sequence[str | Path],
    basic: BasicTokenizer,
    min_freq: int,
    size: int | None,
    stats: CorpusStats,
    progress: Progress | None,
    workers: int = 1,
) -> tuple[list[str], tuple[int, int]]:
    if workers > 1 and sum(check_readable(p).stat().st_size for p in corpus) > _RANGE_BYTES:  # else not worth a pool
        counts = _count_pieces_in_pool(corpus, basic, stats, progress, workers)
    else:
        counts = Counter()
        for batch in _batches(_lines(corpus, stats, progress)):
            counts.update(basic.char_piece_counts(batch))
    total = sum(counts.values())
    if total == 0:
        raise ZenError(f"{', '.join(map(str, corpus))}: corpus has no tokens (only white space or control characters)")
    # [UNK] marks words over 100 chars; the specials are already in the vocabulary.
    kept = sorted(
        (p for p, n in counts.items() if n >= min_freq and p not in SPECIAL_TOKENS), key=lambda p: (-counts[p], p)
    )
    if size is not None:
        kept = kept[: size - len(SPECIAL_TOKENS)]
    if not kept:
        top = max(counts.values())
        raise ZenError(f"no character reaches --min-freq {min_freq} (the most frequent occurs {top} times)")
    covered = sum(counts[p] for p in kept)
    return kept, (total, total - covered)


# Bytes of text per counting task (several per worker, so that progress moves and the workers finish together).
_RANGE_BYTES = 32 << 20


def _count_pieces_in_pool(corpus: Sequence[str | Path], basic: BasicTokenizer, stats: CorpusStats,
                          progress: Progress | None, workers: int) -> Counter[str]:
    """The `char_pieces` counts of the corpus, byte ranges of its files counted in `workers` processes."""
    tasks = [(str(p), start, end, basic, encoding_errors()) for p in corpus
             for start, end in shard_byte_ranges(p, max(workers, -(-check_readable(p).stat().st_size // _RANGE_BYTES)))]
    counts: Counter[str] = Counter()
    for k, (part, lines, chars, replaced) in in_processes(_count_range, tasks, workers):
        counts.update(part)
        stats.lines += lines
        stats.chars += chars
        record_replaced(replaced)
        if progress is not None:
            progress(tasks[k][2] - tasks[k][1])
    return counts


def _count_range(path: str, start: int, end: int, basic: BasicTokenizer,
                 errors: str) -> tuple[Counter[str], int, int, dict]:
    """(piece counts, lines, chars, what was replaced) of the lines starting in [start, end) of `path`."""
    counts: Counter[str] = Counter()
    lines = chars = 0
    with decoding(errors) as replaced:
        try:
            def texts() -> Iterator[str]:
                nonlocal lines, chars
                for _, text in iter_lines(path, start_byte=start, end_byte=end):
                    lines += 1
                    chars += len(text)
                    yield text

            for batch in _batches(texts()):
                counts.update(basic.char_piece_counts(batch))
        except ZenError as e:
            raise absolute_line_error(e, path, start) from None
    return counts, lines, chars, replaced.lines


def _wordpiece_vocab(
    corpus: Sequence[str | Path],
    basic: BasicTokenizer,
    min_freq: int,
    size: int,
    stats: CorpusStats,
    progress: Progress | None,
) -> tuple[list[str], tuple[int, int]]:
    # lazy: only word pieces need tokenizers (a compiled extension); a character vocabulary does not
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers, trainers

    words: Counter[str] = Counter()
    for text in _lines(corpus, stats, progress):
        words.update(basic.split(text))
    if not words:
        raise ZenError(f"{', '.join(map(str, corpus))}: corpus has no tokens (only white space or control characters)")
    chars = sorted({c for w in words for c in w})
    continuations = sorted({CONTINUATION + c for w in words for c in w[1:]})
    needed = len(SPECIAL_TOKENS) + len(chars) + len(continuations)
    if size < needed:
        raise ZenError(
            f"--size {size} is too small: the corpus alphabet needs {needed} entries "
            f"({len(chars)} chars, {len(continuations)} ## pieces, {len(SPECIAL_TOKENS)} specials)"
        )
    hf = HFTokenizer(models.WordPiece(unk_token=UNK))
    # Words arrive already basic-tokenised, joined by single spaces: split on exactly that.
    hf.pre_tokenizer = pre_tokenizers.Split(" ", behavior="removed")
    trainer = trainers.WordPieceTrainer(
        vocab_size=size,
        min_frequency=min_freq,
        special_tokens=[*SPECIAL_TOKENS, *continuations],
        continuing_subword_prefix=CONTINUATION,
        show_progress=False,
    )
    hf.train_from_iterator(_repeat_words(words), trainer)
    learned = sorted(hf.get_vocab().items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in learned if t not in SPECIAL_TOKENS]

    # Coverage with our own WordPiece (the one the model will use), weighted by word frequency.
    tok = Tokenizer(Vocab([*SPECIAL_TOKENS, *tokens]), lowercase=basic.lowercase, strip_accents=basic.strip_accents,
                    normalize=basic.normalize)
    total = unk = 0
    for w, n in words.items():
        pieces = tok.wordpiece(w)
        if pieces is None:
            total += n
            unk += n
        else:
            total += n * len(pieces)
    return tokens, (total, unk)


def _repeat_words(words: Counter[str], chunk: int = 1000) -> Iterator[str]:
    """The corpus as the trainer needs it (word counts), in a fixed order, without huge strings."""
    for w, n in sorted(words.items()):
        while n > 0:
            k = min(n, chunk)
            yield " ".join([w] * k)
            n -= k
