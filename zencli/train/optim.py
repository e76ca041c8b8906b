"""Optimizers: AdamW with BERT's weight-decay exclusions, and a row-sparse ("lazy") AdamW for big tables.

The lazy one exists because ZEN's n-gram table has 100k–260k rows but a batch touches a few hundred: a dense
gradient and a dense AdamW update of the whole table every step cost a large share of a step (measured:
docs/design.md). `mark_sparse_embeddings` gives large, untied tables sparse gradients; `LazyAdamW` updates
only the rows a batch touched.

Semantics of LazyAdamW versus dense AdamW (same as TensorFlow's LazyAdam, plus decoupled decay):
- A row's moments, weight decay and bias correction advance only in steps whose gradient holds that
  row. Each row keeps its own step count t_r, so its bias correction is 1 - beta^t_r: a row touched for
  the first time at step 1000 gets exactly the update a fresh AdamW would give it at its first step.
- Dense AdamW also changes untouched rows every step: it decays them by lr × weight_decay and keeps
  moving them with their stale momentum m / (sqrt(v) + eps), even though their gradient is zero. Lazy
  AdamW leaves them unchanged. On rows touched in a step both agree on the first step exactly; later
  they differ for rows that were skipped in between.
- A dense gradient (e.g. a table tied to an output layer) counts as touching every row, which makes the
  update identical to dense AdamW.

Host syncs: neither `clip_grad_norm` nor `LazyAdamW.step` reads a tensor's value on the host, so a CUDA
step is not held up by them — except that a sparse gradient must be coalesced (its duplicate rows summed)
before its norm or its rows mean anything, and the number of distinct rows is data-dependent: one sync
per row-sparse table per step. Dense AdamW is torch's fused kernel when every parameter is on a GPU; on
the CPU it is torch's default for-loop implementation (unchanged, so CPU runs resume bit for bit).

More: docs/design.md, "Optimizers".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn

_NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.RMSNorm, nn.modules.batchnorm._BatchNorm)


def no_decay(module_name: str, module: nn.Module, param_name: str) -> bool:
    """BERT's exclusions: biases (incl. ZEN 2.0's r_r_bias/r_w_bias) and LayerNorm weights."""
    if param_name.endswith("bias"):
        return True
    if isinstance(module, _NORM_TYPES):
        return True
    # hand-written norms named like BERT's (`...LayerNorm.weight`, `...layer_norm.weight`)
    last = module_name.rsplit(".", 1)[-1].lower()
    return "layernorm" in last or "layer_norm" in last


def mark_sparse_embeddings(model: nn.Module, min_rows: int) -> list[nn.Embedding]:
    """Switch untied `nn.Embedding` tables with >= min_rows rows to sparse gradients; return them.

    A table whose weight is shared with another module (the MLM decoder tied to the char table) is left
    dense: its gradient is dense anyway. Callers restore `.sparse` with `unmark_sparse_embeddings`.
    """
    names_per_param: dict[int, int] = {}
    for _, p in model.named_parameters(remove_duplicate=False):
        names_per_param[id(p)] = names_per_param.get(id(p), 0) + 1
    marked = []
    for module in model.modules():
        if (isinstance(module, nn.Embedding) and not module.sparse and module.num_embeddings >= min_rows
                and module.max_norm is None and names_per_param.get(id(module.weight), 0) == 1
                and module.weight.requires_grad):  # a frozen table (a fitted n-gram bag) gets no gradient
            module.sparse = True
            marked.append(module)
    return marked


def unmark_sparse_embeddings(modules: Iterable[nn.Embedding]) -> None:
    for module in modules:
        module.sparse = False


class LazyAdamW(torch.optim.Optimizer):
    """AdamW updating only the rows present in a (sparse) gradient of a 2-D table; see module doc."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError(f"LazyAdamW updates 2-D tables by row, got a {p.dim()}-D parameter")

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        for state in self.state.values():  # Optimizer.load_state_dict casts state to the param's dtype
            if "row_steps" in state:
                state["row_steps"] = state["row_steps"].to(torch.int64)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                rows, g = touched_rows(p.grad)  # [k], [k, H]
                if rows.numel() == 0:
                    continue
                state = self.state[p]
                if not state:
                    state["row_steps"] = torch.zeros(p.shape[0], dtype=torch.int64, device=p.device)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                t = state["row_steps"].index_select(0, rows) + 1  # [k]
                state["row_steps"].index_copy_(0, rows, t)
                m = state["exp_avg"].index_select(0, rows).lerp_(g, 1 - beta1)  # [k, H]
                v = state["exp_avg_sq"].index_select(0, rows).mul_(beta2).addcmul_(g, g, value=1 - beta2)
                state["exp_avg"].index_copy_(0, rows, m)
                state["exp_avg_sq"].index_copy_(0, rows, v)
                # per-row bias correction, computed in float64 like torch's scalar version
                t64 = t.to(torch.float64).unsqueeze(1)  # [k, 1]
                step_size = (lr / (1 - beta1 ** t64)).to(p.dtype)
                bias_correction2_sqrt = (1 - beta2 ** t64).sqrt().to(p.dtype)
                denom = v.sqrt().div_(bias_correction2_sqrt).add_(eps)
                update = torch.div(m, denom, out=denom).mul_(step_size)  # reuses denom's memory
                w = p.index_select(0, rows)
                w.mul_(1 - lr * wd).sub_(update)
                p.index_copy_(0, rows, w)
        return loss


