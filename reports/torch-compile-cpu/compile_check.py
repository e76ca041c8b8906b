"""Does torch.compile pay for zen's ZEN 2.0 on a CPU? Eager and compiled (inductor, dynamic shapes) timed
alternately in one process, one thread, on `zen bench model`'s synthetic batches (8 × 128, 128 n-gram slots).

    PYTHONPATH=. python3 reports/torch-compile-cpu/compile_check.py infer tiny
    PYTHONPATH=. python3 reports/torch-compile-cpu/compile_check.py train tiny

Prints the first (compiling) call's seconds, the eager and compiled outputs' difference, and eager ÷ compiled
median time (> 1: compiled is faster)."""

import sys
import time

import numpy as np
import torch

from zencli.bench.model import Variant, _build, parse_size
from zencli.bench.model_inputs import encoder_inputs, make_batches, synthetic_chars

mode, size = sys.argv[1], parse_size(sys.argv[2])
torch.set_num_threads(1)
cpu = torch.device("cpu")
chars = synthetic_chars(100_000, 21128, np.random.default_rng(0))
batches = make_batches(4, batch=8, seq_len=128, slots=128, ngram_rows=20000, vocab_size=21128, chars=chars,
                       matcher=None, ngram_rate=0.5, seed=0)
eager, twin = (_build(size, "zen2", 21128, 20000, 0, cpu) for _ in range(2))
if mode == "infer":
    eager.eval()
    twin.eval()
    compiled = torch.compile(twin.bert, dynamic=True)

    def run_eager(b):
        with torch.no_grad():
            return eager.bert(b["input_ids"], **encoder_inputs(b, True)).sequence_output

    def run_compiled(b):
        with torch.no_grad():
            return compiled(b["input_ids"], **encoder_inputs(b, True)).sequence_output
else:
    v_eager, v_comp = Variant("eager", eager, True, cpu), Variant("compiled", twin, True, cpu)
    v_comp.model = torch.compile(twin, dynamic=True)

    def run_eager(b):
        return v_eager.train_step(b, "fp32")[1]

    def run_compiled(b):
        return v_comp.train_step(b, "fp32")[1]

t0 = time.perf_counter()
out_c = run_compiled(batches[0])
print(f"first compiled call (compiling): {time.perf_counter() - t0:.1f} s")
out_e = run_eager(batches[0])
print(f"max |eager - compiled| of the first call's output: {(out_e - out_c).abs().max().item():.3g}")
te, tc = [], []
for _ in range(3):
    for b in batches:
        t = time.perf_counter()
        run_eager(b)
        te.append(time.perf_counter() - t)
        t = time.perf_counter()
        run_compiled(b)
        tc.append(time.perf_counter() - t)
print(f"{mode} {sys.argv[2]}: eager {np.median(te) * 1e3:.0f} ms, compiled {np.median(tc) * 1e3:.0f} ms, "
      f"eager / compiled {np.median(te) / np.median(tc):.2f}")
