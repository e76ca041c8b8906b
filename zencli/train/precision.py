"""Mixed precision: choose fp32 / bf16 / fp16 for the hardware, and give the matching autocast and scaler.

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
from functools import lru_cache
from pathlib import Path

import torch

from zencli.errors import ZenError

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


def resolve_precision(requested: str, device: torch.device, flags: frozenset[str] | None = None) -> str:
    """`auto|fp32|bf16|fp16` → the precision to train with on `device` (`fp32`, `bf16` or `fp16`)."""
    if requested not in ("auto", "fp32", "bf16", "fp16"):
        raise ZenError(f"precision: expected one of auto, fp32, bf16, fp16, got {requested!r}")
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        bf16_ok = torch.cuda.is_bf16_supported()
        if requested == "auto":
            return "bf16" if bf16_ok else "fp16" if major >= 7 else "fp32"
        if requested == "bf16" and not bf16_ok:
            raise ZenError(f"precision: bf16 is not supported by {torch.cuda.get_device_name(device)}; "
                           "use fp16 or fp32")
        return requested
    if requested == "auto":
        return "bf16" if cpu_has_fast_bf16(flags) else "fp32"
    return requested


def autocast(precision: str, device: torch.device):
    """Context manager for the forward pass (and loss) in `precision`."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """Dynamic loss scaling for fp16; a disabled (pass-through) scaler otherwise."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")
