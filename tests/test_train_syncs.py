"""Host syncs of the training loop: a step that neither logs, evaluates nor saves reads no tensor value on
the host (on a GPU such a read waits for every queued kernel). Audited on the CPU with a dispatch mode that
sees every `aten._local_scalar_dense` (what .item(), float(), bool() and `if tensor` call) and `aten.nonzero`
(data-dependent shapes) the step makes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from zencli.train import IndexedBatches, TrainSettings, train
from zencli.train.optim import build_optimizers, clip_grad_norm, describe_optimizers

# ops that read a value on the host or size their output by the data (on a GPU both wait for the queue)
SYNCS = (torch.ops.aten._local_scalar_dense, torch.ops.aten.nonzero, torch.ops.aten.masked_select,
         torch.ops.aten._unique2, torch.ops.aten.unique_consecutive, torch.ops.aten.unique_dim)
BOOL_INDEXING = (torch.ops.aten.index, torch.ops.aten.index_put_, torch.ops.aten.index_put)
_OPTIMIZER_PY = os.path.join("torch", "optim", "optimizer.py")


def _reads_cpu_step_counter() -> bool:
    """torch's for-loop AdamW (the loop's on the CPU) reads its step counter, a CPU tensor, with .item():
    not a device sync. On a GPU the loop runs fused AdamW, whose counters stay on the GPU unread."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "_get_value" and frame.f_code.co_filename.endswith(_OPTIMIZER_PY):
            return True
        frame = frame.f_back
    return False


