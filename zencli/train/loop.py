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

One loop for every job, so pretraining and fine-tuning share its guarantees: `batch_size` is global (processes
× grad_accum × micro-batch); a resumed run continues exactly where the checkpoint left off (model, optimizer,
RNG states, data position); evaluation runs on rank 0 and can keep the best weights or stop early; a
wall-clock budget (`max_minutes`) fits the step count; and steps that neither log, evaluate nor save make no
host sync of their own. Evaluations run in `settings.eval_precision`. SIGTERM / SIGINT finish the step, save a
checkpoint and stop (zencli.signals).

The loop's parts: window.py (the sums between log lines), run_dir.py (the checkpoint to resume, the output
directory), early_stopping.py (the best evaluation, patience), ema.py (the weight average).

The contract of `loss_fn`, `data`, `eval_fn` and the rest, and what each step does: docs/design.md, "The
training loop".
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from torch import nn

from zencli.errors import ZenError
from zencli.plain_data import to_dict
from zencli.signals import Interrupted, StopRequest
from zencli.train import distributed as D
from zencli.train.budget import TimeBudget
from zencli.train.checkpoint import (
    FORMAT,
    CheckpointDir,
    fingerprint,
    rng_state,
    seed_everything,
    set_rng_state,
)
from zencli.train.data import ResumableBatches, prefetch, to_device
from zencli.train.early_stopping import BestEvaluation
from zencli.train.ema import averaged_model, update_ema
from zencli.train.lock import RunLock
from zencli.train.optim import (
    build_optimizers,
    clip_grad_norm,
    describe_optimizers,
    mark_sparse_embeddings,
    unmark_sparse_embeddings,
)
from zencli.train.precision import (
    autocast,
    grad_scaler,
    inference_autocast,
    inference_model,
    resolve_inference_precision,
    resolve_precision,
)
from zencli.train.progress import BaselineWatch, MetricsLog, ProgressDisplay
from zencli.train.run_dir import checkpoint_to_resume, prepare_output_dir, refuse_another_run
from zencli.train.schedule import LinearWarmupDecay, plan_warmup
from zencli.train.settings import TrainSettings
from zencli.train.threads import torch_threads
from zencli.train.window import LogWindow

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
          show_progress: bool = True, watch: BaselineWatch | None = None,
          lr_scales: dict[str, float] | None = None) -> TrainResult:
    """Train `model` in place; see the module docstring. `lr_scales`: parameter name → multiplier of the
    learning rate (`zencli.train.optim.build_optimizers`)."""
    settings.validate()
    if not isinstance(data, ResumableBatches):
        raise TypeError("data must implement ResumableBatches (configure, state, load_state, __iter__)")
    ctx = D.setup(settings.device)
    try:
        with torch_threads(settings.num_threads):  # restored afterwards: the caller's threads stay its own
            return _Trainer(model, loss_fn, data, settings, ctx, eval_fn, on_eval, fingerprint_extra or {},
                            console, show_progress, watch, lr_scales or {}).run()
    finally:
        D.teardown(ctx)



