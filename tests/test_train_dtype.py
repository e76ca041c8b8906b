"""Dtype selection (auto by hardware, overridable) and that each CPU mode trains."""

import torch

from zencli.train.dtype import autocast, cpu_flags, cpu_has_fast_bf16, grad_scaler, resolve_dtype

CPU = torch.device("cpu")


def test_auto_on_cpu_follows_bf16_matrix_instructions():
    assert resolve_dtype("auto", CPU, frozenset({"avx2", "avx512f", "amx_bf16", "amx_tile"})) == "bf16"
    assert resolve_dtype("auto", CPU, frozenset({"avx512f", "avx512_bf16"})) == "bf16"
    # AVX-512 without bf16 instructions emulates bf16 (slower than fp32): stay in fp32
    assert resolve_dtype("auto", CPU, frozenset({"avx2", "avx512f", "avx512bw"})) == "fp32"
    assert resolve_dtype("auto", CPU, frozenset()) == "fp32"


def test_explicit_dtype_overrides_detection():
    assert resolve_dtype("fp32", CPU, frozenset({"amx_bf16"})) == "fp32"
    assert resolve_dtype("bf16", CPU, frozenset()) == "bf16"


def test_cpu_flags_reads_the_flags_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu sse2 avx512_bf16 amx_tile\n\n"
                    "processor\t: 1\nflags\t\t: fpu\n")
    flags = cpu_flags(str(info))
    assert {"avx512_bf16", "amx_tile", "fpu"} <= flags and cpu_has_fast_bf16(flags)
    assert cpu_flags(str(tmp_path / "missing")) == frozenset()


def test_this_machine_detection_is_consistent_with_proc_cpuinfo():
    text = open("/proc/cpuinfo").read() if __import__("os").path.exists("/proc/cpuinfo") else ""
    has = "amx_bf16" in text.split() or "avx512_bf16" in text.split()
    assert resolve_dtype("auto", CPU) == ("bf16" if has else "fp32")


def test_autocast_and_scaler_per_mode():
    x = torch.randn(4, 4)
    with autocast("bf16", CPU):
        assert (x @ x).dtype == torch.bfloat16
    with autocast("fp32", CPU):
        assert (x @ x).dtype == torch.float32
    assert not grad_scaler("bf16", CPU).is_enabled() and not grad_scaler("fp32", CPU).is_enabled()
    assert grad_scaler("fp16", CPU).is_enabled()
