"""The compute dtype (mixed precision): choose fp32 / bf16 / fp16 for the hardware, and give the matching
autocast and scaler (`train.dtype`); the dtype a trained model runs in (`--dtype`, `train.eval_dtype`).

`auto` picks
- CUDA: bf16 where the GPU supports it (Ampere and later), fp16 with loss scaling on Volta/Turing
  (tensor cores, no bf16), fp32 on older GPUs, where half precision brings no speed;
- CPU: bf16 when the CPU has bf16 matrix instructions (AMX `amx_bf16` or AVX-512 `avx512_bf16` in
  /proc/cpuinfo) — on such CPUs bf16 GEMMs run 2–6× faster — otherwise fp32, because bf16 emulated on
  plain AVX-512/AVX2 is slower than fp32.
Weights, gradients and optimizer states stay fp32 in every mode: autocast only lowers the matrix
products of the forward pass (and so of the backward). Only fp16 needs a GradScaler (its range is
too small for raw gradients); bf16 has fp32's exponent range.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from functools import lru_cache
from pathlib import Path

import torch

from zencli.errors import ZenError
from zencli.train.settings import INFERENCE_DTYPES

BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")


@lru_cache(maxsize=1)
def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The feature flags of the first CPU in /proc/cpuinfo (empty where there is no such file)."""
    try:
        text = Path(cpuinfo).read_text(encoding="ascii", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_has_fast_bf16(flags: frozenset[str] | None = None) -> bool:
    flags = cpu_flags() if flags is None else flags
    return any(f in flags for f in BF16_CPU_FLAGS)


def resolve_dtype(requested: str, device: torch.device, flags: frozenset[str] | None = None) -> str:
    """`auto|fp32|bf16|fp16` → the dtype to train with on `device` (`fp32`, `bf16` or `fp16`)."""
    if requested not in ("auto", "fp32", "bf16", "fp16"):
        raise ZenError(f"dtype: expected one of auto, fp32, bf16, fp16, got {requested!r}")
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        bf16_ok = torch.cuda.is_bf16_supported()
        if requested == "auto":
            return "bf16" if bf16_ok else "fp16" if major >= 7 else "fp32"
        if requested == "bf16" and not bf16_ok:
            raise ZenError(f"dtype: bf16 is not supported by {torch.cuda.get_device_name(device)}; "
                           "use fp16 or fp32")
        return requested
    if requested == "auto":
        return "bf16" if cpu_has_fast_bf16(flags) else "fp32"
    return requested


def autocast(dtype: str, device: torch.device):
    """Context manager for the forward pass (and loss) in `dtype`."""
    if dtype == "fp32":
        return contextlib.nullcontext()
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=torch_dtype)


def grad_scaler(dtype: str, device: torch.device) -> torch.amp.GradScaler:
    """Dynamic loss scaling for fp16; a disabled (pass-through) scaler otherwise."""
    return torch.amp.GradScaler(device.type, enabled=dtype == "fp16")


# --- running a trained model: prediction and evaluation ------------------------------------------------
#
# `auto|fp32|bf16|int8` (zencli.train.settings.InferenceDtype): bf16 runs the forward under bf16
# autocast (weights stay fp32, so the model is unchanged); int8 runs a copy of the model whose linear
# layers are dynamically quantized (int8 weights, activations quantized per batch) — CPU kernels only.
# `auto` picks bf16 where the hardware has bf16 matrix units (CUDA GPUs with bf16, CPUs with AMX or
# AVX-512 bf16), fp32 elsewhere; the scores each dtype loses against fp32 are in docs/results.md.


def resolve_inference_dtype(requested: str, device: torch.device, flags: frozenset[str] | None = None,
                            key: str = "dtype") -> tuple[str, str]:
    """`auto|fp32|bf16|int8` → (the dtype to run a trained model in on `device`, why `auto` chose it:
    '' for an explicit choice). An unsupported choice is a ZenError naming `key` (the option or recipe key)."""
    if requested not in INFERENCE_DTYPES:
        raise ZenError(f"{key}: expected one of {', '.join(INFERENCE_DTYPES)}, got {requested!r}")
    if device.type == "cuda":
        bf16_ok = torch.cuda.is_bf16_supported()
        name = torch.cuda.get_device_name(device)
        if requested == "int8":
            raise ZenError(f"{key}: int8 (dynamic quantization) runs on CPUs only; on {name} use bf16 or fp32")
        if requested == "bf16" and not bf16_ok:
            raise ZenError(f"{key}: bf16 is not supported by {name}; use fp32")
        if requested == "auto":
            return ("bf16", f"{name} has bf16") if bf16_ok else ("fp32", f"{name} has no bf16")
        return requested, ""
    if device.type != "cpu":
        if requested not in ("auto", "fp32"):
            raise ZenError(f"{key}: {requested} is supported on CPU and CUDA only, not on {device.type}")
        return "fp32", "" if requested == "fp32" else f"bf16 and int8 run on CPU and CUDA only, not {device.type}"
    if requested == "auto":
        flags = cpu_flags() if flags is None else flags
        found = [f for f in BF16_CPU_FLAGS if f in flags]
        if found:
            return "bf16", f"this CPU has {found[0]}"
        return "fp32", f"this CPU has no bf16 instructions ({' or '.join(BF16_CPU_FLAGS)})"
    return requested, ""


def describe_inference_dtype(requested: str, chosen: str, why: str) -> str:
    """The line that says what `--dtype` ran with: `dtype: bf16 (auto: this CPU has amx_bf16)`."""
    return f"dtype: {chosen}" + (f" ({requested}: {why})" if why else "")


def inference_autocast(dtype: str, device: torch.device):
    """The context a trained model's forward runs in: bf16 autocast for bf16, none for fp32 and int8."""
    return autocast("bf16" if dtype == "bf16" else "fp32", device)


def inference_model(model: torch.nn.Module, dtype: str) -> torch.nn.Module:
    """The module to run in `dtype`: for int8 a dynamically quantized copy (every nn.Linear: int8
    weights, activations quantized per call; the given model and its files are untouched); else `model`."""
    if dtype != "int8":
        return model
    return quantize_int8(model)


def quantize_int8(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of `model` (on the CPU, in eval mode) with its nn.Linear layers dynamically quantized to int8.

    torch.ao.quantization.quantize_dynamic rather than torchao: in eager mode on CPU its fbgemm/onednn
    kernels were the faster of the two with the same agreement (docs/results.md, "int8"); torchao's
    int8 path pays only under torch.compile. torch.ao's eager quantization is deprecated: if a torch
    release drops it, this is the one place to change."""
    try:
        from torch.ao.quantization import quantize_dynamic  # optional: not in every torch (see above)
    except ImportError as e:  # a torch without the eager quantization API
        raise ZenError(f"dtype: int8 needs torch.ao.quantization.quantize_dynamic, which this torch "
                       f"{torch.__version__} lacks ({e}); use fp32 or bf16") from None
    if any(p.device.type != "cpu" for p in model.parameters()):
        raise ZenError("dtype: int8 (dynamic quantization) runs on CPUs only; use bf16 or fp32 on a GPU")
    was_training = model.training
    model.eval()
    try:
        copied = copy.deepcopy(model)
    finally:
        model.train(was_training)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its deprecation notice: the choice is documented above
        return quantize_dynamic(copied, {torch.nn.Linear}, dtype=torch.qint8)