class _Trainer:
    def __init__(self, model, loss_fn, data, settings: TrainSettings, ctx: D.DistContext, eval_fn, on_eval,
                 fingerprint_extra, console, show_progress, watch: BaselineWatch | None,
                 lr_scales: dict[str, float]):
        self.model, self.loss_fn, self.data, self.s, self.ctx = model, loss_fn, data, settings, ctx
        self.eval_fn, self.on_eval = eval_fn, on_eval
        self.lr_scales = lr_scales
        self.out = Path(settings.output_dir)
        self.ckdir = CheckpointDir(self.out / "checkpoints")
        self.console = console
        self.show_progress = show_progress and ctx.is_main
        self.fingerprint_extra = fingerprint_extra
        self.best = BestEvaluation(settings.best_metric, settings.best_mode, settings.patience)  # in checkpoints
        self.last_record: dict[str, Any] = {}
        self.last_checkpoint: Path | None = None
        self.notes: list[str] = []  # shown once the progress display exists
        self.file_notes: list[str] = []  # the same, also under --quiet (a damaged checkpoint passed over)
        self.watch, self.watch_judged, self.windows_logged = watch, False, 0
        self.warnings: list[dict[str, Any]] = []
        self.checked_step = 0  # the gradient norms of the steps up to this one were finite
        self.skipped = 0  # fp16: updates the grad scaler skipped (overflow)

    # --- setup ---------------------------------------------------------------------------------------

    def _prepare(self) -> dict | None:
        s, ctx = self.s, self.ctx
        self.model.to(ctx.device)
        self.model.train()
        self.precision = resolve_precision(s.precision, ctx.device)
        self.eval_precision, _ = resolve_inference_precision(s.eval_precision, ctx.device,
                                                                key="train.eval_precision")
        self.sparse_tables = mark_sparse_embeddings(self.model, s.sparse_min_rows) if s.sparse_embeddings else []
        table_ids = {id(m.weight) for m in self.sparse_tables}
        self.sparse_names = [n for n, p in self.model.named_parameters() if id(p) in table_ids]
        self.sparse_params = [m.weight for m in self.sparse_tables]
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizers = build_optimizers(self.model, lr=s.lr, betas=(s.adam_beta1, s.adam_beta2),
                                           eps=s.adam_eps, weight_decay=s.weight_decay,
                                           sparse_tables=self.sparse_tables, lr_scales=self.lr_scales)
        self.scaler = grad_scaler(self.precision, ctx.device)
        self.ema = averaged_model(self.model, s.ema_decay) if s.ema_decay is not None else None
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
        state = checkpoint_to_resume(s, self.ckdir, self.out, self.fp, self.fp_values, self.file_notes.append)
        if state is None and not s.overwrite:
            refuse_another_run(self.out, self.fp, self.fp_values)
        D.barrier(self.ctx)  # every process has read what it needs before rank 0 changes the directory
        if self.ctx.is_main:
            run = {"fingerprint": self.fp, "fingerprint_values": self.fp_values, "settings": to_dict(s),
                   "precision": self.precision, "world_size": self.ctx.world_size, "torch": torch.__version__}
            prepare_output_dir(self.out, self.ckdir, overwrite=s.overwrite,
                               resumed_step=state["step"] if state else 0, run=run)
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
        self.best.load_state_dict(state["eval"])
        same_layout = len(state["rng"]) == ctx.world_size
        self.data.load_state(state["data"][ctx.rank] if same_layout else state["data"][0])
        if same_layout:
            set_rng_state(state["rng"][ctx.rank])
        else:
            seed_everything(self.s.seed + ctx.rank + 1_000_003 * state["step"])
            self.notes.append(f"note: resuming a {len(state['rng'])}-process checkpoint with {ctx.world_size} "
                              "processes: random streams are reseeded, so losses will not match the original run")

    def _start(self, state: dict | None) -> tuple[int, nn.Module]:
        """Continue from `state` or seed a fresh run; the step to start from and the model to call (a DDP
        wrapper when distributed). The progress display and metrics log open here."""
        s, ctx = self.s, self.ctx
        start_step = 0
        if state is not None:
            self._load(state)
            start_step = state["step"]
        else:
            seed_everything(s.seed + ctx.rank)
        self.ema_started = self.ema is not None and int(self.ema.n_averaged) > 0  # a CPU counter
        forward_model = self.model
        if ctx.distributed:
            forward_model = D.wrap_ddp(self.model, ctx, self.sparse_names, s.find_unused_parameters)
        if s.compile:
            # only the training forward: self.model (state dicts, evaluation, EMA) stays the eager module
            forward_model = torch.compile(forward_model, mode=s.compile_mode)
        self.progress = ProgressDisplay(self.total_steps, start_step, self.console, enabled=self.show_progress)
        self.metrics_log = MetricsLog(self.out, s.tensorboard) if ctx.is_main else None
        for text in [self._banner(start_step), *self.notes]:
            self._say(text)
        if ctx.is_main:
            for text in self.file_notes:
                self.progress.note(text)
        self.checked_step = start_step
        self.saved_step = start_step if state is not None else -1  # the step of the newest checkpoint
        return start_step, forward_model

    # --- the loop ------------------------------------------------------------------------------------

    def run(self) -> TrainResult:
        self.sparse_tables: list[nn.Embedding] = []
        try:
            with RunLock(self.out) if self.ctx.is_main else contextlib.nullcontext(), StopRequest() as request:
                self.vote = D.StopVote(self.ctx, request)
                return self._run(self._prepare())
        finally:
            unmark_sparse_embeddings(self.sparse_tables)  # the caller gets its model back as it was

    def _run(self, state: dict | None) -> TrainResult:
        start_step, forward_model = self._start(state)
        del state  # its tensors are in the model and optimizers now: no second copy while training
        t0 = time.perf_counter()
        step, tokens_total = start_step, 0.0
        window = LogWindow(start_step + 1)
        batches = iter(self.data)
        try:
            # a resumed run whose budget (earlier invocations' time included) is already used up trains no more
            spent = self.budget is not None and start_step > 0 and D.broadcast_object(self.budget.spent(), self.ctx)
            done = step >= self.total_steps or self.best.stopped_early or spent
            while not done:
                step_t0 = time.perf_counter()
                factor = self._train_step(forward_model, batches, step, window)
                step += 1
                window.steps += 1
                if self.budget is not None and not self.budget.fitted and self.ctx.device.type == "cuda":
                    torch.cuda.synchronize(self.ctx.device)  # calibration times the GPU's work, not the queueing
                last = self._after_step(step, time.perf_counter() - step_t0, step == start_step + 1)
                self.progress.advance(step)
                tokens_total += self._log_evaluate_save(step, last, window, factor * self.s.lr, t0)
                done = last or self.best.stopped_early
                if not done and (signum := self.vote.poll()):
                    self._stop(step, signum, window)
            if signum := self.vote.finish():  # a signal during the last steps: the run is complete, say so
                self._stop(step, signum, window)
            D.barrier(self.ctx)
            if self.ema is not None:
                self.model.load_state_dict(self.ema.module.state_dict())  # the run ends on the averaged weights
        finally:
            getattr(batches, "close", lambda: None)()  # ends data worker processes now (errors, Ctrl-C, the end)
            self.progress.close()
            if self.metrics_log is not None:
                self.metrics_log.close()
        return self._result(step, start_step, t0, tokens_total)

    def _train_step(self, forward_model: nn.Module, batches: Iterator[Any], step: int, window: LogWindow) -> float:
        """Optimizer step `step` + 1 (`grad_accum` micro-batches, then the update); its LR factor."""
        s, ctx = self.s, self.ctx
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
        self._update(window)
        return factor

    def _update(self, window: LogWindow) -> None:
        """Unscale, clip the global norm, step the optimizers (and the EMA), zero the gradients."""
        for opt in self.optimizers:
            self.scaler.unscale_(opt)
        norm = clip_grad_norm(self.params, self.s.clip_norm)
        # fp16 overflow: skip this update, the scaler lowers its scale (a host sync; GradScaler.step
        # makes one anyway). Other precisions do not look here: _check_finite reads the window's sum.
        if self.precision == "fp16" and not torch.isfinite(norm):
            self.skipped += 1
        else:
            for opt in self.optimizers:
                self.scaler.step(opt)
            if self.ema is not None:
                update_ema(self.ema, self.model, self.s.ema_decay, self.ema_started)
                self.ema_started = True
            window.grad_norm.add(norm)
        self.scaler.update()
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)

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

    def _result(self, step: int, start_step: int, t0: float, tokens_total: float) -> TrainResult:
        best, ctx = self.best, self.ctx
        if best.stopped_early:
            self._say(f"stopped early at step {step}: no improvement of {self.s.best_metric} in {self.s.patience} "
                      f"evaluations (best {best.best_value} at step {best.best_step})")
        return TrainResult(step=step, start_step=start_step, last=self.last_record, precision=self.precision,
                           world_size=ctx.world_size, output_dir=self.out,
                           checkpoint=self.last_checkpoint or self.ckdir.latest(),
                           best_step=best.best_step, best_value=best.best_value, best_metrics=best.best_metrics,
                           stopped_early=best.stopped_early, elapsed_s=time.perf_counter() - t0,
                           tokens=int(tokens_total), planned_steps=self.total_steps, warnings=self.warnings)

    # --- logging, evaluation, checkpoints ------------------------------------------------------------

    def _log_evaluate_save(self, step: int, last: bool, window: LogWindow, lr: float, t0: float) -> float:
        """What is due after optimizer step `step`: a log line, an evaluation, a checkpoint (always at the
        end). Returns the tokens of the window logged (0 without a log line)."""
        s = self.s
        logged = step % s.log_every == 0 or last
        evaluating = self.eval_fn is not None and ((s.eval_every and step % s.eval_every == 0) or last)
        saving = s.save_every and step % s.save_every == 0
        tokens = 0.0
        if logged or evaluating or saving:
            grad_norm_sum = self._check_finite(step, window)  # before anything is logged, scored or saved
        if logged:
            tokens = self._log(step, window, grad_norm_sum, lr, time.perf_counter() - t0)
        if evaluating:
            eval_t0 = time.perf_counter()
            self._evaluate(step)
            if self.budget is not None and not last:
                self._refit_budget(step, time.perf_counter() - eval_t0)
        if saving or last or self.best.stopped_early:
            self._save(step)
        if logged:
            window.reset(step + 1)  # after evaluating and saving: tokens/s measures training only
        return tokens

    def _refit_budget(self, step: int, eval_seconds: float) -> None:
        """Evaluations take time out of the budget: fit the remaining steps again (rank 0 decides)."""
        ctx, budget = self.ctx, self.budget
        seconds = D.broadcast_object(eval_seconds, ctx)
        budget.refit(step, seconds, self.s.eval_every)
        planned = D.broadcast_object(budget.total_steps, ctx)  # rank 0's plan for all
        budget.total_steps = planned
        if planned != self.total_steps:
            note = self._plan(planned)
            self._say(f"time budget: {budget.step_seconds():.3f} s per step, evaluations "
                      f"{seconds:.1f} s; the run now ends at step {planned:,}"
                      + (f"; {note}" if note else ""))

    def _say(self, text: str) -> None:
        if self.ctx.is_main:
            self.progress.message(text)

    def _banner(self, start_step: int) -> str:
        s, ctx = self.s, self.ctx
        n_params = sum(p.numel() for p in self.model.parameters())
        tables = ", ".join(f"{n} {tuple(p.shape)}" for n, p in zip(self.sparse_names, self.sparse_params))
        where = f"resuming from step {start_step}" if start_step else "starting"
        evals = f" (evaluations {self.eval_precision})" if self.eval_fn is not None else ""
        return (f"train: {where} · {n_params:,} parameters · {self.precision}{evals} on {ctx.device} · "
                f"{ctx.world_size} process(es) × {s.grad_accum} accum × {self.micro_batch} = batch {s.batch_size}"
                + f" · warm-up {self.schedule.warmup_steps:,} of {self.total_steps:,} steps"
                + f" · {describe_optimizers(self.optimizers)}"
                + (f" · torch.compile ({s.compile_mode or 'default'})" if s.compile else "")
                + (f" · row-sparse tables: {tables}" if tables else "") + f" · output {self.out}")

    def _check_finite(self, step: int, window: LogWindow) -> float:
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

    def _log(self, step: int, window: LogWindow, grad_norm_sum: float, lr: float, elapsed: float) -> float:
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
            record["skipped_steps"] = self.skipped
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
        """Score the model (the average with EMA) on rank 0; keep best.pt, count patience, record."""
        s, ctx = self.s, self.ctx
        scored = self.model if self.ema is None else self.ema.module
        metrics = self._score(scored)
        improved = self.best.update(step, metrics)
        if improved and ctx.is_main:
            self.ckdir.save_best({"format": FORMAT, "kind": "best", "step": step, "metric": s.best_metric,
                                  "value": self.best.best_value, "metrics": metrics, "fingerprint": self.fp,
                                  "model": scored.state_dict()})
        if ctx.is_main:
            record = {"kind": "eval", "step": step, **metrics}
            if self.metrics_log is not None:
                self.metrics_log.write(record)
            shown = " · ".join(f"{k} {v:.4f}" for k, v in metrics.items())
            self._say(f"eval @ step {step}: {shown}" + (" (best so far)" if improved else ""))
            if self.on_eval is not None:
                self.on_eval(step, metrics, improved)

    def _score(self, scored: nn.Module) -> dict[str, float]:
        """`eval_fn` on rank 0, its metrics sent to every process. RNG states are restored afterwards, so
        evaluating does not change the training trajectory."""
        ctx = self.ctx
        saved_rng = rng_state()
        metrics = None
        if ctx.is_main:
            scored.eval()
            try:
                run = inference_model(scored, self.eval_precision)  # int8: a quantized copy, for this evaluation
                with torch.no_grad(), inference_autocast(self.eval_precision, ctx.device):
                    metrics = {k: float(v) for k, v in self.eval_fn(run).items()}
            finally:
                self.model.train()
        metrics = D.broadcast_object(metrics, ctx)
        set_rng_state(saved_rng)
        return metrics

    def _stop(self, step: int, signum: int, window: LogWindow) -> None:
        """SIGTERM/SIGINT (on any process): checkpoint optimizer step `step` unless that is done, then stop
        every process with `Interrupted`."""
        if self.saved_step != step:
            self._check_finite(step, window)  # as before every checkpoint: never save diverged weights
            self._save(step)
        D.barrier(self.ctx)  # rank 0 has written the checkpoint before any process reports it
        raise Interrupted(f"interrupted at step {step}: checkpoint saved; run the same command to resume", signum,
                          announce=self.ctx.is_main)

    def _save(self, step: int) -> None:
        ctx = self.ctx
        self.saved_step = step
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
                "eval": self.best.state_dict(),
            }
            self.last_checkpoint = self.ckdir.save(state, step, self.s.keep_last)
