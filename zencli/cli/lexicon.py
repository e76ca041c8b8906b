"""`zen lexicon [build|count|merge|show|stats]`: PMI n-gram lexicon extraction (see zencli/lexicon/).

Bare `zen lexicon` is the first step of the default pipeline: the character vocabulary and the n-gram
lexicon of the default corpus (PD98 raw/train.txt), into the workspace (zencli.jobs.workspace)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from zencli.cli.common import (
    ENCODING_ERRORS,
    OVERRIDES,
    RECIPE,
    WORKDIR_OPTION,
    console,
    encoding_errors_option,
    err_console,
    reads_text,
    text_decoding,
)
from zencli.errors import ZenError
from zencli.jobs.lexicon import build_config
from zencli.jobs.workspace import Workspace

app = typer.Typer(
    help="Extract the n-gram lexicon (frequency + PMI) from raw text: one pass (build) or map/reduce "
    "over shards (count, merge); show a lexicon; measure it against gold word boundaries (stats). "
    "Without a subcommand: the default pipeline's first step, "
    "the vocabulary and lexicon of the default corpus (PD98 raw train) in the workspace.",
    invoke_without_command=True,
    no_args_is_help=False,
)

OUTPUT = typer.Option(None, "--output", "-o", help="ngram.txt to write (a JSON sidecar goes next to it).")
LANGUAGE = typer.Option(
    None, "--language", "-l", help="zh or ar: default thresholds (zh: PMI 3, freq 15; ar: PMI 10, freq 20)."
)
MIN_FREQ = typer.Option(None, "--min-freq", help="Keep n-grams seen at least this often (default: language default).")
MIN_PMI = typer.Option(None, "--min-pmi", help="Keep n-grams whose PMI (bits, min over splits) is at least this.")
MIN_ENTROPY = typer.Option(
    None, "--min-entropy", help="Also keep only n-grams whose left and right branching entropy (bits) are both at "
    "least this (default: off; counts one extra n-gram length for the neighbours)."
)
MIN_N = typer.Option(None, "--min-n", help="Shortest n-gram, in tokens (default 2).")
MAX_N = typer.Option(None, "--max-n", help="Longest n-gram, in tokens (default 8).")
MAX_SIZE = typer.Option(None, "--max-size", help="Keep at most this many n-grams, the most frequent of those that "
                        "pass the filters (default: all); bounds the n-gram table of a model pretrained on it.")
WORKERS = typer.Option(None, "--workers", "-j", help="Counting processes (0 or default: one per CPU core).")
VOCAB = typer.Option(
    None, "--vocab", help="Count WordPiece pieces of this vocab.txt (needed for Arabic); default: characters."
)
ENCODING_ERRORS_KEY = encoding_errors_option("encoding_errors")
STYLE = typer.Option(None, "--style", help="ngram.txt style: tokens (ZEN 2.0, `北 京,9`) or raw (ZEN 1.0, `北京,9`).")


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def print_result(result, output: Path) -> None:
    from rich.table import Table

    corpus = result.corpus
    passed = sum(v["selected"] for v in result.per_length.values())
    capped = (f" (the most frequent of {passed:,} that passed: max_size)"
              if result.settings.get("max_size") is not None and passed > len(result.lexicon) else "")
    console.print(f"lexicon: {len(result.lexicon):,} n-grams{capped} → {output}", soft_wrap=True)
    t = Table(title="n-grams per length")
    t.add_column("n", justify="right")
    t.add_column("counted (after pruning)", justify="right")
    t.add_column(f"freq ≥ {result.settings['min_freq']}", justify="right")
    entropy = result.settings.get("min_entropy")
    if entropy is None:
        t.add_column(f"+ PMI ≥ {result.settings['min_pmi']:g} (selected)", justify="right")
    else:
        t.add_column(f"+ PMI ≥ {result.settings['min_pmi']:g}", justify="right")
        t.add_column(f"+ entropy ≥ {entropy:g} (selected)", justify="right")
    for n, row in sorted(result.per_length.items()):
        if n < result.settings["min_n"]:
            continue
        cells = [f"{row['candidates']:,}", f"{row['frequent']:,}"]
        cells += [f"{row['selected']:,}"] if entropy is None else [f"{row['pmi']:,}", f"{row['selected']:,}"]
        t.add_row(str(n), *cells)
    console.print(t)
    _print_top(result.lexicon, 10)
    s = Table(title="run", show_header=False)
    s.add_column("key")
    s.add_column("value", justify="right")
    s.add_row("corpus", f"{len(corpus['files'])} file(s), {corpus['lines']:,} lines, {corpus['chars']:,} chars, "
                        f"{corpus['tokens']:,} tokens")
    for k, v in result.times.items():
        s.add_row(f"time {k}", f"{v:.2f} s")
    if corpus["chars"] and result.times.get("total"):
        s.add_row("throughput", f"{corpus['chars'] / result.times['total'] / 1e6:.2f} M chars/s")
    mem = result.memory
    if mem:
        s.add_row("peak RSS, all processes (sampled)", _mib(mem["peak_rss_total_sampled"]))
        s.add_row("peak RSS, main process", _mib(mem["peak_rss_main"]))
        s.add_row("peak RSS, largest worker (sampled)", _mib(mem["peak_rss_worker_max"]))
        for stage, peak in mem.get("peak_rss_total_sampled_by_stage", {}).items():
            s.add_row(f"peak RSS while {stage.replace('_', ' ')} (sampled)", _mib(peak))
    if result.merged_raw:
        s.add_row("raw-style duplicates folded", f"{result.merged_raw:,}")
    console.print(s)


def _print_top(lexicon, top: int) -> None:
    from rich.table import Table

    t = Table(title=f"top {min(top, len(lexicon))} n-grams")
    t.add_column("id", justify="right")
    t.add_column("n-gram")
    t.add_column("n", justify="right")
    t.add_column("freq", justify="right")
    for i, (g, f) in enumerate(zip(lexicon.ngrams[:top], lexicon.freqs[:top])):
        t.add_row(str(i + 1), " ".join(g) if lexicon.style == "tokens" else "".join(g), str(len(g)), f"{f:,}")
    console.print(t)


@app.callback()
def default(
    ctx: typer.Context,
    workdir: Optional[Path] = WORKDIR_OPTION,
    workers: Optional[int] = WORKERS,
    overwrite: bool = typer.Option(False, "--overwrite", help="Build them again even if the workspace has them."),
    encoding_errors: str = ENCODING_ERRORS,
) -> None:
    """Without a subcommand: vocab.txt and ngram.txt of the default corpus into WORKDIR/lexicon."""
    if ctx.invoked_subcommand is not None:
        if workdir is not None or workers is not None or overwrite or encoding_errors != "strict":
            raise ZenError(f"--workdir/--workers/--overwrite/--encoding-errors before `{ctx.invoked_subcommand}` "
                           f"belong to bare `zen lexicon`; give the subcommand's own options after its name")
        return
    from zencli.jobs.lexicon import build_workspace_lexicon

    with text_decoding(encoding_errors):
        build_workspace_lexicon(Workspace.at(workdir), workers=workers, overwrite=overwrite, console=console,
                                show=print_result)


@app.command()
def build(
    corpus: list[Path] = typer.Argument(None,
                                        help="Raw text files, one sentence per line (default: the recipe's corpus)."),
    recipe: str = RECIPE,
    overrides: list[str] = OVERRIDES,
    output: Path = OUTPUT,
    language: str = LANGUAGE,
    min_freq: int = MIN_FREQ,
    min_pmi: float = MIN_PMI,
    min_entropy: float = MIN_ENTROPY,
    min_n: int = MIN_N,
    max_n: int = MAX_N,
    max_size: int = MAX_SIZE,
    workers: int = WORKERS,
    vocab: Path = VOCAB,
    style: str = STYLE,
    encoding_errors: str = ENCODING_ERRORS_KEY,
) -> None:
    """Extract the lexicon in one pass: count with the workers, merge, select by frequency and PMI (and
    branching entropy, with --min-entropy)."""
    from zencli.lexicon.extract import build as run_build
    from zencli.lexicon.extract import sidecar_path

    cfg = build_config(recipe, overrides, output=output, language=language, min_freq=min_freq, min_pmi=min_pmi,
                       min_entropy=min_entropy, min_n=min_n, max_n=max_n, max_size=max_size, workers=workers,
                       vocab=vocab, style=style,
                       encoding_errors=encoding_errors, corpus=[str(p) for p in corpus] if corpus else None)
    with text_decoding(cfg.encoding_errors):
        result = run_build(cfg, console=console)
    print_result(result, cfg.output)
    console.print(f"wrote {cfg.output} and {sidecar_path(cfg.output)}", soft_wrap=True)


@app.command()
def count(
    shards: list[Path] = typer.Argument(..., help="Raw text files to count (one sentence per line)."),
    output: Path = typer.Option(..., "--output", "-o", help="Counts file to write (e.g. shard-00.counts)."),
    recipe: str = RECIPE,
    overrides: list[str] = OVERRIDES,
    language: str = LANGUAGE,
    max_n: int = MAX_N,
    workers: int = WORKERS,
    vocab: Path = VOCAB,
    encoding_errors: str = ENCODING_ERRORS_KEY,
) -> None:
    """Map step: count every n-gram (1..max_n; max_n+1 when the recipe sets min_entropy) of SHARDS exactly into
    one counts file."""
    from rich.table import Table

    from zencli.lexicon.extract import count as run_count

    cfg = build_config(recipe, overrides, language=language, max_n=max_n, workers=workers, vocab=vocab,
                       encoding_errors=encoding_errors)
    with text_decoding(cfg.encoding_errors):
        run, memory = run_count(cfg, shards, output, console=console)
    console.print(f"counts → {output}", soft_wrap=True)
    t = Table(title="counting", show_header=False)
    t.add_column("key")
    t.add_column("value", justify="right")
    t.add_row("corpus", f"{len(shards)} file(s), {run.lines:,} lines, {run.chars:,} chars, {run.tokens:,} tokens")
    t.add_row("sections", f"{run.sections:,}")
    t.add_row("file size", _mib(output.stat().st_size))
    t.add_row("time", f"{run.seconds:.2f} s ({run.chars / max(run.seconds, 1e-9) / 1e6:.2f} M chars/s)")
    t.add_row("peak RSS, all processes (sampled)", _mib(memory["peak_rss_total_sampled"]))
    console.print(t)


@app.command()
def merge(
    counts: list[Path] = typer.Argument(..., help="Counts files from `zen lexicon count`."),
    output: Path = OUTPUT,
    recipe: str = RECIPE,
    overrides: list[str] = OVERRIDES,
    language: str = LANGUAGE,
    min_freq: int = MIN_FREQ,
    min_pmi: float = MIN_PMI,
    min_entropy: float = MIN_ENTROPY,
    min_n: int = MIN_N,
    max_n: int = MAX_N,
    max_size: int = MAX_SIZE,
    style: str = STYLE,
) -> None:
    """Reduce step: merge counts files and select the lexicon (same result as `build` on all the text)."""
    from zencli.lexicon.extract import merge as run_merge
    from zencli.lexicon.extract import sidecar_path

    cfg = build_config(recipe, overrides, output=output, language=language, min_freq=min_freq, min_pmi=min_pmi,
                       min_entropy=min_entropy, min_n=min_n, max_n=max_n, max_size=max_size, style=style)
    result = run_merge(cfg, counts, console=console)
    print_result(result, cfg.output)
    console.print(f"wrote {cfg.output} and {sidecar_path(cfg.output)}", soft_wrap=True)


@app.command()
def show(
    path: Path = typer.Argument(..., help="An ngram.txt (either released style)."),
    top: int = typer.Option(20, "--top", "-n", help="How many n-grams to list."),
) -> None:
    """Show the most frequent n-grams and the number of n-grams per length."""
    from collections import Counter

    from rich.table import Table

    from zencli.lexicon.ngram_file import Lexicon

    lexicon = Lexicon.load(path)
    _print_top(lexicon, top)
    per = Counter(len(g) for g in lexicon.ngrams)
    console.print(f"{path}: {len(lexicon):,} n-grams, style {lexicon.style}", soft_wrap=True)
    t = Table(title="n-grams per length")
    t.add_column("n", justify="right")
    t.add_column("n-grams", justify="right")
    t.add_column("total freq", justify="right")
    totals = Counter()
    for g, f in zip(lexicon.ngrams, lexicon.freqs):
        totals[len(g)] += f
    for n in sorted(per):
        t.add_row(str(n), f"{per[n]:,}", f"{totals[n]:,}")
    console.print(t)


@app.command()
@reads_text
def stats(
    ngram: Path = typer.Argument(..., help="An ngram.txt (its .json sidecar, if any, gives the tokenizer settings)."),
    gold: Path = typer.Option(..., "--gold", "-g", help="Gold segmentation: one sentence per line, words "
                              "separated by spaces (e.g. a PD98 or SIGHAN CWS file)."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON instead of tables."),
) -> None:
    """How the lexicon's matches sit against gold word boundaries.

    Every occurrence of a lexicon n-gram of 2..8 tokens in the gold text (words joined, tokenized as the
    lexicon was counted, overlapping matches included, found by the model's n-gram matcher) is a match.
    Cut share = matches whose start or end lies strictly inside a gold word / matches. Coverage = gold
    words of 2+ characters (occurrences) spanned exactly by a match / gold words of 2+ characters.
    Per length: matches of n tokens and how many cut; gold words of n characters and how many are covered."""
    import json

    from zencli.lexicon.extract import progress_display
    from zencli.lexicon.stats import gold_stats

    with progress_display(err_console if as_json else console, "bytes") as progress:
        task = progress.add_task("matching", total=None, extra="") if progress is not None else None

        def on_progress(done: int, total: int) -> None:
            if progress is not None:
                progress.update(task, completed=done, total=total)

        result = gold_stats(ngram, gold, on_progress=on_progress)
    report = result.to_json()
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    _print_stats(report)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _print_stats(r: dict) -> None:
    from rich.table import Table

    s = Table(title=f"{r['lexicon']} ({r['ngrams']:,} n-grams) on {r['gold']}", show_header=False)
    s.add_column("figure")
    s.add_column("value", justify="right")
    s.add_row("gold", f"{r['lines']:,} lines, {r['chars']:,} chars, {r['words']:,} words")
    s.add_row("matches (n = 2..8, overlapping)", f"{r['matches']:,}")
    s.add_row("cut share: matches cutting a gold word", f"{_pct(r['cut_share'])} ({r['cutting']:,})")
    s.add_row("matches of several whole words", f"{r['phrase_matches']:,}")
    s.add_row("coverage: multi-char gold words matched exactly",
              f"{_pct(r['coverage'])} ({r['covered']:,} of {r['multichar_words']:,})")
    console.print(s)
    t = Table(title="per length (matches by tokens, gold words by characters)")
    for col in ("n", "matches", "cutting", "cut share", "gold words", "covered", "coverage"):
        t.add_column(col, justify="right")
    for row in r["per_length"]:
        t.add_row(str(row["n"]), f"{row['matches']:,}", f"{row['cutting']:,}", _pct(row["cut_share"]),
                  f"{row['gold_words']:,}", f"{row['covered']:,}", _pct(row["coverage"]))
    console.print(t)
