"""`zen bench speed`: models (ZEN 2.0 / ZEN 1.0 / BERT), n-gram matcher, lexicon extraction and the GEMM
peak in one run, one table per section and the ratios (zencli.bench.speed composes the benchmarks)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from zencli.cli.common import progress_bar, write_json_report


def speed(
    sizes: Optional[str] = typer.Option(
        None, "--sizes", help="Model sizes, comma-separated: tiny, small, base or LAYERSxHIDDENxNGRAM_LAYERS "
        "(default: tiny,small,base; with --quick: tiny)."),
    quick: bool = typer.Option(False, "--quick", help="Every section, shortened: 2 timed model rounds, one "
                               "matcher pass, the lexicon on the raw train text only (about a minute at tiny)."),
    data: Optional[Path] = typer.Option(None, "--data", help="Dataset directory in the shared layout (raw/, "
                                        "cws/); default: the located PD98."),
    lexicon_sizes: Optional[str] = typer.Option(
        None, "--lexicon-sizes", help="Synthetic lexicon corpus sizes in chars, e.g. 12.5M,25M; '' for none "
        "(default: 12.5M; with --quick: none)."),
    threads: int = typer.Option(0, "--threads", help="Torch threads for the models (0: torch's default). With 1 "
                                "the model ratios use process CPU time, which other load disturbs least."),
    workers: int = typer.Option(2, "--workers", "-j", help="Counting processes of the lexicon build."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the full results as JSON here."),
) -> None:
    """ZEN 2.0 / ZEN 1.0 / BERT tokens/s, n-gram matcher, lexicon chars/s and GEMM peak in one run, with ratios.

    Training and inference tokens/s of the three encoders at the same size (interleaved rounds), the trie
    matcher against the released per-position loop, `zen lexicon build` chars/s, and the GEMM peak."""
    from zencli.bench.speed import run
    from zencli.cli.bench_lexicon import _size
    from zencli.errors import ZenError

    size_list = [x.strip() for x in sizes.split(",") if x.strip()] if sizes is not None else None
    try:
        lex = [_size(x) for x in lexicon_sizes.split(",") if x.strip()] if lexicon_sizes is not None else None
    except ZenError as e:
        raise ZenError(str(e).replace("--sizes", "--lexicon-sizes", 1)) from None
    with progress_bar() as progress:
        state: dict[str, int] = {}

        def section(name: str, total: int | None):
            if "task" in state:
                progress.update(state["task"], visible=False)
            state["task"] = progress.add_task(name, total=total)

            def advance(label: str) -> None:
                progress.update(state["task"], advance=1, description=f"{name}: {label}"[:34])
            return advance

        report = run(data=data, sizes=size_list, quick=quick, lexicon_sizes=lex, threads=threads, workers=workers,
                     log=lambda s: progress.console.print(f"[dim]{s}[/dim]", highlight=False),
                     section=section)
    print_report(report)
    write_json_report(json_path, report)


def print_report(report: dict) -> None:
    from rich.table import Table

    from zencli.bench.speed import ratio_lines
    from zencli.cli.bench_model import _say  # wide enough that numbers never wrap

    sm = report["summary"]
    pre = "cpu_" if sm["clock"] == "cpu" else ""
    mach = report["machine"]
    ms = report["model"]["settings"]
    _say(f"[bold]zen bench speed[/bold]{' (quick)' if report['settings']['quick'] else ''}: "
                  f"{mach['cpu_count']} CPU(s) {mach['cpu_model'] or ''}, torch {mach['torch']}, {ms['threads']} "
                  f"thread(s), load avg {report['model']['load_avg_start'][0]:.2f} → "
                  f"{report['model']['load_avg_end'][0]:.2f}; model times by {sm['clock']} clock, "
                  f"batch {ms['batch']} × seq {ms['seq_len']}")

    t = Table(title="models: tokens/s (training step incl. optimizer; inference = encoder forward)")
    for c in ("size", "encoder", "dtype", "train tok/s", "× BERT time", "infer tok/s", "× BERT time ",
              "% GEMM peak"):
        t.add_column(c, justify="left" if c in ("size", "encoder", "dtype") else "right", no_wrap=True)
    for res in report["model"]["results"]:
        for r in res["rows"]:
            inf = r.get("infer") or {}
            t.add_row(res["size"], r["encoder"], r["dtype"], f"{r['train'][pre + 'tokens_per_s']:,.0f}",
                      _x(r.get(pre + "train_ratio_vs_bert")),
                      f"{inf[pre + 'tokens_per_s']:,.0f}" if inf else "", _x(r.get(pre + "infer_ratio_vs_bert")),
                      f"{r['train'][pre + 'pct_of_gemm_peak']:.0f}")
    _say(t)

    g = Table(title=f"GEMM peak (torch.matmul {ms['gemm_size']}², GFLOP/s)")
    for c in ("dtype", "start", "end"):
        g.add_column(c, justify="left" if c == "dtype" else "right")
    for p, v in report["model"]["gemm_peak_gflops"].items():
        g.add_row(p, f"{v['start']:,.0f}", f"{v['end']:,.0f}")
    _say(g)

    mt = report["matcher"]
    t = Table(title=f"n-gram matcher: {mt['lexicon']['ngrams']:,} n-grams, {mt['data']['sequences']:,} sequences × "
                    f"{mt['data']['seq_len']} chars (output identical to the naive loop)")
    for c in ("method", "M tok/s", "× naive", "CPU × naive"):
        t.add_column(c, justify="left" if c == "method" else "right")
    for r in mt["rows"]:
        t.add_row(r["method"], f"{r['tokens_per_s'] / 1e6:.2f}", f"{r['speedup']:.1f}", f"{r['cpu_speedup']:.1f}")
    _say(t)

    lx = report["lexicon"]
    t = Table(title=f"lexicon extraction (zen lexicon build, {report['settings']['workers']} worker(s))")
    for c in ("corpus", "chars", "n-grams", "total s", "M chars/s", "peak RSS"):
        t.add_column(c, justify="left" if c == "corpus" else "right")
    for r in lx["rows"]:
        t.add_row(r["corpus"], f"{r['chars']:,}", f"{r['ngrams']:,}", f"{r['time_total_s']:.1f}",
                  f"{r['chars_per_s'] / 1e6:.2f}", f"{r['peak_rss_total'] / 2**20:,.0f} MiB")
    _say(t)

    t = Table(title="ratios")
    t.add_column("what", justify="left")
    t.add_column("value", justify="right")
    for what, value in ratio_lines(sm):
        t.add_row(what, value)
    _say(t)


def _x(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"
