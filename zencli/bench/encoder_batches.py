"""The synthetic (or real-text) pretraining batches `zen bench model` and benchmarks/peers.py time: characters,
n-gram slots, masks and NSP labels (the make-up is described in zencli/bench/model.py's docstring)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zencli.errors import ZenError
from zencli.lexicon.matcher import select_released
from zencli.model.pretraining import IGNORE_INDEX
from zencli.text.reading import iter_lines

PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = 0, 100, 101, 102, 103  # BERT-Chinese vocab.txt
FIRST_CHAR_ID = 104
# Share of n-gram matches of length 2..8 (PMI lexicon of PD98 train matched on PD98 dev).
LENGTH_DIST = (0.652, 0.215, 0.079, 0.028, 0.014, 0.008, 0.004)
MASK_RATE = 0.15


@dataclass
class CharSource:
    """Where the characters of the benchmark sequences come from."""

    ids: np.ndarray  # [N] token ids of a long character stream
    vocab: dict[str, int] | None  # char → id (real text only)
    description: str


def synthetic_chars(n: int, vocab_size: int, rng: np.random.Generator, alphabet: int = 3000) -> CharSource:
    """A Markov chain over `alphabet` ids: with p=0.6 a char's fixed successor, else a Zipf-ish draw.
    Neighbours predict a masked char, so an MLM can learn it."""
    alphabet = max(2, min(alphabet, vocab_size - FIRST_CHAR_ID))
    succ = rng.permutation(alphabet)
    weights = 1.0 / np.arange(1, alphabet + 1)
    draws = rng.choice(alphabet, size=n, p=weights / weights.sum())
    follow = rng.random(n) < 0.6
    out = np.empty(n, np.int64)
    prev = int(draws[0])
    for i in range(n):  # data preparation, outside every timing
        prev = int(succ[prev]) if follow[i] else int(draws[i])
        out[i] = prev
    return CharSource(out + FIRST_CHAR_ID, None, f"synthetic Markov chain over {alphabet} chars")


def text_chars(path: Path, vocab_size: int, max_chars: int) -> CharSource:
    """The characters of `path` (lines joined, up to `max_chars`), ids by descending frequency; chars
    beyond the vocabulary become [UNK]."""
    parts, n = [], 0
    for _, line in iter_lines(path):
        parts.append(line)
        n += len(line)
        if n >= max_chars:
            break
    text = "".join(parts)[:max_chars]
    if len(text) < 16:
        raise ZenError(f"{path}: only {len(text)} characters; the model benchmark needs at least 16")
    chars, counts = np.unique(np.array(list(text)), return_counts=True)
    order = np.argsort(-counts, kind="stable")
    room = vocab_size - FIRST_CHAR_ID
    if room < 1:
        raise ZenError(f"--vocab-size: {vocab_size} leaves no ids for characters (the first is {FIRST_CHAR_ID})")
    vocab = {str(chars[j]): FIRST_CHAR_ID + r for r, j in enumerate(order[:room])}
    ids = np.fromiter((vocab.get(c, UNK_ID) for c in text), np.int64, len(text))
    return CharSource(ids, vocab, f"{path} ({len(text):,} chars, {len(vocab):,} distinct in the vocabulary)")


@dataclass
class Slots:
    ids: np.ndarray  # [B,M]
    starts: np.ndarray  # [B,M] token index incl. [CLS]
    lengths: np.ndarray  # [B,M], 0 = padding slot
    freqs: np.ndarray  # [B,M]


def synthetic_slots(B: int, L: int, M: int, rows: int, rate: float, rng: np.random.Generator) -> Slots:
    """Per sequence Binomial(L−3, rate) n-grams (at most M), lengths from LENGTH_DIST, inside the text."""
    slots = Slots(*(np.zeros((B, M), np.int64) for _ in range(4)))
    lens = np.arange(2, 2 + len(LENGTH_DIST))
    p = np.asarray(LENGTH_DIST) / sum(LENGTH_DIST)
    for b in range(B):
        k = min(M, int(rng.binomial(max(L - 3, 0), rate)))
        ln = np.minimum(rng.choice(lens, size=k, p=p), max(L - 2, 1))
        start = 1 + (rng.random(k) * np.maximum(L - 1 - ln, 1)).astype(np.int64)  # ends before the last [SEP]
        ids = np.sort(1 + ((rows - 1) * rng.random(k) ** 3).astype(np.int64))  # ZEN 2.0 order: smallest id first
        slots.ids[b, :k], slots.starts[b, :k], slots.lengths[b, :k] = ids, start, ln
        slots.freqs[b, :k] = 15 + 30000 // ids
    return slots


def lexicon_slots(tokens: np.ndarray, matcher: Any, M: int) -> Slots:
    """The lexicon's matches in `tokens` [B,L], kept as the released ZEN 2.0 code keeps them."""
    B, L = tokens.shape
    m = select_released(matcher.match_batch(tokens, np.full(B, L)), "zen2", L, M)
    pad = m.padded(M)
    return Slots(pad["ngram_ids"], pad["ngram_starts"], pad["ngram_lengths"], pad["ngram_freqs"])


