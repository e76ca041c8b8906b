"""Whole n-gram masking: merging, budget, 80/10/10, and the no-leak invariant for n-gram slots."""

import numpy as np
import pytest

from zencli.data.masking import (
    char_units,
    choose_masked_chars_batch,
    choose_masked_units,
    corrupt,
    drop_covering_masked,
    merge_with_lexicon,
)


def test_merge_prefers_the_longest_lexicon_run():
    tokens = list("北京大学生在")
    pieces = [(0, 2), (2, 4), (4, 5), (5, 6)]  # 北京 | 大学 | 生 | 在
    lex = {tuple("北京大学"), tuple("北京大学生"), tuple("学生")}
    assert merge_with_lexicon(tokens, pieces, lex.__contains__) == [(0, 5), (5, 6)]
    # max_n caps the merged length
    assert merge_with_lexicon(tokens, pieces, lex.__contains__, max_n=4) == [(0, 4), (4, 5), (5, 6)]
    # a merge that is not in the lexicon keeps the pieces apart
    assert merge_with_lexicon(tokens, pieces, set().__contains__) == list(pieces)


def test_budget_is_respected_and_units_stay_whole():
    rng = np.random.default_rng(0)
    L = 200
    maskable = np.ones(L, dtype=bool)
    maskable[[0, 99, 199]] = False  # [CLS], [SEP]s
    units, i = [], 1
    while i < L - 1:
        n = int(rng.integers(1, 5))
        units.append((i, min(i + n, L - 1)))
        i += n
    for seed in range(20):
        m = choose_masked_units(units, maskable, np.random.default_rng(seed))
        budget = round(maskable.sum() * 0.15)
        assert 0 < m.sum() <= budget
        assert not m[~maskable].any()
        for s, e in units:  # whole units: all or nothing
            assert m[s:e].all() or not m[s:e].any()


def test_at_least_one_unit_when_all_units_exceed_budget():
    maskable = np.array([False, True, True, True, False])
    m = choose_masked_units([(1, 4)], maskable, np.random.default_rng(0))
    assert m.tolist() == [False, True, True, True, False]


def test_char_units_and_corruption_ratios():
    rng = np.random.default_rng(1)
    L = 20000
    ids = rng.integers(10, 100, size=L)
    masked = np.zeros(L, dtype=bool)
    masked[::2] = True
    inputs, labels = corrupt(ids, masked, rng, mask_id=4, random_ids=np.arange(10, 100))
    assert (labels[masked] == ids[masked]).all() and (labels[~masked] == -100).all()
    assert (inputs[~masked] == ids[~masked]).all()
    frac_mask = (inputs[masked] == 4).mean()
    frac_same = (inputs[masked] == ids[masked]).mean()
    assert frac_mask == pytest.approx(0.8, abs=0.02)
    assert frac_same == pytest.approx(0.1 + 0.1 / 90, abs=0.02)
    assert char_units(np.array([False, True, True])) == [(1, 2), (2, 3)]


def test_no_ngram_slot_covers_a_masked_position():
    masked = np.array([0, 0, 1, 1, 0, 0, 0, 1, 0], dtype=bool)
    starts = np.array([0, 1, 3, 4, 5, 6, 8])
    lengths = np.array([2, 2, 2, 3, 2, 2, 1])
    keep = drop_covering_masked(starts, lengths, masked)
    assert keep.tolist() == [True, False, False, True, True, False, True]


def test_batch_char_masking_masks_each_row_s_budget_uniformly():
    """Every row gets max(1, round(15% of its maskable positions)) of them (none without any), nothing else;
    over many draws each maskable position is as likely as the others; the same seed, the same masks."""
    shape_rng = np.random.default_rng(7)
    maskable = shape_rng.random((300, 50)) < 0.8
    maskable[0] = False
    maskable[1] = False
    maskable[1, 3] = True  # one maskable position: masked, budget max(1, 0)
    masked = choose_masked_chars_batch(maskable, np.random.default_rng(0), 0.15)
    assert not (masked & ~maskable).any()
    want = [0 if m == 0 else max(1, int(round(0.15 * m))) for m in maskable.sum(1).tolist()]
    assert masked.sum(1).tolist() == want
    assert np.array_equal(masked, choose_masked_chars_batch(maskable, np.random.default_rng(0), 0.15))
    hits = np.zeros(50)
    row = np.ones((1, 50), bool)
    rng = np.random.default_rng(1)
    for _ in range(2000):
        hits += choose_masked_chars_batch(row, rng, 0.2)[0]
    assert hits.sum() == 2000 * 10
    assert np.abs(hits / 2000 - 0.2).max() < 0.05  # each position near 10 / 50 (sd 0.009)


def test_corruption_of_a_batch_is_the_corruption_of_its_rows_laid_end_to_end():
    rng = np.random.default_rng(3)
    ids = rng.integers(10, 100, size=(40, 30))
    masked = rng.random((40, 30)) < 0.3
    batch_in, batch_labels = corrupt(ids, masked, np.random.default_rng(5), mask_id=4, random_ids=np.arange(10, 100))
    flat_in, flat_labels = corrupt(ids.reshape(-1), masked.reshape(-1), np.random.default_rng(5), mask_id=4,
                                   random_ids=np.arange(10, 100))
    assert np.array_equal(batch_in.reshape(-1), flat_in) and np.array_equal(batch_labels.reshape(-1), flat_labels)
    assert (batch_in[masked] == 4).mean() == pytest.approx(0.8, abs=0.05)
    view = ids[:, ::2]  # not contiguous: corrupted all the same
    got, _ = corrupt(view, masked[:, ::2], np.random.default_rng(5), mask_id=4, random_ids=np.arange(10, 100))
    assert (got[masked[:, ::2]] != view[masked[:, ::2]]).any() and np.array_equal(got[~masked[:, ::2]],
                                                                                  view[~masked[:, ::2]])
