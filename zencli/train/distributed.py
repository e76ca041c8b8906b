"""Data-parallel training: process-group setup from the environment, a local launcher, gradient sync.

Two ways to run N processes:
- `torchrun --nproc-per-node N -m zencli pretrain …` (any torchrun/SLURM setup that exports RANK,
  WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; across machines too), or
- `launch_local(N, command)`, what `zen pretrain --nproc N` uses: it starts N copies of `command` on
  this machine with that environment, and stops them all when one fails.
`setup()` reads the environment, picks the device (on CUDA: GPU LOCAL_RANK of the visible ones, one
GPU per process) and joins the group: gloo on CPU, nccl on GPUs.

Two process groups, because NCCL only moves CUDA tensors and blocks the GPU stream while it waits:
- the default group (nccl or gloo) carries the training collectives on the device's tensors: DDP's
  gradient all-reduce, `average_sparse_grads`, `all_reduce_sum` of the logged metrics. Every rank is
  in the same step there, so its timeout (`COLLECTIVE_TIMEOUT`) only has to cover a checkpoint write.
- `ctx.control`, a gloo group on the CPU, carries everything else: Python objects (`broadcast_object`,
  `gather_objects`), `barrier`, and CPU tensors on a GPU run. Those are the places where ranks wait
  for rank 0 alone (evaluating, writing a model), which can take long (`WAIT_TIMEOUT`), and where a
  GPU group would add a host-device sync for a few bytes.

Gradients of dense parameters are averaged by DistributedDataParallel. Row-sparse embedding gradients
are kept out of DDP (NCCL has no sparse all-reduce) and averaged by `average_sparse_grads`, which
gathers every process's touched rows — a few hundred rows instead of a whole table.
"""

from __future__ import annotations

import inspect
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from zencli.cpus import usable_cpus
from zencli.errors import ZenError

# Training collectives: all ranks arrive within a step, except while rank 0 writes a checkpoint (a base
# model with its Adam moments is ~1.3 GB). torch's NCCL default (10 min) is tight on a slow disk.
COLLECTIVE_TIMEOUT = timedelta(minutes=30)
# Ranks waiting on the control group for rank 0 alone: evaluation, exporting the model, results.
WAIT_TIMEOUT = timedelta(hours=24)


@dataclass
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str | None  # None: single process
    owns_group: bool  # setup() created the process group (and teardown() will destroy it)
    control: Any = None  # gloo group for objects, barriers and CPU tensors (None: single process)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ZenError(f"environment variable {name}: expected an integer, got {raw!r}") from None


def _uses_cuda(device: str) -> bool:
    return device == "cuda" or (device == "auto" and torch.cuda.is_available())


def _visible_gpus() -> str:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return f"{count} visible CUDA GPU(s)" + (f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else "")


