"""IndexedBatches: epoch-seeded order, O(1) resume by position, per-rank shards of one global batch."""

import itertools

import pytest
import torch

from zencli.errors import ZenError
from zencli.train.data import IndexedBatches, ResumableBatches, to_device


def _batches(source, n):
    return [b for b in itertools.islice(iter(source), n)]


def _make(n=10, seed=5, micro=3, rank=0, world=1):
    src = IndexedBatches(list(range(n)), list, seed=seed)
    src.configure(micro_batch_size=micro, rank=rank, world_size=world)
    return src


def test_each_epoch_is_a_permutation_and_batches_span_epochs_without_dropping():
    src = _make(n=10, micro=3)
    assert isinstance(src, ResumableBatches)
    flat = [i for b in _batches(src, 10) for i in b]  # 30 items = 3 epochs
    for e in range(3):
        assert sorted(flat[10 * e:10 * e + 10]) == list(range(10))
    assert flat[:10] != flat[10:20]  # reshuffled per epoch
    assert src.state() == {"epoch": 3, "index": 0, "size": 10, "seed": 5}
    assert flat == [i for b in _batches(_make(n=10, micro=3), 10) for i in b]  # deterministic


def test_resume_from_state_continues_with_the_same_batches():
    full = _batches(_make(), 12)
    src = _make()
    head = _batches(src, 5)
    state = src.state()
    assert state["epoch"] == 1 and state["index"] == 5
    resumed = _make()
    resumed.load_state(state)
    assert head + _batches(resumed, 7) == full


def test_ranks_split_the_global_batch_of_a_single_process_run():
    single = _batches(_make(n=20, micro=4, world=1), 6)
    r0 = _batches(_make(n=20, micro=2, rank=0, world=2), 6)
    r1 = _batches(_make(n=20, micro=2, rank=1, world=2), 6)
    assert [a + b for a, b in zip(r0, r1)] == single


def test_state_from_another_dataset_is_refused():
    state = _make(n=10).state()
    with pytest.raises(ZenError, match="training data changed"):
        _make(n=11).load_state(state)
    with pytest.raises(ZenError, match="empty"):
        IndexedBatches([], list)


def test_unshuffled_order_and_to_device_nesting():
    src = IndexedBatches(list(range(5)), list, shuffle=False)
    src.configure(micro_batch_size=2, rank=0, world_size=1)
    assert _batches(src, 3) == [[0, 1], [2, 3], [4, 0]]
    batch = {"a": torch.ones(2), "b": [torch.zeros(1), (torch.ones(1), 3)], "c": "text"}
    moved = to_device(batch, torch.device("cpu"))
    assert moved["c"] == "text" and moved["b"][1][1] == 3 and torch.equal(moved["a"], torch.ones(2))
