"""N-gram matcher benchmark: tokens/s of `NgramMatcher` against the released look-up loop, same run.

Data: a character lexicon (an ngram.txt given with `lexicon`, or counted here from PD98 train: every
2..max_len-char substring of the first `train_chars` characters with frequency >= `min_freq`, ids by
descending frequency) and PD98 dev text cut into sequences of `seq_len` characters; tokens are
characters mapped to ids. Every method runs over all sequences `repeats` times, interleaved, and the
best time counts (wall clock and process CPU time both; the machine may be shared, so compare ratios
of the same run). Before timing, the matcher's output is checked to equal the naive loop's.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from zencli.bench.common import interleaved_rounds
from zencli.errors import ZenError
from zencli.lexicon.matcher import Matches, NgramMatcher, naive_matches, ngram_index, select_released
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.reading import iter_lines

# Released max_ngram_in_seq default, for the "released ZEN 2.0 rules" row.
_RELEASED_SLOTS = 128


def count_lexicon(
    path: Path, max_chars: int, min_freq: int, max_len: int
) -> tuple[list[tuple[str, ...]], list[int], int]:
    """Character n-grams of 2..max_len chars seen >= min_freq times in the first max_chars chars (0: all).

    Returns (ngrams, freqs, chars read); ids follow descending frequency, ties by the n-gram text.
    """
    counts: Counter[str] = Counter()
    read = 0
    for _, line in iter_lines(path):
        if max_chars and read >= max_chars:
            break
        read += len(line)
        for n in range(2, max_len + 1):
            counts.update(line[s : s + n] for s in range(len(line) - n + 1))
    kept = sorted(((g, f) for g, f in counts.items() if f >= min_freq), key=lambda x: (-x[1], x[0]))
    return [tuple(g) for g, _ in kept], [f for _, f in kept], read


def dev_sequences(path: Path, seq_len: int) -> list[str]:
    """The file's lines joined and cut into pieces of seq_len characters (the last may be shorter)."""
    text = "".join(line for _, line in iter_lines(path))
    if not text:
        raise ZenError(f"{path}: no text; expected lines of characters")
    return [text[i : i + seq_len] for i in range(0, len(text), seq_len)]


def _per_sequence(m: Matches) -> list[list[tuple[int, int, int]]]:
    off = m.offsets().tolist()
    rows = list(zip(m.ngram_id.tolist(), m.start.tolist(), m.length.tolist()))
    return [rows[off[b] : off[b + 1]] for b in range(m.n_seqs)]