def cuda_device(local_rank: int) -> torch.device:
    """GPU `local_rank` of the visible ones: one GPU per process, never two processes on one GPU."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise ZenError("device: cuda requested but torch sees no CUDA GPU")
    if not 0 <= local_rank < count:
        raise ZenError(f"environment variable LOCAL_RANK: {local_rank}, but this machine has {_visible_gpus()}; "
                       f"start at most {count} process(es) per machine (one per GPU)")
    return torch.device("cuda", local_rank)


def setup(device: str = "auto") -> DistContext:
    """Join the process group described by the environment (if any) and choose this process's device."""
    world = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local_rank = _env_int("LOCAL_RANK", 0)
    use_cuda = _uses_cuda(device)
    dev = cuda_device(local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        # Before the process group: NCCL's communicator, DDP and every tensor made without an explicit
        # device then live on this process's GPU, not all on GPU 0.
        torch.cuda.set_device(dev)
    if dist.is_initialized():  # a caller (or an earlier setup()) joined already: use its group
        backend, owns = dist.get_backend(), False
        rank, world = dist.get_rank(), dist.get_world_size()
    elif world <= 1:
        return DistContext(0, 1, local_rank, dev, None, False)
    else:
        if not 0 <= rank < world:
            raise ZenError(f"environment variable RANK: expected 0 … {world - 1} (WORLD_SIZE {world}), got {rank}")
        for name in ("MASTER_ADDR", "MASTER_PORT"):
            if not os.environ.get(name):
                raise ZenError(f"environment variable {name}: not set; start multi-process runs with "
                               "torchrun or `--nproc N`")
        backend, owns = ("nccl" if use_cuda else "gloo"), True
        extra: dict[str, Any] = {}
        if use_cuda and "device_id" in inspect.signature(dist.init_process_group).parameters:
            extra["device_id"] = dev  # torch >= 2.3: NCCL binds to this GPU and connects now, not at the first use
        dist.init_process_group(backend=backend, rank=rank, world_size=world, timeout=COLLECTIVE_TIMEOUT, **extra)
    if world <= 1:
        return DistContext(rank, world, local_rank, dev, backend, owns)
    return DistContext(rank, world, local_rank, dev, backend, owns, _control_group())


_control: tuple[Any, Any] | None = None  # (the default group it was made for, the gloo group)


def _control_group() -> Any:
    """The gloo group beside the default one (made once per default group; every rank calls this)."""
    global _control
    if _control is None or _control[0] is not dist.group.WORLD:
        _control = (dist.group.WORLD, dist.new_group(backend="gloo", timeout=WAIT_TIMEOUT))
    return _control[1]


def teardown(ctx: DistContext) -> None:
    """Leave the group setup() joined. Called from a `finally`: on an exception in flight it does not wait."""
    global _control
    if not (ctx.owns_group and dist.is_initialized()):
        return
    if sys.exc_info()[0] is not None:
        # The other ranks may be anywhere, e.g. inside a collective this rank will never join: a barrier
        # here would hang until the timeout. Closing the gloo connections makes ranks waiting on them fail
        # at once; NCCL communicators are aborted when the process exits, and the launcher (launch_local,
        # torchrun) stops the other processes as soon as this one has exited with an error.
        if ctx.backend == "gloo":
            dist.destroy_process_group()
        elif ctx.control is not None:
            dist.destroy_process_group(ctx.control)
        _control = None
        return
    # All ranks leave together: a rank that destroys the group while another is still in a final
    # collective (rank 0 saving) can abort gloo's threads ("terminate called without an active exception").
    barrier(ctx)
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)  # no NCCL kernel of this process still running at destruction
    dist.destroy_process_group()
    _control = None


