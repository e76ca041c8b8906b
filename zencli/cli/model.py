"""`zen model info|import|export`: inspect and convert checkpoints (zen ⇄ released ZEN, BERT → zen)."""

from __future__ import annotations

from pathlib import Path

import typer

from zencli.cli.common import console

app = typer.Typer(help="Inspect and convert model directories (zen, released ZEN 1.0/2.0, BERT).", no_args_is_help=True)


@app.command("info")
def info(
    directory: Path = typer.Argument(..., help="A fine-tuned or pretrained zen model directory (or the output "
                                     "directory of `zen finetune` / `zen pretrain`), released ZEN or BERT."),
    as_json: bool = typer.Option(False, "--json", help="Print the description as JSON."),
) -> None:
    """Show what a model directory holds: kind, task and labels, encoder sizes, parameters, vocab and
    lexicon, and the scores written beside it."""
    import json

    from zencli.tasks.info import describe_model

    d = describe_model(directory)
    if as_json:
        typer.echo(json.dumps(d, ensure_ascii=False, indent=1))
        return
    _print_info(d)


def _print_info(d: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(f"{d['path']} ({d['kind']})"), show_header=False)
    t.add_column("key")
    t.add_column("value", overflow="fold")
    rows: list[tuple[str, str]] = []
    task = d.get("task")
    if task:
        labels = task["labels"] or []
        shown = ", ".join(labels[:24]) + (f", … ({len(labels) - 24} more)" if len(labels) > 24 else "")
        rows += [("task", f"{task['name']} ({task['description']})"),
                 ("labels", f"{len(labels)}" + (f" {task['scheme']}" if task["scheme"] else "")
                  + (f", one per {task['level']}" if task["level"] else "") + (f": {shown}" if labels else "")),
                 ("decoder", f"{task['decoder']} · max_seq_len {task['max_seq_len']}")]
    e = d.get("encoder")
    if e:
        ngrams = e["type"] != "bert"
        rows += [("encoder", e["type"]),
                 ("layers × hidden", (f"{e['layers']} × {e['hidden_size']} ({e['heads']} heads, FFN "
                                      f"{e['intermediate_size']})")),
                 ("n-gram layers", str(e["ngram_layers"]) if ngrams else "—"),
                 ("vocab rows", f"{e['vocab_rows']:,}"),
                 ("n-gram rows", f"{e['ngram_rows']:,}" if ngrams else "—")]
    if d.get("chte"):
        c = d["chte"]
        rows.append(("CHTE", ", ".join(f"{k} {v}" for k, v in c.items() if k in (
            "n_layers", "n_heads", "n_linear_heads", "head_dim", "ffn_size", "cnn_windows", "char_vocab_size",
            "bigram_vocab_size"))))
    rows.append(("parameters", f"{d['parameters']:,}"))
    rows += [(name, path or ("— (no n-gram side)" if name == "ngram.txt" and not e else "missing"))
             for name, path in d["files"].items()]
    if d.get("source"):
        rows.append(("encoder source", d["source"]))
    for name, s in (d.get("scores") or {}).items():
        if name == "heldout" and s.get("objective") == "rtd":
            rows.append(("held-out (pretraining)", (f"replaced-token detection acc {_num(s['rtd_acc'])}, AUC "
                                                    f"{_num(s['rtd_auc'])}; the generator's masked-char acc "
                                                    f"{_num(s['masked_acc'])} at step {s['step']}")))
        elif name == "heldout":
            rows.append(("held-out (pretraining)", (f"masked-char acc {_num(s['masked_acc'])}, MLM loss "
                                                    f"{_num(s['mlm_loss'])} at step {s['step']}")))
        else:
            step = f" at step {s['step']}" if s.get("step") is not None else ""
            rows.append((f"{name} score", f"{s['metric']} {_num(s['value'])}{step} ({s['gold']})"))
    for k, v in rows:
        t.add_row(escape(k), escape(str(v)))
    console.print(t)


def _num(v) -> str:
    return "n/a" if v is None else f"{v:.4f}"


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
    from zencli.tasks.convert import import_checkpoint

    p = import_checkpoint(source, output, encoder=encoder, ngram=ngram, ngram_layers=ngram_layers, seed=seed)
    console.print(f"{source} ({p.kind}) → {output}")
    for note in p.notes:
        console.print(f"  {note}", highlight=False)


@app.command("export")
def export(
    directory: Path = typer.Argument(..., help="A zen model directory (pretrained; fine-tuned for --format onnx)."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for the released layout or the ONNX files."),
    fmt: str = typer.Option("released", "--format", help="released (the released ZEN layout) or onnx (a "
                            "fine-tuned model for ONNX Runtime: `zen predict --engine onnx`)."),
    int8: bool = typer.Option(True, "--int8/--no-int8", help="--format onnx: also write the int8 model "
                              "(onnxruntime's dynamic quantization) beside the fp32 one."),
) -> None:
    """Write the released ZEN layout (pytorch_model.bin, config.json, vocab.txt, ngram.txt), or with
    --format onnx a fine-tuned model as ONNX (fp32 and int8) with what `zen predict --engine onnx` needs."""
    from zencli.errors import ZenError

    if fmt == "onnx":
        from zencli.tasks.engine import export_onnx

        export_onnx(directory, output, int8=int8, say=lambda line: console.print(line, highlight=False))
        return
    if fmt != "released":
        raise ZenError(f"--format: expected released or onnx, got {fmt!r}")
    from zencli.tasks.convert import export_checkpoint

    export_checkpoint(directory, output)
    console.print(f"{directory} → {output} (released layout)")
