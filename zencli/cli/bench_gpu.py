"""`zen bench gpu`: check a GPU end to end in one command (zencli.bench.gpu does the work)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from zencli.cli.common import console, err_console, write_json_report


def gpu(
    tiny: bool = typer.Option(False, "--tiny", help="CPU-sized preset for a small corpus (what CI runs on "
                              "made-up data): 2-layer models, 200 pretraining steps; too short to learn PD98."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Output directory, a workspace (lexicon/, "
                                          "pretrain/, finetune-ner/, finetune-cws/, bench-gpu.json; default "
                                          "runs/bench-gpu)."),
    data: Optional[Path] = typer.Option(None, "--data", help="The pd98 dataset directory (raw/, ner/, cws/); "
                                        "default: $ZEN_DATA/pd98 or the cache (`zen data fetch pd98`)."),
    device: Optional[str] = typer.Option(None, "--device", help="auto (default: cuda when visible), cuda or cpu."),
    model_size: Optional[str] = typer.Option(None, "--model-size", help="bench model size: tiny, small, base "
                                             "(default) or LAYERSxHIDDENxNGRAM_LAYERS."),
    model_batch: Optional[int] = typer.Option(None, "--model-batch", help="bench model: sequences per batch "
                                              "(default 32)."),
    model_steps: Optional[int] = typer.Option(None, "--model-steps", help="bench model: timed rounds (default 10)."),
    pretrain_size: Optional[str] = typer.Option(None, "--pretrain-size", help="Pretrained model: "
                                                "LAYERSxHIDDENxNGRAM_LAYERS (default 6x256x2; heads hidden/64, "
                                                "FFN 4 × hidden)."),
    pretrain_batch: Optional[int] = typer.Option(None, "--pretrain-batch", help="Pretraining batch (default 128)."),
    pretrain_minutes: Optional[float] = typer.Option(None, "--pretrain-minutes", help="Pretraining time budget "
                                                     "(default 3)."),
    pretrain_steps: Optional[int] = typer.Option(None, "--pretrain-steps", help="Pretraining step limit (default "
                                                 "100000: the budget decides)."),
    finetune_minutes: Optional[float] = typer.Option(None, "--finetune-minutes", help="Time budget of each "
                                                     "fine-tuning (default 0.75)."),
    finetune_steps: Optional[int] = typer.Option(None, "--finetune-steps", help="Fine-tuning steps instead of the "
                                                 "recipes' epochs (default: epochs, cut by the budget)."),
    predict_lines: Optional[int] = typer.Option(None, "--predict-lines", help="Lines to predict (default 3000)."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Pretraining and fine-tuning: auto "
                                        "(default: bf16 where supported), fp32, bf16 or fp16."),
    min_pretrain_ratio: Optional[float] = typer.Option(None, "--min-pretrain-ratio", help="Pass: held-out "
                                                       "masked-char accuracy ≥ this × the unigram baseline's "
                                                       "(default 2)."),
    min_ner_f1: Optional[float] = typer.Option(None, "--min-ner-f1", help="Pass: NER test F1 ≥ this (default 0.6)."),
    min_cws_f1: Optional[float] = typer.Option(None, "--min-cws-f1", help="Pass: CWS test F1 ≥ this (default 0.9)."),
    pretrain_set: list[str] = typer.Option([], "--pretrain-set", help="KEY=VALUE for the pretraining, as `zen "
                                           "pretrain --set` (repeatable; wins over the options above)."),
    finetune_set: list[str] = typer.Option([], "--finetune-set", help="KEY=VALUE for both fine-tunings, as `zen "
                                           "finetune --set` (repeatable)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads of every step (default: torch's, "
                                          "the recipes' own for training; --tiny: 1)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Random seed (default 0)."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the report here (it always goes "
                                             "to OUTPUT/bench-gpu.json)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress displays."),
) -> None:
    """Check a GPU end to end in ≤ 8 minutes: bench model base fp32/bf16, a 3-minute pretraining that must
    beat the unigram baseline, NER and CWS fine-tunings scored as `zen evaluate`, `zen predict` throughput.

    One table (what ran, its time, its key numbers, pass/fail) and a JSON report; exits with status 1 when a
    criterion fails. With --tiny the same chain runs at CPU size."""
    from zencli.bench.gpu import GPU, TINY, run, table
    from zencli.cli.bench_model import _say, model_progress

    given = {"output_dir": output, "data": data, "device": device, "model_size": model_size,
             "model_batch": model_batch, "model_steps": model_steps, "pretrain_size": pretrain_size,
             "pretrain_batch": pretrain_batch, "pretrain_minutes": pretrain_minutes, "pretrain_steps": pretrain_steps,
             "finetune_minutes": finetune_minutes, "finetune_steps": finetune_steps, "predict_lines": predict_lines,
             "dtype": dtype, "min_pretrain_ratio": min_pretrain_ratio, "min_ner_f1": min_ner_f1,
             "min_cws_f1": min_cws_f1, "threads": threads, "seed": seed, "pretrain_sets": pretrain_set or None,
             "finetune_sets": finetune_set or None}
    settings = replace(TINY if tiny else GPU, **{k: v for k, v in given.items() if v is not None})
    report = run(settings, console=err_console, show_progress=not quiet,
                 model_progress=None if quiet else (lambda: model_progress(err_console)))
    _say(table(report))
    console.print(f"report: {report['workdir']}/bench-gpu.json", highlight=False, soft_wrap=True)
    write_json_report(json_path, report)
    if not report["passed"]:
        from rich.markup import escape

        console.print("[bold red]zen bench gpu FAILED[/bold red]: " + escape("; ".join(report["failures"])),
                      highlight=False)
        raise typer.Exit(1)
