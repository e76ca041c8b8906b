"""One shard's examples from one part's documents: NSP pairs, masking units, the 15% choice and its
corruption, then n-gram slots matched on the corrupted ids (the pipeline of `zencli.data.pretraining`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from zencli.data.documents import Pair, make_pairs
from zencli.data.features import NgramFeaturizer
from zencli.data.masking import choose_masked_chars, choose_masked_units, corrupt, merge_with_lexicon
from zencli.data.pretraining.settings import MATCH_MAX_N, MERGE_MAX_N, PretrainDataSettings, random_token_ids
from zencli.data.segmenters import LexiconSegmenter, ModelLoader, lexicon_ngram_set, make_segmenter
from zencli.data.shards import token_dtype
from zencli.lexicon.matcher import NgramMatcher
from zencli.lexicon.ngram_file import Lexicon
from zencli.text.vocab import Vocab

FEATURIZE_CHUNK = 1024  # examples per batched n-gram matching call


def slot_featurizer(vocab: Vocab, lexicon: Lexicon | NgramMatcher, settings: PretrainDataSettings,
                    seed: int = 0) -> NgramFeaturizer:
    """The featurizer that fills a pretraining example's n-gram slots: the settings' rules and cap."""
    s = settings
    return NgramFeaturizer(vocab, lexicon, rules=s.ngram_rules,  # type: ignore[arg-type]
                           max_ngrams=s.max_seq_len if s.max_ngrams is None else s.max_ngrams,
                           max_seq_len=s.max_seq_len, max_len=MATCH_MAX_N, released_version=s.released_version,
                           seed=seed)


class ExampleMaker:
    """Turns the documents of one part into the columns of one shard (see `zencli.data.pretraining`)."""

    def __init__(self, vocab: Vocab, lexicon: Lexicon, settings: PretrainDataSettings,
                 load_model: ModelLoader | None = None):
        self.vocab = vocab
        self.settings = settings
        self.tokens = vocab.tokens
        self.cls_id, self.sep_id, self.mask_id, self.pad_id = vocab.cls_id, vocab.sep_id, vocab.mask_id, vocab.pad_id
        self.random_ids = random_token_ids(vocab)
        self.dtype = token_dtype(len(vocab))
        self.segmenter = None
        if settings.masking == "ngram":
            self.segmenter = make_segmenter(settings.segmenter, lexicon, max_n=MERGE_MAX_N, load_model=load_model)
            ngram_set = (self.segmenter.ngrams if isinstance(self.segmenter, LexiconSegmenter)
                         else lexicon_ngram_set(lexicon, MERGE_MAX_N))
            self.in_lexicon = ngram_set.__contains__
            # Forward maximum matching already takes the longest lexicon n-gram (of <= MERGE_MAX_N tokens)
            # at each piece start, so merging its pieces with the same lexicon can never change them.
            self.merge = not (isinstance(self.segmenter, LexiconSegmenter) and self.segmenter.max_n >= MERGE_MAX_N)
        self.matcher = NgramMatcher.from_lexicon(lexicon, vocab.get, 2, MATCH_MAX_N)

    def units(self, toks: list[str], lo: int, hi: int) -> list[tuple[int, int]]:
        """Whole n-gram masking units of tokens lo..hi-1 (one segment), as positions in the example."""
        part = toks[lo:hi]
        pieces = self.segmenter.segment(part)  # type: ignore[union-attr]
        if self.merge:
            pieces = merge_with_lexicon(part, pieces, self.in_lexicon, MERGE_MAX_N)
        return [(lo + s, lo + e) for s, e in pieces]

    def make(self, docs: list[list[list[int]]], seeds: Sequence[int]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The shard columns and statistics of one part's documents; `seeds` (seed, round, part) alone
        decide the random choices."""
        s = self.settings
        rng = np.random.default_rng(list(seeds))
        pairs = make_pairs(docs, s.max_seq_len, rng, s.short_seq_prob)
        featurizer = slot_featurizer(self.vocab, self.matcher, s,
                                     seed=int(np.random.SeedSequence([*seeds, 1]).generate_state(1)[0]))
        n_ex = len(pairs)
        columns = _ShardColumns(n_ex, s.max_seq_len, self.pad_id, self.dtype)
        stats = {"examples": n_ex, "tokens": 0, "maskable": 0, "masked": 0, "masked_as_mask": 0,
                 "masked_as_random": 0, "masked_units": 0, "masked_multi_token_units": 0,
                 "nsp_random": 0, "ngram_slots": 0, "max_slots": 0}
        # Masking draws from `rng` example by example, in order; n-gram matching draws nothing from it,
        # so it can run batched, a chunk of corrupted examples at a time.
        for c0 in range(0, n_ex, FEATURIZE_CHUNK):
            seg_as, seg_bs, blocked = [], [], []
            for i in range(c0, min(c0 + FEATURIZE_CHUNK, n_ex)):
                pair = pairs[i]
                ids, inputs, units, masked = self._masked_example(pair, rng)
                la, n = len(pair.a), len(ids)
                seg_as.append(inputs[1 : la + 1])
                seg_bs.append(inputs[la + 2 : n - 1])
                blocked.append(masked)
                pos = np.flatnonzero(masked)
                columns.add_example(i, pair, ids, pos)
                _count_masking(stats, pair, ids, inputs, units, masked, pos, self.mask_id)
            records = featurizer.featurize_batch(seg_as, seg_bs, blocked=blocked)
            for i, rec in zip(range(c0, c0 + len(records)), records):
                columns.add_slots(i, rec)
                stats["ngram_slots"] += len(rec["ngram_ids"])
                stats["max_slots"] = max(stats["max_slots"], len(rec["ngram_ids"]))
        return columns.arrays(), stats

    def _masked_example(self, pair: Pair, rng: np.random.Generator
                        ) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]] | None, np.ndarray]:
        """`[CLS] A [SEP] B [SEP]` of a pair masked: (ids, corrupted ids, masking units (None: single
        positions), masked [n] bool)."""
        la, lb = len(pair.a), len(pair.b)
        n = la + lb + 3
        ids = np.empty(n, np.int64)
        ids[0], ids[la + 1], ids[n - 1] = self.cls_id, self.sep_id, self.sep_id
        ids[1 : la + 1] = pair.a
        ids[la + 2 : n - 1] = pair.b
        maskable = np.ones(n, bool)
        maskable[[0, la + 1, n - 1]] = False
        if self.segmenter is not None:
            toks = list(map(self.tokens.__getitem__, ids.tolist()))
            units = self.units(toks, 1, la + 1) + self.units(toks, la + 2, n - 1)
            masked = choose_masked_units(units, maskable, rng, self.settings.mask_rate)
        else:  # character masking: every maskable position is a unit (the same choice, without the unit list)
            units = None
            masked = choose_masked_chars(maskable, rng, self.settings.mask_rate)
        inputs, _ = corrupt(ids, masked, rng, self.mask_id, self.random_ids)
        return ids, inputs, units, masked