def _time(fn: Callable[[], object]) -> tuple[float, float]:
    gc.collect()
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def run(
    *,
    dev: Path,
    lexicon: Path | None = None,
    train: Path | None = None,
    train_chars: int = 0,
    min_freq: int = 15,
    seq_len: int = 128,
    batch_size: int = 128,
    max_len: int = 8,
    repeats: int = 3,
    log: Callable[[str], None] = lambda s: None,
    advance: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    """Run the benchmark; `advance(name)` is called after each timed pass (5 × repeats in all)."""
    for name, value, low in (("seq_len", seq_len, 1), ("batch_size", batch_size, 1), ("repeats", repeats, 1),
                             ("min_freq", min_freq, 1), ("max_len", max_len, 2), ("train_chars", train_chars, 0)):
        if value < low:
            raise ZenError(f"--{name.replace('_', '-')}: expected an integer >= {low}, got {value}")
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    if lexicon is not None:
        lex = Lexicon.load(lexicon)
        source = str(lexicon)
        log(f"read {len(lex):,} n-grams from {lexicon}")
    else:
        if train is None:
            raise ZenError("--train: give a text to count n-grams in, or a lexicon with --lexicon")
        ngrams, freqs, read = count_lexicon(train, train_chars, min_freq, max_len)
        lex = Lexicon(ngrams, freqs)
        source = f"counted from {read:,} chars of {train}, freq >= {min_freq}"
        log(f"counted {len(lex):,} n-grams (freq >= {min_freq}) in {read:,} chars of {train}")
    lexicon_s = time.perf_counter() - t0
    if not len(lex):
        raise ZenError(f"lexicon ({source}) is empty; lower --min-freq or give more text")

    texts = dev_sequences(dev, seq_len)
    chars = sorted({t for g in lex.ngrams for t in g} | {c for t in texts for c in t})
    vocab = {c: i + 1 for i, c in enumerate(chars)}  # 0 left free, as a [PAD] would be
    seqs = [[vocab[c] for c in t] for t in texts]
    n_tokens = sum(map(len, seqs))

    t0 = time.perf_counter()
    matcher = NgramMatcher.from_lexicon(lex, vocab.get, min_len=2, max_len=max_len)
    build_s = time.perf_counter() - t0
    index = ngram_index([tuple(vocab[t] for t in g) for g in lex.ngrams])
    batches = [seqs[i : i + batch_size] for i in range(0, len(seqs), batch_size)]
    padded = []
    for b in batches:
        arr = np.zeros((len(b), max(map(len, b))), np.int64)
        for i, s in enumerate(b):
            arr[i, : len(s)] = s
        padded.append((arr, [len(s) for s in b]))

    naive = [naive_matches(s, index, 2, max_len) for s in seqs]
    for form, fast in (("lists", [row for b in batches for row in _per_sequence(matcher.match_batch(b))]),
                       ("padded", [row for a, n in padded for row in _per_sequence(matcher.match_batch(a, n))])):
        if fast != naive:
            bad = next(i for i, (x, y) in enumerate(zip(fast, naive)) if x != y)
            raise RuntimeError(f"matcher ({form}) and naive loop disagree on dev sequence {bad}: "
                               f"{fast[bad][:5]} vs {naive[bad][:5]}")
    n_matches = sum(map(len, naive))

    methods: list[tuple[str, int, Callable[[], object]]] = [
        ("naive dict loop (released)", 1, lambda: [naive_matches(s, index, 2, max_len) for s in seqs]),
        ("match(), 1 sequence/call", 1, lambda: [matcher.match(s) for s in seqs]),
        ("match_batch(), lists", batch_size, lambda: [matcher.match_batch(b) for b in batches]),
        ("match_batch(), padded array", batch_size, lambda: [matcher.match_batch(a, n) for a, n in padded]),
        ("match_batch() + ZEN 2.0 rules", batch_size,
         lambda: [select_released(matcher.match_batch(b), "zen2", seq_len, _RELEASED_SLOTS) for b in batches]),
    ]
    fns = {name: fn for name, _, fn in methods}

    def one(name: str, r: int) -> tuple[float, float]:
        times = _time(fns[name])
        advance(name)
        return times

    timed = interleaved_rounds(list(fns), repeats, 0, one)
    wall = {name: [w for w, _ in t] for name, t in timed.items()}
    cpu = {name: [c for _, c in t] for name, t in timed.items()}

    base_w, base_c = min(wall[methods[0][0]]), min(cpu[methods[0][0]])
    rows = []
    for name, batch, _ in methods:
        w, c = min(wall[name]), min(cpu[name])
        rows.append({
            "method": name,
            "batch_size": batch,
            "tokens_per_s": n_tokens / w,
            "cpu_tokens_per_s": n_tokens / max(c, 1e-9),
            "speedup": base_w / w,
            "cpu_speedup": base_c / max(c, 1e-9),
            "wall_s": wall[name],
            "cpu_s": cpu[name],
        })
    lengths = Counter(len(g) for g in lex.ngrams)
    return {
        "lexicon": {"source": source, "ngrams": len(lex), "per_length": {str(k): lengths[k] for k in sorted(lengths)},
                    "seconds": lexicon_s},
        "data": {"dev": str(dev), "sequences": len(seqs), "seq_len": seq_len, "tokens": n_tokens,
                 "matches": n_matches, "matches_per_token": n_matches / n_tokens, "alphabet": len(vocab)},
        "settings": {"batch_size": batch_size, "min_len": 2, "max_len": max_len, "repeats": repeats,
                     "released_max_ngram_in_seq": _RELEASED_SLOTS},
        "matcher": {"build_s": build_s, "trie_nodes": matcher.n_nodes},
        "identical_to_naive": True,
        "rows": rows,
        "load_avg_at_start": load,
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
    }
