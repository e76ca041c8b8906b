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
checkpoint is loaded with `weights_only=True`).

`IndexedBatches` covers any indexable dataset: epoch e visits the items in the order of a permutation
seeded by (seed, e); the position is (epoch, index into that permutation), so seeking is O(1). Every
micro-step takes the next micro_batch_size × world_size items of that stream and process `rank` keeps
its slice, which makes the global batch independent of the number of processes. Batches run across
epoch boundaries, so no item is dropped and every batch has the same size.

`LengthGroupedBatches` is the same with batches of examples of similar length (sorted within groups
of steps), for data whose lengths vary: a batch is padded to its longest example.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

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
        self.lengths = np.asarray(lengths, np.int64)
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
            order = order[: len(order) // self.stride * self.stride]
            shuffle = np.random.default_rng([self.seed, epoch, 1])
            out = []
            for lo in range(0, len(order), self.group * self.stride):
                chunk = order[lo:lo + self.group * self.stride]
                chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")].reshape(-1, self.stride)
                out.append(chunk[shuffle.permutation(len(chunk))])
            self._epoch_steps = (epoch, np.concatenate(out))
        return self._epoch_steps[1]

    def __iter__(self):
        while True:
            steps = self.steps(self.epoch)
            if self.step >= len(steps):
                self.epoch, self.step = self.epoch + 1, 0
                continue
            ids = steps[self.step]
            self.step += 1
            yield self.get_batch(ids[self.rank * self.micro_batch_size:(self.rank + 1) * self.micro_batch_size])


def to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor inside nested dicts/lists/tuples to `device`."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)) and not hasattr(batch, "_fields"):
        return type(batch)(to_device(v, device) for v in batch)
    if isinstance(batch, tuple):  # namedtuple
        return type(batch)(*(to_device(v, device) for v in batch))
    return batch
