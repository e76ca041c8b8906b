"""Model benchmark: ZEN 2.0 / ZEN 1.0 against a same-size plain BERT encoder, fp32 and bf16.

For every size (tiny 4×256 with 2 n-gram layers, small 6×512 / 3, base 12×768 / 6, or a custom
`LAYERSxHIDDENxNGRAM_LAYERS`) the encoders are built from one seed and measured in the same run:

- training step: forward of `ZenForPreTraining` with MLM + NSP labels (MLM logits at the masked
  positions only) under autocast, backward, global-norm clipping, optimizer step, zero_grad — with zen's
  optimizer setup (`mark_sparse_embeddings` + `build_optimizers`: AdamW, and the row-sparse LazyAdamW
  for the n-gram table). Variant `zen2+dense-adamw` runs the same ZEN 2.0 model with a dense gradient
  and dense AdamW on every table (what the released code does), for the optimizer-cost comparison;
- inference: the encoder (`ZenModel`, pooled output included, no pretraining heads) in eval mode under
  `torch.inference_mode()`.

Rounds are interleaved — each round runs every (variant, dtype) once, in an order rotated from
round to round — and the first `warmup` rounds are discarded; reported times are medians. Ratios
(vs plain BERT, bf16 vs fp32) are medians of the per-round ratios, so load drift on a shared machine
cancels as far as it can. Every phase is timed by wall clock and by process CPU time (`cpu_*` keys).
With one thread, CPU time is what other processes on a shared machine disturb least (a descheduled
thread uses none), so the summary judges by it (`judging_clock`); with more threads it would count
spin-waiting, and the wall clock is used.

More: docs/design.md, "Model benchmark".
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

from zencli.bench.common import interleaved_rounds
from zencli.bench.encoder_batches import (
    FIRST_CHAR_ID,
    CharSource,
    computed_slots,
    encoder_inputs,
    make_batches,
    real_slots,
    synthetic_chars,
    text_chars,
)
from zencli.bench.flops import device_sync, forward_flops, gemm_peak, training_flops
from zencli.errors import ZenError
from zencli.lexicon.matcher import NgramMatcher
from zencli.lexicon.ngram_file import Lexicon
from zencli.model.config import ZenConfig
from zencli.model.ngram_fusion import ngram_position_matrix
from zencli.model.pretraining import IGNORE_INDEX, ZenForPreTraining
from zencli.train.dtype import autocast, cpu_has_fast_bf16
from zencli.train.optim import build_optimizers, clip_grad_norm, mark_sparse_embeddings
from zencli.train.settings import TrainSettings

ENCODERS = ("zen2", "zen1", "bert")
DENSE_VARIANT = "zen2+dense-adamw"
DTYPES = ("fp32", "bf16")
# The optimizer setup of zen's training loop, with its defaults.
_TRAIN = TrainSettings()
LR, BETAS, EPS = _TRAIN.lr, (_TRAIN.adam_beta1, _TRAIN.adam_beta2), _TRAIN.adam_eps
WEIGHT_DECAY, CLIP_NORM, SPARSE_MIN_ROWS = _TRAIN.weight_decay, _TRAIN.clip_norm, _TRAIN.sparse_min_rows


@dataclass(frozen=True)
class ModelSize:
    name: str
    layers: int
    hidden: int
    heads: int
    intermediate: int
    ngram_layers: int


SIZES = {
    "tiny": ModelSize("tiny", 4, 256, 4, 1024, 2),
    "small": ModelSize("small", 6, 512, 8, 2048, 3),
    "base": ModelSize("base", 12, 768, 12, 3072, 6),
}
DEFAULT_STEPS = {"tiny": 8, "small": 4, "base": 3}  # timed rounds per size when `steps` is 0


def parse_size(spec: str) -> ModelSize:
    """`tiny|small|base`, or `LAYERSxHIDDENxNGRAM_LAYERS` (heads = hidden/64, at least 1; FFN 4·hidden)."""
    spec = spec.strip()
    if spec in SIZES:
        return SIZES[spec]
    parts = spec.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ZenError(f"--sizes: expected tiny, small, base or LAYERSxHIDDENxNGRAM_LAYERS (e.g. 2x128x1), "
                       f"got {spec!r}")
    layers, hidden, ngram_layers = map(int, parts)
    heads = max(1, hidden // 64)
    if layers < 1 or hidden < 8 or hidden % heads or (hidden // heads) % 2:
        raise ZenError(f"--sizes: {spec!r}: need >= 1 layer and a hidden size >= 8 that splits into "
                       f"{heads} head(s) of even size")
    if ngram_layers > layers:
        raise ZenError(f"--sizes: {spec!r}: n-gram layers ({ngram_layers}) must not exceed layers ({layers})")
    return ModelSize(spec, layers, hidden, heads, 4 * hidden, ngram_layers)


def model_config(size: ModelSize, encoder: str, *, vocab_size: int, ngram_rows: int) -> ZenConfig:
    return ZenConfig(vocab_size=vocab_size, hidden_size=size.hidden, num_hidden_layers=size.layers,
                     num_attention_heads=size.heads, intermediate_size=size.intermediate,
                     word_size=ngram_rows, num_hidden_word_layers=size.ngram_layers, encoder=encoder)


# -- measurement ------------------------------------------------------------------------------------

class Clock:
    """Wall-clock and process CPU time since the last `lap()`. CPU time counts only this process's work,
    so on a shared machine it is the measure least disturbed by other load when running one thread
    (with more, it also counts threads spin-waiting for a descheduled sibling)."""

    def __init__(self, device: torch.device):
        self.device = device
        device_sync(device)
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self) -> tuple[float, float]:
        device_sync(self.device)
        wall, cpu = time.perf_counter(), time.process_time()
        out = (wall - self.wall, cpu - self.cpu)
        self.wall, self.cpu = wall, cpu
        return out


class Variant:
    """One model + optimizer setup that can run a timed training step and a timed inference pass."""

    def __init__(self, name: str, model: ZenForPreTraining, sparse: bool, device: torch.device):
        self.name, self.model, self.device = name, model, device
        self.has_ngrams = model.config.has_ngrams
        self.tables = mark_sparse_embeddings(model, SPARSE_MIN_ROWS) if sparse else []
        self.optimizers = build_optimizers(model, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY,
                                           sparse_tables=self.tables)
        self.params = [p for p in model.parameters() if p.requires_grad]

    def _set_sparse(self) -> None:
        # the dense variant shares its model with the sparse one: (re)state the tables' mode each step
        for module in self.model.modules():
            if isinstance(module, nn.Embedding):
                module.sparse = False
        for t in self.tables:
            t.sparse = True

    def train_step(self, batch: dict[str, torch.Tensor], dtype: str
                   ) -> tuple[dict[str, tuple[float, float]], torch.Tensor]:
        """{phase: (wall s, CPU s)} for fwd, bwd, opt, and the loss of one training step (a 0-d tensor)."""
        self._set_sparse()
        self.model.train()
        inputs = encoder_inputs(batch, self.has_ngrams)
        clock = Clock(self.device)
        with autocast(dtype, self.device):
            out = self.model(batch["input_ids"], mlm_labels=batch["mlm_labels"], nsp_labels=batch["nsp_labels"],
                             **inputs)
        fwd = clock.lap()
        out.loss.backward()
        bwd = clock.lap()
        clip_grad_norm(self.params, CLIP_NORM)
        for opt in self.optimizers:
            opt.step()
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        return {"fwd": fwd, "bwd": bwd, "opt": clock.lap()}, out.loss.detach()

    def infer(self, batch: dict[str, torch.Tensor], dtype: str) -> tuple[float, float]:
        """(wall s, CPU s) of one encoder forward in eval mode."""
        self.model.eval()
        inputs = encoder_inputs(batch, self.has_ngrams)
        clock = Clock(self.device)
        with torch.inference_mode(), autocast(dtype, self.device):
            self.model.bert(batch["input_ids"], **inputs)
        return clock.lap()


def _peak_rss_mb() -> float | None:
    """This process's peak resident memory so far (Linux: ru_maxrss in KiB)."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else math.nan


