"""The training loop shared by pretraining and fine-tuning.

    from zencli.train import IndexedBatches, TrainSettings, train

    def loss_fn(model, batch):                       # batch: what the data source yields, on the device
        logits = model(batch["input_ids"])           # call the model only (it may be a DDP wrapper)
        loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
        n = (batch["labels"] != -100).sum()
        correct = ((logits.argmax(-1) == batch["labels"]) & (batch["labels"] != -100)).sum()
        return loss, {"mlm_acc": (correct, n)}, batch["input_ids"].numel()

    data = IndexedBatches(examples, collate, seed=1)   # or any ResumableBatches (see zencli.train.data)
    result = train(model, loss_fn, data, TrainSettings(lr=1e-4, max_steps=1000, output_dir=Path("runs/x")))

`train(model, loss_fn, data, settings, *, eval_fn=None, on_eval=None, fingerprint_extra=None,
console=None, show_progress=True, watch=None) -> TrainResult`

- `loss_fn(model, batch) -> (loss, metrics, n_tokens)`: `loss` is the mean loss of the micro-batch (a
  0-d tensor to backpropagate); `metrics` maps names to a number or a 0-d tensor (averaged over
  micro-batches) or a `(numerator, denominator)` pair (summed separately: exact token-level
  accuracies); `n_tokens` counts the tokens of the batch (for tokens/s). The same keys every call.
  It runs under autocast; the loop scales by 1/grad_accum, backpropagates and steps.
- `data`: a `ResumableBatches` (configure / state / load_state / __iter__). The loop configures it with
  this process's micro-batch size (`batch_size` is global: processes × grad_accum × micro-batch) and
  rank, restores its position when resuming, and saves its `state()` in every checkpoint.
- `eval_fn(model) -> dict[str, float]`: runs on rank 0 every `eval_every` steps and at the end, with the
  model in eval mode, under no_grad and autocast; RNG states are restored afterwards so evaluating does
  not change the training trajectory. With `best_metric` set, `checkpoints/best.pt` holds the weights of
  the best evaluation and `patience` evaluations without improvement stop the run.
  `on_eval(step, metrics, improved)` is called on rank 0 after each evaluation (e.g. to export the best
  model).
- `fingerprint_extra`: plain data that must match for a checkpoint to be resumed (model config, data
  files, task). The fingerprint also covers the trajectory settings (`settings.FINGERPRINT_KEYS`), the
  resolved precision and every parameter's name and shape.
- `watch`: a `BaselineWatch` (zencli.train.progress): once a share of the planned steps is done, a train
  metric that has not moved clearly past its baseline (a pretraining's MLM loss still at the unigram
  loss) gets a loud warning, a `{"kind": "warning"}` record in metrics.jsonl and an entry in
  `TrainResult.warnings`.

Each optimizer step: learning rate from the linear warm-up/decay schedule; `grad_accum` micro-batches
(forward under autocast, backward; DDP syncs dense gradients on the last one, sparse embedding
gradients are averaged after it); unscale (fp16); clip the global norm; AdamW (dense) + LazyAdamW
(row-sparse tables) step; zero gradients. Then, as due: log (rank 0: progress, metrics.jsonl,
TensorBoard), evaluate, checkpoint (atomic, keep the last `keep_last`; always at the end).

A step that neither logs, evaluates nor saves makes no host sync of its own (the loss function and a
row-sparse table's gradient may): losses, metrics, token counts and gradient norms are summed where they
are (device tensors on the device, Python numbers on the host) and read at the next log step. So a
gradient norm that became inf/nan in bf16/fp32 is found before the next log, evaluation or checkpoint —
never written into one — and the run stops there with an error naming the steps. fp16 checks every
step instead: its grad scaler skips the overflowing updates (and syncs to do so anyway).

With `ema_decay`, an exponential moving average of the weights follows every optimizer step
(torch.optim.swa_utils.AveragedModel): evaluations score the average, best.pt holds it, checkpoints carry
it for resuming, and `model` ends the run holding the averaged weights.

With `max_minutes`, the run fits its step count and LR schedule into that wall-clock budget after timing
its first steps, and stops at the budget at the latest (zencli.train.budget); `max_steps` is the cap.
The warm-up follows `schedule.plan_warmup`: `warmup_steps` as given (shortened, with a note, only beyond
half the fitted run), `warmup_ratio` as a share of the fitted steps (a note below `WARMUP_FLOOR`).

Outputs in `output_dir`: run.json (resolved settings + fingerprint), metrics.jsonl, checkpoints/,
tensorboard/. Resuming (`resume: auto`, the default) continues from the newest checkpoint there: model,
optimizer moments, grad scaler, RNG states of every process and data positions are restored, so the
continued run produces the losses an uninterrupted run would (bit for bit in fp32 on CPU with the same
thread count); metrics.jsonl records written after that checkpoint are dropped. A directory holding
another run (different fingerprint) is refused unless `overwrite` is set.

Seeding: the loop seeds python/numpy/torch with `seed + rank` at the start of a fresh run. Seed before
building the model (`seed_everything`) to make its initialisation reproducible too.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from torch import nn

from zencli.atomic_write import atomic_write_text
from zencli.errors import ZenError
from zencli.plain_data import to_dict
from zencli.train import distributed as D
from zencli.train.budget import TimeBudget
from zencli.train.checkpoint import (
    FORMAT,
    CheckpointDir,
    fingerprint,
    fingerprint_diff,
    load_checkpoint,
    rng_state,
    seed_everything,
    set_rng_state,
)
from zencli.train.data import ResumableBatches, prefetch, to_device
from zencli.train.lock import RunLock
from zencli.train.optim import (
    build_optimizers,
    clip_grad_norm,
    describe_optimizers,
    mark_sparse_embeddings,
    unmark_sparse_embeddings,
)
from zencli.train.precision import autocast, grad_scaler, resolve_precision
from zencli.train.progress import BaselineWatch, MetricsLog, ProgressDisplay
from zencli.train.schedule import LinearWarmupDecay, plan_warmup
from zencli.train.settings import TrainSettings

LossFn = Callable[[nn.Module, Any], tuple[torch.Tensor, dict[str, Any], Any]]
EvalFn = Callable[[nn.Module], dict[str, float]]
OnEval = Callable[[int, dict[str, float], bool], None]


@dataclass
class TrainResult:
    step: int  # optimizer steps done in total (max_steps unless stopped early)
    start_step: int  # step this invocation started from (> 0 when resumed)
    last: dict[str, Any]  # the last train record written to metrics.jsonl
    precision: str
    world_size: int
    output_dir: Path
    checkpoint: Path | None  # newest training checkpoint
    best_step: int | None = None
    best_value: float | None = None
    best_metrics: dict[str, float] = field(default_factory=dict)
    stopped_early: bool = False
    elapsed_s: float = 0.0
    tokens: int = 0  # tokens processed by this invocation, all processes
    planned_steps: int = 0  # max_steps, or the steps fitted into max_minutes
    warnings: list[dict[str, Any]] = field(default_factory=list)  # the "warning" records of this invocation


def train(model: nn.Module, loss_fn: LossFn, data: ResumableBatches, settings: TrainSettings, *,
          eval_fn: EvalFn | None = None, on_eval: OnEval | None = None,
          fingerprint_extra: dict[str, Any] | None = None, console: Console | None = None,
          show_progress: bool = True, watch: BaselineWatch | None = None) -> TrainResult:
    """Train `model` in place; see the module docstring."""
    settings.validate()
    if not isinstance(data, ResumableBatches):
        raise TypeError("data must implement ResumableBatches (configure, state, load_state, __iter__)")
    ctx = D.setup(settings.device)
    try:
        return _Trainer(model, loss_fn, data, settings, ctx, eval_fn, on_eval, fingerprint_extra or {},
                        console, show_progress, watch).run()
    finally:
        D.teardown(ctx)


class _Sum:
    """A running sum kept where its values are: tensors on their device (adding one is a kernel launch,
    not a host sync), Python numbers on the host (no copy to the device per micro-batch)."""

    __slots__ = ("device_sum", "host_sum")

    def __init__(self) -> None:
        self.device_sum: torch.Tensor | None = None
        self.host_sum = 0.0

    def add(self, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            if self.device_sum is None:
                self.device_sum = torch.zeros((), dtype=torch.float64, device=value.device)
            self.device_sum.add_(value.detach().to(self.device_sum.device))  # add_ casts to float64 itself
        else:
            self.host_sum += float(value)

    def tensor(self, device: torch.device) -> torch.Tensor:
        total = torch.tensor(self.host_sum, dtype=torch.float64, device=device)
        return total if self.device_sum is None else total + self.device_sum.to(device)

    def value(self) -> float:
        """The sum as a number (a host sync when part of it is on a GPU)."""
        return self.host_sum + (self.device_sum.item() if self.device_sum is not None else 0.0)


class _Window:
    """Sums over the micro-batches and steps since the last log line (read only when logging)."""

    def __init__(self, first_step: int):
        self.reset(first_step)

    def reset(self, first_step: int) -> None:
        self.first_step = first_step  # the window's first optimizer step (1-based)
        self.loss, self.tokens, self.grad_norm = _Sum(), _Sum(), _Sum()
        self.micro = 0
        self.steps = 0
        self.metrics: dict[str, tuple[_Sum, _Sum]] = {}
        self.start = time.perf_counter()

    def add_micro(self, loss: torch.Tensor, metrics: dict[str, Any], n_tokens: Any) -> None:
        self.loss.add(loss)
        self.micro += 1
        self.tokens.add(n_tokens)
        for key, value in metrics.items():
            num, den = value if isinstance(value, (tuple, list)) else (value, 1.0)
            acc = self.metrics.get(key)
            if acc is None:
                acc = self.metrics[key] = (_Sum(), _Sum())
            acc[0].add(num)
            acc[1].add(den)

    def totals(self, ctx: D.DistContext) -> tuple[float, float, dict[str, float]]:
        """(mean loss, tokens, metrics) over this window and all processes."""
        keys = sorted(self.metrics)
        sums = [self.loss, self.tokens, *(part for key in keys for part in self.metrics[key])]
        parts = [torch.tensor(float(self.micro), dtype=torch.float64, device=ctx.device)]
        parts += [acc.tensor(ctx.device) for acc in sums]
        micro, loss, tokens, *rest = D.all_reduce_sum(torch.stack(parts), ctx).tolist()
        metrics = {}
        for key, num, den in zip(keys, rest[0::2], rest[1::2]):
            metrics[key] = num / den if den else float("nan")
        return loss / max(micro, 1.0), tokens, metrics


class _Trainer:
    def __init__(self, model, loss_fn, data, settings: TrainSettings, ctx: D.DistContext, eval_fn, on_eval,
                 fingerprint_extra, console, show_progress, watch: BaselineWatch | None):
        self.model, self.loss_fn, self.data, self.s, self.ctx = model, loss_fn, data, settings, ctx
        self.eval_fn, self.on_eval = eval_fn, on_eval
        self.out = Path(settings.output_dir)
        self.ckdir = CheckpointDir(self.out / "checkpoints")
        self.console = console
        self.show_progress = show_progress and ctx.is_main
        self.fingerprint_extra = fingerprint_extra
        # evaluation / early-stopping state (saved in checkpoints)
        self.best_value: float | None = None
        self.best_step: int | None = None
        self.best_metrics: dict[str, float] = {}
        self.bad_evals = 0
        self.stopped_early = False
        self.last_record: dict[str, Any] = {}
        self.last_checkpoint: Path | None = None
        self.notes: list[str] = []  # shown once the progress display exists
        self.watch, self.watch_judged, self.windows_logged = watch, False, 0
        self.warnings: list[dict[str, Any]] = []
        self.checked_step = 0  # the gradient norms of the steps up to this one were finite

    # --- setup ---------------------------------------------------------------------------------------

    def _prepare(self) -> dict | None:
        s, ctx = self.s, self.ctx
        if s.num_threads:
            torch.set_num_threads(s.num_threads)
        self.model.to(ctx.device)
        self.model.train()
        self.precision = resolve_precision(s.precision, ctx.device)
        self.sparse_tables = mark_sparse_embeddings(self.model, s.sparse_min_rows) if s.sparse_embeddings else []
        table_ids = {id(m.weight) for m in self.sparse_tables}
        self.sparse_names = [n for n, p in self.model.named_parameters() if id(p) in table_ids]
        self.sparse_params = [m.weight for m in self.sparse_tables]
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizers = build_optimizers(self.model, lr=s.lr, betas=(s.adam_beta1, s.adam_beta2),
                                           eps=s.adam_eps, weight_decay=s.weight_decay,
                                           sparse_tables=self.sparse_tables)
        self.scaler = grad_scaler(self.precision, ctx.device)
        self.ema = None
        if s.ema_decay is not None:
            from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

            # A copy of the model whose weights are the average (only ever evaluated); buffers follow the model's.
            # Its checkpoint format is AveragedModel's; _update_ema does its update without host syncs.
            self.ema = AveragedModel(self.model, multi_avg_fn=get_ema_multi_avg_fn(s.ema_decay), use_buffers=False)
        self.budget = TimeBudget(s.max_minutes, s.max_steps) if s.max_minutes else None
        self._plan(s.max_steps)
        self.micro_batch = s.micro_batch_size(ctx.world_size)
        self.data = prefetch(self.data, s.data_workers, ctx.device)  # batches built ahead in worker processes
        self.data.configure(micro_batch_size=self.micro_batch, rank=ctx.rank, world_size=ctx.world_size)
        self.fp_values = {
            **s.fingerprint_fields(), "precision": self.precision,
            "parameters": {n: list(p.shape) for n, p in self.model.named_parameters()},
            "extra": self.fingerprint_extra,
        }
        self.fp = fingerprint(self.fp_values)
        return self._resume_state()

    def _resume_state(self) -> dict | None:
        """Find and check the checkpoint to continue from; prepare the output directory (rank 0)."""
        s = self.s
        explicit = s.resume not in ("auto", "never")
        state, path = None, None
        if explicit:
            path = Path(s.resume)
        elif s.resume == "auto" and not s.overwrite:
            path = self.ckdir.latest()
        elif s.resume == "never" and not s.overwrite and self.ckdir.latest() is not None:
            raise ZenError(f"{self.out}: holds checkpoints of an earlier run ({self.ckdir.latest().name}); "
                           "resume it with resume: auto, choose a new output dir, or pass --overwrite")
        if path is not None:
            state = load_checkpoint(path)
            if state["fingerprint"] != self.fp:
                diff = fingerprint_diff(state["fingerprint_values"], self.fp_values)
                if explicit:
                    raise ZenError(f"{path}: resume: this checkpoint belongs to a run with other settings "
                                   f"({diff}); resume it with the settings it was trained with")
                raise ZenError(f"{self.out}: holds checkpoints of a different run ({diff}); "
                               "use a new output dir or pass --overwrite")
        run_json = self.out / "run.json"
        if not s.overwrite and state is None and run_json.is_file():
            try:
                other = json.loads(run_json.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                raise ZenError(f"{run_json}: not valid JSON; choose a new output dir or pass --overwrite") from None
            if other.get("fingerprint") != self.fp:
                raise ZenError(f"{self.out}: holds another run "
                               f"({fingerprint_diff(other.get('fingerprint_values', {}), self.fp_values)}); "
                               "use a new output dir or pass --overwrite")
        D.barrier(self.ctx)  # every process has read what it needs before rank 0 changes the directory
        if self.ctx.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
            if s.overwrite:
                self.ckdir.clear()
                for name in ("metrics.jsonl", "run.json"):
                    (self.out / name).unlink(missing_ok=True)
                tb = self.out / "tensorboard"
                if tb.is_dir():
                    for f in tb.glob("events.out.tfevents.*"):
                        f.unlink()
            self.ckdir.remove_stale_temp_files()
            MetricsLog.truncate_after(self.out, state["step"] if state else 0)
            atomic_write_text(run_json, json.dumps({
                "fingerprint": self.fp, "fingerprint_values": self.fp_values, "settings": to_dict(s),
                "precision": self.precision, "world_size": self.ctx.world_size,
                "torch": torch.__version__}, indent=2, ensure_ascii=False, default=str) + "\n")
        D.barrier(self.ctx)
        return state

    def _load(self, state: dict) -> None:
        ctx = self.ctx
        self.model.load_state_dict(state["model"])
        if len(state["optimizers"]) != len(self.optimizers):
            raise ZenError("resume: the checkpoint's optimizer layout differs (sparse_embeddings changed?)")
        for opt, sd in zip(self.optimizers, state["optimizers"]):
            opt.load_state_dict(sd)
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if self.ema is not None:
            self.ema.load_state_dict(state["ema"])  # present: ema_decay is part of the fingerprint
        if self.budget is not None and state.get("budget"):
            self.budget.load_state_dict(state["budget"])
            note = self._plan(self.budget.total_steps)
            if note:
                self.notes.append(f"note: {note}")
        old, new = state.get("schedule") or {}, self.schedule.state_dict()
        if old and (old["warmup_steps"], old["total_steps"]) != (new["warmup_steps"], new["total_steps"]):
            # e.g. a checkpoint of a budgeted run from before warmup_steps were honoured under a budget
            self.notes.append(f"note: the checkpoint was trained to warm up over {old['warmup_steps']:,} of "
                              f"{old['total_steps']:,} steps; the learning rate continues on this run's schedule "
                              f"({new['warmup_steps']:,} of {new['total_steps']:,})")
        ev = state["eval"]
        self.best_value, self.best_step, self.best_metrics = ev["best_value"], ev["best_step"], ev["best_metrics"]
        self.bad_evals, self.stopped_early = ev["bad_evals"], ev["stopped_early"]
        same_layout = len(state["rng"]) == ctx.world_size
        self.data.load_state(state["data"][ctx.rank] if same_layout else state["data"][0])
        if same_layout:
            set_rng_state(state["rng"][ctx.rank])
        else:
            seed_everything(self.s.seed + ctx.rank + 1_000_003 * state["step"])
            self.notes.append(f"note: resuming a {len(state['rng'])}-process checkpoint with {ctx.world_size} "
                              "processes: random streams are reseeded, so losses will not match the original run")

    # --- the loop ------------------------------------------------------------------------------------

    def run(self) -> TrainResult:
        self.sparse_tables: list[nn.Embedding] = []
        try:
            with RunLock(self.out) if self.ctx.is_main else contextlib.nullcontext():
                return self._run(self._prepare())
        finally:
            unmark_sparse_embeddings(self.sparse_tables)  # the caller gets its model back as it was

    def _run(self, state: dict | None) -> TrainResult:
        s, ctx = self.s, self.ctx
        start_step = 0
        if state is not None:
            self._load(state)
            start_step = state["step"]
        else:
            seed_everything(s.seed + ctx.rank)
        del state
        self.ema_started = self.ema is not None and int(self.ema.n_averaged) > 0  # a CPU counter
        forward_model = self.model
        if ctx.distributed:
            forward_model = D.wrap_ddp(self.model, ctx, self.sparse_names, s.find_unused_parameters)
        self.progress = ProgressDisplay(self.total_steps, start_step, self.console, enabled=self.show_progress)
        self.metrics_log = MetricsLog(self.out, s.tensorboard) if ctx.is_main else None
        for text in [self._banner(start_step), *self.notes]:
            self._say(text)
        t0 = time.perf_counter()
        step, tokens_total, skipped = start_step, 0.0, 0
        self.checked_step = start_step
        window = _Window(start_step + 1)
        batches = iter(self.data)
        try:
            # a resumed run whose budget (earlier invocations' time included) is already used up trains no more
            spent = self.budget is not None and start_step > 0 and D.broadcast_object(self.budget.spent(), ctx)
            done = step >= self.total_steps or self.stopped_early or spent
            while not done:
                step_t0 = time.perf_counter()
                factor = self.schedule.factor(step)
                for opt in self.optimizers:
                    for group in opt.param_groups:
                        group["lr"] = group["initial_lr"] * factor
                for micro in range(s.grad_accum):
                    batch = to_device(next(batches), ctx.device)
                    # DDP all-reduces on the last micro-batch only; earlier ones just accumulate
                    accumulate_only = ctx.distributed and micro < s.grad_accum - 1
                    with forward_model.no_sync() if accumulate_only else contextlib.nullcontext():
                        with autocast(self.precision, ctx.device):
                            loss, metrics, n_tokens = self.loss_fn(forward_model, batch)
                        self.scaler.scale(loss / s.grad_accum).backward()
                    window.add_micro(loss, metrics, n_tokens)
                if ctx.distributed and self.sparse_params:
                    D.average_sparse_grads(self.sparse_params, ctx.world_size)
                for opt in self.optimizers:
                    self.scaler.unscale_(opt)
                norm = clip_grad_norm(self.params, s.clip_norm)
                # fp16 overflow: skip this update, the scaler lowers its scale (a host sync; GradScaler.step
                # makes one anyway). Other precisions do not look here: _check_finite reads the window's sum.
                if self.precision == "fp16" and not torch.isfinite(norm):
                    skipped += 1
                else:
                    for opt in self.optimizers:
                        self.scaler.step(opt)
                    if self.ema is not None:
                        self._update_ema()
                    window.grad_norm.add(norm)
                self.scaler.update()
                for opt in self.optimizers:
                    opt.zero_grad(set_to_none=True)
                step += 1
                window.steps += 1
                if self.budget is not None and not self.budget.fitted and ctx.device.type == "cuda":
                    torch.cuda.synchronize(ctx.device)  # calibration times the GPU's work, not the queueing
                last = self._after_step(step, time.perf_counter() - step_t0, step == start_step + 1)
                self.progress.advance(step)
                logged = step % s.log_every == 0 or last
                evaluating = self.eval_fn is not None and ((s.eval_every and step % s.eval_every == 0) or last)
                if logged or evaluating or (s.save_every and step % s.save_every == 0):
                    grad_norm_sum = self._check_finite(step, window)  # before anything is logged, scored or saved
                if logged:
                    tokens_total += self._log(step, window, grad_norm_sum, factor * s.lr, skipped,
                                              time.perf_counter() - t0)
                if evaluating:
                    eval_t0 = time.perf_counter()
                    self._evaluate(step)
                    if self.budget is not None and not last:
                        seconds = D.broadcast_object(time.perf_counter() - eval_t0, ctx)
                        self.budget.refit(step, seconds, s.eval_every)
                        planned = D.broadcast_object(self.budget.total_steps, ctx)  # rank 0's plan for all
                        self.budget.total_steps = planned
                        if planned != self.total_steps:
                            note = self._plan(planned)
                            self._say(f"time budget: {self.budget.step_seconds():.3f} s per step, evaluations "
                                      f"{seconds:.1f} s; the run now ends at step {planned:,}"
                                      + (f"; {note}" if note else ""))
                done = last or self.stopped_early
                if (s.save_every and step % s.save_every == 0) or done:
                    self._save(step)
                if logged:
                    window.reset(step + 1)  # after evaluating and saving: tokens/s measures training only
            D.barrier(ctx)
            if self.ema is not None:
                self.model.load_state_dict(self.ema.module.state_dict())
        finally:
            getattr(batches, "close", lambda: None)()  # ends data worker processes now (errors, Ctrl-C, the end)
            self.progress.close()
            if self.metrics_log is not None:
                self.metrics_log.close()
        if self.stopped_early:
            self._say(f"stopped early at step {step}: no improvement of {s.best_metric} in {s.patience} "
                      f"evaluations (best {self.best_value} at step {self.best_step})")
        return TrainResult(step=step, start_step=start_step, last=self.last_record, precision=self.precision,
                           world_size=ctx.world_size, output_dir=self.out,
                           checkpoint=self.last_checkpoint or self.ckdir.latest(),
                           best_step=self.best_step, best_value=self.best_value, best_metrics=self.best_metrics,
                           stopped_early=self.stopped_early, elapsed_s=time.perf_counter() - t0,
                           tokens=int(tokens_total), planned_steps=self.total_steps, warnings=self.warnings)

    @torch.no_grad()
    def _update_ema(self) -> None:
        """`AveragedModel.update_parameters` (EMA, buffers copied) without its host syncs: it compares its
        step counter, a CPU tensor, and copies it to the GPU every step. The same foreach ops otherwise."""
        ema, model = list(self.ema.parameters()), list(self.model.parameters())
        if self.ema_started:
            torch._foreach_lerp_(ema, model, 1 - self.s.ema_decay)
        else:
            torch._foreach_copy_(ema, model)  # the average starts at the weights after the first step
            self.ema_started = True
        for b_avg, b in zip(self.ema.module.buffers(), self.model.buffers()):
            b_avg.copy_(b)
        self.ema.n_averaged += 1  # stays on the CPU: the checkpoint's "ema" state keeps its format

    def _after_step(self, step: int, seconds: float, first: bool) -> bool:
        """Time-budget bookkeeping after optimizer step `step`; True when it is the run's last."""
        budget = self.budget
        if budget is None:
            return step >= self.total_steps
        budget.record_step(seconds, first)
        if budget.fit(step):
            planned = D.broadcast_object(budget.total_steps, self.ctx)  # every process plans like rank 0
            budget.total_steps = planned
            note = self._plan(planned)
            self._say(f"time budget {self.s.max_minutes:g} min: {budget.step_seconds():.3f} s per step → "
                      f"{planned:,} steps" + (f" (max_steps {self.s.max_steps:,})" if planned < self.s.max_steps
                                             else "") + (f"; {note}" if note else ""))
        spent = D.broadcast_object(budget.spent(), self.ctx)
        if spent and step < self.total_steps:
            self._say(f"time budget {self.s.max_minutes:g} min spent at step {step:,} of {self.total_steps:,}")
        return step >= self.total_steps or spent

    def _plan(self, total: int) -> str | None:
        """Run `total` steps: warm up as `plan_warmup` says and decay to the end; its note, if any."""
        s = self.s
        self.total_steps = total
        warmup, note = plan_warmup(s.warmup_steps, s.warmup_ratio, total, s.max_steps)
        self.schedule = LinearWarmupDecay(s.lr, warmup, total)
        if getattr(self, "progress", None) is not None:
            self.progress.set_total(total)
        return note

    # --- logging, evaluation, checkpoints ------------------------------------------------------------

    def _say(self, text: str) -> None:
        if self.ctx.is_main:
            self.progress.message(text)

    def _banner(self, start_step: int) -> str:
        s, ctx = self.s, self.ctx
        n_params = sum(p.numel() for p in self.model.parameters())
        tables = ", ".join(f"{n} {tuple(p.shape)}" for n, p in zip(self.sparse_names, self.sparse_params))
        where = f"resuming from step {start_step}" if start_step else "starting"
        return (f"train: {where} · {n_params:,} parameters · {self.precision} on {ctx.device} · "
                f"{ctx.world_size} process(es) × {s.grad_accum} accum × {self.micro_batch} = batch {s.batch_size}"
                + f" · warm-up {self.schedule.warmup_steps:,} of {self.total_steps:,} steps"
                + f" · {describe_optimizers(self.optimizers)}"
                + (f" · row-sparse tables: {tables}" if tables else "") + f" · output {self.out}")

    def _check_finite(self, step: int, window: _Window) -> float:
        """The window's gradient-norm sum (a host sync); a ZenError naming the steps when it is inf/nan.

        Norms are >= 0, so the sum is finite exactly when every step's norm was (fp16 leaves out the
        overflowing steps its scaler skipped)."""
        total = window.grad_norm.value()
        if not math.isfinite(total):
            first = max(window.first_step, self.checked_step + 1)
            where = f"step {step}" if first == step else f"steps {first}–{step}"
            raise ZenError(f"{where}: the gradient norm is {total} — training diverged; lower lr, raise "
                           "warmup_steps, or use precision fp32")
        self.checked_step = step
        return total

    def _log(self, step: int, window: _Window, grad_norm_sum: float, lr: float, skipped: int,
             elapsed: float) -> float:
        loss, tokens, metrics = window.totals(self.ctx)
        if not math.isfinite(loss):
            raise ZenError(f"step {step}: the loss is {loss} — training diverged; lower lr, raise "
                           "warmup_steps, or use precision fp32")
        seconds = max(time.perf_counter() - window.start, 1e-9)
        metrics = {k: (v if math.isfinite(v) else None) for k, v in metrics.items()}  # JSON has no NaN
        record: dict[str, Any] = {"kind": "train", "step": step, "loss": loss, **metrics, "lr": lr,
                                  "grad_norm": grad_norm_sum / max(window.steps, 1),
                                  "tokens_per_s": tokens / seconds, "elapsed_s": round(elapsed, 3)}
        if self.precision == "fp16":
            record["skipped_steps"] = skipped
        self.last_record = record
        if self.metrics_log is not None:
            self.metrics_log.write(record)
            self.progress.log(step, record)
        self.windows_logged += 1
        if self.watch is not None and not self.watch_judged and self.watch.due(step, self.total_steps,
                                                                                 self.windows_logged):
            self.watch_judged = True
            if self.watch.metric not in record:
                raise ZenError(f"baseline watch: {self.watch.metric!r} is not a train metric (expected one of "
                               f"{', '.join(k for k in record if k not in ('kind', 'step'))})")
            if not self.watch.passed(record[self.watch.metric]):
                self._warn_stalled(step, record[self.watch.metric])
        return tokens

    def _warn_stalled(self, step: int, value: float | None) -> None:
        """The metric the watch follows is still at its baseline: say so loudly, record it."""
        w, s = self.watch, self.s
        assert w is not None
        below = w.mode == "min"
        bound = w.baseline - w.margin if below else w.baseline + w.margin
        margin = f" {'-' if below else '+'} {w.margin:g}" if w.margin else ""
        shown = "n/a" if value is None else f"{value:.4f}"
        warmup = self.schedule.warmup_steps
        message = (f"step {step:,} of {self.total_steps:,}: the train {w.metric} is {shown}, not yet "
                   f"{'below' if below else 'above'} {bound:.4f} ({w.label} {w.baseline:.4f}{margin}) — the model "
                   f"has not started learning (a slow start may still take off; a run that stays here learns "
                   f"nothing). Likely causes: a peak learning rate too high for its warm-up, or far too low "
                   f"(lr {s.lr:g}, warm-up {warmup:,} step{'' if warmup == 1 else 's'}); too few steps "
                   f"({self.total_steps:,} planned). Lower lr (or raise a tiny one), lengthen the warm-up "
                   "(warmup_steps / warmup_ratio) or train longer.")
        record = {"kind": "warning", "step": step, "metric": w.metric, "value": value, "baseline": w.baseline,
                  "message": message}
        self.warnings.append(record)
        if self.metrics_log is not None:
            self.metrics_log.write(record)
            self.progress.warn(message)

    def _evaluate(self, step: int) -> None:
        s, ctx = self.s, self.ctx
        saved_rng = rng_state()
        metrics = None
        scored = self.model if self.ema is None else self.ema.module
        if ctx.is_main:
            scored.eval()
            try:
                with torch.no_grad(), autocast(self.precision, ctx.device):
                    metrics = {k: float(v) for k, v in self.eval_fn(scored).items()}
            finally:
                self.model.train()
        metrics = D.broadcast_object(metrics, ctx)
        set_rng_state(saved_rng)
        improved = False
        if s.best_metric is not None:
            if s.best_metric not in metrics:
                raise ZenError(f"best_metric: expected one of the evaluation metrics "
                               f"({', '.join(sorted(metrics)) or 'none'}), got {s.best_metric!r}")
            value = metrics[s.best_metric]
            improved = self.best_value is None or (value > self.best_value if s.best_mode == "max"
                                                   else value < self.best_value)
            if improved:
                self.best_value, self.best_step, self.best_metrics, self.bad_evals = value, step, metrics, 0
                if ctx.is_main:
                    self.ckdir.save_best({"format": FORMAT, "kind": "best", "step": step, "metric": s.best_metric,
                                          "value": value, "metrics": metrics, "fingerprint": self.fp,
                                          "model": scored.state_dict()})
            else:
                self.bad_evals += 1
                if s.patience and self.bad_evals >= s.patience:
                    self.stopped_early = True
        if ctx.is_main:
            record = {"kind": "eval", "step": step, **metrics}
            if self.metrics_log is not None:
                self.metrics_log.write(record)
            shown = " · ".join(f"{k} {v:.4f}" for k, v in metrics.items())
            self._say(f"eval @ step {step}: {shown}" + (" (best so far)" if improved else ""))
            if self.on_eval is not None:
                self.on_eval(step, metrics, improved)

    def _save(self, step: int) -> None:
        ctx = self.ctx
        data_states = D.gather_objects(self.data.state(), ctx)
        rngs = D.gather_objects(rng_state(), ctx)
        if ctx.is_main:
            state = {
                "format": FORMAT, "step": step, "fingerprint": self.fp, "fingerprint_values": self.fp_values,
                "model": self.model.state_dict(),
                "optimizers": [opt.state_dict() for opt in self.optimizers],
                "scaler": self.scaler.state_dict(), "schedule": self.schedule.state_dict(),
                "ema": self.ema.state_dict() if self.ema is not None else None,
                "budget": self.budget.state_dict() if self.budget is not None else None,
                "rng": rngs, "data": data_states, "world_size": ctx.world_size,
                "eval": {"best_value": self.best_value, "best_step": self.best_step,
                         "best_metrics": self.best_metrics, "bad_evals": self.bad_evals,
                         "stopped_early": self.stopped_early},
            }
            self.last_checkpoint = self.ckdir.save(state, step, self.s.keep_last)