def launches(nproc: int, device: str) -> bool:
    """`--nproc N` of a training command: True when this command must start N processes here.

    False for N = 1 and inside a group a launcher started (torchrun, or the processes `--nproc` starts,
    which run without it). One-line errors: N < 1, N > 1 inside such a group, and on a CUDA run N larger
    than the visible GPUs (one process per GPU; CUDA_VISIBLE_DEVICES chooses them)."""
    if nproc < 1:
        raise ZenError(f"--nproc: expected an integer >= 1, got {nproc}")
    world = os.environ.get("WORLD_SIZE")
    if world:
        if nproc > 1:
            raise ZenError(f"--nproc {nproc}: this command already runs as one of {world} processes of a launcher "
                           f"(WORLD_SIZE={world}); set the process count with the launcher (torchrun --nproc-per-node) "
                           "and drop --nproc")
        return False
    if nproc == 1:
        return False
    if _uses_cuda(device):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if nproc > count:
            raise ZenError(f"--nproc {nproc}: a CUDA run uses one GPU per process and this machine has "
                           f"{_visible_gpus()}; use --nproc {count} or fewer" if count else
                           f"--nproc {nproc}: device cuda requested but torch sees no CUDA GPU")
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_local(nproc: int, command: list[str], env: dict[str, str] | None = None,
                 poll_s: float = 0.1, interrupted_grace_s: float = 120.0) -> int:
    """Run `command` as `nproc` cooperating processes on this machine; return the first failure's code.

    Each process gets RANK/LOCAL_RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT and, unless already set,
    OMP_NUM_THREADS = cores / nproc so the processes do not oversubscribe the CPU. When one process
    fails the others are terminated (SIGTERM, then SIGKILL after 10 s).

    SIGTERM or Ctrl-C here (`Terminated` / KeyboardInterrupt) is passed on to every process, which stop
    gracefully together (zencli.signals, `StopVote`), and waited for; their status (143 or 130) is returned.
    A second one stops them at once. A process that exits 130/143 by itself (a signal sent to it alone) is
    not a failure to cut short either: the others stop after the same step, and are given
    `interrupted_grace_s` to write the checkpoint and exit.
    """
    if nproc < 1:
        raise ZenError(f"--nproc: expected an integer >= 1, got {nproc}")
    base = dict(os.environ if env is None else env)
    base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(nproc),
                LOCAL_WORLD_SIZE=str(nproc))
    base.setdefault("OMP_NUM_THREADS", str(max(1, usable_cpus() // nproc)))
    procs: list[subprocess.Popen] = []
    interrupt_codes = (128 + signal.SIGINT, 128 + signal.SIGTERM)
    forwarded = False
    interrupted_at: float | None = None
    try:
        for rank in range(nproc):
            procs.append(subprocess.Popen(command, env={**base, "RANK": str(rank), "LOCAL_RANK": str(rank)}))
        while True:
            try:
                codes = [p.poll() for p in procs]
                failed = [c for c in codes if c not in (None, 0)]
                if all(c is not None for c in codes):
                    return failed[0] if failed else 0
                if failed and failed[0] in interrupt_codes:
                    interrupted_at = interrupted_at or time.monotonic()
                    if time.monotonic() - interrupted_at < interrupted_grace_s:
                        time.sleep(poll_s)
                        continue
                if failed:
                    _stop(procs)
                    return failed[0]
                time.sleep(poll_s)
            except KeyboardInterrupt as e:
                if forwarded:
                    raise
                forwarded = True
                signum = getattr(e, "signum", signal.SIGINT)
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signum)
    finally:
        _stop(procs)


def _stop(procs: list[subprocess.Popen], grace_s: float = 10.0) -> None:
    running = [p for p in procs if p.poll() is None]
    for p in running:
        p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in running:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wrap_ddp(model: torch.nn.Module, ctx: DistContext, sparse_param_names: list[str],
             find_unused_parameters: bool) -> torch.nn.Module:
    """DistributedDataParallel over the dense parameters; sparse tables are synced by hand."""
    if sparse_param_names:
        DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, sparse_param_names)
        # DDP broadcasts rank 0's weights to all; do the same for the parameters it ignores
        params = dict(model.named_parameters())
        for name in sparse_param_names:
            dist.broadcast(params[name].data, src=0)
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    # broadcast_buffers off: the models' buffers are constants (CRF transition masks, CHTE taps), so
    # re-sending rank 0's copy before every forward would only add a collective per micro-batch.
    return DistributedDataParallel(model, device_ids=device_ids, broadcast_buffers=False,
                                   find_unused_parameters=find_unused_parameters)


@torch.no_grad()
def average_sparse_grads(params: list[torch.nn.Parameter], world_size: int) -> None:
    """Replace each parameter's gradient by the mean over processes (sparse or dense gradients).

    A sparse gradient's touched rows differ in number between processes, and NCCL gathers only tensors
    of one size: every process pads its rows to the largest count (one all-gather of all the tables'
    counts, one host sync per step), gathers, and drops the padding."""
    sparse: list[tuple[torch.nn.Parameter, torch.Tensor]] = []
    for p in params:
        g = p.grad
        if g is not None and not g.is_sparse:
            dist.all_reduce(g)
            p.grad = g.div_(world_size)
            continue
        if g is None:  # no row touched here: an empty sparse gradient, so the collectives still match
            g = torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.int64, device=p.device),
                                        torch.zeros(0, *p.shape[1:], dtype=p.dtype, device=p.device), p.shape,
                                        check_invariants=False)
        sparse.append((p, g.coalesce()))
    if not sparse:
        return
    device = sparse[0][0].device
    count = torch.tensor([g.indices().shape[1] for _, g in sparse], dtype=torch.int64, device=device)  # [T]
    counts = [torch.empty_like(count) for _ in range(world_size)]
    dist.all_gather(counts, count)
    per_rank = torch.stack(counts).tolist()  # [world][T]
    for t, (p, g) in enumerate(sparse):
        rows, values = g.indices()[0], g.values()  # [k], [k, H]
        sizes = [r[t] for r in per_rank]
        if max(sizes) == 0:  # no process touched this table: keep the empty gradient, gather nothing
            p.grad = g
            continue
        pad = max(sizes) - rows.numel()
        rows_p = torch.cat([rows, rows.new_zeros(pad)])
        values_p = torch.cat([values, values.new_zeros(pad, *values.shape[1:])])
        all_rows = [torch.empty_like(rows_p) for _ in range(world_size)]
        all_values = [torch.empty_like(values_p) for _ in range(world_size)]
        dist.all_gather(all_rows, rows_p)
        dist.all_gather(all_values, values_p)
        rows_cat = torch.cat([r[:n] for r, n in zip(all_rows, sizes)])
        values_cat = torch.cat([v[:n] for v, n in zip(all_values, sizes)])
        # rows come from valid gradients: skip the invariant check (and torch's warning about skipping it)
        p.grad = torch.sparse_coo_tensor(rows_cat.unsqueeze(0), values_cat / world_size, p.shape,
                                         check_invariants=False).coalesce()