class SyncAudit(TorchDispatchMode):
    """Records (loss_fn calls so far, op) for every host-sync op dispatched while active."""

    def __init__(self, calls: list[int]):
        super().__init__()
        self.calls = calls
        self.seen: list[tuple[int, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        op = func._overloadpacket
        bool_mask = op in BOOL_INDEXING and any(  # x[mask]: its nonzero() runs inside the kernel, unseen here
            isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in (args[1] or ()))
        if (op in SYNCS or bool_mask) and not _reads_cpu_step_counter():
            self.seen.append((self.calls[0], str(func)))
        return func(*args, **(kwargs or {}))


class Plain(nn.Module):
    """Sync-free: embedding → LayerNorm → tanh → linear (no boolean indexing, no .item())."""

    def __init__(self, rows: int):
        super().__init__()
        self.emb = nn.Embedding(rows, 16)
        self.norm = nn.LayerNorm(16)
        self.out = nn.Linear(16, 40)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # [B, L] → [B, L, 40]
        return self.out(torch.tanh(self.norm(self.emb(ids))))


def audited_run(tmp_path: Path, *, rows: int = 40, reads: str | None = None, **kw):
    """12 steps of 2 micro-batches; log every 6, save every 4, evaluate at the end. Returns {step: [ops]}."""
    calls = [0]

    def loss_fn(model, ids):
        calls[0] += 1
        logits = model(ids)
        target = ids % 40
        loss = F.cross_entropy(logits.flatten(0, 1).float(), target.flatten())
        if reads == "item":
            float(loss.detach())
        elif reads == "mask":
            loss = loss + 0 * logits[target > 3].sum()  # boolean indexing: a data-dependent shape
        correct = (logits.argmax(-1) == target).sum()
        # a (tensor, int) pair, a Python number and an int token count: every kind the loop sums
        return loss, {"acc": (correct, target.numel()), "const": 0.5}, ids.numel()

    torch.manual_seed(0)
    examples = [torch.randint(0, rows, (8,)) for _ in range(32)]
    settings = TrainSettings(**{**dict(
        lr=1e-3, warmup_steps=2, max_steps=12, batch_size=8, grad_accum=2, dtype="fp32", device="cpu",
        seed=1, log_every=6, save_every=4, keep_last=1, output_dir=tmp_path, tensorboard=False), **kw})
    audit = SyncAudit(calls)
    with audit:
        train(Plain(rows), loss_fn, IndexedBatches(examples, torch.stack, seed=1), settings,
              eval_fn=lambda model: {"score": 1.0}, show_progress=False)
    per_step: dict[int, list[str]] = {}
    for n, op in audit.seen:  # during loss_fn call n (and after it, until call n + 1): step ceil(n / 2)
        per_step.setdefault(-(-n // 2), []).append(op)
    return per_step


QUIET_STEPS = {1, 2, 3, 5, 7, 9, 10, 11}  # neither log (6, 12), save (4, 8, 12) nor evaluate (12)


@pytest.mark.parametrize("kw", [
    {},
    {"dtype": "bf16"},
    {"rows": 1500, "ema_decay": 0.9, "clip_norm": 0.01},  # a row-sparse table (LazyAdamW), EMA, clipping on
], ids=["fp32", "bf16", "sparse-ema-clipped"])
def test_quiet_steps_make_no_host_sync(tmp_path, kw):
    per_step = audited_run(tmp_path, **kw)
    assert not {s: ops for s, ops in per_step.items() if s in QUIET_STEPS}
    assert per_step.get(6) and per_step.get(12)  # log steps do read (the audit sees those reads)


@pytest.mark.parametrize("reads", ["item", "mask"])
def test_the_audit_sees_a_loss_function_that_syncs(tmp_path, reads):
    per_step = audited_run(tmp_path, reads=reads)
    assert QUIET_STEPS <= set(per_step)
    assert ("aten._local_scalar_dense.default" if reads == "item" else "aten.index.Tensor") in per_step[1]


def test_fp16_still_checks_every_step_for_its_scaler(tmp_path):
    per_step = audited_run(tmp_path, dtype="fp16")
    assert QUIET_STEPS <= set(per_step)  # overflowing steps are skipped (and counted) as they happen


def test_clip_grad_norm_matches_the_per_tensor_norm_and_leaves_small_gradients_alone():
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s)) for s in [(30, 4), (4,), (7, 3)]]
    for p in params:
        p.grad = torch.randn_like(p) * 0.1
    before = [p.grad.clone() for p in params]
    expected = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in before]))
    norm = clip_grad_norm(params, 100.0)
    assert torch.equal(norm, expected)
    assert all(torch.equal(p.grad, g) for p, g in zip(params, before))  # × 1.0: bit for bit
    norm = clip_grad_norm(params, 0.5)
    assert torch.equal(norm, expected)
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
    assert total == pytest.approx(0.5, rel=1e-5)
    for p in params:
        p.grad = torch.full_like(p, float("inf"))
    assert torch.isinf(clip_grad_norm(params, 0.5))
    assert all(torch.isinf(p.grad).all() for p in params)  # not finite: nothing scaled


def test_cpu_runs_torchs_for_loop_adamw_and_the_banner_says_so(tmp_path):
    model = Plain(1500)
    from zencli.train.optim import mark_sparse_embeddings

    opts = build_optimizers(model, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
                            sparse_tables=mark_sparse_embeddings(model, 1000))
    assert opts[0].defaults["foreach"] is False and not opts[0].defaults["fused"]
    assert describe_optimizers(opts) == "AdamW (for-loop) + LazyAdamW (row-sparse)"


def test_a_divergence_between_checks_stops_before_it_is_saved_naming_the_steps(tmp_path):
    from tests.helpers_train import lm_loss
    from tests.test_train_loop import run
    from zencli.errors import ZenError

    calls = {"n": 0}

    def nan_from_step_3(model, batch):
        calls["n"] += 1
        loss, metrics, n = lm_loss(model, batch)
        return (loss * float("nan") if calls["n"] >= 3 else loss), metrics, n

    with pytest.raises(ZenError, match="^steps 3–4: the gradient norm is nan — training diverged"):
        run(tmp_path, loss_fn=nan_from_step_3, log_every=4, save_every=2, keep_last=5)
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*.pt")) == ["step-00000002.pt"]
