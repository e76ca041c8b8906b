"""One shard's examples from one part's documents: NSP pairs, masking units, the 15% choice and its
corruption, then n-gram slots matched on the corrupted ids (the pipeline of `zencli.data.pretraining`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from zencli.data.documents import PairSpans, Segments, pair_spans
from zencli.data.features import NgramFeaturizer
from zencli.data.masking import choose_masked_chars_batch, choose_masked_units, corrupt, merge_with_lexicon
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

    def make(self, seg: Segments, seeds: Sequence[int]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The shard columns and statistics of one part's documents; `seeds` (seed, round, part) alone
        decide the random choices. The shard's examples are laid out in one [N, max_seq_len] grid and
        masked, corrupted and matched all at once: `rng` draws the pairs, then every example's masked
        positions (character masking: one draw for the shard; whole n-gram masking: example by example, as
        the segmenter's units are per example), then the corruption of all masked positions."""
        s = self.settings
        rng = np.random.default_rng(list(seeds))
        pairs = pair_spans(seg, s.max_seq_len, rng, s.short_seq_prob)
        grid = _PairGrid(seg.ids, pairs, self.cls_id, self.sep_id, self.pad_id, s.max_seq_len)
        if self.segmenter is None:  # every maskable position is its own unit
            masked = choose_masked_chars_batch(grid.maskable, rng, s.mask_rate)
            n_units, n_multi = int(masked.sum()), 0
        else:
            masked, n_units, n_multi = self._masked_units(grid, rng)
        inputs, _ = corrupt(grid.ids, masked, rng, self.mask_id, self.random_ids)  # [N, L]
        featurizer = slot_featurizer(self.vocab, self.matcher, s,
                                     seed=int(np.random.SeedSequence([*seeds, 1]).generate_state(1)[0]))
        # n-grams matched on the corrupted ids, none covering a masked position; a chunk of examples at a
        # time bounds the matcher's memory
        chunks = [slice(c0, c0 + FEATURIZE_CHUNK) for c0 in range(0, grid.n, FEATURIZE_CHUNK)]
        slots = [featurizer.slots_of_padded(inputs[c], grid.lengths[c], grid.len_a[c], blocked=masked[c])
                 for c in chunks]
        slot_seq = np.concatenate([m.seq + c.start for m, c in zip(slots, chunks)])  # [K] example of each slot
        rows, cols = np.nonzero(masked)  # row-major: each example's masked positions in order
        per_example = np.bincount(slot_seq, minlength=grid.n)
        columns = {
            "input_ids": inputs.astype(self.dtype),
            "lengths": grid.lengths.astype(np.uint16),
            "seg_a": (grid.len_a + 2).astype(np.uint16),
            "nsp_labels": grid.nsp.astype(np.uint8),
            "mlm_offsets": _offsets_of(masked.sum(1)),
            "mlm_positions": cols.astype(np.uint16),
            "mlm_ids": grid.ids[rows, cols].astype(self.dtype),
            "ngram_offsets": _offsets_of(per_example),
            "ngram_ids": np.concatenate([m.ngram_id for m in slots]).astype(np.int32),
            "ngram_starts": np.concatenate([m.start for m in slots]).astype(np.uint16),
            "ngram_lengths": np.concatenate([m.length for m in slots]).astype(np.uint8),
        }
        at_masked = inputs[rows, cols]
        stats = {"examples": grid.n, "tokens": int(grid.lengths.sum()), "maskable": int(grid.maskable.sum()),
                 "masked": len(rows), "masked_as_mask": int((at_masked == self.mask_id).sum()),
                 "masked_as_random": int(((at_masked != self.mask_id) & (at_masked != columns["mlm_ids"])).sum()),
                 "masked_units": n_units, "masked_multi_token_units": n_multi, "nsp_random": int(grid.nsp.sum()),
                 "ngram_slots": len(slot_seq), "max_slots": int(per_example.max(initial=0))}
        return columns, stats

    def _masked_units(self, grid: _PairGrid, rng: np.random.Generator) -> tuple[np.ndarray, int, int]:
        """Whole n-gram masking of every example, in order: (masked [N, L], masked units, masked units of
        more than one token)."""
        masked = np.zeros_like(grid.maskable)
        n_units = n_multi = 0
        for i, (n, la) in enumerate(zip(grid.lengths.tolist(), grid.len_a.tolist())):
            toks = list(map(self.tokens.__getitem__, grid.ids[i, :n].tolist()))
            units = self.units(toks, 1, la + 1) + self.units(toks, la + 2, n - 1)
            row = choose_masked_units(units, grid.maskable[i, :n], rng, self.settings.mask_rate)
            masked[i, :n] = row
            for s, e in units:
                if row[s]:
                    n_units += 1
                    n_multi += e - s > 1
        return masked, n_units, n_multi


class _PairGrid:
    """A shard's NSP pairs as `[CLS] A [SEP] B [SEP]` rows of an [N, L] grid (padding after each)."""

    def __init__(self, ids: np.ndarray, pairs: PairSpans, cls_id: int, sep_id: int, pad_id: int, max_seq_len: int):
        self.n = len(pairs.a0)
        self.len_a = pairs.a1 - pairs.a0  # [N]
        self.lengths = self.len_a + (pairs.b1 - pairs.b0) + 3  # [N]
        self.nsp = pairs.is_random_next  # [N]
        col = np.arange(max_seq_len)[None, :]  # [1, L]
        la, n = self.len_a[:, None], self.lengths[:, None]  # [N, 1]
        in_a, in_b = (col >= 1) & (col <= la), (col >= la + 2) & (col < n - 1)  # [N, L]
        src = np.where(col <= la, pairs.a0[:, None] + col - 1, pairs.b0[:, None] + col - la - 2)  # [N, L] into ids
        src[~(in_a | in_b)] = 0
        self.ids = np.where(in_a | in_b, np.asarray(ids, np.int64)[src], pad_id)  # [N, L]
        self.ids[:, 0] = cls_id
        self.ids[(col == la + 1) | (col == n - 1)] = sep_id
        self.maskable = in_a | in_b  # [N, L]: the text, not [CLS] / [SEP] / padding


def _offsets_of(counts: np.ndarray) -> np.ndarray:
    """[N+1] int64 offsets of ragged rows with `counts` [N] items."""
    out = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=out[1:])
    return out