def _build(size: ModelSize, encoder: str, vocab_size: int, ngram_rows: int, seed: int,
           device: torch.device) -> ZenForPreTraining:
    torch.manual_seed(seed)
    return ZenForPreTraining(model_config(size, encoder, vocab_size=vocab_size, ngram_rows=ngram_rows)).to(device)


def bf16_accuracy(model: ZenForPreTraining, batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, float]:
    """bf16 autocast vs fp32 on one batch, eval mode: sequence output and MLM loss."""
    model.eval()
    inputs = encoder_inputs(batch, model.config.has_ngrams)
    res = {}
    with torch.inference_mode():
        for dtype in DTYPES:
            with autocast(dtype, device):
                out = model(batch["input_ids"], mlm_labels=batch["mlm_labels"], **inputs)
            res[dtype] = (out.encoder.sequence_output.float(), float(out.mlm_loss))
    (ref, loss32), (low, loss16) = res["fp32"], res["bf16"]
    diff = (low - ref).abs()
    return {"seq_max_abs_err": float(diff.max()), "seq_rel_err": float(diff.norm() / ref.norm()),
            "seq_abs_max": float(ref.abs().max()), "mlm_loss_fp32": loss32, "mlm_loss_bf16": loss16,
            "mlm_loss_abs_diff": abs(loss16 - loss32)}


