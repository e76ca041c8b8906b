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
wall-clock budget (`max_minutes`) fits the step count and keeps fitting it; and steps that neither log,
evaluate nor save make no host sync of their own. Evaluations run in `settings.eval_dtype`. SIGTERM /
SIGINT finish the step, save a checkpoint and stop (zencli.signals).

The loop's parts: step.py (one optimizer step: optimizers, scaler, EMA), schedule.py (`StepPlan`: steps,
learning rate, evaluation cadence), budget.py (`TimeBudget`: re-fits the plan to the clock),
early_stopping.py (the best evaluation, patience), progress.py (`RunLog`, the `BaselineCheck` callback),
window.py (the sums between log lines), run_dir.py (the checkpoint to resume, the output directory).

The contract of `loss_fn`, `data`, `eval_fn` and the rest, and what each step does: docs/design.md, "The
training loop".
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
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
from zencli.train.data import ResumableBatches, prefetch
from zencli.train.dtype import inference_autocast, inference_model, resolve_inference_dtype
from zencli.train.early_stopping import BestEvaluation
from zencli.train.lock import RunLock
from zencli.train.optim import describe_optimizers, unmark_sparse_embeddings
from zencli.train.progress import BaselineCheck, BaselineWatch, Callback, RunLog
from zencli.train.run_dir import checkpoint_to_resume, prepare_output_dir, refuse_another_run
from zencli.train.schedule import StepPlan
from zencli.train.settings import TrainSettings
from zencli.train.step import Optimization
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
    dtype: str
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
          lr_scales: dict[str, float] | None = None, epoch_steps: int | None = None) -> TrainResult:
    """Train `model` in place; see the module docstring. `lr_scales`: parameter name → multiplier of the
    learning rate (`zencli.train.optim.build_optimizers`). `epoch_steps`: optimizer steps of one pass over
    the data, the cadence `eval_every: auto` follows where it can."""
    settings.validate()
    if not isinstance(data, ResumableBatches):
        raise TypeError("data must implement ResumableBatches (configure, state, load_state, __iter__)")
    ctx = D.setup(settings.device)
    try:
        with torch_threads(settings.num_threads):  # restored afterwards: the caller's threads stay its own
            trainer = _Trainer(model, loss_fn, data, settings, ctx, eval_fn, on_eval, fingerprint_extra or {},
                               RunLog(console, show_progress, ctx.is_main),
                               [BaselineCheck(watch)] if watch is not None else [], lr_scales or {}, epoch_steps)
            try:
                return trainer.run()
            finally:
                unmark_sparse_embeddings(trainer.opt.sparse_tables)  # the caller gets its model back as it was
    finally:
        D.teardown(ctx)


@dataclass
class _RunFiles:
    """The run's directory: where checkpoints go, the fingerprint a checkpoint must match to be resumed."""

    out: Path
    fp_values: dict[str, Any]
    ckdir: CheckpointDir = field(init=False)
    fp: str = field(init=False)
    last_checkpoint: Path | None = None  # written by this invocation
    saved_step: int = -1  # the step of the newest checkpoint

    def __post_init__(self) -> None:
        self.ckdir = CheckpointDir(self.out / "checkpoints")
        self.fp = fingerprint(self.fp_values)


