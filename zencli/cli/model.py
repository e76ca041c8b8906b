"""`zen model info|import|export`: inspect and convert checkpoints (zen ⇄ released ZEN, BERT → zen)."""

from __future__ import annotations

from pathlib import Path

import typer

from zencli.cli.common import console

app = typer.Typer(help="Inspect and convert model directories (zen, released ZEN 1.0/2.0, BERT).", no_args_is_help=True)


@app.command("info")
def info(directory: Path = typer.Argument(..., help="A zen, released ZEN or BERT model directory.")) -> None:
    """Show what a model directory holds: kind, encoder, sizes, parameters, vocab and lexicon."""
    from rich.table import Table

    from zencli.model.sources import load_pretrained

    p = load_pretrained(directory)
    cfg = p.model.config
    t = Table(title=f"{directory} ({p.kind})", show_header=False)
    t.add_column("key")
    t.add_column("value")
    rows = [
        ("encoder", cfg.encoder),
        ("layers × hidden", f"{cfg.num_hidden_layers} × {cfg.hidden_size} ({cfg.num_attention_heads} heads)"),
        ("n-gram layers", str(cfg.num_hidden_word_layers) if cfg.encoder != "bert" else "—"),
        ("vocab rows", f"{cfg.vocab_size:,}"),
        ("n-gram rows", f"{cfg.word_size:,}" if cfg.encoder != "bert" else "—"),
        ("parameters", f"{sum(x.numel() for x in p.model.parameters()):,}"),
        ("vocab.txt", str(p.vocab) if p.vocab else "missing"),
        ("ngram.txt", str(p.ngram) if p.ngram else "missing"),
    ]
    for k, v in rows:
        t.add_row(k, v)
    console.print(t)


@app.command("import")
def import_(
    source: Path = typer.Argument(..., help="A released ZEN directory or a BERT(-Chinese) checkpoint directory."),
    output: Path = typer.Option(..., "--output", "-o", help="zen model directory to write."),
    encoder: str = typer.Option("zen2", "--encoder", help="For BERT sources: zen2, zen1 or bert."),
    ngram: Path | None = typer.Option(None, "--ngram",
                                      help="For BERT sources: the lexicon (ngram.txt) of the new n-gram side."),
    ngram_layers: int = typer.Option(6, "--ngram-layers", help="For BERT sources: n-gram encoder depth."),
    seed: int = typer.Option(0, "--seed", help="Seed for freshly initialised weights."),
) -> None:
    """Convert a released ZEN or BERT checkpoint into a zen model directory (BERT: continue-training path)."""
    import torch

    from zencli.model.checkpoint import save_zen_model
    from zencli.model.sources import load_pretrained

    torch.manual_seed(seed)
    p = load_pretrained(source, encoder=encoder, ngram=ngram, num_hidden_word_layers=ngram_layers)
    save_zen_model(p.model, output, vocab=p.vocab, ngram=p.ngram)
    console.print(f"{source} ({p.kind}) → {output}")
    for note in p.notes:
        console.print(f"  {note}", highlight=False)


@app.command("export")
def export(
    directory: Path = typer.Argument(..., help="A zen model directory (pretrained)."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for the released layout."),
) -> None:
    """Write the released ZEN layout (pytorch_model.bin, config.json, vocab.txt, ngram.txt)."""
    from zencli.model.released import export_released
    from zencli.model.sources import load_pretrained

    p = load_pretrained(directory)
    export_released(p.model, output, vocab=p.vocab, ngram=p.ngram)
    console.print(f"{directory} → {output} (released layout)")
