"""`zen bench model`: ZEN 2.0 / ZEN 1.0 training and inference speed next to a same-size plain BERT,
achieved GFLOP/s against a measured GEMM peak, and the speed and accuracy of bf16 autocast."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console

from zencli.cli.common import console, progress_bar, write_json_report


def _list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def model(
    sizes: str = typer.Option("tiny,small,base", "--sizes",
                              help="Comma-separated: tiny (4×256, 2 n-gram layers), small (6×512, 3), base "
                                   "(12×768, 6), or LAYERSxHIDDENxNGRAM_LAYERS (e.g. 2x128x1)."),
    encoders: str = typer.Option("zen2,zen1,bert", "--encoders", help="Encoders to compare (bert = baseline)."),
    dtype: str = typer.Option(None, "--dtype",
                              help="Comma-separated fp32,bf16 (default: both where bf16 is fast, else fp32)."),
    steps: int = typer.Option(0, "--steps", help="Timed training rounds per size (0: tiny 8, small 4, base 3)."),
    infer_steps: int = typer.Option(0, "--infer-steps", help="Timed inference rounds (0: as --steps)."),
    warmup: int = typer.Option(1, "--warmup", help="Untimed rounds first."),
    batch: int = typer.Option(8, "--batch", "-b", help="Sequences per batch."),
    seq_len: int = typer.Option(128, "--seq-len", help="Tokens per sequence."),
    slots: int = typer.Option(128, "--slots", help="N-gram slots per sequence (released max_ngram_in_seq)."),
    ngram_rows: int = typer.Option(100_000, "--ngram-rows", help="Rows of the n-gram table."),
    vocab_size: int = typer.Option(21128, "--vocab-size", help="Character vocabulary size."),
    ngram_rate: float = typer.Option(0.4, "--ngram-rate", help="Synthetic n-grams per character."),
    text: Path = typer.Option(None, "--text", help="Take the characters from this text (default: synthetic)."),
    lexicon: Path = typer.Option(None, "--lexicon", help="ngram.txt to match in --text (default: synthetic slots)."),
    dense_adamw: bool = typer.Option(True, "--dense-adamw/--no-dense-adamw",
                                     help="Also time ZEN 2.0 with dense gradients and dense AdamW on every table."),
    curve_steps: int = typer.Option(30, "--curve-steps",
                                    help="Steps of the fp32-vs-bf16 training comparison (0: skip)."),
    curve_size: str = typer.Option("tiny", "--curve-size", help="Model size of that comparison."),
    gemm_size: int = typer.Option(2048, "--gemm-size", help="Square matmul size of the GEMM peak."),
    threads: int = typer.Option(0, "--threads", help="Torch threads (0: torch's default). With 1, process CPU "
                                "time is immune to other load and the verdicts use it."),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda."),
    seed: int = typer.Option(0, "--seed"),
    json_path: Path = typer.Option(None, "--json", help="Also write the results as JSON here."),
) -> None:
    """Time ZEN 2.0 / 1.0 against plain BERT (same run, interleaved): training step, inference, bf16."""
    from zencli.bench.model import ModelBenchSettings, parse_size, run

    settings = ModelBenchSettings(
        sizes=[parse_size(s) for s in _list(sizes)], encoders=_list(encoders),
        dtypes=_list(dtype) if dtype is not None else None, dense_opt=dense_adamw, steps=steps,
        warmup=warmup, infer_steps=infer_steps, batch=batch, seq_len=seq_len, slots=slots, ngram_rows=ngram_rows,
        vocab_size=vocab_size, ngram_rate=ngram_rate, text=text, lexicon=lexicon, curve_steps=curve_steps,
        curve_size=parse_size(curve_size), gemm_size=gemm_size, threads=threads, seed=seed, device=device)
    with model_progress() as callbacks:
        report = run(settings, **callbacks)
    print_report(report)
    write_json_report(json_path, report)


@contextmanager
def model_progress(out: Console = console) -> Iterator[dict[str, Callable]]:
    """The progress bar of a `zencli.bench.model.run` (`zen bench model`, `zen bench gpu`) on `out`: the run's
    log / advance / on_total callbacks."""
    with progress_bar(out) as progress:
        task = progress.add_task("preparing inputs", total=None)
        yield {"log": lambda s: progress.console.print(f"[dim]{s}[/dim]"),
               "advance": lambda name: progress.update(task, advance=1, description=name),
               "on_total": lambda n: progress.update(task, total=n)}


def print_report(report: dict) -> None:
    from rich.table import Table

    from zencli.bench.model import judging_clock

    s = report["settings"]
    clock = judging_clock(s["threads"])
    pre = "cpu_" if clock == "cpu" else ""
    peaks = report["gemm_peak_gflops"]
    peak_text = ", ".join(f"{p} {v['start']:.0f}→{v['end']:.0f}" for p, v in peaks.items())
    inp = report["inputs"]
    _say(f"[bold]zen bench model[/bold]: batch {s['batch']} × seq {s['seq_len']}, n-gram table {s['ngram_rows']:,} "
         f"rows, {inp['slots_filled_per_seq']:.1f} of {s['slots']} slots filled; {s['threads']} thread(s) on "
         f"{s['device']}; GEMM {s['gemm_size']}³ GFLOP/s (start→end): {peak_text}; load avg "
         f"{report['load_avg_start'][0]:.2f} → {report['load_avg_end'][0]:.2f}. Times are medians of interleaved "
         f"rounds, ratios medians of per-round ratios; tok/s, ms and GFLOP/s by {clock} clock"
         + ("" if clock == "cpu" else "; '× bert cpu' = the ratio in process CPU time"))
    for res in report["results"]:
        m = res["model"]
        head = (f"{res['size']} ({m['layers']}×{m['hidden']}, {m['ngram_layers']} n-gram layers; "
                f"{res['computed_slots_mean']:.0f} slots computed, {res['masked_per_batch']:.0f} masked/batch)")
        t = Table(title=f"{head}: training step (ms)")
        cols = ["variant", "tok/s", "step", "fwd", "bwd", "opt", "opt/(f+b)", "× bert"]
        cols += [] if clock == "cpu" else ["× bert cpu"]
        cols += ["GFLOP/s", "% peak", "bf16 ×", "ops", "syncs"]
        for c in cols:
            t.add_column(c, justify="left" if c == "variant" else "right", no_wrap=True)
        for r in res["rows"]:
            tr = r["train"]
            cells = [f"{r['encoder']} {r['dtype']}", f"{tr[pre + 'tokens_per_s']:,.0f}",
                     f"{tr[pre + 'step_ms']:.0f}", f"{tr[pre + 'fwd_ms']:.0f}", f"{tr[pre + 'bwd_ms']:.0f}",
                     f"{tr[pre + 'opt_ms']:.0f}", f"{tr[pre + 'opt_over_fwd_bwd']:.2f}",
                     _fmt(r.get(pre + "train_ratio_vs_bert"))]
            cells += [] if clock == "cpu" else [_fmt(r.get("cpu_train_ratio_vs_bert"))]
            cells += [f"{tr[pre + 'gflops_per_s']:.0f}", f"{tr[pre + 'pct_of_gemm_peak']:.0f}",
                      _fmt(r.get(pre + "bf16_train_speedup")), str(tr["ops_per_step"]), str(tr["host_syncs_per_step"])]
            t.add_row(*cells)
        _say(t)
        t = Table(title=f"{head}: inference (encoder, eval, no grad)")
        cols = ["variant", "tok/s", "ms", "× bert"] + ([] if clock == "cpu" else ["× bert cpu"])
        cols += ["GFLOP/s", "% peak", "bf16 ×"]
        for c in cols:
            t.add_column(c, justify="left" if c == "variant" else "right", no_wrap=True)
        for r in res["rows"]:
            inf = r.get("infer")
            if inf:
                cells = [f"{r['encoder']} {r['dtype']}", f"{inf[pre + 'tokens_per_s']:,.0f}",
                         f"{inf[pre + 'ms']:.0f}", _fmt(r.get(pre + "infer_ratio_vs_bert"))]
                cells += [] if clock == "cpu" else [_fmt(r.get("cpu_infer_ratio_vs_bert"))]
                cells += [f"{inf[pre + 'gflops_per_s']:.0f}", f"{inf[pre + 'pct_of_gemm_peak']:.0f}",
                          _fmt(r.get(pre + "bf16_infer_speedup"))]
                t.add_row(*cells)
        _say(t)
        if res["bf16_accuracy"]:
            a = Table(title=f"{res['size']}: bf16 autocast vs fp32 on one batch (eval mode)")
            for c in ("encoder", "seq out max |Δ|", "seq out max |x|", "seq out rel err", "MLM loss fp32",
                      "MLM loss bf16", "|Δ loss|"):
                a.add_column(c, justify="left" if c == "encoder" else "right", no_wrap=True)
            for r in res["bf16_accuracy"]:
                a.add_row(r["encoder"], f"{r['seq_max_abs_err']:.3g}", f"{r['seq_abs_max']:.3g}",
                          f"{r['seq_rel_err']:.2e}", f"{r['mlm_loss_fp32']:.4f}", f"{r['mlm_loss_bf16']:.4f}",
                          f"{r['mlm_loss_abs_diff']:.2e}")
            _say(a)
    kernels = report.get("attention_kernels") or []
    if kernels:
        k = Table(title=f"scaled_dot_product_attention backends for zen's attention shapes ({s['sizes'][-1]['name']}, "
                        f"{s['dtypes'][-1]}, forward+backward ms; n/a: cannot run these shapes)")
        backends = list(dict.fromkeys(r["backend"] for r in kernels))
        k.add_column("attention", justify="left")
        for b in backends:
            k.add_column(b.lower().replace("_attention", ""), justify="right")
        for kind in dict.fromkeys(r["attention"] for r in kernels):
            cells = {r["backend"]: (f"{r['ms']:.2f}" if r["ok"] else "n/a") for r in kernels if r["attention"] == kind}
            k.add_row(kind, *(cells[b] for b in backends))
        _say(k)
    curve = report.get("bf16_training")
    if curve:
        n = curve["steps"]
        marks = sorted({0, n // 4, n // 2, 3 * n // 4, n - 1})
        c = Table(title=f"bf16 vs fp32 training: {curve['size']} ZEN 2.0, {n} steps, lr {curve['lr']}, same seed "
                        f"and batches (loss at step)")
        c.add_column("dtype", justify="left")
        for i in marks:
            c.add_column(str(i + 1), justify="right")
        c.add_column(f"mean last {curve['final_window']}", justify="right")
        c.add_column("seconds", justify="right")
        for p in ("fp32", "bf16"):
            c.add_row(p, *(f"{curve[f'loss_{p}'][i]:.4f}" for i in marks), f"{curve[f'final_loss_{p}']:.4f}",
                      f"{curve[f'seconds_{p}']:.1f}")
        _say(c)
        _say(f"bf16 vs fp32 final loss gap {100 * curve['final_rel_gap']:.2f}%, largest per-step difference "
             f"{curve['max_abs_step_diff']:.4f}")
    sm = report["summary"]
    ratios = ", ".join(f"{k} {v:.2f}×" for k, v in sm["zen2_train_ratio_vs_bert"].items())
    if ratios:
        verdict = "met" if sm["zen2_train_ratio_ok"] else "NOT met"
        _say(f"ZEN 2.0 / BERT training step ({clock} clock): {ratios} (target ≤ {sm['zen2_train_ratio_target']}×: "
             f"{verdict})")
    _say("optimizer step cheaper than forward+backward with zen's setup: "
         + ("yes" if sm["optimizer_cheaper_than_fwd_bwd"] else "NO"))
    if "bf16_default_ok" in sm:
        _say(f"bf16: faster for training {sm['bf16_faster_for_training']}, training close to fp32 "
             f"{sm['bf16_training_close_to_fp32']} → bf16 default OK: {sm['bf16_default_ok']}")
    if inp["ngram_matrix_ms_per_batch"] is not None:
        _say(f"n-gram fusion matrix P: {inp['ngram_matrix_ms_per_batch']:.2f} ms per batch (batched tensor ops "
             "inside the forward, no per-example Python)")


def _say(thing) -> None:
    # Tables keep their numbers whole: rendered at least 120 columns wide (a narrow terminal wraps lines).
    from rich.console import Console

    wide = Console(file=console.file, width=max(console.width, 120), force_terminal=console.is_terminal,
                   no_color=console.no_color, highlight=False)
    wide.print(thing)


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"