def drop_slots_covering(slots: Slots, masked: np.ndarray) -> Slots:
    """Remove slots that cover a masked position (they would leak the answer), left-packing the rest."""
    B, M = slots.ids.shape
    csum = np.concatenate([np.zeros((B, 1), np.int64), np.cumsum(masked, 1, dtype=np.int64)], 1)  # [B,L+1]
    end = np.minimum(slots.starts + slots.lengths, masked.shape[1])
    hit = np.take_along_axis(csum, end, 1) - np.take_along_axis(csum, slots.starts, 1)
    keep = (slots.lengths > 0) & (hit == 0)
    order = np.argsort(~keep, axis=1, kind="stable")  # kept slots first, in their order
    out = Slots(*(np.take_along_axis(a, order, 1) for a in (slots.ids, slots.starts, slots.lengths, slots.freqs)))
    dropped = np.take_along_axis(~keep, order, 1)
    for a in (out.ids, out.starts, out.lengths, out.freqs):
        a[dropped] = 0
    return out


def make_batches(count: int, *, batch: int, seq_len: int, slots: int, ngram_rows: int, vocab_size: int,
                 chars: CharSource, matcher: Any | None, ngram_rate: float, seed: int
                 ) -> list[dict[str, torch.Tensor]]:
    """`count` pretraining batches (see the module docstring for their make-up)."""
    rng = np.random.default_rng(seed)
    B, L, M = batch, seq_len, slots
    body = L - 3
    n_a = body // 2
    stream = chars.ids
    need = body + 1
    if len(stream) < need:
        stream = np.resize(stream, need)
    out = []
    for _ in range(count):
        starts = rng.integers(0, len(stream) - body + 1, size=B)
        text = np.stack([stream[s:s + body] for s in starts])  # [B, body]
        is_random = rng.random(B) < 0.5  # NSP: B segment from elsewhere
        for b in np.flatnonzero(is_random):
            s = int(rng.integers(0, len(stream) - body + 1))
            text[b, n_a:] = stream[s:s + body - n_a]
        ids = np.empty((B, L), np.int64)
        ids[:, 0], ids[:, 1:1 + n_a], ids[:, 1 + n_a] = CLS_ID, text[:, :n_a], SEP_ID
        ids[:, 2 + n_a:L - 1], ids[:, L - 1] = text[:, n_a:], SEP_ID
        types = np.zeros((B, L), np.int64)
        types[:, 2 + n_a:] = 1
        maskable = np.ones((B, L), bool)
        maskable[:, [0, 1 + n_a, L - 1]] = False
        masked = maskable & (rng.random((B, L)) < MASK_RATE)
        masked[~masked.any(1), 1] = True  # every sequence predicts at least one char
        if matcher is not None:
            sl = drop_slots_covering(lexicon_slots(ids, matcher, M), masked)
        else:
            sl = synthetic_slots(B, L, M, ngram_rows, ngram_rate, rng)
        # Slots padded to the batch's longest row, as zen's collates give them (off the CPU the model
        # does not look for trailing all-padding slots: that would wait for the GPU).
        sl = Slots(*(a[:, :int((sl.lengths > 0).sum(1).max())] for a in (sl.ids, sl.starts, sl.lengths, sl.freqs)))
        labels = np.where(masked, ids, IGNORE_INDEX)
        inputs = np.where(masked, MASK_ID, ids)
        out.append({
            "input_ids": torch.from_numpy(inputs),
            "token_type_ids": torch.from_numpy(types),
            "attention_mask": torch.ones(B, L, dtype=torch.long),
            "ngram_ids": torch.from_numpy(sl.ids),
            "ngram_token_type_ids": torch.from_numpy(np.take_along_axis(types, np.minimum(sl.starts, L - 1), 1)
                                                     * (sl.lengths > 0)),
            "ngram_attention_mask": torch.from_numpy((sl.lengths > 0).astype(np.int64)),
            "ngram_starts": torch.from_numpy(sl.starts),
            "ngram_lengths": torch.from_numpy(sl.lengths),
            "ngram_freqs": torch.from_numpy(sl.freqs),
            "mlm_labels": torch.from_numpy(labels),
            "nsp_labels": torch.from_numpy(is_random.astype(np.int64)),
        })
    return out


ENCODER_KEYS = ("token_type_ids", "attention_mask", "ngram_ids", "ngram_token_type_ids", "ngram_attention_mask",
                "ngram_starts", "ngram_lengths", "ngram_freqs")


def encoder_inputs(batch: dict[str, torch.Tensor], has_ngrams: bool) -> dict[str, torch.Tensor]:
    keys = ENCODER_KEYS if has_ngrams else ENCODER_KEYS[:2]
    return {k: batch[k] for k in keys}


def real_slots(batch: dict[str, torch.Tensor]) -> int:
    """Slots holding an n-gram, over the batch: the rows the n-gram tower's linears run on on a CPU (packed)."""
    return int(batch["ngram_attention_mask"].sum())


def computed_slots(batch: dict[str, torch.Tensor]) -> int:
    """Slots the model runs its n-gram tower on: up to the last one used by any row (the rest are trimmed)."""
    used = (batch["ngram_lengths"] > 0).any(0).nonzero()
    return int(used.max()) + 1 if len(used) else 0
