"""`zen bench predict`: end-to-end `zen predict` chars/s per dtype, the encoder's share of the time and
(--profile) the share of each phase of the prediction path (zencli.bench.predict)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from zencli.cli.common import WORKDIR_OPTION, console, progress_bar, write_json_report


def predict(
    model: Optional[Path] = typer.Argument(None, help="A fine-tuned model directory. Default: the workspace's "
                                           "newest fine-tuned model."),
    workdir: Optional[Path] = WORKDIR_OPTION,
    input_path: Optional[Path] = typer.Option(None, "--input", "-i", help="Text to predict, one example per line "
                                              "(default: PD98 raw dev)."),
    max_lines: int = typer.Option(0, "--max-lines", help="Predict the first N lines only (0: all)."),
    dtype: str = typer.Option("fp32,bf16,int8", "--dtype", help="Comma-separated: fp32, bf16, int8."),
    engine: str = typer.Option("torch", "--engine", help="Comma-separated: torch, torch-compile (fp32 and "
                               "bf16; the warm-up rounds compile), onnx (ONNX Runtime on an export made for the run, "
                               "fp32 and int8; needs zencli\\[onnx])."),
    size: Optional[str] = typer.Option(None, "--size", help="Rebuild MODEL's encoder at this size (tiny, small, "
                                       "base or LxHxN) with random weights, to time the path at that size."),
    rounds: int = typer.Option(3, "--rounds", help="Timed passes per dtype (interleaved)."),
    warmup: int = typer.Option(1, "--warmup", help="Untimed passes first."),
    threads: int = typer.Option(1, "--threads", help="Torch threads; with 1, process CPU time is the clock."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", "-b", help="Windows per forward pass "
                                             "(default: the model's eval_batch_size)."),
    profile: bool = typer.Option(False, "--profile", help="Also split one pass per dtype into its phases "
                                 "(cProfile)."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the results as JSON here."),
) -> None:
    """`zen predict` chars/s per engine and dtype, end to end (reading to writing), and where the time goes."""
    from rich.table import Table

    from zencli.bench.common import dataset_dir
    from zencli.bench.predict import run
    from zencli.cli.predict import resolve_model

    path = resolve_model(model, None, workdir)
    data = input_path if input_path is not None else dataset_dir(None) / "raw" / "dev.txt"
    with progress_bar() as progress:
        task = progress.add_task("loading", total=None)
        report = run(path, data, dtypes=[p.strip() for p in dtype.split(",") if p.strip()],
                     engines=[e.strip() for e in engine.split(",") if e.strip()], size=size,
                     max_lines=max_lines, rounds=rounds, warmup=warmup, threads=threads, batch_size=batch_size,
                     profile=profile, log=lambda s: progress.console.print(f"[dim]{s}[/dim]", highlight=False),
                     advance=lambda name: progress.update(task, advance=1, description=name),
                     on_total=lambda n: progress.update(task, total=n))
    s, m = report["settings"], report["machine"]
    enc = s["encoder"]
    shape = f"{enc['kind']} {enc['layers']}×{enc['hidden']}" if enc else "CHTE"
    t = Table(title=f"zen predict, {s['task']} {shape} ({s['size']}), {s['lines']:,} lines / {s['chars']:,} chars, "
                    f"batch {s['batch_size']}, {s['threads']} thread(s), {s['clock']} clock; "
                    f"{m['cpu_model'] or ''}")
    for c in ("engine", "dtype", "chars/s", "lines/s", "× torch fp32", "encoder share", "outside encoder"):
        t.add_column(c, justify="left" if c in ("engine", "dtype") else "right", no_wrap=True)
    for r in report["rows"]:
        t.add_row(r["engine"], r["dtype"], f"{r['chars_per_s']:,.0f}", f"{r['lines_per_s']:,.1f}",
                  "" if r["speed_vs_fp32"] is None else f"{r['speed_vs_fp32']:.2f}",
                  f"{100 * r['encoder_share']:.1f}%", f"{100 * r['outside_encoder_share']:.1f}%")
    console.print(t)
    if report["phases"]:
        p = Table(title="one pass under cProfile: share of the time per phase (cProfile inflates Python code)")
        p.add_column("phase", justify="left")
        for prec in report["phases"]:  # a dtype (torch) or "onnx fp32" / "onnx int8"
            p.add_column(prec, justify="right")
        phases = next(iter(report["phases"].values()))
        for name in phases:
            if name == "total":
                continue
            p.add_row(name, *(f"{100 * v[name] / v['total']:.1f}%" for v in report["phases"].values()))
        console.print(p)
    write_json_report(json_path, report)
