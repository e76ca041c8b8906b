"""Benchmark: optimizer cost of a large embedding table, dense AdamW vs row-sparse LazyAdamW.

    python -m zencli.train.benchmark [--rows 100000] [--dim 768] [--touched 400] [--repeats 20] [--threads 0]

Per variant, the median wall time of the backward pass through the lookup (which builds the gradient:
a zero-filled dense [rows, dim] table, or only the touched rows) and of the optimizer step, plus the
step's minimum (less sensitive to other load on the machine).
`--touched` ids are drawn (with repeats, like n-gram slots of a batch) from the whole table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch import nn

from zencli.train.optim import LazyAdamW


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def benchmark_embedding_update(rows: int = 100_000, dim: int = 768, touched: int = 400, repeats: int = 10,
                               seed: int = 0) -> dict[str, dict[str, float]]:
    """{variant: {backward_ms, optimizer_ms, optimizer_min_ms, total_ms}} for dense AdamW, LazyAdamW and
    torch's SparseAdam (which has no weight decay and one bias correction for all rows)."""
    g = torch.Generator().manual_seed(seed)
    variants = {
        "dense AdamW": (False, lambda p: torch.optim.AdamW(p, lr=1e-4, weight_decay=0.01)),
        "lazy AdamW (zen)": (True, lambda p: LazyAdamW(p, lr=1e-4, weight_decay=0.01)),
        "torch SparseAdam": (True, lambda p: torch.optim.SparseAdam(p, lr=1e-4)),
    }
    results = {}
    for name, (sparse, make_opt) in variants.items():
        table = nn.Embedding(rows, dim, sparse=sparse)
        opt = make_opt(list(table.parameters()))
        backward, step = [], []
        for i in range(repeats + 2):  # two warm-up steps (state allocation, first-touch page faults)
            ids = torch.randint(0, rows, (touched,), generator=g)
            out = table(ids)
            t0 = time.perf_counter()
            out.sum().backward()
            t1 = time.perf_counter()
            opt.step()
            t2 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            if i >= 2:
                backward.append(t1 - t0)
                step.append(t2 - t1)
        results[name] = {"backward_ms": _median_ms(backward), "optimizer_ms": _median_ms(step),
                         "optimizer_min_ms": round(min(step) * 1000, 3),
                         "total_ms": _median_ms([a + b for a, b in zip(backward, step)])}
        del table, opt
    return results


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--touched", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default); 1 gives "
                    "steadier numbers on a machine shared with other work")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from rich.console import Console
    from rich.table import Table

    res = benchmark_embedding_update(args.rows, args.dim, args.touched, args.repeats)
    table = Table(title=f"embedding {args.rows}×{args.dim}, {args.touched} ids/step, "
                        f"{torch.get_num_threads()} threads (median ms)")
    for col in ("variant", "backward", "optimizer step", "optimizer step (min)", "total"):
        table.add_column(col, justify="right" if col != "variant" else "left")
    for name, r in res.items():
        table.add_row(name, f"{r['backward_ms']:.2f}", f"{r['optimizer_ms']:.2f}",
                      f"{r['optimizer_min_ms']:.2f}", f"{r['total_ms']:.2f}")
    Console().print(table)
    print(json.dumps({"rows": args.rows, "dim": args.dim, "touched": args.touched, "results": res}))


if __name__ == "__main__":
    main()
