"""Data-parallel training: process-group setup from the environment, a local launcher, gradient sync.

Two ways to run N processes:
- `torchrun --nproc-per-node N -m zencli pretrain …` (any torchrun/SLURM setup that exports RANK,
  WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), or
- `launch_local(N, command)`, what `zen pretrain --nproc N` uses: it starts N copies of `command` on
  this machine with that environment, and stops them all when one fails.
`setup()` reads the environment, joins the group (gloo on CPU, nccl on GPUs) and picks the device.

Gradients of dense parameters are averaged by DistributedDataParallel. Row-sparse embedding gradients
are kept out of DDP (NCCL has no sparse all-reduce) and averaged by `average_sparse_grads`, which
gathers every process's touched rows — a few hundred rows instead of a whole table.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from zencli.errors import ZenError


@dataclass
class DistContext:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str | None  # None: single process
    owns_group: bool  # setup() created the process group (and teardown() will destroy it)

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


def setup(device: str = "auto") -> DistContext:
    """Join the process group described by the environment (if any) and choose this process's device."""
    world = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local_rank = _env_int("LOCAL_RANK", 0)
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        raise ZenError("device: cuda requested but torch sees no CUDA GPU")
    dev = torch.device("cuda", local_rank % torch.cuda.device_count()) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    if world <= 1:
        return DistContext(0, 1, 0, dev, None, False)
    backend = "nccl" if use_cuda else "gloo"
    owns = not dist.is_initialized()
    if owns:
        for name in ("MASTER_ADDR", "MASTER_PORT"):
            if not os.environ.get(name):
                raise ZenError(f"environment variable {name}: not set; start multi-process runs with "
                               "torchrun or `--nproc N`")
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
    else:
        backend = dist.get_backend()
    return DistContext(rank, world, local_rank, dev, backend, owns)


def teardown(ctx: DistContext) -> None:
    if ctx.owns_group and dist.is_initialized():
        # All ranks leave together: a rank that destroys the group while another is still in a final
        # collective (rank 0 saving) can abort gloo's threads ("terminate called without an active exception").
        dist.barrier()
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_local(nproc: int, command: list[str], env: dict[str, str] | None = None,
                 poll_s: float = 0.1) -> int:
    """Run `command` as `nproc` cooperating processes on this machine; return the first failure's code.

    Each process gets RANK/LOCAL_RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT and, unless already set,
    OMP_NUM_THREADS = cores / nproc so the processes do not oversubscribe the CPU. When one process
    fails the others are terminated (SIGTERM, then SIGKILL after 10 s); Ctrl-C stops all of them.
    """
    if nproc < 1:
        raise ZenError(f"--nproc: expected an integer >= 1, got {nproc}")
    base = dict(os.environ if env is None else env)
    base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(nproc),
                LOCAL_WORLD_SIZE=str(nproc))
    base.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    procs: list[subprocess.Popen] = []
    try:
        for rank in range(nproc):
            procs.append(subprocess.Popen(command, env={**base, "RANK": str(rank), "LOCAL_RANK": str(rank)}))
        while True:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                _stop(procs)
                return failed[0]
            if all(c == 0 for c in codes):
                return 0
            time.sleep(poll_s)
    except KeyboardInterrupt:
        _stop(procs)
        raise
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
    from torch.nn.parallel import DistributedDataParallel

    if sparse_param_names:
        DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, sparse_param_names)
        # DDP broadcasts rank 0's weights to all; do the same for the parameters it ignores
        params = dict(model.named_parameters())
        for name in sparse_param_names:
            dist.broadcast(params[name].data, src=0)
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids,
                                   find_unused_parameters=find_unused_parameters)


@torch.no_grad()
def average_sparse_grads(params: list[torch.nn.Parameter], world_size: int) -> None:
    """Replace each parameter's gradient by the mean over processes (sparse or dense gradients)."""
    for p in params:
        g = p.grad
        if g is None:
            g = torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.int64, device=p.device),
                                        torch.zeros(0, *p.shape[1:], dtype=p.dtype, device=p.device),
                                        p.shape)
        if not g.is_sparse:
            dist.all_reduce(g)
            p.grad = g.div_(world_size)
            continue
        g = g.coalesce()
        rows, values = g.indices()[0], g.values()  # [k], [k, H]
        count = torch.tensor([rows.numel()], device=p.device)
        counts = [torch.zeros_like(count) for _ in range(world_size)]
        dist.all_gather(counts, count)
        counts_list = [int(c.item()) for c in counts]
        longest = max(counts_list)
        pad = longest - rows.numel()
        rows_p = torch.cat([rows, rows.new_zeros(pad)])
        values_p = torch.cat([values, values.new_zeros(pad, *values.shape[1:])])
        all_rows = [torch.empty_like(rows_p) for _ in range(world_size)]
        all_values = [torch.empty_like(values_p) for _ in range(world_size)]
        dist.all_gather(all_rows, rows_p)
        dist.all_gather(all_values, values_p)
        rows_cat = torch.cat([r[:n] for r, n in zip(all_rows, counts_list)])
        values_cat = torch.cat([v[:n] for v, n in zip(all_values, counts_list)])
        p.grad = torch.sparse_coo_tensor(rows_cat.unsqueeze(0), values_cat / world_size, p.shape).coalesce()


def gather_objects(obj: Any, ctx: DistContext) -> list[Any]:
    """Every process's `obj`, in rank order (on every process)."""
    if not ctx.distributed:
        return [obj]
    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any, ctx: DistContext) -> Any:
    """Rank 0's `obj` on every process."""
    if not ctx.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_reduce_sum(t: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    if ctx.distributed:
        dist.all_reduce(t)
    return t


def barrier(ctx: DistContext) -> None:
    if ctx.distributed:
        dist.barrier()


def python_module_command(*args: str) -> list[str]:
    """`[python, -m, zencli, *args]` — the command a launcher starts for `zen <args>`."""
    return [sys.executable, "-m", "zencli", *args]
