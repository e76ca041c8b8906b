"""`zen bench matcher`: n-gram matcher throughput against the released look-up loop (PD98 dev)."""

from __future__ import annotations

from pathlib import Path

import typer

from zencli.cli.common import console, progress_bar, write_json_report


def matcher(
    lexicon: Path = typer.Option(None, "--lexicon", help="ngram.txt of char n-grams; default: count from --train."),
    train: Path = typer.Option(None, "--train", help="Text to count n-grams in (default: PD98 raw train)."),
    train_chars: int = typer.Option(0, "--train-chars", help="Count over the first N chars of --train only (0: all)."),
    min_freq: int = typer.Option(15, "--min-freq", help="Keep counted n-grams seen at least this often."),
    dev: Path = typer.Option(None, "--dev", help="Text to match (default: PD98 raw dev)."),
    seq_len: int = typer.Option(128, "--seq-len", help="Characters per sequence."),
    batch_size: int = typer.Option(128, "--batch-size", "-b", help="Sequences per batched call."),
    max_len: int = typer.Option(8, "--max-len", help="Longest n-gram (counted and matched); shortest is 2."),
    repeats: int = typer.Option(3, "--repeats", help="Timed passes per method; the best one counts."),
    json_path: Path = typer.Option(None, "--json", help="Also write the results as JSON here."),
) -> None:
    """Time the trie matcher against the released per-position dict loop (same data, same run)."""
    from rich.table import Table

    from zencli.bench.common import dataset_dir
    from zencli.bench.matcher import run

    if dev is None or (train is None and lexicon is None):
        pd98 = dataset_dir(None)  # the located (or fetched) PD98
        dev = dev or pd98 / "raw" / "dev.txt"
        train = train or (None if lexicon is not None else pd98 / "raw" / "train.txt")

    with progress_bar() as progress:
        task = progress.add_task("lexicon, correctness check", total=5 * max(repeats, 1))
        report = run(lexicon=lexicon, train=train, train_chars=train_chars, min_freq=min_freq, dev=dev,
                     seq_len=seq_len, batch_size=batch_size, max_len=max_len, repeats=repeats,
                     log=lambda s: progress.console.print(f"[dim]{s}[/dim]"),
                     advance=lambda name: progress.update(task, advance=1, description=name))
    lex, data = report["lexicon"], report["data"]
    t = Table(title=f"n-gram matching: {lex['ngrams']:,} n-grams, {data['sequences']:,} sequences × "
                    f"{data['seq_len']} chars, {data['matches_per_token']:.2f} matches/token, "
                    f"load avg at start {report['load_avg_at_start']:.2f}")
    for col in ("method", "batch", "Mtok/s", "× naive", "CPU Mtok/s", "CPU × naive"):
        t.add_column(col, justify="left" if col == "method" else "right")
    for r in report["rows"]:
        t.add_row(r["method"], str(r["batch_size"]), f"{r['tokens_per_s'] / 1e6:.2f}", f"{r['speedup']:.1f}",
                  f"{r['cpu_tokens_per_s'] / 1e6:.2f}", f"{r['cpu_speedup']:.1f}")
    console.print(t)
    console.print(f"matcher built in {report['matcher']['build_s']:.2f} s ({report['matcher']['trie_nodes']:,} trie "
                  f"nodes); output identical to the naive loop on all {data['sequences']:,} sequences")
    write_json_report(json_path, report)