def gather_objects(obj: Any, ctx: DistContext) -> list[Any]:
    """Every process's `obj`, in rank order (on every process; through the CPU control group)."""
    if not ctx.distributed:
        return [obj]
    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj, group=ctx.control)
    return out


def broadcast_object(obj: Any, ctx: DistContext) -> Any:
    """Rank 0's `obj` on every process (through the CPU control group: no GPU sync, long timeout)."""
    if not ctx.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0, group=ctx.control)
    return box[0]


def all_reduce_sum(t: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """Sum `t` over processes in place: a device tensor on the default group, a CPU tensor on a GPU run
    through the control group (NCCL moves CUDA tensors only)."""
    if ctx.distributed:
        cpu_on_gpu_run = t.device.type == "cpu" and ctx.device.type != "cpu"
        dist.all_reduce(t, group=ctx.control if cpu_on_gpu_run else None)
    return t


class StopVote:
    """After each optimizer step: do all processes stop here? The signal number (0: go on) of the stop
    requests (zencli.signals.StopRequest) recorded by any process.

    One process reads its own request. Several vote with an all-reduce (max) of their requests on the CPU
    control group, started asynchronously at one step boundary and read at the next: every process reads
    the same result at the same boundary, so all stop after the same step, and a plain step neither waits
    for the other processes nor syncs the GPU (the 4-byte reduce completes while the step computes). The
    price: a stop takes effect one step after the signal. `finish` votes once more, synchronously, when
    the run ends, so a request that arrived during the last steps is not lost."""

    def __init__(self, ctx: DistContext, request: Any):
        self.ctx, self.request = ctx, request
        self._pending: tuple[Any, torch.Tensor] | None = None

    def _local(self) -> torch.Tensor:
        return torch.tensor([self.request.signum or 0], dtype=torch.int32)

    def poll(self) -> int:
        if not self.ctx.distributed:
            return self.request.signum or 0
        agreed = 0
        if self._pending is not None:
            work, box = self._pending
            work.wait()
            agreed = int(box.item())
            self._pending = None
        if not agreed:  # no reduce stays in flight once every process stops
            box = self._local()
            self._pending = (dist.all_reduce(box, op=dist.ReduceOp.MAX, group=self.ctx.control, async_op=True), box)
        return agreed

    def finish(self) -> int:
        if not self.ctx.distributed:
            return self.request.signum or 0
        if self._pending is not None:
            self._pending[0].wait()
            self._pending = None
        box = self._local()
        dist.all_reduce(box, op=dist.ReduceOp.MAX, group=self.ctx.control)
        return int(box.item())


def barrier(ctx: DistContext) -> None:
    """Wait until every process got here (on the CPU control group: e.g. rank 0 finished writing)."""
    if ctx.distributed:
        dist.barrier(group=ctx.control)


def python_module_command(*args: str) -> list[str]:
    """`[python, -m, zencli, *args]` — the command a launcher starts for `zen <args>`."""
    return [sys.executable, "-m", "zencli", *args]
