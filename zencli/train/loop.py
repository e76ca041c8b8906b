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
console=None, show_progress=True) -> TrainResult`

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

Each optimizer step: learning rate from the linear warm-up/decay schedule; `grad_accum` micro-batches
(forward under autocast, backward; DDP syncs dense gradients on the last one, sparse embedding
gradients are averaged after it); unscale (fp16); clip the global norm; AdamW (dense) + LazyAdamW
(row-sparse tables) step; zero gradients. Then, as due: log (rank 0: progress, metrics.jsonl,
TensorBoard), evaluate, checkpoint (atomic, keep the last `keep_last`; always at the end).

With `ema_decay`, an exponential moving average of the weights follows every optimizer step
(torch.optim.swa_utils.AveragedModel): evaluations score the average, best.pt holds it, checkpoints carry
it for resuming, and `model` ends the run holding the averaged weights.

With `max_minutes`, the run fits its step count and LR schedule into that wall-clock budget after timing
its first steps, and stops at the budget at the latest (zencli.train.budget); `max_steps` is the cap.

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
from zencli.config.loading import to_dict
from zencli.errors import ZenError
from zencli.train import distributed as D
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
from zencli.train.budget import TimeBudget
from zencli.train.data import ResumableBatches, prefetch, to_device
from zencli.train.optim import (
    build_optimizers,
    clip_grad_norm,
    mark_sparse_embeddings,
    unmark_sparse_embeddings,
)
from zencli.train.precision import autocast, grad_scaler, resolve_precision
from zencli.train.progress import MetricsLog, ProgressDisplay
from zencli.train.schedule import LinearWarmupDecay
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


def train(model: nn.Module, loss_fn: LossFn, data: ResumableBatches, settings: TrainSettings, *,
          eval_fn: EvalFn | None = None, on_eval: OnEval | None = None,
          fingerprint_extra: dict[str, Any] | None = None, console: Console | None = None,
          show_progress: bool = True) -> TrainResult:
    """Train `model` in place; see the module docstring."""
    settings.validate()
    if not isinstance(data, ResumableBatches):
        raise TypeError("data must implement ResumableBatches (configure, state, load_state, __iter__)")
    ctx = D.setup(settings.device)
    try:
        return _Trainer(model, loss_fn, data, settings, ctx, eval_fn, on_eval, fingerprint_extra or {},
                        console, show_progress).run()
    finally:
        D.teardown(ctx)


class _Window:
    """Sums over the micro-batches since the last log line, kept as device tensors until logged."""

    def __init__(self, device: torch.device):
        self.device = device
        self.reset()

    def reset(self) -> None:
        self.loss = torch.zeros((), dtype=torch.float64, device=self.device)
        self.micro = 0
        self.steps = 0
        self.tokens = torch.zeros((), dtype=torch.float64, device=self.device)
        self.grad_norm = 0.0
        self.metrics: dict[str, list[torch.Tensor]] = {}
        self.start = time.perf_counter()

    def add_micro(self, loss: torch.Tensor, metrics: dict[str, Any], n_tokens: Any) -> None:
        self.loss += loss.detach().to(torch.float64)
        self.micro += 1
        self.tokens += torch.as_tensor(n_tokens, device=self.device).to(torch.float64)
        for key, value in metrics.items():
            num, den = value if isinstance(value, (tuple, list)) else (value, 1.0)
            acc = self.metrics.setdefault(key, [torch.zeros((), dtype=torch.float64, device=self.device),
                                                torch.zeros((), dtype=torch.float64, device=self.device)])
            acc[0] += torch.as_tensor(num, device=self.device).detach().to(torch.float64)
            acc[1] += torch.as_tensor(den, device=self.device).detach().to(torch.float64)

    def totals(self, ctx: D.DistContext) -> tuple[float, float, dict[str, float]]:
        """(mean loss, tokens, metrics) over this window and all processes."""
        keys = sorted(self.metrics)
        parts = [self.loss, torch.tensor(float(self.micro), dtype=torch.float64, device=self.device),
                 self.tokens]
        for key in keys:
            parts += self.metrics[key]
        vec = D.all_reduce_sum(torch.stack(parts), ctx).tolist()
        loss, tokens = vec[0] / max(vec[1], 1.0), vec[2]
        metrics = {}
        for i, key in enumerate(keys):
            num, den = vec[3 + 2 * i], vec[4 + 2 * i]
            metrics[key] = num / den if den else float("nan")
        return loss, tokens, metrics


class _Trainer:
    def __init__(self, model, loss_fn, data, settings: TrainSettings, ctx: D.DistContext, eval_fn, on_eval,
                 fingerprint_extra, console, show_progress):
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
            self.ema = AveragedModel(self.model, multi_avg_fn=get_ema_multi_avg_fn(s.ema_decay), use_buffers=False)
        self.budget = TimeBudget(s.max_minutes, s.max_steps) if s.max_minutes else None
        self.total_steps = s.max_steps
        self.schedule = LinearWarmupDecay(s.lr, s.warmup_steps, s.max_steps)
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
            self._plan(self.budget.total_steps)
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
        forward_model = self.model
        if ctx.distributed:
            forward_model = D.wrap_ddp(self.model, ctx, self.sparse_names, s.find_unused_parameters)
        self.progress = ProgressDisplay(self.total_steps, start_step, self.console, enabled=self.show_progress)
        self.metrics_log = MetricsLog(self.out, s.tensorboard) if ctx.is_main else None
        for text in [self._banner(start_step), *self.notes]:
            self._say(text)
        t0 = time.perf_counter()
        step, tokens_total, skipped = start_step, 0.0, 0
        window = _Window(ctx.device)
        batches = iter(self.data)
        try:
            done = step >= self.total_steps or self.stopped_early
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
                if not torch.isfinite(norm):
                    if self.precision != "fp16":
                        raise ZenError(f"step {step + 1}: the gradient norm is {norm.item()} — training diverged; "
                                       "lower lr, raise warmup_steps, or use precision fp32")
                    skipped += 1  # fp16 overflow: skip this update, the scaler lowers its scale
                else:
                    for opt in self.optimizers:
                        self.scaler.step(opt)
                    if self.ema is not None:
                        self.ema.update_parameters(self.model)
                    window.grad_norm += norm.item()
                self.scaler.update()
                for opt in self.optimizers:
                    opt.zero_grad(set_to_none=True)
                step += 1
                window.steps += 1
                last = self._after_step(step, time.perf_counter() - step_t0, step == start_step + 1)
                self.progress.advance(step)
                logged = step % s.log_every == 0 or last
                if logged:
                    tokens_total += self._log(step, window, factor * s.lr, skipped, time.perf_counter() - t0)
                if self.eval_fn is not None and ((s.eval_every and step % s.eval_every == 0) or last):
                    eval_t0 = time.perf_counter()
                    self._evaluate(step)
                    if self.budget is not None and not last:
                        seconds = D.broadcast_object(time.perf_counter() - eval_t0, ctx)
                        self.budget.refit(step, seconds, s.eval_every)
                        planned = D.broadcast_object(self.budget.total_steps, ctx)  # rank 0's plan for all
                        self.budget.total_steps = planned
                        if planned != self.total_steps:
                            self._plan(planned)
                            self._say(f"time budget: {self.budget.step_seconds():.3f} s per step, evaluations "
                                      f"{seconds:.1f} s; the run now ends at step {planned:,}")
                done = last or self.stopped_early
                if (s.save_every and step % s.save_every == 0) or done:
                    self._save(step)
                if logged:
                    window.reset()  # after evaluating and saving: tokens/s measures training only
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
                           tokens=int(tokens_total), planned_steps=self.total_steps)

    def _after_step(self, step: int, seconds: float, first: bool) -> bool:
        """Time-budget bookkeeping after optimizer step `step`; True when it is the run's last."""
        budget = self.budget
        if budget is None:
            return step >= self.total_steps
        budget.record_step(seconds, first)
        if budget.fit(step):
            planned = D.broadcast_object(budget.total_steps, self.ctx)  # every process plans like rank 0
            budget.total_steps = planned
            self._plan(planned)
            self._say(f"time budget {self.s.max_minutes:g} min: {budget.step_seconds():.3f} s per step → "
                      f"{planned:,} steps" + (f" (max_steps {self.s.max_steps:,})" if planned < self.s.max_steps
                                             else ""))
        spent = D.broadcast_object(budget.spent(), self.ctx)
        if spent and step < self.total_steps:
            self._say(f"time budget {self.s.max_minutes:g} min spent at step {step:,} of {self.total_steps:,}")
        return step >= self.total_steps or spent

    def _plan(self, total: int) -> None:
        """Run `total` steps: the schedule warms up over the same share of the run and decays to its end."""
        s = self.s
        self.total_steps = total
        warmup = min(s.warmup_steps, round(s.warmup_steps * total / s.max_steps))
        self.schedule = LinearWarmupDecay(s.lr, warmup, total)
        if getattr(self, "progress", None) is not None:
            self.progress.set_total(total)

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
                + (f" · row-sparse tables: {tables}" if tables else "") + f" · output {self.out}")

    def _log(self, step: int, window: _Window, lr: float, skipped: int, elapsed: float) -> float:
        loss, tokens, metrics = window.totals(self.ctx)
        if not math.isfinite(loss):
            raise ZenError(f"step {step}: the loss is {loss} — training diverged; lower lr, raise "
                           "warmup_steps, or use precision fp32")
        seconds = max(time.perf_counter() - window.start, 1e-9)
        metrics = {k: (v if math.isfinite(v) else None) for k, v in metrics.items()}  # JSON has no NaN
        record: dict[str, Any] = {"kind": "train", "step": step, "loss": loss, **metrics, "lr": lr,
                                  "grad_norm": window.grad_norm / max(window.steps, 1),
                                  "tokens_per_s": tokens / seconds, "elapsed_s": round(elapsed, 3)}
        if self.precision == "fp16":
            record["skipped_steps"] = skipped
        self.last_record = record
        if self.metrics_log is not None:
            self.metrics_log.write(record)
            self.progress.log(step, record)
        return tokens

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