class _ShardColumns:
    """The columns of one shard (`zencli.data.shards`), filled example by example; the ragged ones are
    kept as lists and stored flat with offsets."""

    def __init__(self, n_ex: int, max_seq_len: int, pad_id: int, dtype: np.dtype):
        self.dtype = dtype
        self.input_ids = np.full((n_ex, max_seq_len), pad_id, dtype)
        self.lengths = np.empty(n_ex, np.uint16)
        self.seg_a = np.empty(n_ex, np.uint16)
        self.nsp = np.empty(n_ex, np.uint8)
        self.mlm_pos: list[np.ndarray] = []
        self.mlm_ids: list[np.ndarray] = []
        self.slot_ids: list[np.ndarray] = []
        self.slot_starts: list[np.ndarray] = []
        self.slot_lengths: list[np.ndarray] = []

    def add_example(self, i: int, pair: Pair, ids: np.ndarray, pos: np.ndarray) -> None:
        """Example i's lengths, NSP label and MLM targets (`pos`: its masked positions)."""
        self.lengths[i], self.seg_a[i], self.nsp[i] = len(ids), len(pair.a) + 2, pair.is_random_next
        self.mlm_pos.append(pos.astype(np.uint16))
        self.mlm_ids.append(ids[pos].astype(self.dtype))

    def add_slots(self, i: int, rec: dict[str, np.ndarray]) -> None:
        """Example i's (corrupted) input ids and n-gram slots, from its featurized record."""
        self.input_ids[i, : len(rec["input_ids"])] = rec["input_ids"]
        self.slot_ids.append(rec["ngram_ids"])
        self.slot_starts.append(rec["ngram_starts"].astype(np.uint16))
        self.slot_lengths.append(rec["ngram_lengths"].astype(np.uint8))

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "input_ids": self.input_ids,
            "lengths": self.lengths,
            "seg_a": self.seg_a,
            "nsp_labels": self.nsp,
            "mlm_offsets": _offsets(self.mlm_pos),
            "mlm_positions": _concat(self.mlm_pos, np.uint16),
            "mlm_ids": _concat(self.mlm_ids, self.dtype),
            "ngram_offsets": _offsets(self.slot_ids),
            "ngram_ids": _concat(self.slot_ids, np.int32),
            "ngram_starts": _concat(self.slot_starts, np.uint16),
            "ngram_lengths": _concat(self.slot_lengths, np.uint8),
        }


def _count_masking(stats: dict[str, Any], pair: Pair, ids: np.ndarray, inputs: np.ndarray,
                   units: list[tuple[int, int]] | None, masked: np.ndarray, pos: np.ndarray, mask_id: int) -> None:
    """Add one example's token, masking and NSP counts to the shard's statistics (`units` None: character
    masking, one unit per masked position)."""
    n = len(ids)
    n_units, n_multi = _masked_unit_counts(units, masked) if units is not None else (len(pos), 0)
    stats["tokens"] += n
    stats["maskable"] += n - 3
    stats["masked"] += len(pos)
    stats["masked_as_mask"] += int((inputs[pos] == mask_id).sum())
    stats["masked_as_random"] += int(((inputs[pos] != mask_id) & (inputs[pos] != ids[pos])).sum())
    stats["masked_units"] += n_units
    stats["masked_multi_token_units"] += n_multi
    stats["nsp_random"] += int(pair.is_random_next)


def _masked_unit_counts(units: list[tuple[int, int]], masked: np.ndarray) -> tuple[int, int]:
    """(masked units, masked units of more than one token)."""
    n = multi = 0
    for s, e in units:
        if masked[s]:
            n += 1
            multi += e - s > 1
    return n, multi


def _offsets(parts: list[np.ndarray]) -> np.ndarray:
    out = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([len(p) for p in parts], out=out[1:])
    return out


def _concat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)
