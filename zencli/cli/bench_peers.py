"""`zen bench peers`: zen's ZEN 2.0 and BERT against the released ZEN 2.0 code and Hugging Face's BERT."""

from __future__ import annotations

from pathlib import Path

import typer

from zencli.cli.common import progress_bar, write_json_report


def peers(
    released: Path = typer.Option(None, "--released", help="A checkout of the released ZEN 2.0 code (the folder "
                                  "holding ZEN2/modeling.py) to time beside zen."),
    hf: bool = typer.Option(False, "--hf", help="Also time Hugging Face's BertModel (needs transformers)."),
    sizes: str = typer.Option("tiny,small,base", "--sizes", help="tiny, small, base or LAYERSxHIDDENxNGRAM_LAYERS."),
    modes: str = typer.Option("infer,train", "--modes", help="infer, train or both."),
    steps: int = typer.Option(5, "--steps", help="Timed rounds per size and mode."),
    warmup: int = typer.Option(1, "--warmup", help="Untimed rounds first."),
    batch: int = typer.Option(8, "--batch", "-b", help="Sequences per batch."),
    seq_len: int = typer.Option(128, "--seq-len", help="Tokens per sequence."),
    slots: int = typer.Option(128, "--slots", help="N-gram slots per sequence."),
    ngram_rows: int = typer.Option(100_000, "--ngram-rows", help="Rows of the n-gram table."),
    threads: int = typer.Option(1, "--threads", help="Torch threads; with 1 on CPU, process CPU time is the clock."),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda."),
    precision: str = typer.Option(None, "--precision", help="Comma-separated: fp32, bf16 (autocast, every model "
                                  "alike), int8 (zen's encoders, inference; CPU). Default: all three on CPU, "
                                  "fp32,bf16 on CUDA."),
    seed: int = typer.Option(0, "--seed"),
    json_path: Path = typer.Option(None, "--json", help="Also write the results as JSON here."),
) -> None:
    """Time zen's encoders against the code they replace, interleaved in one run."""
    from rich.table import Table

    from zencli.bench.model import parse_size
    from zencli.bench.peers import run
    from zencli.cli.bench_model import _say  # wide enough that numbers never wrap
    from zencli.errors import ZenError

    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    if not mode_list or any(m not in ("infer", "train") for m in mode_list):
        raise ZenError(f"--modes: expected infer, train or infer,train, got {modes!r}")
    with progress_bar() as progress:
        task = progress.add_task("building models", total=None)
        report = run(sizes=[parse_size(s) for s in sizes.split(",") if s.strip()], released=released, hf=hf,
                     modes=mode_list, steps=steps, warmup=warmup, batch=batch, seq_len=seq_len, slots=slots,
                     ngram_rows=ngram_rows, vocab_size=21128, threads=threads, seed=seed, device=device,
                     precision=precision,
                     log=lambda s: progress.console.print(f"[dim]{s}[/dim]"),
                     advance=lambda name: progress.update(task, advance=1, description=name),
                     on_total=lambda n: progress.update(task, total=n))
    s = report["settings"]
    for mode in mode_list:
        precisions = [p for p in s["precisions"] if mode == "infer" or p != "int8"]  # int8: inference only
        t = Table(title=f"{mode}: batch {s['batch']} × {s['seq_len']}, {s['slots']} n-gram slots, "
                        f"{', '.join(precisions)} on {s['device']}, "
                        f"{s['threads']} thread(s), {s['clock']} clock")
        for c in ("size", "model", "precision", "tokens/s", "ms", "zen2 × (same precision)"):
            t.add_column(c, justify="left" if c in ("size", "model", "precision") else "right", no_wrap=True)
        ratios = Table(title=f"{mode}: ratios (> 1: the first named is faster)")
        for c in ("size", "what", "×"):
            ratios.add_column(c, justify="right" if c == "×" else "left", no_wrap=True)
        for r in report["results"]:
            rr = r[mode + "_ratios"]
            for m in r[mode]:
                ratio = rr.get(f"zen2 vs {m['model']}, {m['precision']}")
                t.add_row(r["size"], m["model"], m["precision"], f"{m['tokens_per_s']:,.0f}", f"{m['ms']:.1f}",
                          "" if ratio is None else f"{ratio:.2f}")
            t.add_section()
            for key, ratio in rr.items():
                if not key.startswith("zen2 vs "):  # zen's BERT vs HF's; zen2 in each precision vs a fp32 peer
                    ratios.add_row(r["size"], key, f"{ratio:.2f}")
        _say(t)
        if ratios.row_count:
            _say(ratios)
    write_json_report(json_path, report)
