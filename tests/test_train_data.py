"""IndexedBatches and LengthGroupedBatches: epoch-seeded order, O(1) resume by position, per-rank shards
of one global batch."""

import itertools

import numpy as np
import pytest
import torch

from zencli.errors import ZenError
from zencli.train.data import IndexedBatches, LengthGroupedBatches, ResumableBatches, to_device


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


# --- batches of similar length ---------------------------------------------------------------------------

def test_length_grouped_batches_cover_the_data_resume_and_split_across_ranks():
    lengths = np.random.default_rng(0).integers(5, 129, 1003)

    def stream(world: int, rank: int, n: int, start: dict | None = None) -> tuple[list[list[int]], dict]:
        b = LengthGroupedBatches(lengths, lambda ids: [int(i) for i in ids], seed=3, group=50)
        b.configure(micro_batch_size=8 // world, rank=rank, world_size=world)
        if start is not None:
            b.load_state(start)
        it = iter(b)
        return [next(it) for _ in range(n)], b.state()

    epoch, _ = stream(1, 0, 125)  # 1003 // 8 = 125 steps per epoch
    seen = [i for batch in epoch for i in batch]
    assert len(seen) == len(set(seen)) == 1000
    def padding(batches) -> float:  # padded tokens / real tokens
        return sum(max(lengths[b]) * len(b) for b in batches) / sum(lengths[b].sum() for b in batches)

    assert padding(epoch) < 1.05
    assert padding(np.random.default_rng(1).permutation(1000).reshape(-1, 8)) > 1.4  # random batches
    first, state = stream(1, 0, 40)
    rest, _ = stream(1, 0, 100, start=state)
    assert first + rest == stream(1, 0, 140)[0]  # seeking continues exactly, across the epoch boundary
    halves = [stream(2, r, 20)[0] for r in (0, 1)]
    assert [a + b for a, b in zip(*halves)] == stream(1, 0, 20)[0]


def test_length_grouped_steps_are_those_of_the_int64_version():
    """The steps held as int32 and written into one array (for corpora of tens of millions of examples) are
    the steps the earlier int64 version made: a concatenation of int64 copies, group by group."""

    def int64_steps(lengths: np.ndarray, seed: int, epoch: int, stride: int, group: int) -> np.ndarray:
        lengths = np.asarray(lengths, np.int64)
        order = np.random.default_rng([seed, epoch]).permutation(len(lengths))
        order = order[: len(order) // stride * stride]
        shuffle = np.random.default_rng([seed, epoch, 1])
        out = []
        for lo in range(0, len(order), group * stride):
            chunk = order[lo:lo + group * stride]
            chunk = chunk[np.argsort(lengths[chunk], kind="stable")].reshape(-1, stride)
            out.append(chunk[shuffle.permutation(len(chunk))])
        return np.concatenate(out)

    for n, stride, group, seed in [(1003, 8, 50, 3), (5000, 16, 7, 1), (64, 4, 50, 0), (777, 3, 2, 9)]:
        lengths = np.random.default_rng(n).integers(3, 129, n)
        b = LengthGroupedBatches(lengths, lambda ids: ids, seed=seed, group=group)
        b.configure(micro_batch_size=stride, rank=0, world_size=1)
        for epoch in (0, 1):
            steps = b.steps(epoch)
            assert steps.dtype == np.int32
            assert np.array_equal(steps, int64_steps(lengths, seed, epoch, stride, group))


def test_length_grouped_batches_repeat_a_data_set_smaller_than_one_step():
    from zencli.train.data import LengthGroupedBatches

    b = LengthGroupedBatches(np.array([3, 9, 5]), lambda ids: sorted(int(i) for i in ids), seed=1)
    b.configure(micro_batch_size=8, rank=0, world_size=1)
    batches = _batches(b, 3)
    assert all(len(x) == 8 and set(x) == {0, 1, 2} for x in batches)  # every example, none dropped
    assert (b.state()["epoch"], b.state()["step"]) == (2, 1)  # one step per epoch
