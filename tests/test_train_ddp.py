"""Data parallelism on CPU (gloo): 2 processes started by launch_local train what 1 process does, only rank 0
writes, a checkpoint resumes on another process count, a failing process ends the run at once; the
collectives pad unequal sparse gradients; and the CUDA/NCCL set-up (device per LOCAL_RANK, set_device before
the group, device_id, timeouts, GPU counts) checked with torch's CUDA and process-group calls stubbed.

On a machine with 2 or more GPUs, `ZEN_TEST_DDP_DEVICE=cuda pytest tests/test_train_ddp.py` runs the same
multi-process tests on GPUs with NCCL.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from zencli.errors import ZenError
from zencli.train import distributed as D
from zencli.train.checkpoint import load_checkpoint
from zencli.train.distributed import launch_local

ROOT = Path(__file__).resolve().parents[1]
DEVICE = os.environ.get("ZEN_TEST_DDP_DEVICE", "cpu")  # cuda: the processes train on GPUs 0 and 1 with NCCL
pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed missing")
needs_two = pytest.mark.skipif(DEVICE == "cuda" and (not torch.cuda.is_available() or torch.cuda.device_count() < 2),
                               reason="ZEN_TEST_DDP_DEVICE=cuda needs 2 GPUs")  # on CPU: always run

# The tiny LM of tests.helpers_train: a row-sparse embedding table (synced by average_sparse_grads)
# and dense layers (synced by DDP); a deterministic loss, no dropout, 6 steps of a global batch of 8.
SCRIPT = [sys.executable, "-m", "tests.helpers_train", "--plain", "--dropout", "0", "--max-steps", "6",
          "--save-every", "3", "--batch-size", "8", "--device", DEVICE]
# Why a tolerance and not equality: DDP sums each gradient bucket over the ranks (the order is gloo's or
# NCCL's: ring, tree), the sparse rows are summed in gather order, and the logged loss is a mean of
# per-process means; one process accumulates in its own order. In fp32 that moves the last bits
# (~1e-7 relative per step); over 6 Adam steps the weights stay within 1e-6 and the losses within 1e-5.
WEIGHT_ATOL, LOSS_ATOL = 1e-6, 1e-5


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def _run_one(args: list[str]) -> subprocess.CompletedProcess:
    r = subprocess.run(args, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name, w in a.items():
        assert torch.allclose(w, b[name], atol=WEIGHT_ATOL, rtol=0), name


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """tmp/one: 1 process, micro-batch 8. tmp/two: 2 processes × grad_accum 2 × micro-batch 2, each
    logging its writes under tmp/audit. Both: global batch 8, checkpoints at steps 3 and 6."""
    if DEVICE == "cuda" and (not torch.cuda.is_available() or torch.cuda.device_count() < 2):
        pytest.skip("ZEN_TEST_DDP_DEVICE=cuda needs 2 GPUs")
    tmp = tmp_path_factory.mktemp("ddp")
    single = subprocess.Popen(SCRIPT + [str(tmp / "one")], cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    code = launch_local(2, SCRIPT + ["--grad-accum", "2", "--audit", str(tmp / "audit"), str(tmp / "two")],
                        env=_env())
    _, err = single.communicate(timeout=300)
    assert single.returncode == 0, err
    assert code == 0
    return tmp


def test_two_processes_match_one_process_with_the_same_global_batch(runs):
    one = load_checkpoint(runs / "one" / "checkpoints" / "step-00000006.pt")
    two = load_checkpoint(runs / "two" / "checkpoints" / "step-00000006.pt")
    assert two["world_size"] == 2 and len(two["rng"]) == 2 and len(two["data"]) == 2
    _assert_same_weights(one["model"], two["model"])
    assert not torch.equal(one["model"]["embed.weight"], load_checkpoint(
        runs / "two" / "checkpoints" / "step-00000003.pt")["model"]["embed.weight"])  # it trained
    lines, ref = _metrics(runs / "two"), _metrics(runs / "one")
    assert [r["step"] for r in lines] == list(range(1, 7))  # only rank 0 logs
    assert all(abs(a["loss"] - b["loss"]) < LOSS_ATOL for a, b in zip(lines, ref))  # loss averaged over ranks


def test_only_rank_0_writes_in_the_output_directory(runs):
    rank0 = (runs / "audit" / "rank-0.txt").read_text().splitlines()
    rank1 = (runs / "audit" / "rank-1.txt").read_text().splitlines()  # exists: the hook ran there too
    assert rank1 == []
    written = {Path(line.split(" ", 1)[1]).name for line in rank0}
    assert {"step-00000003.pt", "step-00000006.pt", "metrics.jsonl", "run.json"} <= written


def test_a_checkpoint_resumes_on_another_process_count(runs):
    # 2 processes → 1: as if the 2-process run had stopped after its step-3 checkpoint.
    resumed = runs / "two-then-one"
    shutil.copytree(runs / "two", resumed)
    (resumed / "checkpoints" / "step-00000006.pt").unlink()
    r = _run_one(SCRIPT + ["--grad-accum", "2", "--progress", str(resumed)])
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"start_step": 3, "step": 6}
    assert "resuming a 2-process checkpoint with 1 processes" in " ".join(r.stderr.split())  # a note, not a crash
    end = load_checkpoint(resumed / "checkpoints" / "step-00000006.pt")
    assert end["world_size"] == 1 and len(end["rng"]) == 1
    _assert_same_weights(end["model"], load_checkpoint(runs / "two" / "checkpoints" / "step-00000006.pt")["model"])
    assert [m["step"] for m in _metrics(resumed)] == list(range(1, 7))

    # 1 process → 2 (same grad_accum, so the same fingerprint; micro-batch 4 each).
    resumed = runs / "one-then-two"
    shutil.copytree(runs / "one", resumed)
    (resumed / "checkpoints" / "step-00000006.pt").unlink()
    assert launch_local(2, SCRIPT + [str(resumed)], env=_env()) == 0
    end = load_checkpoint(resumed / "checkpoints" / "step-00000006.pt")
    assert end["world_size"] == 2 and len(end["data"]) == 2
    _assert_same_weights(end["model"], load_checkpoint(runs / "one" / "checkpoints" / "step-00000006.pt")["model"])
    losses = [m["loss"] for m in _metrics(resumed)]
    assert len(losses) == 6 and all(abs(a - m["loss"]) < LOSS_ATOL for a, m in zip(losses, _metrics(runs / "one")))


@needs_two
def test_a_failing_process_ends_the_run_at_once(tmp_path):
    # Rank 1 fails in its third micro-batch while rank 0 goes on into DDP's all-reduce. Rank 1 must not
    # wait in a barrier (that hung until gloo's 30-minute timeout): it closes its connections and exits,
    # rank 0's collective fails, and launch_local returns the error.
    t0 = time.monotonic()
    code = launch_local(2, SCRIPT + ["--max-steps", "50", "--fail", "1:3", str(tmp_path / "run")], env=_env())
    assert code != 0
    assert time.monotonic() - t0 < 120
    assert not (tmp_path / "run" / "checkpoints" / "step-00000003.pt").exists()  # it failed in step 3


def test_launch_local_stops_all_processes_when_one_fails(tmp_path):
    code = ("import os, sys, time\n"
            "if os.environ['RANK'] == '1': sys.exit(3)\n"
            "time.sleep(60)\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    t0 = time.monotonic()
    assert launch_local(2, [sys.executable, "-c", code], env=env) == 3
    assert time.monotonic() - t0 < 30  # rank 0 was terminated, not waited for


# --- the collectives, 2 processes through torch.multiprocessing -------------------------------------------

def _collectives(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    ctx = D.setup(DEVICE)
    dev = ctx.device
    try:
        # A [5, 3] table: rank 0 touched rows 1, 3 (3 twice), rank 1 touched nothing; a [4, 2] table: rank 0
        # row 0, rank 1 rows 0, 2; a dense [2] gradient; a [3, 2] table nobody touched. NCCL gathers equal
        # sizes only: padding is exercised.
        a, b, c, d = (torch.nn.Parameter(torch.zeros(*s, device=dev)) for s in ((5, 3), (4, 2), (2,), (3, 2)))
        if rank == 0:
            a.grad = torch.sparse_coo_tensor([[1, 3, 3]], [[1.0, 2, 3], [4, 5, 6], [1, 1, 1]], (5, 3), device=dev)
            b.grad = torch.sparse_coo_tensor([[0]], [[2.0, 4]], (4, 2), device=dev)
        else:
            b.grad = torch.sparse_coo_tensor([[0, 2]], [[4.0, 2], [6, 8]], (4, 2), device=dev)
        c.grad = torch.tensor([1.0, 2.0], device=dev) * (rank + 1)
        D.average_sparse_grads([a, b, c, d], ctx.world_size)
        result = {
            "a": a.grad.to_dense().tolist(), "a_rows": a.grad.indices()[0].tolist(),
            "b": b.grad.to_dense().tolist(), "c": c.grad.tolist(), "d": [d.grad.is_sparse, d.grad._nnz()],
            "gathered": D.gather_objects({"rank": rank}, ctx),
            "broadcast": D.broadcast_object(f"from {rank}", ctx),
            "sum": D.all_reduce_sum(torch.tensor([rank + 1.0], dtype=torch.float64, device=dev), ctx).tolist(),
            "cpu_sum": D.all_reduce_sum(torch.tensor([rank + 2]), ctx).tolist(),  # the control group on GPUs
            "control_backend": dist.get_backend(ctx.control),
        }
        D.barrier(ctx)
        Path(out, f"rank-{rank}.json").write_text(json.dumps(result))
    finally:
        D.teardown(ctx)


@needs_two
def test_collectives_average_unequal_sparse_gradients_and_move_objects(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_collectives, args=(D.free_port(), str(tmp_path)), nprocs=2, join=True)
    results = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(2)]
    assert results[0] == results[1]
    got = results[0]
    assert got["a"] == [[0, 0, 0], [0.5, 1, 1.5], [0, 0, 0], [2.5, 3, 3.5], [0, 0, 0]]
    assert got["a_rows"] == [1, 3]  # only the touched rows: LazyAdamW leaves the others alone
    assert got["b"] == [[3, 3], [0, 0], [3, 4], [0, 0]]
    assert got["c"] == [1.5, 3.0] and got["d"] == [True, 0]
    assert got["gathered"] == [{"rank": 0}, {"rank": 1}] and got["broadcast"] == "from 0"
    assert got["sum"] == [3.0] and got["cpu_sum"] == [5] and got["control_backend"] == "gloo"


# --- CUDA / NCCL set-up, with torch's CUDA and process-group calls stubbed ---------------------------------

@pytest.fixture
def two_gpus(monkeypatch):
    """A machine with 2 visible GPUs as torch.cuda reports it; records set_device / init / new_group calls."""
    calls: list[tuple] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append(("set_device", d)))
    monkeypatch.setattr(dist, "is_initialized", lambda: False)

    def init_process_group(*, backend, rank, world_size, timeout, device_id=None):  # torch >= 2.3's keywords
        calls.append(("init", {"backend": backend, "rank": rank, "world_size": world_size, "timeout": timeout,
                               "device_id": device_id}))

    monkeypatch.setattr(dist, "init_process_group", init_process_group)
    monkeypatch.setattr(dist, "new_group", lambda **kw: calls.append(("new_group", kw)) or "control")
    monkeypatch.setattr(D, "_control", None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    return calls


def test_setup_on_gpus_binds_local_rank_s_gpu_before_joining_an_nccl_group(two_gpus, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")  # e.g. the second of two machines with 2 GPUs each
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    ctx = D.setup("auto")
    assert ctx.device == torch.device("cuda", 1) and ctx.backend == "nccl" and ctx.control == "control"
    assert (ctx.rank, ctx.world_size, ctx.local_rank, ctx.owns_group) == (3, 4, 1, True)
    assert [c[0] for c in two_gpus] == ["set_device", "init", "new_group"]
    assert two_gpus[0][1] == torch.device("cuda", 1)
    init = two_gpus[1][1]
    assert init["backend"] == "nccl" and (init["rank"], init["world_size"]) == (3, 4)
    assert init["device_id"] == torch.device("cuda", 1)  # eager NCCL init on this GPU (torch >= 2.3)
    assert init["timeout"] == D.COLLECTIVE_TIMEOUT
    assert two_gpus[2][1] == {"backend": "gloo", "timeout": D.WAIT_TIMEOUT}


def test_setup_refuses_a_local_rank_without_its_own_gpu(two_gpus, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("LOCAL_RANK", "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    with pytest.raises(ZenError) as e:
        D.setup("cuda")
    msg = str(e.value)
    assert "\n" not in msg and "LOCAL_RANK: 2" in msg and "2 visible CUDA GPU(s) (CUDA_VISIBLE_DEVICES=4,5)" in msg
    assert two_gpus == []  # nothing bound, no group joined


def test_nproc_is_checked_against_the_gpus_before_anything_starts(two_gpus, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert D.launches(2, "auto") and D.launches(4, "cpu") and not D.launches(1, "cuda")
    with pytest.raises(ZenError, match=r"^--nproc 4: a CUDA run uses one GPU per process and this machine has "
                                       r"2 visible CUDA GPU\(s\); use --nproc 2 or fewer$"):
        D.launches(4, "cuda")
    with pytest.raises(ZenError, match=r"^--nproc: expected an integer >= 1, got 0$"):
        D.launches(0, "cpu")
    monkeypatch.setenv("WORLD_SIZE", "2")  # one of the processes a launcher started
    assert not D.launches(1, "auto")
    with pytest.raises(ZenError, match="already runs as one of 2 processes of a launcher"):
        D.launches(2, "auto")


def test_nproc_on_cuda_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ZenError, match="^--nproc 2: device cuda requested but torch sees no CUDA GPU$"):
        D.launches(2, "cuda")
    assert D.launches(2, "auto")  # auto on a CPU machine: gloo processes
