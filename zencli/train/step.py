"""One optimizer step of the training loop, and what it needs and changes: the optimizers (AdamW, LazyAdamW
for row-sparse tables), the grad scaler, the weight average (EMA) and the dtype.

    opt = Optimization(model, settings, ctx, lr_scales)
    lr = opt.step(forward_model, loss_fn, batches, factor, window)   # grad_accum micro-batches, one update

Kept apart from the loop (zencli.train.loop) so the step reads on one screen, and the loop's policies
(budget, evaluation, early stopping, checkpoints) stay beside it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from zencli.errors import ZenError
from zencli.train import distributed as D
from zencli.train.data import to_device
from zencli.train.dtype import autocast, grad_scaler, resolve_dtype
from zencli.train.ema import averaged_model, update_ema
from zencli.train.optim import build_optimizers, clip_grad_norm, mark_sparse_embeddings
from zencli.train.settings import TrainSettings
from zencli.train.window import LogWindow


class Optimization:
    def __init__(self, model: nn.Module, s: TrainSettings, ctx: D.DistContext, lr_scales: dict[str, float]):
        self.s, self.ctx, self.model = s, ctx, model
        self.dtype = resolve_dtype(s.dtype, ctx.device)
        self.sparse_tables = mark_sparse_embeddings(model, s.sparse_min_rows) if s.sparse_embeddings else []
        table_ids = {id(m.weight) for m in self.sparse_tables}
        self.sparse_names = [n for n, p in model.named_parameters() if id(p) in table_ids]
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizers = build_optimizers(model, lr=s.lr, betas=(s.adam_beta1, s.adam_beta2), eps=s.adam_eps,
                                           weight_decay=s.weight_decay, sparse_tables=self.sparse_tables,
                                           lr_scales=lr_scales)
        self.scaler = grad_scaler(self.dtype, ctx.device)
        self.ema = averaged_model(model, s.ema_decay) if s.ema_decay is not None else None
        self.ema_started = False  # set when the run starts (a resumed average has started)
        self.skipped = 0  # fp16: updates the grad scaler skipped (overflow)

    @property
    def sparse_params(self) -> list[nn.Parameter]:
        return [m.weight for m in self.sparse_tables]

    def step(self, forward_model: nn.Module, loss_fn: Callable[..., Any], batches: Iterator[Any], factor: float,
             window: LogWindow) -> None:
        """One optimizer step at `factor` × the peak rate: `grad_accum` micro-batches, then the update."""
        s, ctx = self.s, self.ctx
        for opt in self.optimizers:
            for group in opt.param_groups:
                group["lr"] = group["initial_lr"] * factor
        for micro in range(s.grad_accum):
            batch = to_device(next(batches), ctx.device)
            # DDP all-reduces on the last micro-batch only; earlier ones just accumulate
            accumulate_only = ctx.distributed and micro < s.grad_accum - 1
            with forward_model.no_sync() if accumulate_only else contextlib.nullcontext():
                with autocast(self.dtype, ctx.device):
                    loss, metrics, n_tokens = loss_fn(forward_model, batch)
                self.scaler.scale(loss / s.grad_accum).backward()
            window.add_micro(loss, metrics, n_tokens)
        if ctx.distributed and self.sparse_tables:
            D.average_sparse_grads(self.sparse_params, ctx.world_size)
        for opt in self.optimizers:
            self.scaler.unscale_(opt)
        norm = clip_grad_norm(self.params, s.clip_norm)
        # fp16 overflow: skip this update, the scaler lowers its scale (a host sync; GradScaler.step
        # makes one anyway). Other dtypes do not look here: the loop checks the window's norm sum.
        if self.dtype == "fp16" and not torch.isfinite(norm):
            self.skipped += 1
        else:
            for opt in self.optimizers:
                self.scaler.step(opt)
            if self.ema is not None:
                update_ema(self.ema, self.model, s.ema_decay, self.ema_started)
                self.ema_started = True
            window.grad_norm.add(norm)
        self.scaler.update()
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        window.steps += 1

    def state_dict(self) -> dict[str, Any]:
        return {"optimizers": [opt.state_dict() for opt in self.optimizers], "scaler": self.scaler.state_dict(),
                "ema": self.ema.state_dict() if self.ema is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["optimizers"]) != len(self.optimizers):
            raise ZenError("resume: the checkpoint's optimizer layout differs (sparse_embeddings changed?)")
        for opt, sd in zip(self.optimizers, state["optimizers"]):
            opt.load_state_dict(sd)
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if self.ema is not None:
            self.ema.load_state_dict(state["ema"])  # present: ema_decay is part of the fingerprint
