"""`zen data pretrain`: make the pretraining shards only (e.g. on a CPU machine before training on GPUs)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from zencli.cli.common import OVERRIDES, RECIPE, console, err_console

app = typer.Typer(help="Prepare training data (pretraining shards).", no_args_is_help=True)


@app.command("pretrain")
def pretrain_data(
    corpus: list[Path] = typer.Argument(None, help="Raw text files (default: the recipe's data.corpus)."),
    recipe: str | None = RECIPE,
    overrides: list[str] = OVERRIDES,
    output: Path | None = typer.Option(None, "--output", "-o", help="The output directory `zen pretrain` "
                                          "will use (train.output_dir); shards go to OUTPUT/data/."),
    heldout: list[Path] = typer.Option(None, "--heldout", help="Held-out raw text (data.heldout; repeatable)."),
    vocab: Path | None = typer.Option(None, "--vocab", help="vocab.txt (data.vocab)."),
    ngram: Path | None = typer.Option(None, "--ngram", help="ngram.txt, the n-gram lexicon (data.ngram)."),
    build_missing: bool | None = typer.Option(None, "--build-missing/--no-build-missing", help="Build a "
                                                 "missing vocab/lexicon from the corpus (data.build_missing)."),
    workers: int | None = typer.Option(None, "--workers", "-j", help="Processes (0: one per CPU core)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Delete earlier outputs of zen pretrain in "
                                   "OUTPUT (shards, checkpoints, model) first."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Build a missing vocab/lexicon and generate the shards `zen pretrain` trains on, then stop.

    Run `zen pretrain` later with the same recipe and output directory: it reuses everything made here.
    An interrupted run continues where it stopped (complete shards are kept)."""
    from zencli.cli.pretrain import build_config
    from zencli.data.pretraining import summary_table
    from zencli.tasks.pretraining import prepare

    options = {
        "data.corpus": [str(p) for p in corpus] if corpus else None,
        "data.heldout": [str(p) for p in heldout] if heldout else None,
        "data.vocab": vocab, "data.ngram": ngram, "data.build_missing": build_missing, "data.workers": workers,
        "train.output_dir": output, "train.overwrite": True if overwrite else None,
    }
    cfg = build_config(recipe, overrides, options)
    prepared = prepare(cfg, console=None if as_json else err_console)
    if as_json:
        payload = {"vocab": str(prepared.vocab), "ngram": str(prepared.ngram), "built": prepared.built,
                   **{k: v.as_dict() for k, v in prepared.generation.items()}}
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    for result in prepared.generation.values():
        console.print(summary_table(result))
    console.print(f"vocab {prepared.vocab} · lexicon {prepared.ngram}; train with: zen pretrain --output "
                  f"{cfg.train.output_dir} (same recipe)", highlight=False, soft_wrap=True)
