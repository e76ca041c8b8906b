"""Resumable batch sources: the data protocol of the training loop, and a shuffled-index implementation.

A data source gives the loop an endless stream of micro-batches for one process and can say where it
is, so that a resumed run continues with exactly the batch an uninterrupted run would have seen next —
by seeking, never by replaying the stream:

    class ResumableBatches(Protocol):
        def configure(self, *, micro_batch_size: int, rank: int, world_size: int) -> None
        def state(self) -> dict          # position after the last batch yielded; plain data only
        def load_state(self, state: dict) -> None
        def __iter__(self) -> Iterator[Batch]   # from the current position on, without end

`state()` is read by the loop after a step's micro-batches were consumed, so an implementation must
advance its position before yielding a batch (a generator does this naturally) and must not read
ahead past what it yielded. States hold only ints, floats, strings, lists, dicts and tensors (the
checkpoint is loaded with `weights_only=True`). A batch depends on the position only, never on a
global random generator (a resumed run restores the position, not a generator inside the source).

An optional `skip(n)` moves the position past the next n batches without building them (O(1) for the
two sources here); `PrefetchedBatches` needs it to run more than one worker.

More: docs/design.md, "Resumable batch sources".
"""

from __future__ import annotations

import math
import pickle
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from zencli.cpus import usable_cpus
from zencli.errors import ZenError


@runtime_checkable
class ResumableBatches(Protocol):
    def configure(self, *, micro_batch_size: int, rank: int, world_size: int) -> None: ...

    def state(self) -> dict: ...

    def load_state(self, state: dict) -> None: ...

    def __iter__(self) -> Iterator[Any]: ...


class IndexedBatches:
    """Epoch-seeded shuffled micro-batches over `dataset[i]`, collated by `collate(list_of_items)`."""

    def __init__(self, dataset: Sequence, collate: Callable[[list], Any], *, seed: int = 0,
                 shuffle: bool = True):
        if len(dataset) == 0:
            raise ZenError("training data: the dataset is empty; expected at least one example")
        self.dataset = dataset
        self.collate = collate
        self.seed = seed
        self.shuffle = shuffle
        self.micro_batch_size = 1
        self.rank = 0
        self.world_size = 1
        self.epoch = 0
        self.index = 0  # position in this epoch's permutation of the next item to take
        self._order_epoch = -1
        self._order = np.arange(0)

    def configure(self, *, micro_batch_size: int, rank: int, world_size: int) -> None:
        if micro_batch_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"bad batch layout: micro {micro_batch_size}, rank {rank} of {world_size}")
        self.micro_batch_size, self.rank, self.world_size = micro_batch_size, rank, world_size

    def state(self) -> dict:
        return {"epoch": self.epoch, "index": self.index, "size": len(self.dataset), "seed": self.seed}

    def load_state(self, state: dict) -> None:
        if state.get("size") != len(self.dataset) or state.get("seed") != self.seed:
            raise ZenError(f"resume: the training data changed since the checkpoint ({state.get('size')} "
                           f"examples, seed {state.get('seed')}; now {len(self.dataset)}, seed {self.seed})")
        self.epoch, self.index = int(state["epoch"]), int(state["index"])

    def steps_per_epoch(self, global_batch_size: int) -> float:
        return len(self.dataset) / global_batch_size

    def order(self, epoch: int) -> np.ndarray:
        """The visiting order of epoch `epoch` (cached: one permutation is computed per epoch)."""
        if epoch != self._order_epoch:
            n = len(self.dataset)
            self._order = (np.random.default_rng([self.seed, epoch]).permutation(n) if self.shuffle
                           else np.arange(n))
            self._order_epoch = epoch
        return self._order

    def _take(self, count: int) -> list[int]:
        """The next `count` positions of the global stream, advancing (epoch, index)."""
        out: list[int] = []
        n = len(self.dataset)
        while len(out) < count:
            order = self.order(self.epoch)
            k = min(count - len(out), n - self.index)
            out.extend(order[self.index:self.index + k].tolist())
            self.index += k
            if self.index == n:
                self.epoch, self.index = self.epoch + 1, 0
        return out

    def skip(self, n: int) -> None:
        """Move past the next `n` batches without building them (the position `_take` would reach)."""
        size = len(self.dataset)
        epochs, self.index = divmod(self.index + n * self.micro_batch_size * self.world_size, size)
        self.epoch += epochs

    def __iter__(self) -> Iterator[Any]:
        while True:
            stride = self.micro_batch_size * self.world_size
            ids = self._take(stride)
            mine = ids[self.rank * self.micro_batch_size:(self.rank + 1) * self.micro_batch_size]
            yield self.collate([self.dataset[i] for i in mine])


