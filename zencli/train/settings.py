"""`TrainSettings`: every knob of the shared training loop, as a recipe section.

Pretraining and fine-tuning recipes embed this dataclass (e.g. as their `train:` section); the recipe
loader calls `validate()`, whose errors name the key. This module imports nothing heavy (no torch), so
the recipe schema can import it without slowing down `zen --help`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from zencli.errors import ZenError

Dtype = Literal["auto", "fp32", "bf16", "fp16"]
# The dtype a trained model is run in (prediction, evaluation): `zen predict/evaluate --dtype`,
# `zen quickstart --dtype` and `train.eval_dtype` all take these (zencli.train.dtype resolves them).
InferenceDtype = Literal["auto", "fp32", "bf16", "int8"]
INFERENCE_DTYPES: tuple[str, ...] = ("auto", "fp32", "bf16", "int8")

# Settings that decide the training trajectory: a checkpoint can only be resumed by a run whose values
# agree on all of them (plus the resolved dtype, the parameter shapes and the caller's extras).
# Logging, saving and evaluation cadence are left out: changing them does not change the losses.
FINGERPRINT_KEYS = (
    "lr", "warmup_steps", "max_steps", "batch_size", "grad_accum", "clip_norm", "weight_decay",
    "adam_beta1", "adam_beta2", "adam_eps", "seed", "sparse_embeddings", "sparse_min_rows",
)


@dataclass
class TrainSettings:
    """Optimisation, dtype, checkpointing and logging of one training run.

    `batch_size` is the GLOBAL batch: sequences per optimizer step, summed over gradient accumulation
    and processes. Each process feeds micro-batches of batch_size / (processes × grad_accum).
    """

    # Keys renamed since recipes were written with them: old key → new key (zencli.config.loading.from_dict
    # refuses an old one in one line naming the new one). `precision` also names P in P/R/F.
    RENAMED: ClassVar[dict[str, str]] = {"precision": "dtype", "eval_precision": "eval_dtype"}

    # optimisation (ZEN paper: AdamW, peak 1e-4, 36k warm-up steps, linear decay)
    lr: float = 1e-4
    # The warm-up, as steps or as a share of the run (set one): `warmup_steps` is honoured as given (a run
    # fitted into max_minutes shortens it, with a note, only where it would take over half the fitted run);
    # `warmup_ratio` is a fraction of the planned steps, so it follows the steps fitted into max_minutes.
    warmup_steps: int = 0
    warmup_ratio: float = 0.0
    max_steps: int = 1000
    # Wall-clock budget of the run (evaluations and checkpoints included): the loop times its first steps,
    # then shortens the run (and its LR decay) to the steps that fit, and stops at the budget at the latest.
    # The step count then depends on the machine's speed; max_steps stays the upper bound.
    max_minutes: float | None = None
    batch_size: int = 32
    grad_accum: int = 1
    clip_norm: float = 1.0  # 0: no clipping (the norm is still logged)
    weight_decay: float = 0.01  # not applied to biases and LayerNorm weights
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-6
    # Keep an exponential moving average of the weights (decay per optimizer step, e.g. 0.999: a horizon of
    # ~1,000 steps); evaluations, best.pt and the weights the run ends with are the average's. null: off.
    ema_decay: float | None = None
    # embedding tables with >= sparse_min_rows rows get row-sparse gradients and a lazy AdamW update
    sparse_embeddings: bool = True
    sparse_min_rows: int = 1000
    # numerics and placement
    dtype: Dtype = "auto"
    # The dtype of the evaluations during and after training (dev scores, best checkpoint, early
    # stopping, the scores written beside the model): as `zen evaluate --dtype`, independent of the
    # training dtype above. auto: bf16 on CUDA and on CPUs with bf16 instructions, else fp32.
    eval_dtype: InferenceDtype = "auto"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    seed: int = 42
    num_threads: int = 0  # CPU threads per process; 0: torch's default
    # Worker processes per training process that build batches ahead of the step (into pinned memory, copied
    # to the GPU asynchronously). auto: 0 on the CPU (batches are built in the training process when the step
    # asks: workers would take cores from the model), 2 on a GPU. Batches and losses are the same for every
    # value, so a run may be resumed with another.
    data_workers: int | Literal["auto"] = "auto"
    find_unused_parameters: bool = False  # DDP: set when some parameters get no gradient in a step
    # torch.compile the training forward: true (inductor's default mode), reduce-overhead (also CUDA graphs:
    # fewer kernel launches, for small launch-bound models on a GPU) or max-autotune; false: eager. Off by
    # default: on a CPU a compiled training step was slower than eager (docs/results.md, "torch.compile on a
    # CPU") and compiling takes a minute. Compiled kernels round differently, so losses match eager only
    # closely; a run may be resumed with another value.
    compile: bool | Literal["reduce-overhead", "max-autotune"] = False
    # output, checkpoints, resume
    output_dir: Path = Path("runs/train")
    save_every: int = 1000  # 0: only at the end
    keep_last: int = 3
    resume: str = "auto"  # auto: continue from output_dir if it has checkpoints | never | a checkpoint (*.pt)
    overwrite: bool = False  # delete this run's files in output_dir instead of refusing
    # logging
    log_every: int = 10
    tensorboard: bool = True  # write TensorBoard events when the tensorboard package is installed
    # evaluation, best checkpoint, early stopping (needs an eval_fn)
    # Steps between evaluations; 0: only at the end. auto: a step cadence that gives between MIN_EVALS and
    # MAX_EVALS evaluations of the planned steps (once per epoch where the caller names the epoch and that
    # keeps within the range); with a time budget it follows the re-planned step count.
    eval_every: int | Literal["auto"] = 0
    best_metric: str | None = None  # e.g. "f1": keep checkpoints/best.pt by this eval metric
    best_mode: Literal["max", "min"] = "max"
    # Early stopping: stop once this share of the planned steps has passed without a better evaluation
    # (e.g. 0.2), never inside the warm-up nor before a quarter of the run (zencli.train.early_stopping); 0: never
    patience: float = 0.0

    def validate(self) -> None:
        """Raise ZenError naming the first bad key."""
        def need(ok: bool, key: str, expected: str) -> None:
            if not ok:
                raise ZenError(f"{key}: expected {expected}, got {getattr(self, key)!r}")

        need(self.lr > 0, "lr", "a learning rate > 0")
        need(self.warmup_steps >= 0, "warmup_steps", "an integer >= 0")
        need(self.max_steps >= 1, "max_steps", "an integer >= 1")
        need(self.warmup_steps <= self.max_steps, "warmup_steps", f"<= max_steps ({self.max_steps})")
        need(0 <= self.warmup_ratio < 1, "warmup_ratio", "a fraction of the run's steps in [0, 1)")
        if self.warmup_steps and self.warmup_ratio:
            raise ZenError(f"warmup_steps, warmup_ratio: set one of them, not both (warmup_steps "
                           f"{self.warmup_steps}, warmup_ratio {self.warmup_ratio}); the other stays 0")
        need(self.max_minutes is None or self.max_minutes > 0, "max_minutes", "a number of minutes > 0 or null")
        need(self.batch_size >= 1, "batch_size", "an integer >= 1")
        need(self.grad_accum >= 1, "grad_accum", "an integer >= 1")
        need(self.batch_size % self.grad_accum == 0, "batch_size",
             f"a multiple of grad_accum ({self.grad_accum})")
        need(self.clip_norm >= 0, "clip_norm", "a number >= 0 (0 disables clipping)")
        need(self.weight_decay >= 0, "weight_decay", "a number >= 0")
        need(0 <= self.adam_beta1 < 1, "adam_beta1", "a number in [0, 1)")
        need(0 <= self.adam_beta2 < 1, "adam_beta2", "a number in [0, 1)")
        need(self.adam_eps > 0, "adam_eps", "a number > 0")
        need(self.ema_decay is None or 0 < self.ema_decay < 1, "ema_decay", "a decay in (0, 1) or null")
        need(self.sparse_min_rows >= 1, "sparse_min_rows", "an integer >= 1")
        need(self.num_threads >= 0, "num_threads", "an integer >= 0 (0: torch's default)")
        need(self.data_workers == "auto" or self.data_workers >= 0, "data_workers", "an integer >= 0 or auto")
        need(self.save_every >= 0, "save_every", "an integer >= 0 (0: only at the end)")
        need(self.keep_last >= 1, "keep_last", "an integer >= 1")
        need(self.log_every >= 1, "log_every", "an integer >= 1")
        need(self.eval_every == "auto" or self.eval_every >= 0, "eval_every",
             "an integer >= 0 (0: only at the end) or auto")
        check_patience(self.patience)
        need(self.patience == 0 or self.best_metric is not None, "patience",
             "0 unless best_metric is set (early stopping watches that metric)")
        need(self.best_metric is None or self.best_metric.strip() != "", "best_metric",
             "a metric name or null")
        need(self.resume in ("auto", "never") or self.resume.endswith(".pt"), "resume",
             "auto, never, or a checkpoint file (*.pt)")

    @property
    def compile_mode(self) -> str | None:
        """torch.compile's `mode` for `compile` (None: inductor's default); meaningful only when compile is set."""
        return None if self.compile is True else self.compile or None

    def micro_batch_size(self, world_size: int) -> int:
        """Sequences per forward pass in each of `world_size` processes."""
        per_step = world_size * self.grad_accum
        if self.batch_size % per_step:
            # The global batch is what keeps a run's trajectory whatever the process count, so it is never
            # rounded: say which process counts keep it, or which batch sizes this count can run.
            counts = [n for n in range(1, self.batch_size + 1) if self.batch_size % (n * self.grad_accum) == 0]
            keep = f"{', '.join(map(str, counts[:8]))}{' …' if len(counts) > 8 else ''} processes keep it, or " \
                if counts else ""
            raise ZenError(f"batch_size: the global batch of {self.batch_size} does not split over {world_size} "
                           f"processes × grad_accum {self.grad_accum}; {keep}set a batch_size that is a multiple "
                           f"of {per_step}")
        return self.batch_size // per_step

    def fingerprint_fields(self) -> dict[str, Any]:
        fields = {k: getattr(self, k) for k in FINGERPRINT_KEYS}
        # only when set, so runs without a budget / an average / a warm-up ratio keep their fingerprints
        for key in ("max_minutes", "ema_decay"):
            if getattr(self, key) is not None:
                fields[key] = getattr(self, key)
        if self.warmup_ratio:
            if self.max_minutes is None:
                # The planned steps are known: the same trajectory as these steps given explicitly (what
                # fine-tuning's warmup_ratio was turned into before), so such checkpoints stay resumable.
                fields["warmup_steps"] = warmup_from_ratio(self.warmup_ratio, self.max_steps)
            else:
                fields["warmup_ratio"] = self.warmup_ratio
        return fields


def check_patience(patience: float) -> None:
    """A ZenError naming the key unless `patience` is a share of the planned steps in [0, 1). A whole number
    >= 1 is what the setting meant before (evaluations without improvement): refused, not reinterpreted."""
    if 0 <= patience < 1:
        return
    old = (", a count of evaluations (what patience meant before); give the share of the run instead"
           if patience >= 1 and float(patience).is_integer() else "")
    raise ZenError(f"patience: expected a share of the planned steps in [0, 1) (e.g. 0.2; 0: no early stopping), "
                   f"got {patience:g}{old}")


def warmup_from_ratio(ratio: float, total_steps: int) -> int:
    """The warm-up steps `warmup_ratio` gives a run of `total_steps`."""
    return round(ratio * total_steps)
