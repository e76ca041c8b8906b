"""`zen bench lexicon`: lexicon extraction speed and peak memory (PD98 + synthetic corpora)."""

from __future__ import annotations

from pathlib import Path

import typer

from zencli.cli.common import console, write_json_report


def _size(text: str) -> int:
    from zencli.errors import ZenError

    t = text.strip().upper()
    scale = {"K": 10**3, "M": 10**6, "G": 10**9}.get(t[-1:], 1)
    try:
        value = float(t[:-1] if t[-1:] in "KMG" else t) * scale
    except ValueError:
        raise ZenError(f"--sizes: expected sizes in chars like 10M,50M, got {text!r}") from None
    if value < 1000:
        raise ZenError(f"--sizes: expected at least 1K chars, got {text!r}")
    return int(value)


def lexicon(
    sizes: str = typer.Option(
        "12.5M,25M,50M", "--sizes", help="Synthetic corpus sizes in chars (comma-separated); '' for none."
    ),
    workers: int = typer.Option(2, "--workers", "-j", help="Counting processes per build."),
    raw: Path = typer.Option(None, "--raw", help="Real corpus to time first (default: PD98 raw train)."),
    cws: Path = typer.Option(None, "--cws", help="Segmented text the synthetic corpus is generated from "
                                                 "(default: PD98 cws train)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the synthetic corpus."),
    tmp_dir: Path = typer.Option(None, "--tmp-dir",
                                 help="Where to write the temporary corpora (default: system temp)."),
    json_path: Path = typer.Option(None, "--json", help="Also write the results as JSON here."),
) -> None:
    """Time `zen lexicon build` (chars/s, peak RSS) on PD98 and on synthetic corpora of growing size."""
    from rich.table import Table

    from zencli.bench.common import dataset_dir
    from zencli.bench.lexicon import run_bench

    if raw is None or cws is None:
        pd98 = dataset_dir(None)  # the located (or fetched) PD98
        raw, cws = raw or pd98 / "raw" / "train.txt", cws or pd98 / "cws" / "train.txt"

    size_list = [_size(s) for s in sizes.split(",") if s.strip()]
    report = run_bench(size_list, workers=workers, raw=raw, cws=cws, tmp_dir=tmp_dir, seed=seed,
                       log=lambda s: console.print(f"[dim]{s}[/dim]"))
    t = Table(title=f"lexicon extraction, {workers} worker(s), load avg at start {report['load_avg_at_start']:.2f}")
    for col in ("corpus", "chars", "n-grams", "count s", "merge s", "total s", "CPU s", "M chars/s",
                "peak RSS all", "main", "worker"):
        t.add_column(col, justify="left" if col == "corpus" else "right")
    for r in report["rows"]:
        t.add_row(r["corpus"], f"{r['chars']:,}", f"{r['ngrams']:,}", f"{r['time_count_s']:.1f}",
                  f"{r['time_merge_s']:.1f}", f"{r['time_total_s']:.1f}", f"{r['cpu_s']:.1f}",
                  f"{r['chars_per_s'] / 1e6:.2f}", f"{r['peak_rss_total'] / 2**20:,.0f} MiB",
                  f"{r['peak_rss_main'] / 2**20:,.0f} MiB", f"{r['peak_rss_worker'] / 2**20:,.0f} MiB")
    console.print(t)
    write_json_report(json_path, report)