def training_curve(size: ModelSize, steps: int, batches: list[dict[str, torch.Tensor]], *, vocab_size: int,
                   ngram_rows: int, seed: int, lr: float, device: torch.device,
                   advance: Callable[[str], None]) -> dict[str, Any]:
    """ZEN 2.0 trained `steps` steps in fp32 and in bf16 from the same init, batches and dropout seed."""
    curves: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    for dtype in DTYPES:
        model = _build(size, "zen2", vocab_size, ngram_rows, seed, device)
        v = Variant("zen2", model, True, device)
        for opt in v.optimizers:
            for group in opt.param_groups:
                group["lr"] = lr
        torch.manual_seed(seed + 1)
        losses, t = [], 0.0
        for i in range(steps):
            times, loss = v.train_step(batches[i % len(batches)], dtype)
            losses.append(float(loss))
            t += sum(wall for wall, _ in times.values())
            advance(f"bf16 check: {dtype} training")
        curves[dtype], seconds[dtype] = losses, t
        del v, model
    k = max(1, min(5, steps // 3))
    f32, b16 = curves["fp32"], curves["bf16"]
    last32, last16 = statistics.fmean(f32[-k:]), statistics.fmean(b16[-k:])
    return {
        "size": size.name, "encoder": "zen2", "steps": steps, "lr": lr, "loss_fp32": f32, "loss_bf16": b16,
        "first_loss_fp32": f32[0], "first_loss_bf16": b16[0], "final_loss_fp32": last32, "final_loss_bf16": last16,
        "final_window": k, "final_rel_gap": abs(last16 - last32) / abs(last32),
        "max_abs_step_diff": max(abs(a - b) for a, b in zip(f32, b16)),
        "seconds_fp32": seconds["fp32"], "seconds_bf16": seconds["bf16"],
    }


def _ratio(a: list[float], b: list[float]) -> float:
    """Median of the per-round ratios a/b (rounds were interleaved, so each pair ran close in time)."""
    return _median([x / y for x, y in zip(a, b) if y > 0])


def bench_size(size: ModelSize, *, encoders: list[str], dtypes: list[str], dense_opt: bool,
               batches: list[dict[str, torch.Tensor]], steps: int, warmup: int, infer_steps: int,
               vocab_size: int, ngram_rows: int, seed: int, device: torch.device,
               advance: Callable[[str], None]) -> dict[str, Any]:
    """All measurements of one size; see the module docstring."""
    B, L = batches[0]["input_ids"].shape
    variants: list[Variant] = []
    built: dict[str, ZenForPreTraining] = {}
    for enc in encoders:
        built[enc] = _build(size, enc, vocab_size, ngram_rows, seed, device)
        variants.append(Variant(enc, built[enc], True, device))
    if dense_opt and "zen2" in built:
        variants.append(Variant(DENSE_VARIANT, built["zen2"], False, device))
    combos = [(v, p) for p in dtypes for v in variants]

    # samples[clock][phase][(variant, dtype)]: one value per timed round, clock 0 = wall, 1 = CPU
    samples: list[dict[str, dict[tuple[str, str], list[float]]]] = [
        {ph: {(v.name, p): [] for v, p in combos} for ph in ("fwd", "bwd", "opt", "fwd_bwd", "step", "infer")}
        for _ in range(2)]
    nb = len(batches)

    def train(combo: tuple[Variant, str], r: int) -> dict[str, tuple[float, float]]:
        times, _ = combo[0].train_step(batches[r % nb], combo[1])
        advance(f"{size.name}: training steps")
        return times

    for (v, p), rounds in interleaved_rounds(combos, steps, warmup, train).items():
        for times in rounds:
            for c in (0, 1):
                f, b, o = times["fwd"][c], times["bwd"][c], times["opt"][c]
                for ph, val in (("fwd", f), ("bwd", b), ("opt", o), ("fwd_bwd", f + b), ("step", f + b + o)):
                    samples[c][ph][(v.name, p)].append(val)

    def infer(combo: tuple[Variant, str], r: int) -> tuple[float, float]:
        times = combo[0].infer(batches[r % nb], combo[1])
        advance(f"{size.name}: inference")
        return times

    infer_combos = [(v, p) for v, p in combos if v.name != DENSE_VARIANT]  # same forward as zen2
    for (v, p), rounds in interleaved_rounds(infer_combos, infer_steps, warmup, infer).items():
        for times in rounds:
            for c in (0, 1):
                samples[c]["infer"][(v.name, p)].append(times[c])

    dispatch = {}
    for v, p in combos:  # one more (untimed) step each, counting what it dispatches
        host = [st["step"] for opt in v.optimizers for st in opt.state.values() if torch.is_tensor(st.get("step"))]
        with OpCounter(host) as counted:
            v.train_step(batches[0], p)
        dispatch[(v.name, p)] = {"ops_per_step": counted.ops, "host_syncs_per_step": counted.syncs}

    slots = statistics.fmean(computed_slots(b) for b in batches)
    # On a CPU the tower's linears run on the real slots only (ZenModel packs them; a GPU keeps the padding).
    slot_rows = statistics.fmean(real_slots(b) for b in batches) if device.type == "cpu" else None
    masked = statistics.fmean(float((b["mlm_labels"] != IGNORE_INDEX).sum()) for b in batches)
    rows = []
    for v, p in combos:
        key = (v.name, p)
        train_flops = training_flops(v.model.config, B, L, slots, masked, slot_rows)
        infer_flops = forward_flops(v.model.config, B, L, slots, masked, heads=False, slot_rows=slot_rows)
        row: dict[str, Any] = {"encoder": v.name, "dtype": p, "train": {}}
        for c, prefix in ((0, ""), (1, "cpu_")):
            t = samples[c]
            step = _median(t["step"][key])
            row["train"].update({
                f"{prefix}fwd_ms": 1e3 * _median(t["fwd"][key]), f"{prefix}bwd_ms": 1e3 * _median(t["bwd"][key]),
                f"{prefix}opt_ms": 1e3 * _median(t["opt"][key]), f"{prefix}step_ms": 1e3 * step,
                f"{prefix}step_min_ms": 1e3 * min(t["step"][key]), f"{prefix}tokens_per_s": B * L / step,
                # achieved rate over forward + backward (the optimizer does no matrix products)
                f"{prefix}gflops_per_s": train_flops / _median(t["fwd_bwd"][key]) / 1e9,
                # per step: the optimizer against the forward + backward of the same step
                f"{prefix}opt_over_fwd_bwd": _ratio(t["opt"][key], t["fwd_bwd"][key]),
            })
            if v.name != DENSE_VARIANT:
                it = _median(t["infer"][key])
                row.setdefault("infer", {}).update({f"{prefix}ms": 1e3 * it, f"{prefix}tokens_per_s": B * L / it,
                                                    f"{prefix}gflops_per_s": infer_flops / it / 1e9})
            if "bert" in built:
                row[f"{prefix}train_ratio_vs_bert"] = _ratio(t["step"][key], t["step"][("bert", p)])
                row[f"{prefix}fwd_bwd_ratio_vs_bert"] = _ratio(t["fwd_bwd"][key], t["fwd_bwd"][("bert", p)])
                if v.name != DENSE_VARIANT:
                    row[f"{prefix}infer_ratio_vs_bert"] = _ratio(t["infer"][key], t["infer"][("bert", p)])
            if p == "bf16" and "fp32" in dtypes:
                row[f"{prefix}bf16_train_speedup"] = _ratio(t["step"][(v.name, "fp32")], t["step"][key])
                if v.name != DENSE_VARIANT:
                    row[f"{prefix}bf16_infer_speedup"] = _ratio(t["infer"][(v.name, "fp32")], t["infer"][key])
        row["train"].update({**dispatch[key], "gflop": train_flops / 1e9, "steps_timed": len(samples[0]["step"][key]),
                             "step_ms_per_round": [1e3 * x for x in samples[0]["step"][key]],
                             "cpu_step_ms_per_round": [1e3 * x for x in samples[1]["step"][key]]})
        if "infer" in row:
            row["infer"].update({"gflop": infer_flops / 1e9, "rounds_timed": len(samples[0]["infer"][key])})
        rows.append(row)

    accuracy = []
    if "bf16" in dtypes:
        for enc, model in built.items():
            accuracy.append({"encoder": enc, **bf16_accuracy(model, batches[0], device)})
            advance(f"{size.name}: bf16 accuracy")
    result = {
        "size": size.name, "model": asdict(size), "computed_slots_mean": slots, "masked_per_batch": masked,
        "peak_rss_mb_so_far": _peak_rss_mb(),
        "params": {enc: sum(p.numel() for p in m.parameters()) for enc, m in built.items()},
        "rows": rows, "bf16_accuracy": accuracy,
    }
    del variants, built, combos
    return result


class OpCounter(TorchDispatchMode):
    """Counts the aten ops a piece of code dispatches — on a GPU each is (at least) one kernel launch, so
    for small models this count bounds the step time — and among them the ones that need a value on the
    host (`.item()`, `bool()`, data-dependent shapes): each of those would stall a GPU pipeline."""

    SYNC_OPS = ("aten._local_scalar_dense", "aten.nonzero", "aten.is_nonzero", "aten.unique", "aten.masked_select")

    def __init__(self, host_tensors: list[torch.Tensor] = ()) -> None:
        super().__init__()
        self.ops = 0
        self.syncs = 0
        self.host = {id(t) for t in host_tensors}  # kept on the host on a GPU too (optimizers' step counts)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        if str(func.overloadpacket) in self.SYNC_OPS and not (args and id(args[0]) in self.host):
            self.syncs += 1
        return func(*args, **(kwargs or {}))


def ngram_matrix_ms(batches: list[dict[str, torch.Tensor]], repeats: int = 5) -> float:
    """Median ms to build the ZEN 2.0 fusion matrix P for one batch (done inside the model's forward)."""
    b = batches[0]
    L = b["input_ids"].shape[1]
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        ngram_position_matrix(b["ngram_starts"], b["ngram_lengths"], b["ngram_freqs"], L, "frequency")
        times.append(time.perf_counter() - t)
    return 1e3 * _median(times)


def attention_kernels(size: ModelSize, batch: int, seq_len: int, dtype: str, device: torch.device,
                      repeats: int = 5) -> list[dict[str, Any]]:
    """Which scaled_dot_product_attention backends can run zen's attention calls at this size, and their
    forward+backward ms — for the GPU path (`attention.attend`): ZEN 2.0 with [Q+u|Q'], [K|K'] heads of
    2d and V of d, the same with V zero-padded to 2d (what flash kernels that need equal head sizes would
    take), and plain attention (d everywhere), all with the [B,1,1,L] padding mask; "default" is what torch
    picks by itself."""
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    A, d = size.heads, size.hidden // size.heads
    mask = torch.zeros(batch, 1, 1, seq_len, device=device, dtype=torch_dtype)
    rows = []
    for kind, qk_dim, v_dim in (("zen2", 2 * d, d), ("zen2, V padded", 2 * d, 2 * d), ("plain", d, d)):
        q, k = (torch.randn(batch, A, seq_len, qk_dim, device=device, dtype=torch_dtype, requires_grad=True)
                for _ in "qk")
        v = torch.randn(batch, A, seq_len, v_dim, device=device, dtype=torch_dtype, requires_grad=True)
        for backend in ("default", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
            ctx = (contextlib.nullcontext() if backend == "default"
                   else sdpa_kernel(getattr(SDPBackend, backend)))
            try:
                times = []
                with ctx, warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # "... not supported because ..." notes of unusable kernels
                    for _ in range(repeats + 1):
                        clock = Clock(device)
                        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=d ** -0.5).sum().backward()
                        times.append(clock.lap()[0])
                rows.append({"attention": kind, "backend": backend, "ok": True, "ms": 1e3 * _median(times[1:])})
            except RuntimeError as e:  # this backend cannot run these shapes / dtype / mask
                rows.append({"attention": kind, "backend": backend, "ok": False, "why": str(e).splitlines()[0][:160]})
    return rows


def progress_total(sizes_steps: list[tuple[int, int]], n_encoders: int, dtypes: list[str], dense: bool,
                   warmup: int, curve_steps: int) -> int:
    """How many `advance` calls a run makes: (training rounds, inference rounds) per size."""
    n_var, n_prec, bf16 = n_encoders + (1 if dense else 0), len(dtypes), "bf16" in dtypes
    total = 0
    for steps, isteps in sizes_steps:
        total += (warmup + steps) * n_var * n_prec + (warmup + isteps) * n_encoders * n_prec
        total += n_encoders if bf16 else 0  # bf16 accuracy check
    return total + (2 * curve_steps if bf16 else 0)


@dataclass
class _Inputs:
    """The batches every size is timed on, and how they were made."""

    batches: list[dict[str, torch.Tensor]]
    make: dict[str, Any]  # make_batches' keyword arguments (the curve makes more batches the same way)
    chars: CharSource
    matcher: Any | None
    ngram_rows: int  # the n-gram table's rows (at least the lexicon's)
    filled: float  # n-gram slots filled per sequence


def _check_options(*, sizes: list[ModelSize], encoders: Sequence[str], dtypes: list[str] | None,
                   ints: dict[str, tuple[int, int]], seq_len: int, ngram_rate: float, text: Path | None,
                   lexicon: Path | None, device: str) -> tuple[torch.device, list[str]]:
    """One-line errors for bad options; the device and the dtypes to time (default: fp32, and bf16
    where the hardware has fast bf16)."""
    for name, (value, low) in ints.items():
        if value < low:
            raise ZenError(f"--{name.replace('_', '-')}: expected an integer >= {low}, got {value}")
    if not sizes:
        raise ZenError("--sizes: expected at least one size")
    max_positions = ZenConfig.__dataclass_fields__["max_position_embeddings"].default
    if seq_len > max_positions:
        raise ZenError(f"--seq-len: expected at most {max_positions} (the position table of ZEN 1.0 and BERT), "
                       f"got {seq_len}")
    for enc in encoders:
        if enc not in ENCODERS:
            raise ZenError(f"--encoders: expected a comma-separated subset of {', '.join(ENCODERS)}, got {enc!r}")
    if not encoders:
        raise ZenError("--encoders: expected at least one encoder")
    if not 0.0 <= ngram_rate <= 1.0:
        raise ZenError(f"--ngram-rate: expected a number in [0, 1], got {ngram_rate}")
    if lexicon is not None and text is None:
        raise ZenError("--lexicon needs --text (the lexicon is matched against that text)")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ZenError("--device cuda: no CUDA device is available")
    fast_bf16 = (torch.cuda.is_bf16_supported() if dev.type == "cuda" else cpu_has_fast_bf16())
    if dtypes is None:
        dtypes = ["fp32", "bf16"] if fast_bf16 else ["fp32"]
    for p in dtypes:
        if p not in DTYPES:
            raise ZenError(f"--dtype: expected a comma-separated subset of fp32, bf16, got {p!r}")
    if "bf16" in dtypes and dev.type == "cuda" and not fast_bf16:
        raise ZenError(f"--dtype bf16: {torch.cuda.get_device_name(dev)} does not support bf16")
    if not dtypes:
        raise ZenError("--dtype: expected at least one dtype")
    return dev, list(dtypes)


def _make_inputs(*, text: Path | None, lexicon: Path | None, batch: int, seq_len: int, slots: int, ngram_rows: int,
                 vocab_size: int, ngram_rate: float, seed: int, dev: torch.device,
                 log: Callable[[str], None]) -> _Inputs:
    """Four batches of real text (n-grams matched with `lexicon`, or synthetic slots) or synthetic chars."""
    rng = np.random.default_rng(seed)
    matcher = None
    lexicon_rows = 0
    if text is not None:
        chars = text_chars(text, vocab_size, max_chars=2_000_000)
        if lexicon is not None:
            lex = Lexicon.load(lexicon)
            lexicon_rows = len(lex)
            matcher = NgramMatcher.from_lexicon(lex, chars.vocab.get, min_len=2, max_len=8)
            log(f"{len(lex):,} n-grams from {lexicon}")
    else:
        chars = synthetic_chars(200_000, vocab_size, rng)
    rows = max(ngram_rows, lexicon_rows + 1)
    make = dict(batch=batch, seq_len=seq_len, slots=slots, ngram_rows=rows, vocab_size=vocab_size, chars=chars,
                matcher=matcher, ngram_rate=ngram_rate)
    batches = [{k: t.to(dev) for k, t in b.items()} for b in make_batches(4, seed=seed, **make)]
    filled = statistics.fmean(float((b["ngram_lengths"] > 0).sum(1).float().mean()) for b in batches)
    log(f"inputs: {chars.description}; {filled:.1f} of {slots} n-gram slots filled per sequence")
    return _Inputs(batches, make, chars, matcher, rows, filled)


def _gemm_peaks(dtypes: list[str], size: int, dev: torch.device, seconds: float) -> dict[str, float]:
    return {p: gemm_peak(torch.float32 if p == "fp32" else torch.bfloat16, size, dev, min_seconds=seconds)
            for p in dtypes}


def _add_peak_shares(results: list[dict[str, Any]], peaks: dict[str, float]) -> None:
    """Each row's achieved GFLOP/s as a percentage of the GEMM peak of its dtype."""
    for res in results:
        for row in res["rows"]:
            for phase in ("train", "infer"):
                if phase in row:
                    for prefix in ("", "cpu_"):
                        row[phase][f"{prefix}pct_of_gemm_peak"] = (100 * row[phase][f"{prefix}gflops_per_s"]
                                                                   / peaks[row["dtype"]])


def _log_size(log: Callable[[str], None], result: dict[str, Any]) -> None:
    pre = "cpu_" if judging_clock(torch.get_num_threads()) == "cpu" else ""
    log(f"{result['size']}: training tok/s " + "; ".join(
        f"{r['encoder']} {r['dtype']} {r['train'][pre + 'tokens_per_s']:,.0f}"
        + (f" ({r[pre + 'train_ratio_vs_bert']:.2f}× bert)" if pre + "train_ratio_vs_bert" in r else "")
        for r in result["rows"]))


@dataclass
class ModelBenchSettings:
    """What `zen bench model` measures (its options; see the module docstring)."""

    sizes: list[ModelSize]
    encoders: Sequence[str] = ENCODERS
    dtypes: list[str] | None = None  # None: fp32, and bf16 where it is fast
    dense_opt: bool = True  # add the zen2+dense-adamw variant
    steps: int = 0  # timed rounds (0: the size's default)
    warmup: int = 1  # rounds discarded first
    infer_steps: int = 0  # inference rounds (0: as many as training)
    batch: int = 8
    seq_len: int = 128
    slots: int = 128  # n-gram slots per sequence, at most
    ngram_rows: int = 100_000
    vocab_size: int = 21128
    ngram_rate: float = 0.4  # synthetic n-grams per character
    text: Path | None = None  # real characters instead of synthetic ones
    lexicon: Path | None = None  # with `text`: real n-gram matches
    curve_steps: int = 30  # steps of the fp32-vs-bf16 training comparison (0: skip)
    curve_size: ModelSize | None = None  # its model size (None: the first of `sizes`)
    curve_lr: float = 1e-3
    gemm_size: int = 2048  # square matmul of the GEMM peak
    gemm_seconds: float = 1.0  # its timing lasts at least this long
    threads: int = 0  # torch threads (0: torch's default)
    seed: int = 0
    device: str = "cpu"


def run(s: ModelBenchSettings, *, log: Callable[[str], None] = lambda s: None,
        advance: Callable[[str], None] = lambda s: None, on_total: Callable[[int], None] = lambda n: None
        ) -> dict[str, Any]:
    """Run the model benchmark (see the module docstring); returns a JSON-ready report.

    `advance(label)` is called after every timed unit of work; `on_total(n)` announces how many."""
    ints = {"batch": (s.batch, 1), "seq_len": (s.seq_len, 8), "slots": (s.slots, 1), "ngram_rows": (s.ngram_rows, 2),
            "vocab_size": (s.vocab_size, FIRST_CHAR_ID + 2), "steps": (s.steps, 0), "warmup": (s.warmup, 0),
            "infer_steps": (s.infer_steps, 0), "curve_steps": (s.curve_steps, 0), "gemm_size": (s.gemm_size, 16),
            "threads": (s.threads, 0)}
    dev, dtypes = _check_options(sizes=s.sizes, encoders=s.encoders, dtypes=s.dtypes, ints=ints,
                                     seq_len=s.seq_len, ngram_rate=s.ngram_rate, text=s.text, lexicon=s.lexicon,
                                     device=s.device)
    dense_opt = s.dense_opt and "zen2" in s.encoders

    old_threads = torch.get_num_threads()
    if s.threads:
        torch.set_num_threads(s.threads)
    try:
        load_start = os.getloadavg()
        inputs = _make_inputs(text=s.text, lexicon=s.lexicon, batch=s.batch, seq_len=s.seq_len, slots=s.slots,
                              ngram_rows=s.ngram_rows, vocab_size=s.vocab_size, ngram_rate=s.ngram_rate, seed=s.seed,
                              dev=dev, log=log)
        peaks_start = _gemm_peaks(dtypes, s.gemm_size, dev, s.gemm_seconds)
        log("GEMM peak at start: " + ", ".join(f"{p} {g:.0f} GFLOP/s" for p, g in peaks_start.items()))
        step_counts = [s.steps or DEFAULT_STEPS.get(size.name, 3) for size in s.sizes]
        infer_counts = [s.infer_steps or n for n in step_counts]
        on_total(progress_total(list(zip(step_counts, infer_counts)), len(s.encoders), dtypes, dense_opt,
                                s.warmup, s.curve_steps))
        results = []
        for size, n, ni in zip(s.sizes, step_counts, infer_counts):
            results.append(bench_size(size, encoders=list(s.encoders), dtypes=dtypes, dense_opt=dense_opt,
                                      batches=inputs.batches, steps=n, warmup=s.warmup, infer_steps=ni,
                                      vocab_size=s.vocab_size, ngram_rows=inputs.ngram_rows, seed=s.seed, device=dev,
                                      advance=advance))
            _log_size(log, results[-1])
        kernels = attention_kernels(s.sizes[-1], s.batch, s.seq_len, dtypes[-1], dev)
        log("attention kernels (" + s.sizes[-1].name + ", " + dtypes[-1] + "): " + "; ".join(
            f"{r['attention']} {r['backend']} " + (f"{r['ms']:.2f} ms" if r["ok"] else "n/a") for r in kernels))
        curve = None
        if s.curve_steps and "bf16" in dtypes:
            curve_batches = [{k: t.to(dev) for k, t in b.items()}
                             for b in make_batches(s.curve_steps, seed=s.seed + 7, **inputs.make)]
            curve = training_curve(s.curve_size or s.sizes[0], s.curve_steps, curve_batches,
                                   vocab_size=s.vocab_size, ngram_rows=inputs.ngram_rows, seed=s.seed, lr=s.curve_lr,
                                   device=dev, advance=advance)
        peaks_end = _gemm_peaks(dtypes, s.gemm_size, dev, s.gemm_seconds)
        load_end = os.getloadavg()
        _add_peak_shares(results, {p: max(peaks_start[p], peaks_end[p]) for p in dtypes})
        p_ms = (ngram_matrix_ms([{k: t.cpu() for k, t in b.items()} for b in inputs.batches]) if dev.type == "cpu"
                else None)
    finally:
        torch.set_num_threads(old_threads)

    report = {
        "settings": {"sizes": [asdict(size) for size in s.sizes], "encoders": list(s.encoders),
                     "dtypes": dtypes,
                     "dense_adamw_variant": dense_opt, "steps": step_counts, "infer_steps": infer_counts,
                     "warmup": s.warmup, "batch": s.batch, "seq_len": s.seq_len, "slots": s.slots,
                     "ngram_rows": inputs.ngram_rows, "vocab_size": s.vocab_size, "ngram_rate": s.ngram_rate,
                     "seed": s.seed, "device": str(dev), "threads": s.threads or old_threads, "gemm_size": s.gemm_size,
                     "optimizer": {"lr": LR, "betas": list(BETAS), "eps": EPS, "weight_decay": WEIGHT_DECAY,
                                   "clip_norm": CLIP_NORM, "sparse_min_rows": SPARSE_MIN_ROWS}},
        "inputs": {"chars": inputs.chars.description,
                   "ngrams": ("lexicon matches: " + str(s.lexicon)) if inputs.matcher is not None
                   else f"synthetic, rate {s.ngram_rate}/char",
                   "slots_filled_per_seq": inputs.filled, "ngram_matrix_ms_per_batch": p_ms},
        "gemm_peak_gflops": {p: {"start": peaks_start[p], "end": peaks_end[p]} for p in dtypes},
        "results": results,
        "bf16_training": curve,
        "attention_kernels": kernels,
        "cpu_has_fast_bf16": cpu_has_fast_bf16() if dev.type == "cpu" else None,
        "load_avg_start": list(load_start), "load_avg_end": list(load_end),
        "cpu_count": os.cpu_count(), "torch": torch.__version__, "python": sys.version.split()[0],
    }
    report["summary"] = summarize(report)
    return report


def judging_clock(threads: int) -> str:
    """Which times the summary judges by: process CPU time with one thread (immune to other load on a
    shared machine), wall clock otherwise (CPU time would count spin-waiting threads)."""
    return "cpu" if threads == 1 else "wall"


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, checked: ZEN 2.0 / BERT training step ≤ 1.3×; zen's optimizer step cheaper
    than forward+backward; bf16 faster for training and its training loss within 2% of fp32's (mean of
    the last steps). Times by `judging_clock`."""
    clock = judging_clock(report["settings"]["threads"])
    pre = "cpu_" if clock == "cpu" else ""
    out: dict[str, Any] = {"clock": clock, "zen2_train_ratio_target": 1.3}
    ratios, opt, speed_t, speed_i = {}, {}, {}, {}
    for res in report["results"]:
        for row in res["rows"]:
            key = f"{res['size']}/{row['encoder']}/{row['dtype']}"
            if row["encoder"] == "zen2" and f"{pre}train_ratio_vs_bert" in row:
                ratios[f"{res['size']}/{row['dtype']}"] = row[f"{pre}train_ratio_vs_bert"]
            opt[key] = row["train"][f"{pre}opt_over_fwd_bwd"]
            if f"{pre}bf16_train_speedup" in row:
                speed_t[key] = row[f"{pre}bf16_train_speedup"]
            if f"{pre}bf16_infer_speedup" in row:
                speed_i[key] = row[f"{pre}bf16_infer_speedup"]
    out["zen2_train_ratio_vs_bert"] = ratios
    out["zen2_train_ratio_ok"] = bool(ratios) and all(r <= 1.3 for r in ratios.values())
    out["opt_over_fwd_bwd"] = opt
    zen_opt = {k: v for k, v in opt.items() if DENSE_VARIANT not in k}
    out["optimizer_cheaper_than_fwd_bwd"] = all(v < 1.0 for v in zen_opt.values())
    if speed_t:
        curve = report.get("bf16_training")
        close = curve is not None and curve["final_rel_gap"] <= 0.02
        out["bf16_train_speedup"], out["bf16_infer_speedup"] = speed_t, speed_i
        faster = all(v > 1.0 for k, v in speed_t.items() if DENSE_VARIANT not in k)
        out["bf16_faster_for_training"] = faster
        out["bf16_training_close_to_fp32"] = close
        out["bf16_default_ok"] = bool(faster and close)
    return out
