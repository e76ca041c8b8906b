"""Batches built ahead in worker processes (`PrefetchedBatches`, `train.data_workers`): the same batches
and positions as building them in-process, exact resume, one-line errors, workers that end with the
iterator; and the sources' O(1) `skip`."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections import namedtuple

import numpy as np
import pytest
import torch

from tests.conftest import ROOT
from tests.helpers_train import build, collate, lm_loss, make_examples
from tests.test_train_loop import losses, run
from zencli.errors import ZenError
from zencli.train import IndexedBatches, LengthGroupedBatches, TrainSettings, train
from zencli.train.checkpoint import load_checkpoint
from zencli.train.data import PrefetchedBatches, ResumableBatches, _pack, _unpack, data_workers, prefetch


def indexed(n: int = 23, micro: int = 4, rank: int = 0, world: int = 1) -> IndexedBatches:
    src = IndexedBatches(list(range(n)), lambda items: torch.tensor(items), seed=5)
    src.configure(micro_batch_size=micro, rank=rank, world_size=world)
    return src


def grouped(n: int = 203, micro: int = 8, rank: int = 0, world: int = 1, seed: int = 3) -> LengthGroupedBatches:
    lengths = np.random.default_rng(0).integers(5, 100, n)
    src = LengthGroupedBatches(lengths, lambda ids: torch.from_numpy(np.asarray(ids, np.int64)), seed=seed, group=5)
    src.configure(micro_batch_size=micro, rank=rank, world_size=world)
    return src


def take(source, n: int) -> tuple[list, list[dict]]:
    """n batches and the state after each, consumed one at a time as the training loop does."""
    batches, states = [], []
    it = iter(source)
    for _ in range(n):
        batches.append(next(it))
        states.append(source.state())
    getattr(it, "close", lambda: None)()
    return batches, states


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def children() -> list:
    return multiprocessing.active_children()


# --- skip: the position n batches on, without building them ----------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: indexed(),  # 23 items, 4 a batch: epochs end mid-batch
    lambda: indexed(n=8, micro=4),  # epochs end exactly at a batch
    lambda: indexed(n=23, micro=2, rank=1, world=3),
    lambda: grouped(),  # 25 steps an epoch
    lambda: grouped(n=3, micro=8),  # smaller than one step: repeated
    lambda: grouped(micro=4, rank=1, world=2),
], ids=["indexed", "indexed-exact-epochs", "indexed-rank", "grouped", "grouped-tiny", "grouped-rank"])
def test_skip_lands_where_iterating_does(make):
    for start in (0, 1, 3, 24, 25, 26):
        for n in (0, 1, 2, 5, 24, 25, 26, 77):
            walked, skipped = make(), make()
            take(walked, start)
            take(skipped, start)
            take(walked, n)
            skipped.skip(n)
            assert skipped.state() == walked.state(), (start, n)
            assert same(take(skipped, 3)[0], take(walked, 3)[0]), (start, n)


# --- the prefetching source ---------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # 3 workers on a 2-core machine: on purpose
@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("make", [indexed, grouped, lambda: grouped(micro=4, rank=1, world=2)],
                         ids=["indexed", "grouped", "grouped-rank"])
def test_workers_yield_the_in_process_batches_and_states(make, workers):
    want, want_states = take(make(), 60)  # more than two epochs
    source = PrefetchedBatches(make(), workers)
    assert isinstance(source, ResumableBatches)
    got, got_states = take(source, 60)
    assert same(got, want)
    assert got_states == want_states  # after each consumed batch, never after what the workers read ahead
    assert not children()  # closing the iterator ended the workers


@pytest.mark.parametrize("workers", [1, 2])
def test_state_after_k_consumed_batches_resumes_identically(workers):
    want, _ = take(grouped(), 50)
    source = PrefetchedBatches(grouped(), workers)
    head, _ = take(source, 17)
    state = source.state()
    assert state == grouped().state() | {"epoch": 0, "step": 17}
    # in-process and prefetched continuations from that state, and the same object iterated again
    plain = grouped()
    plain.load_state(state)
    again = PrefetchedBatches(grouped(), workers)
    again.load_state(state)
    assert same(head + take(plain, 33)[0], want)
    assert same(head + take(again, 33)[0], want)
    assert same(head + take(source, 33)[0], want)  # a new iterator restarts the workers where it stopped
    assert source.state() == plain.state() == again.state()


Pair = namedtuple("Pair", "ids labels")


def nested(ids: list[int]) -> dict:
    """A batch of every shape the loop passes on: several dtypes, a 0-d and an empty tensor, a strided view,
    tuples, a namedtuple, plain values."""
    x = torch.tensor(ids)
    return {"ids": x, "scores": x.float() / 3, "flags": x % 2 == 0, "count": torch.tensor(len(ids)),
            "slots": torch.zeros(len(ids), 0, dtype=torch.long), "pair": Pair(x[::2], (x * 2).t()),
            "spans": (x.view(-1, 1).expand(-1, 2), [x + 1]), "name": "batch", "n": len(ids)}


def equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return type(b) is dict and a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return a == b


def test_batches_of_any_structure_travel_packed_and_arrive_unchanged():
    batch = nested([3, 1, 4, 1, 5, 9])
    buffers, skeleton = _pack(batch)
    assert sorted(map(str, buffers)) == ["torch.bool", "torch.float32", "torch.int64"]  # one buffer per dtype
    assert equal(_unpack(buffers, skeleton), batch)

    def make():
        src = IndexedBatches(list(range(23)), nested, seed=5)
        src.configure(micro_batch_size=4, rank=0, world_size=1)
        return src

    want, got = take(make(), 9)[0], take(PrefetchedBatches(make(), 2), 9)[0]
    assert all(equal(g, w) for g, w in zip(got, want))


class Delegating:
    """A ResumableBatches with nothing more (no `skip`): the batches of `indexed()`."""

    def __init__(self):
        self.inner = indexed()

    def configure(self, **kw):
        self.inner.configure(**kw)

    def state(self):
        return self.inner.state()

    def load_state(self, state):
        self.inner.load_state(state)

    def __iter__(self):
        return iter(self.inner)


def test_a_source_without_skip_runs_one_worker():
    source = PrefetchedBatches(Delegating(), 3)
    assert source.workers == 1
    assert same(take(source, 12)[0], take(indexed(), 12)[0])


class Failing(Delegating):
    """Batches of `indexed()` until batch `at` (0-based), whose building raises `error`."""

    def __init__(self, error: Exception, at: int = 5):
        super().__init__()
        self.error, self.at = error, at

    def skip(self, n):
        self.inner.skip(n)

    def __iter__(self):
        for batch in self.inner:
            position = self.inner.state()["epoch"] * 23 + self.inner.state()["index"]
            if position > self.at * 4:
                raise self.error
            yield batch


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_a_source_error_in_a_worker_is_the_in_process_one_line_error(workers):
    source = Failing(ZenError("data/train.txt:7: expected a sentence, got an empty line"))
    if workers:
        source = PrefetchedBatches(source, workers)
    it = iter(source)
    got = [next(it) for _ in range(5)]  # the batches before the bad one all arrive
    with pytest.raises(ZenError) as e:
        next(it)
    assert str(e.value) == "data/train.txt:7: expected a sentence, got an empty line"
    assert same(got, take(indexed(), 5)[0])
    del e, it
    assert not children()


def test_a_bug_in_a_worker_keeps_its_type_and_says_where_it_happened():
    source = PrefetchedBatches(Failing(KeyError("input_ids"), at=0), 2)
    with pytest.raises(KeyError) as e:
        next(iter(source))
    if sys.version_info >= (3, 11):
        assert "raised in a data worker" in "\n".join(e.value.__notes__) and "__iter__" in e.value.__notes__[0]


def test_an_exception_that_cannot_be_pickled_still_arrives():
    class Odd(Exception):
        def __init__(self, a, b):  # pickling calls Odd(msg): fails
            super().__init__(f"{a}/{b}")

    with pytest.raises(RuntimeError, match="Odd: x/y"):
        next(iter(PrefetchedBatches(Failing(Odd("x", "y"), at=0), 1)))


def test_a_killed_worker_is_a_one_line_error():
    class Killing(Failing):
        def __iter__(self):
            for batch in self.inner:
                if torch.utils.data.get_worker_info() is not None and self.inner.state()["index"] > 8:
                    time.sleep(0.3)  # until the training process waits for this batch
                    os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's out-of-memory killer would
                yield batch

    it = iter(PrefetchedBatches(Killing(ZenError("unused")), 1))
    with pytest.raises(ZenError, match=r"^train.data_workers: a data worker failed \(DataLoader worker .*"
                                       r"(exited unexpectedly|killed by signal).*\); "
                                       r"set train.data_workers: 0") as e:
        for _ in range(10):
            next(it)
    assert "\n" not in str(e.value)
    it.close()
    assert not children()


def test_workers_end_when_the_iterator_is_dropped_mid_stream():
    it = iter(PrefetchedBatches(grouped(), 2))
    next(it)
    assert len(children()) == 2
    del it  # garbage: the generator closes and stops its workers
    assert not children()


def test_data_workers_setting():
    assert data_workers("auto", torch.device("cpu")) == 0  # nothing may slow the CPU path
    assert 1 <= data_workers("auto", torch.device("cuda")) <= 2
    assert data_workers(3, torch.device("cpu")) == 3
    src = indexed()
    assert prefetch(src, "auto", torch.device("cpu")) is src and prefetch(src, 0, torch.device("cuda")) is src
    wrapped = prefetch(src, 2, torch.device("cpu"))
    assert isinstance(wrapped, PrefetchedBatches) and wrapped.workers == 2 and not wrapped.pin_memory
    assert prefetch(src, "auto", torch.device("cuda")).pin_memory
    with pytest.raises(ZenError, match="data_workers: expected an integer >= 0 or auto, got -1"):
        TrainSettings(data_workers=-1).validate()


# --- through the training loop --------------------------------------------------------------------------

def test_training_with_workers_gives_the_in_process_losses_and_resumes_across_worker_counts(tmp_path):
    m0, _ = run(tmp_path / "plain", max_steps=10, save_every=3, keep_last=5, data_workers=0)
    m2, _ = run(tmp_path / "workers", max_steps=10, save_every=3, keep_last=5, data_workers=2)
    assert losses(tmp_path / "workers") == losses(tmp_path / "plain")  # bit for bit
    assert all(torch.equal(p, q) for p, q in zip(m0.parameters(), m2.parameters()))
    for step in (3, 6, 9, 10):
        name = f"step-{step:08d}.pt"
        a, b = (load_checkpoint(tmp_path / d / "checkpoints" / name) for d in ("plain", "workers"))
        assert a["data"] == b["data"] and a["fingerprint"] == b["fingerprint"]  # data_workers is no trajectory key

    from tests.test_train_loop import crash_at
    with pytest.raises(RuntimeError, match="simulated crash"):  # during step 8, workers 8+ batches ahead
        run(tmp_path / "cut", loss_fn=crash_at(8), max_steps=10, save_every=3, keep_last=5, data_workers=2)
    assert not children()
    _, result = run(tmp_path / "cut", max_steps=10, save_every=3, keep_last=5, data_workers=1)
    assert result.start_step == 6 and losses(tmp_path / "cut") == losses(tmp_path / "plain")


def test_a_data_error_in_training_is_the_same_one_line_error_with_or_without_workers(tmp_path):
    examples = make_examples()

    def collate_or_fail(ids: list[int]) -> torch.Tensor:  # a bad example, met at the same step by every path
        if 17 in ids:
            raise ZenError("train.txt:18: a sentence longer than max_seq_len")
        return collate([examples[i] for i in ids])

    outcomes = []
    for workers in (0, 2):
        s = TrainSettings(lr=3e-3, max_steps=8, batch_size=8, dtype="fp32", device="cpu", seed=7, log_every=1,
                          output_dir=tmp_path / str(workers), tensorboard=False, data_workers=workers)
        with pytest.raises(ZenError) as e:
            train(build(), lm_loss, IndexedBatches(range(64), collate_or_fail, seed=3), s, show_progress=False)
        outcomes.append((str(e.value), losses(tmp_path / str(workers))))
        assert not children()
    assert outcomes[0][0] == "train.txt:18: a sentence longer than max_seq_len"
    assert outcomes[1] == outcomes[0] and 1 <= len(outcomes[0][1]) < 8  # the same steps ran before it


def test_ctrl_c_in_a_run_with_workers_leaves_no_process_behind(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    code = ("import sys, time, tests.helpers_train as f\n"
            "from zencli.train import IndexedBatches, TrainSettings, train\n"
            "def slow(model, batch):\n"
            "    time.sleep(0.05)\n"
            "    return f.lm_loss(model, batch)\n"
            "s = TrainSettings(max_steps=10_000, batch_size=8, device='cpu', output_dir=sys.argv[1], "
            "tensorboard=False, data_workers=2, log_every=1)\n"
            "from zencli.signals import Interrupted\n"
            "try:\n"
            "    train(f.build(), slow, IndexedBatches(f.make_examples(), f.collate, seed=3), s, show_progress=False)\n"
            "except Interrupted as e:  # the step in progress finished (its workers ignore Ctrl-C), saved\n"
            "    import multiprocessing\n"
            "    print(e.exit_code, len(multiprocessing.active_children()), flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    metrics = tmp_path / "metrics.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (metrics.exists() and metrics.read_text().count("\n") >= 3):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group, workers included
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.strip() == "130 0"
    assert "Traceback" not in err
