"""FLOPs of a ZEN / BERT training step and inference pass, counted analytically, and the measured GEMM
peak they are compared with (`zen bench model`; the formulas are spelled out in zencli/bench/model.py's
docstring)."""

from __future__ import annotations

import math
import time

import torch

from zencli.model.config import ZenConfig


def _relative_term(T: float, B: int, H: int, projection: bool) -> float:
    if projection:
        return 2 * B * T * (2 * T - 1) * H  # (Q+v)·Rᵀ against the 2T−1 offsets, all heads
    return 2 * B * T * T * H  # Q'·K'ᵀ, all heads


def _fusions(cfg: ZenConfig) -> int:
    """P·g products per pass: one per n-gram layer, since later char layers add the last one again."""
    return min(cfg.num_hidden_layers, cfg.num_hidden_word_layers)


def forward_flops(cfg: ZenConfig, batch: int, seq_len: int, slots: float, masked: float, *,
                  heads: bool, slot_rows: float | None = None) -> float:
    """Matmul FLOPs of one forward pass (see the module docstring); `slots` = n-gram slots computed,
    `masked` = MLM positions in the batch; `heads` adds the MLM and NSP heads; `slot_rows` = the rows the
    n-gram tower's linears run on (the real slots, packed, on a CPU; default: all B·slots)."""
    B, L, H, I = batch, seq_len, cfg.hidden_size, cfg.intermediate_size

    def layer(T: float, rows: float) -> float:
        f = 2 * rows * H * (4 * H + 2 * I) + 2 * 2 * B * T * T * H
        return f + (_relative_term(T, B, H, cfg.relative_projection) if cfg.relative_positions else 0)

    f = cfg.num_hidden_layers * layer(L, B * L) + 2 * B * H * H
    if cfg.has_ngrams and slots > 0:
        rows = B * slots if slot_rows is None else slot_rows
        f += cfg.num_hidden_word_layers * layer(slots, rows) + _fusions(cfg) * 2 * B * L * slots * H
    if heads:
        f += 2 * masked * H * H + 2 * masked * H * cfg.vocab_size + 2 * B * H * 2
    return float(f)


def training_flops(cfg: ZenConfig, batch: int, seq_len: int, slots: float, masked: float,
                   slot_rows: float | None = None) -> float:
    """Forward + backward of a training step: a product costs 3× its forward FLOPs (the backward takes
    gradients w.r.t. both operands), except the products with a constant operand — the fixed sinusoid K'
    (without W_r) and the fusion matrix P — which cost 2×."""
    B, L, H = batch, seq_len, cfg.hidden_size
    constant = 0.0
    if cfg.relative_positions and not cfg.relative_projection:
        constant += cfg.num_hidden_layers * _relative_term(L, B, H, False)
        if cfg.has_ngrams and slots > 0:
            constant += cfg.num_hidden_word_layers * _relative_term(slots, B, H, False)
    if cfg.has_ngrams and slots > 0:
        constant += _fusions(cfg) * 2 * B * L * slots * H
    return 3 * forward_flops(cfg, batch, seq_len, slots, masked, heads=True, slot_rows=slot_rows) - constant


def gemm_peak(dtype: torch.dtype, n: int, device: torch.device, min_calls: int = 5, min_seconds: float = 1.0) -> float:
    """GFLOP/s of torch.matmul on two n×n matrices: the fastest of at least `min_calls` calls and
    `min_seconds`, after a warm-up of 0.3 × `min_seconds` (the first calls start thread pools and
    pick kernels). The best call is the least disturbed by other load on a shared machine."""
    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(n, n, generator=g).to(device, dtype)
    b = torch.randn(n, n, generator=g).to(device, dtype)
    t0 = time.perf_counter()
    for _ in range(50):
        torch.matmul(a, b)
        device_sync(device)
        if time.perf_counter() - t0 > 0.3 * min_seconds:
            break
    best, calls, t0 = math.inf, 0, time.perf_counter()
    while calls < min_calls or (time.perf_counter() - t0 < min_seconds and calls < 200):
        device_sync(device)
        t = time.perf_counter()
        torch.matmul(a, b)
        device_sync(device)
        best = min(best, time.perf_counter() - t)
        calls += 1
    return 2 * n ** 3 / best / 1e9


def device_sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