def touched_rows(grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(row indices [k], row gradients [k, H]) of a sparse COO gradient; every row of a dense one."""
    if grad.is_sparse:
        grad = grad.coalesce()  # duplicate rows (repeated ids, accumulation) are summed here
        return grad.indices()[0], grad.values()
    return torch.arange(grad.shape[0], device=grad.device), grad


def build_optimizers(model: nn.Module, *, lr: float, betas: tuple[float, float], eps: float,
                     weight_decay: float, sparse_tables: Iterable[nn.Embedding] = (),
                     lr_scales: Mapping[str, float] | None = None) -> list[torch.optim.Optimizer]:
    """AdamW for dense parameters (decay / no-decay groups), LazyAdamW for the sparse tables.

    `lr_scales`: parameter name (as `model.named_parameters()` gives it) → multiplier of `lr` (layer-wise
    decay, a faster head); names it lacks learn at `lr`. Each distinct multiplier gets its own groups, so
    without it the layout (and a checkpoint's optimizer state) is the plain one.
    Every group carries `initial_lr` = lr × its multiplier; the loop sets `lr = initial_lr × schedule factor`.
    """
    scales = lr_scales or {}
    names = {id(p): n for n, p in model.named_parameters()}
    sparse_ids = {id(m.weight) for m in sparse_tables}
    # (kind, scale) → params, in first-seen order: kind 0 decay, 1 no decay, 2 sparse
    buckets: dict[tuple[int, float], list[nn.Parameter]] = {}
    seen: set[int] = set()
    for module_name, module in model.named_modules():
        for param_name, p in module.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            kind = 2 if id(p) in sparse_ids else 1 if no_decay(module_name, module, param_name) else 0
            buckets.setdefault((kind, float(scales.get(names[id(p)], 1.0))), []).append(p)
    order = sorted(buckets, key=lambda k: (k[1] != 1.0, k))  # the plain-rate groups first, as without scales
    dense = [k for k in order if k[0] < 2]
    sparse = [k for k in order if k[0] == 2]
    # fused: one kernel for the whole update, no host reads of step counters (they live on the GPU too)
    fused = all(p.is_cuda for k in dense for p in buckets[k])
    optimizers: list[torch.optim.Optimizer] = []
    if dense:
        groups = [{"params": buckets[k], "weight_decay": weight_decay if k[0] == 0 else 0.0,
                   "initial_lr": lr * k[1]} for k in dense]
        optimizers.append(torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps,
                                            **({"fused": True} if fused else {"foreach": False})))
    if sparse:
        optimizers.append(LazyAdamW([{"params": buckets[k], "weight_decay": weight_decay, "initial_lr": lr * k[1]}
                                     for k in sparse], lr=lr, betas=betas, eps=eps))
    for opt in optimizers:
        for group in opt.param_groups:
            group["lr"] = group["initial_lr"]
    return optimizers


def describe_optimizers(optimizers: Iterable[torch.optim.Optimizer]) -> str:
    """`AdamW (fused) + LazyAdamW (row-sparse)`: which implementations update the weights."""
    names = []
    for opt in optimizers:
        if isinstance(opt, torch.optim.AdamW):
            how = "fused" if opt.defaults.get("fused") else "foreach" if opt.defaults.get("foreach") else "for-loop"
            names.append(f"AdamW ({how})")
        elif isinstance(opt, LazyAdamW):
            names.append("LazyAdamW (row-sparse)")
        else:
            names.append(type(opt).__name__)
    return " + ".join(names)


@torch.no_grad()
def clip_grad_norm(params: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Global L2 norm of all gradients (dense and sparse); scale them to `max_norm` if above it.

    Returns the norm before clipping (a 0-d float32 tensor; inf/nan when a gradient overflowed, in
    which case nothing is scaled). `max_norm` 0 only measures. Sparse gradients are coalesced in place
    first, since duplicate rows must be summed before their norm means anything. No host sync: the
    gradients are always multiplied, by 1 when under `max_norm` or not finite (x × 1.0 is x, bit for bit).
    """
    grads = []
    for p in params:
        if p.grad is None:
            continue
        if p.grad.is_sparse:
            p.grad = p.grad.coalesce()
            grads.append(p.grad._values())
        else:
            grads.append(p.grad)
    if not grads:
        return torch.zeros(())
    # one multi-tensor kernel per device on a GPU (torch._foreach_norm); one norm per tensor on the CPU
    total = torch.nn.utils.get_total_norm(grads, 2.0)
    if max_norm > 0:
        coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
        coef = torch.where(torch.isfinite(total), coef, torch.ones_like(coef))
        if all(g.device == coef.device for g in grads):
            torch._foreach_mul_(grads, coef)
        else:
            for g in grads:
                g.mul_(coef.to(g.device))
    return total