class _Trainer:
    """One run of the loop: the optimizer step (`Optimization`) and, beside it, the policies that decide
    what follows each step: the plan (`StepPlan`), the time budget, early stopping, the callbacks, the
    records (`RunLog`) and the checkpoints."""

    def __init__(self, model: nn.Module, loss_fn: LossFn, data: ResumableBatches, settings: TrainSettings,
                 ctx: D.DistContext, eval_fn: EvalFn | None, on_eval: OnEval | None,
                 fingerprint_extra: dict[str, Any], log: RunLog, callbacks: list[Callback],
                 lr_scales: dict[str, float], epoch_steps: int | None):
        s = self.s = settings
        self.ctx, self.model, self.loss_fn, self.log, self.callbacks = ctx, model, loss_fn, log, callbacks
        self.eval_fn, self.on_eval = eval_fn, on_eval
        model.to(ctx.device)
        model.train()
        self.opt = Optimization(model, s, ctx, lr_scales)
        self.eval_dtype, _ = resolve_inference_dtype(s.eval_dtype, ctx.device, key="train.eval_dtype")
        self.plan = StepPlan(s, epoch_steps)
        self.budget = TimeBudget(s.max_minutes, s.max_steps, ctx) if s.max_minutes else None
        self.best = BestEvaluation(s.best_metric, s.best_mode, s.patience)  # in checkpoints
        self.data = prefetch(data, s.data_workers, ctx.device)  # batches built ahead in worker processes
        self.data.configure(micro_batch_size=s.micro_batch_size(ctx.world_size), rank=ctx.rank,
                            world_size=ctx.world_size)
        self.files = _RunFiles(Path(s.output_dir), {
            **s.fingerprint_fields(), "dtype": self.opt.dtype,
            "parameters": {n: list(p.shape) for n, p in model.named_parameters()}, "extra": fingerprint_extra})
        self.vote: D.StopVote | None = None  # while running
        self.checked_step = 0  # the gradient norms of the steps up to this one were finite

    # --- setup ---------------------------------------------------------------------------------------

    def _resume_state(self) -> dict | None:
        """Find and check the checkpoint to continue from; prepare the output directory (rank 0)."""
        s, f = self.s, self.files
        state = checkpoint_to_resume(s, f.ckdir, f.out, f.fp, f.fp_values, self.log.file_notes.append)
        if state is None and not s.overwrite:
            refuse_another_run(f.out, f.fp, f.fp_values)
        D.barrier(self.ctx)  # every process has read what it needs before rank 0 changes the directory
        if self.ctx.is_main:
            run = {"fingerprint": f.fp, "fingerprint_values": f.fp_values, "settings": to_dict(s),
                   "dtype": self.opt.dtype, "world_size": self.ctx.world_size, "torch": torch.__version__}
            prepare_output_dir(f.out, f.ckdir, overwrite=s.overwrite,
                               resumed_step=state["step"] if state else 0, run=run)
        D.barrier(self.ctx)
        return state

    def _load(self, state: dict) -> None:
        ctx = self.ctx
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state)
        if self.budget is not None and state.get("budget"):
            self.budget.load_state_dict(state["budget"])
            note = self.plan.replan(self.budget.total_steps)
            if note:
                self.log.say(f"note: {note}")
        old, new = state.get("schedule") or {}, self.plan.schedule.state_dict()
        if old and (old["warmup_steps"], old["total_steps"]) != (new["warmup_steps"], new["total_steps"]):
            # e.g. a checkpoint of a budgeted run from before warmup_steps were honoured under a budget
            self.log.say(f"note: the checkpoint was trained to warm up over {old['warmup_steps']:,} of "
                         f"{old['total_steps']:,} steps; the learning rate continues on this run's schedule "
                         f"({new['warmup_steps']:,} of {new['total_steps']:,})")
        self.best.load_state_dict(state["eval"])
        same_layout = len(state["rng"]) == ctx.world_size
        self.data.load_state(state["data"][ctx.rank] if same_layout else state["data"][0])
        if same_layout:
            set_rng_state(state["rng"][ctx.rank])
        else:
            seed_everything(self.s.seed + ctx.rank + 1_000_003 * state["step"])
            self.log.say(f"note: resuming a {len(state['rng'])}-process checkpoint with {ctx.world_size} "
                         "processes: random streams are reseeded, so losses will not match the original run")

    def _start(self, state: dict | None) -> tuple[int, nn.Module]:
        """Continue from `state` or seed a fresh run; the step to start from and the model to call (a DDP
        wrapper when distributed). The progress display and metrics log open here."""
        s, ctx, opt = self.s, self.ctx, self.opt
        start_step = 0
        if state is not None:
            self._load(state)
            start_step = state["step"]
        else:
            seed_everything(s.seed + ctx.rank)
        opt.ema_started = opt.ema is not None and int(opt.ema.n_averaged) > 0  # a CPU counter
        forward_model = self.model
        if ctx.distributed:
            forward_model = D.wrap_ddp(self.model, ctx, opt.sparse_names, s.find_unused_parameters)
        if s.compile:
            # only the training forward: self.model (state dicts, evaluation, EMA) stays the eager module
            forward_model = torch.compile(forward_model, mode=s.compile_mode)
        self.log.open(self.files.out, self.plan.total_steps, start_step, s.tensorboard, self._banner(start_step))
        self.checked_step = start_step
        self.files.saved_step = start_step if state is not None else -1
        return start_step, forward_model

    # --- the loop ------------------------------------------------------------------------------------

    def run(self) -> TrainResult:
        with RunLock(self.files.out) if self.ctx.is_main else contextlib.nullcontext(), StopRequest() as request:
            self.vote = D.StopVote(self.ctx, request)
            return self._run(self._resume_state())

    def _run(self, state: dict | None) -> TrainResult:
        start_step, forward_model = self._start(state)
        del state  # its tensors are in the model and optimizers now: no second copy while training
        t0 = time.perf_counter()
        step, tokens_total = start_step, 0.0
        window = LogWindow(start_step + 1)
        batches = iter(self.data)
        try:
            # a resumed run whose budget (earlier invocations' time included) is already used up trains no more
            spent = self.budget is not None and start_step > 0 and self.budget.used_up()
            done = step >= self.plan.total_steps or self.best.stopped_early or spent
            while not done:
                step_t0 = time.perf_counter()
                factor = self.plan.schedule.factor(step)
                self.opt.step(forward_model, self.loss_fn, batches, factor, window)
                step += 1
                last = self._after_step(step, step_t0, first=step == start_step + 1)
                self.log.progress.advance(step)
                tokens_total += self._log_evaluate_save(step, last, window, factor * self.s.lr, t0)
                done = last or self.best.stopped_early
                if not done and (signum := self.vote.poll()):
                    self._stop(step, signum, window)
            if signum := self.vote.finish():  # a signal during the last steps: the run is complete, say so
                self._stop(step, signum, window)
            D.barrier(self.ctx)
            if self.opt.ema is not None:
                self.model.load_state_dict(self.opt.ema.module.state_dict())  # the run ends on the averaged weights
        finally:
            getattr(batches, "close", lambda: None)()  # ends data worker processes now (errors, Ctrl-C, the end)
            self.log.close()
        return self._result(step, start_step, t0, tokens_total)

    def _after_step(self, step: int, step_t0: float, first: bool) -> bool:
        """Time-budget bookkeeping after optimizer step `step`; True when it is the run's last."""
        budget, plan = self.budget, self.plan
        if budget is None:
            return step >= plan.total_steps
        if not budget.fitted and self.ctx.device.type == "cuda":
            torch.cuda.synchronize(self.ctx.device)  # calibration times the GPU's work, not the queueing
        changed, spent = budget.after_step(step, time.perf_counter() - step_t0, first,
                                           plan.eval_every if self.eval_fn is not None else 0, self.s.save_every)
        if changed:
            note = plan.replan(budget.total_steps)
            self.log.set_total(plan.total_steps)
            if budget.news():
                cap = f" (max_steps {self.s.max_steps:,})" if plan.total_steps < self.s.max_steps else ""
                self.log.say(f"time budget {self.s.max_minutes:g} min: {budget.step_seconds():.3f} s per step → "
                             f"{plan.total_steps:,} steps{cap}" + (f"; {note}" if note else ""))
        if spent and step < plan.total_steps:
            self.log.say(f"time budget {self.s.max_minutes:g} min spent at step {step:,} of {plan.total_steps:,}")
        return step >= plan.total_steps or spent

    def _result(self, step: int, start_step: int, t0: float, tokens_total: float) -> TrainResult:
        best, ctx = self.best, self.ctx
        if best.stopped_early:
            self.log.say(f"stopped early at step {step}: no better {self.s.best_metric} in "
                         f"{best.patience_steps(self.plan.total_steps):,} steps (patience {self.s.patience:g} of "
                         f"{self.plan.total_steps:,} planned; best {best.best_value} at step {best.best_step})")
        return TrainResult(step=step, start_step=start_step, last=self.log.last_record,
                           dtype=self.opt.dtype, world_size=ctx.world_size, output_dir=self.files.out,
                           checkpoint=self.files.last_checkpoint or self.files.ckdir.latest(),
                           best_step=best.best_step, best_value=best.best_value, best_metrics=best.best_metrics,
                           stopped_early=best.stopped_early, elapsed_s=time.perf_counter() - t0,
                           tokens=int(tokens_total), planned_steps=self.plan.total_steps,
                           warnings=self.log.warnings)

    # --- logging, evaluation, checkpoints ------------------------------------------------------------

    def _log_evaluate_save(self, step: int, last: bool, window: LogWindow, lr: float, t0: float) -> float:
        """What is due after optimizer step `step`: a log line, an evaluation, a checkpoint (always at the
        end). Returns the tokens of the window logged (0 without a log line). The time of evaluations and
        checkpoints goes to the budget, which plans for them."""
        s = self.s
        logged = step % s.log_every == 0 or last
        evaluating = self.eval_fn is not None and (self.plan.evaluates(step) or last)
        saving = s.save_every and step % s.save_every == 0
        tokens = 0.0
        if logged or evaluating or saving:
            grad_norm_sum = self._check_finite(step, window)  # before anything is logged, scored or saved
        if logged:
            tokens = self._log(step, window, grad_norm_sum, lr, time.perf_counter() - t0)
        if evaluating:
            self._timed("eval", self._evaluate, step)
            if self.best.stopped_early and not logged:  # the run ends here: its last step gets its train record
                logged = True
                tokens = self._log(step, window, grad_norm_sum, lr, time.perf_counter() - t0)
        if saving or last or self.best.stopped_early:
            self._timed("save", self._save, step)
        if logged:
            window.reset(step + 1)  # after evaluating and saving: tokens/s measures training only
        return tokens

    def _timed(self, what: str, fn: Callable[[int], None], step: int) -> None:
        began = time.perf_counter()
        fn(step)
        if self.budget is not None:
            self.budget.took(what, time.perf_counter() - began)

    def _banner(self, start_step: int) -> str:
        s, ctx, opt = self.s, self.ctx, self.opt
        n_params = sum(p.numel() for p in self.model.parameters())
        tables = ", ".join(f"{n} {tuple(p.shape)}" for n, p in zip(opt.sparse_names, opt.sparse_params))
        where = f"resuming from step {start_step}" if start_step else "starting"
        evals = f" (evaluations {self.eval_dtype})" if self.eval_fn is not None else ""
        return (f"train: {where} · {n_params:,} parameters · {opt.dtype}{evals} on {ctx.device} · "
                f"{ctx.world_size} process(es) × {s.grad_accum} accum × {s.micro_batch_size(ctx.world_size)} = "
                f"batch {s.batch_size} · warm-up {self.plan.schedule.warmup_steps:,} of {self.plan.total_steps:,} "
                f"steps · {describe_optimizers(opt.optimizers)}"
                + (f" · torch.compile ({s.compile_mode or 'default'})" if s.compile else "")
                + (f" · row-sparse tables: {tables}" if tables else "") + f" · output {self.files.out}")

    def _check_finite(self, step: int, window: LogWindow) -> float:
        """The window's gradient-norm sum (a host sync); a ZenError naming the steps when it is inf/nan.

        Norms are >= 0, so the sum is finite exactly when every step's norm was (fp16 leaves out the
        overflowing steps its scaler skipped)."""
        total = window.grad_norm.value()
        if not math.isfinite(total):
            first = max(window.first_step, self.checked_step + 1)
            where = f"step {step}" if first == step else f"steps {first}–{step}"
            raise ZenError(f"{where}: the gradient norm is {total} — training diverged; lower lr, raise "
                           "warmup_steps, or use dtype fp32")
        self.checked_step = step
        return total

    def _log(self, step: int, window: LogWindow, grad_norm_sum: float, lr: float, elapsed: float) -> float:
        loss, tokens, metrics = window.totals(self.ctx)
        if not math.isfinite(loss):
            raise ZenError(f"step {step}: the loss is {loss} — training diverged; lower lr, raise "
                           "warmup_steps, or use dtype fp32")
        seconds = max(time.perf_counter() - window.start, 1e-9)
        metrics = {k: (v if math.isfinite(v) else None) for k, v in metrics.items()}  # JSON has no NaN
        record: dict[str, Any] = {"kind": "train", "step": step, "loss": loss, **metrics, "lr": lr,
                                  "grad_norm": grad_norm_sum / max(window.steps, 1),
                                  "tokens_per_s": tokens / seconds, "elapsed_s": round(elapsed, 3)}
        if self.opt.dtype == "fp16":
            record["skipped_steps"] = self.opt.skipped
        self.log.train(step, record)
        for callback in self.callbacks:
            warning = callback.on_log(step, record, self.plan)
            if warning is not None:
                self.log.warn(warning)
        return tokens

    def _evaluate(self, step: int) -> None:
        """Score the model (the average with EMA) on rank 0; keep best.pt, count patience, record."""
        s, ctx = self.s, self.ctx
        scored = self.model if self.opt.ema is None else self.opt.ema.module
        metrics = self._score(scored)
        improved = self.best.update(step, metrics, self.plan.total_steps, self.plan.schedule.warmup_steps)
        if improved and ctx.is_main:
            self.files.ckdir.save_best({"format": FORMAT, "kind": "best", "step": step, "metric": s.best_metric,
                                        "value": self.best.best_value, "metrics": metrics, "fingerprint": self.files.fp,
                                        "model": scored.state_dict()})
        if ctx.is_main:
            self.log.write({"kind": "eval", "step": step, **metrics})
            shown = " · ".join(f"{k} {v:.4f}" for k, v in metrics.items())
            self.log.say(f"eval @ step {step}: {shown}" + (" (best so far)" if improved else ""))
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
                run = inference_model(scored, self.eval_dtype)  # int8: a quantized copy, for this evaluation
                with torch.no_grad(), inference_autocast(self.eval_dtype, ctx.device):
                    metrics = {k: float(v) for k, v in self.eval_fn(run).items()}
            finally:
                self.model.train()
        metrics = D.broadcast_object(metrics, ctx)
        set_rng_state(saved_rng)
        return metrics

    def _stop(self, step: int, signum: int, window: LogWindow) -> None:
        """SIGTERM/SIGINT (on any process): checkpoint optimizer step `step` unless that is done, then stop
        every process with `Interrupted`."""
        if self.files.saved_step != step:
            self._check_finite(step, window)  # as before every checkpoint: never save diverged weights
            self._save(step)
        D.barrier(self.ctx)  # rank 0 has written the checkpoint before any process reports it
        raise Interrupted(f"interrupted at step {step}: checkpoint saved; run the same command to resume", signum,
                          announce=self.ctx.is_main)

    def _save(self, step: int) -> None:
        ctx, files = self.ctx, self.files
        files.saved_step = step
        data_states = D.gather_objects(self.data.state(), ctx)
        rngs = D.gather_objects(rng_state(), ctx)
        if ctx.is_main:
            state = {
                "format": FORMAT, "step": step, "fingerprint": files.fp, "fingerprint_values": files.fp_values,
                "model": self.model.state_dict(), **self.opt.state_dict(),
                "schedule": self.plan.schedule.state_dict(),
                "budget": self.budget.state_dict() if self.budget is not None else None,
                "rng": rngs, "data": data_states, "world_size": ctx.world_size,
                "eval": self.best.state_dict(),
            }
            files.last_checkpoint = files.ckdir.save(state, step, self.s.keep_last)