class LengthGroupedBatches:
    """Shuffled micro-batches of examples of similar length (a `zencli.train.data.ResumableBatches`).

    A batch is padded to its longest example, and pretraining examples vary a lot (PD98 at 128 tokens:
    median 76, a tenth under 20), so random batches spend ~40% of the compute on padding. Epoch e:
    permute the examples with a generator seeded by (seed, e), cut the permutation into groups of
    `group` global steps, sort each group by length, cut it into steps and shuffle the steps of the
    group (seeded too). Each step's `micro_batch_size × world_size` examples are split across the
    processes as in `IndexedBatches`. The position is (epoch, step), so resuming seeks in O(1). The last
    `n mod (micro × world)` examples of an epoch's permutation are left out of that epoch (a different
    few each epoch); a data set smaller than one step is repeated to fill it.
    """

    def __init__(self, lengths: np.ndarray, get_batch, *, seed: int = 0, group: int = 50):
        if len(lengths) == 0:
            raise ZenError("training data: the dataset is empty; expected at least one example")
        self.lengths = np.asarray(lengths, np.int32)  # tokens per example: 4 bytes each, for corpora of any size
        self.get_batch = get_batch
        self.seed = seed
        self.group = group
        self.micro_batch_size, self.rank, self.world_size = 1, 0, 1
        self.epoch = self.step = 0
        self._epoch_steps: tuple[int, np.ndarray] | None = None

    @property
    def stride(self) -> int:
        return self.micro_batch_size * self.world_size

    def configure(self, *, micro_batch_size: int, rank: int, world_size: int) -> None:
        if micro_batch_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"bad batch layout: micro {micro_batch_size}, rank {rank} of {world_size}")
        self.micro_batch_size, self.rank, self.world_size = micro_batch_size, rank, world_size
        self._epoch_steps = None

    def state(self) -> dict:
        return {"epoch": self.epoch, "step": self.step, "stride": self.stride, "size": len(self.lengths),
                "seed": self.seed, "group": self.group}

    def load_state(self, state: dict) -> None:
        if state.get("size") != len(self.lengths) or state.get("seed") != self.seed:
            raise ZenError(f"resume: the training data changed since the checkpoint ({state.get('size')} "
                           f"examples, seed {state.get('seed')}; now {len(self.lengths)}, seed {self.seed})")
        self.epoch = int(state["epoch"])
        # Another process count changes the steps' size: continue after as many examples as were seen.
        self.step = int(state["step"]) * int(state.get("stride", self.stride)) // self.stride

    def steps(self, epoch: int) -> np.ndarray:
        """[steps, stride] example indices of `epoch`, in visiting order (cached per epoch)."""
        if self._epoch_steps is None or self._epoch_steps[0] != epoch:
            order = np.random.default_rng([self.seed, epoch]).permutation(len(self.lengths))
            if len(order) < self.stride:  # fewer examples than one step takes: repeat them (tiny data sets)
                reps = -(-self.stride // len(order))
                order = np.concatenate([order] + [np.random.default_rng([self.seed, epoch, 2, k])
                                                  .permutation(len(self.lengths)) for k in range(1, reps)])
            # Indices as int32 where they fit, and the steps written into one array: a corpus's worth of
            # examples costs 4 bytes each per array here, not 8 (several times over) as int64 copies.
            index = np.int32 if len(self.lengths) < 2**31 else np.int64
            order = order[: len(order) // self.stride * self.stride].astype(index)
            shuffle = np.random.default_rng([self.seed, epoch, 1])
            steps = np.empty((len(order) // self.stride, self.stride), index)
            for lo in range(0, len(order), self.group * self.stride):
                chunk = order[lo:lo + self.group * self.stride]
                chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")].reshape(-1, self.stride)
                steps[lo // self.stride : lo // self.stride + len(chunk)] = chunk[shuffle.permutation(len(chunk))]
            self._epoch_steps = (epoch, steps)
        return self._epoch_steps[1]

    def skip(self, n: int) -> None:
        """Move past the next `n` batches without building them, to the position iterating would leave."""
        if n <= 0:
            return
        if self.step >= len(self.steps(self.epoch)):  # what __iter__ does before its next batch
            self.epoch, self.step = self.epoch + 1, 0
        per_epoch = len(self.steps(self.epoch))  # the same in every epoch
        epochs, step = divmod(self.step + n - 1, per_epoch)
        self.epoch, self.step = self.epoch + epochs, step + 1  # an epoch's last batch leaves step == per_epoch

    def __iter__(self):
        while True:
            steps = self.steps(self.epoch)
            if self.step >= len(steps):
                self.epoch, self.step = self.epoch + 1, 0
                continue
            ids = steps[self.step]
            self.step += 1
            yield self.get_batch(ids[self.rank * self.micro_batch_size:(self.rank + 1) * self.micro_batch_size])


DataWorkers = int | Literal["auto"]


def data_workers(setting: DataWorkers, device: torch.device) -> int:
    """Worker processes for `setting` on `device`: "auto" is 0 on the CPU, where workers would only take
    cores from the model's own threads, and 2 (at most the cores but one) on a GPU, where the step
    otherwise waits for the host to build its batch."""
    if setting != "auto":
        return setting
    if device.type == "cpu":
        return 0
    return max(1, min(2, usable_cpus() - 1))


def prefetch(source: ResumableBatches, workers: DataWorkers, device: torch.device) -> ResumableBatches:
    """`source` itself (0 workers: batches are built in this process when the loop asks) or a
    `PrefetchedBatches` running it in worker processes."""
    n = data_workers(workers, device)
    return source if n == 0 else PrefetchedBatches(source, n, pin_memory=device.type == "cuda")


class PrefetchedBatches:
    """A `ResumableBatches` that runs another one in `workers` processes, building batches ahead.

    Worker w of k starts from the source's position, skips w batches and then builds every k-th one,
    yielding (batch, the source's state after that batch); torch's DataLoader collects them in round
    robin, so the order is exactly the source's own (k > 1 needs `source.skip`; without it one worker
    runs). This object yields the batch and keeps its state: `state()` is the position after the last
    batch consumed here, never after what the workers read ahead, and iterating again (or after
    `load_state`) restarts the workers from there.

    A batch's tensors travel as one flat buffer per dtype (pinned as one block on CUDA): the tensors
    yielded here are views of it.

    A source's exception in a worker is raised here as that same exception (a ZenError keeps its one-line
    message), at the batch where building in-process would have raised it. Iterators end their workers
    when closed or garbage-collected (the training loop closes its iterator on every exit, Ctrl-C too).
    On Linux workers are forked (the source need not be picklable); elsewhere it must be.
    """

    def __init__(self, source: ResumableBatches, workers: int, *, pin_memory: bool = False,
                 prefetch_factor: int = 2):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.source = source
        self.workers = workers if hasattr(source, "skip") else 1
        self.pin_memory = pin_memory
        self.prefetch_factor = prefetch_factor
        self._state: dict | None = None  # after the last batch consumed; None: the source's own position

    def configure(self, *, micro_batch_size: int, rank: int, world_size: int) -> None:
        self.source.configure(micro_batch_size=micro_batch_size, rank=rank, world_size=world_size)
        self._state = None

    def state(self) -> dict:
        return self.source.state() if self._state is None else self._state

    def load_state(self, state: dict) -> None:
        self.source.load_state(state)
        self._state = None

    def __iter__(self) -> Iterator[Any]:
        if self._state is not None:  # the workers start where this process stopped consuming
            self.source.load_state(self._state)
        loader = DataLoader(
            _WorkerStream(self.source), batch_size=None, num_workers=self.workers,
            collate_fn=_as_is, pin_memory=self.pin_memory, prefetch_factor=self.prefetch_factor,
            # A generator of its own: by default the DataLoader seeds its workers from torch's global one,
            # which would shift every later dropout mask of the run.
            generator=torch.Generator(),
            multiprocessing_context="fork" if sys.platform.startswith("linux") else None,
        )
        it = iter(loader)
        try:
            while True:
                failed = None
                try:
                    item = next(it)
                except StopIteration:
                    return
                except RuntimeError as e:  # the DataLoader's own: a worker killed (out of memory?), a timeout
                    failed = str(e).splitlines()[0]
                if failed is not None:  # raised out here, its context does not keep the DataLoader alive
                    raise ZenError(f"train.data_workers: a data worker failed ({failed}); "
                                   "set train.data_workers: 0 to build batches in the training process")
                if isinstance(item, _WorkerFailure):
                    raise item.error
                buffers, rest = item
                self._state = rest.state
                yield _unpack(buffers, rest.skeleton)
        finally:
            del it  # its finaliser stops and joins the workers now, not whenever the frame is collected


class _WorkerFailure:
    """An exception raised by the source in a worker, carried to the training process as data."""

    def __init__(self, error: Exception):
        # A bug: keep where it happened (Python >= 3.11; a ZenError says what is wrong in its one line).
        if not isinstance(error, ZenError) and hasattr(error, "add_note"):
            error.add_note("raised in a data worker:\n" + "".join(traceback.format_exception(error)).rstrip())
        try:
            pickle.dumps(error)
        except Exception:  # an exception that cannot travel: its text still can
            error = RuntimeError("".join(traceback.format_exception(error)))
        self.error = error


def _as_is(item: Any) -> Any:
    return item


class _WorkerStream(IterableDataset):
    """This worker's share of a source's batches, w, w+k, w+2k, ...: each packed, with the state after it."""

    def __init__(self, source: ResumableBatches):
        self.source = source

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        w, k = (0, 1) if info is None else (info.id, info.num_workers)
        src = self.source
        try:
            if k == 1:
                for batch in src:
                    yield _packed(batch, src.state())
                return
            src.skip(w)
            while True:
                # A fresh iterator from the current position, after each skip (sources are positioned, not
                # stateful generators).
                batch = next(iter(src), _END)
                if batch is _END:
                    return
                yield _packed(batch, src.state())
                src.skip(k - 1)
        except Exception as e:
            yield _WorkerFailure(e)


_END = object()


def to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor inside nested dicts/lists/tuples to `device`. From pinned memory (what
    `PrefetchedBatches` gives on CUDA) the copy is asynchronous: the host goes on to the next step's
    work while the batch travels."""
    return _map_leaves(batch, torch.Tensor, lambda t: t.to(device, non_blocking=True))


def _map_leaves(obj: Any, leaf: type, fn: Callable[[Any], Any]) -> Any:
    """`obj` with every instance of `leaf` inside nested dicts/lists/tuples/namedtuples replaced by fn(it)."""
    if isinstance(obj, leaf):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_leaves(v, leaf, fn) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(_map_leaves(v, leaf, fn) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_leaves(v, leaf, fn) for v in obj)
    return obj


class _Rest:
    """What travels with a packed batch's buffers: its structure and the source's state after it. An
    object the pin-memory thread leaves alone (it would turn the tuples inside into lists)."""

    def __init__(self, skeleton: Any, state: dict):
        self.skeleton, self.state = skeleton, state


def _packed(batch: Any, state: dict) -> tuple[dict[torch.dtype, torch.Tensor], _Rest]:
    buffers, skeleton = _pack(batch)
    return buffers, _Rest(skeleton, state)


class _Place:
    """Where a tensor of a packed batch lies in its dtype's buffer."""

    def __init__(self, dtype: torch.dtype, offset: int, shape: tuple[int, ...]):
        self.dtype, self.offset, self.shape = dtype, offset, shape


def _pack(batch: Any) -> tuple[dict[torch.dtype, torch.Tensor], Any]:
    """The batch's tensors as one flat buffer per dtype, and the batch with `_Place`s instead of tensors.

    A tensor crosses from a worker as a shared-memory segment whose descriptor is handed over through a
    socket, and is pinned as a block of its own: one buffer instead of a dozen tensors more than halves
    the training process's time per batch (measured on the pretraining batches)."""
    parts: dict[torch.dtype, list[torch.Tensor]] = {}
    sizes: dict[torch.dtype, int] = {}

    def place(t: torch.Tensor) -> _Place:
        offset = sizes.get(t.dtype, 0)
        parts.setdefault(t.dtype, []).append(t.reshape(-1))
        sizes[t.dtype] = offset + t.numel()
        return _Place(t.dtype, offset, tuple(t.shape))

    skeleton = _map_leaves(batch, torch.Tensor, place)
    return {dtype: torch.cat(ts) for dtype, ts in parts.items()}, skeleton


def _unpack(buffers: dict[torch.dtype, torch.Tensor], skeleton: Any) -> Any:
    """The batch `_pack` packed, its tensors views of the buffers (no copy)."""
    return _map_leaves(skeleton, _Place, lambda p: buffers[p.dtype][p.offset:p.offset + math.prod(p.shape)]
                       .view(p.shape))
