"""Does torch.compile pay for `zen predict` on a CPU? The prediction path of `zen bench predict` (reading to
writing, one thread, process CPU time) with the encoder eager and compiled (inductor, dynamic shapes: the
batches' lengths vary), alternated in one process; outputs compared line by line.

    PYTHONPATH=. python3 reports/predict-compile/compile_predict.py MODEL INPUT [SIZE] [PRECISION] [LINES]

SIZE (default: as saved) rebuilds the encoder at tiny/small/base with random weights, as
`zen bench predict --size`; PRECISION is fp32 (default) or bf16; LINES (default 200) the input lines used.
Prints the first (compiling) pass's seconds, eager ÷ compiled median time (> 1: compiled is faster) and how
many output lines differ."""

import io
import sys
import tempfile
import time
from pathlib import Path

import torch

from zencli.bench.model import parse_size
from zencli.bench.predict import resized
from zencli.tasks.inference import set_precision
from zencli.tasks.model_dir import LoadedModel, load_task_model
from zencli.tasks.predict import predict_stream
from zencli.text.reading import iter_lines

model_dir, data = Path(sys.argv[1]), Path(sys.argv[2])
size = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
precision = sys.argv[4] if len(sys.argv) > 4 else "fp32"
n_lines = int(sys.argv[5]) if len(sys.argv) > 5 else 200
torch.set_num_threads(1)


def load() -> LoadedModel:
    loaded = load_task_model(model_dir)
    return set_precision(resized(loaded, parse_size(size)) if size else loaded, precision)  # same seed: same weights


eager, twin = load(), load()
twin.model.encoder = torch.compile(twin.model.encoder, dynamic=True)

tmp = Path(tempfile.mkdtemp()) / "in.txt"
with open(tmp, "w", encoding="utf-8") as f:
    for i, (_, text) in enumerate(iter_lines(data, allow_empty=True)):
        if i >= n_lines:
            break
        f.write(text + "\n")


def one(loaded):
    out = io.StringIO()
    t0 = time.process_time()
    predict_stream(loaded, iter_lines(tmp, allow_empty=True), out)
    return time.process_time() - t0, out.getvalue().splitlines()


t_first, compiled_out = one(twin)
print(f"first compiled pass (compiling included): {t_first:.1f} s")
ratios, differ = [], 0
for r in range(4):
    te, eo = one(eager)
    tc, co = one(twin)
    ratios.append(te / tc)
    differ = sum(a != b for a, b in zip(eo, co))
    print(f"round {r}: eager {te:.2f} s, compiled {tc:.2f} s")
ratios.sort()
print(f"{size or 'as saved'} {precision}: eager ÷ compiled {ratios[len(ratios) // 2]:.2f} "
      f"(median of {len(ratios)}); {differ} of {len(eo)} output lines differ")
