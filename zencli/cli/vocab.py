"""`zen vocab build|info|tokenize`: make and inspect BERT vocab.txt files."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from zencli.cli.common import console, err_console, reads_text
from zencli.errors import ZenError
from zencli.progress import make_progress

app = typer.Typer(help="Build and inspect vocabularies (BERT vocab.txt, one token per line).", no_args_is_help=True)


class Language(str, Enum):
    zh = "zh"
    ar = "ar"


@app.command("build")
@reads_text
def build(
    corpus: list[Path] = typer.Argument(..., help="Corpus files: UTF-8 text, one sentence or paragraph per line."),
    output: Path = typer.Option(
        ..., "--output", "-o", help="vocab.txt to write; settings and statistics go to the .json next to it."
    ),
    language: Language = typer.Option(
        Language.zh,
        "--language",
        "-l",
        help="zh: one token per character (Chinese); ar: WordPiece trained with `tokenizers` "
        "(Arabic or any space-delimited language).",
    ),
    min_freq: int = typer.Option(
        1, "--min-freq", min=1, help="zh: keep characters seen at least this often; ar: least count of a merged pair."
    ),
    size: Optional[int] = typer.Option(
        None,
        "--size",
        min=6,
        help="Vocabulary size incl. the 5 specials. zh: a cap (default: none); ar: WordPiece size (default 30000).",
    ),
    lowercase: bool = typer.Option(
        True, "--lowercase/--no-lowercase", help="Lower-case text before matching (as BERT-Chinese)."
    ),
    strip_accents: Optional[bool] = typer.Option(
        None,
        "--strip-accents/--keep-accents",
        help="Remove combining marks (NFD). Default: zh as --lowercase (BERT), ar keeps them.",
    ),
    normalize: Optional[str] = typer.Option(
        None,
        "--normalize",
        help="Arabic normalisations, comma-separated, saved with the vocabulary and applied by every model "
        "built on it: diacritics, tatweel, alef (أ إ آ ٱ → ا), yaa (ى → ي). Default: none.",
    ),
    workers: int = typer.Option(
        0, "--workers", "-j", min=0,
        help="zh: counting processes, each on byte ranges of the corpus (0: one per CPU core). The same vocabulary.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON instead of a table."),
) -> None:
    """Count a corpus and write vocab.txt: [PAD] [UNK] [CLS] [SEP] [MASK], then the learned tokens."""
    from zencli.cpus import usable_cpus
    from zencli.text.reading import check_readable
    from zencli.text.vocab import write_sidecar
    from zencli.text.vocab_build import build_vocab

    paths = [check_readable(p) for p in corpus]
    if output.is_dir():
        raise ZenError(f"{output}: is a directory; expected the vocab.txt file to write")
    out_resolved = output.resolve()
    for p in paths:
        if p.resolve() == out_resolved:
            raise ZenError(f"{output}: is also a corpus file; choose another --output")
    total = sum(p.stat().st_size for p in paths)
    with _byte_progress(f"vocab {language.value}", total) as advance:
        result = build_vocab(
            paths,
            language=language.value,
            min_freq=min_freq,
            size=size,
            lowercase=lowercase,
            strip_accents=strip_accents,
            progress=advance,
            normalize=[n.strip() for n in normalize.split(",") if n.strip()] if normalize else (),
            workers=workers or usable_cpus(),
        )
    result.vocab.save(output)
    sidecar = write_sidecar(output, result.info)
    info = {**result.info, "vocab": str(output), "settings": str(sidecar)}
    if as_json:
        typer.echo(json.dumps(info, ensure_ascii=False, indent=2))
        return
    _print_build_summary(info)


@app.command("info")
def info(
    vocab: Path = typer.Argument(..., help="A vocab.txt (BERT format)."),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON instead of a table."),
) -> None:
    """Size, special-token ids and kinds of tokens of a vocabulary (plus zen's build settings, if any)."""
    from zencli.text.tokenizer import CONTINUATION, is_cjk
    from zencli.text.vocab import SPECIAL_TOKENS, Vocab, read_sidecar

    v = Vocab.load(vocab)
    kinds = {"cjk chars": 0, "## pieces": 0, "[unused*]": 0, "other": 0}
    for t in v:
        if len(t) == 1 and is_cjk(t):
            kinds["cjk chars"] += 1
        elif t.startswith(CONTINUATION) and len(t) > len(CONTINUATION):
            kinds["## pieces"] += 1
        elif t.startswith("[unused") and t.endswith("]"):
            kinds["[unused*]"] += 1
        else:
            kinds["other"] += 1
    data = {
        "vocab": str(vocab),
        "size": len(v),
        "specials": {s: v.get(s) for s in SPECIAL_TOKENS},
        "kinds": kinds,
        "settings": read_sidecar(vocab),
    }
    if as_json:
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2))
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(str(vocab)), show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    table.add_row("tokens", f"{len(v):,}")
    for s, i in data["specials"].items():
        table.add_row(escape(s), "missing" if i is None else str(i))
    for k, n in kinds.items():
        table.add_row(escape(k), f"{n:,}")
    side = data["settings"]
    if side:
        for k in ("language", "method", "lowercase", "strip_accents", "min_freq", "corpus_chars", "coverage"):
            if k in side:
                table.add_row(f"built: {k}", escape(str(side[k])))
    console.print(table)


@app.command("tokenize")
def tokenize(
    vocab: Path = typer.Argument(..., help="A vocab.txt (BERT format)."),
    text: str = typer.Argument(..., help="Text to tokenize."),
    lowercase: Optional[bool] = typer.Option(
        None, "--lowercase/--no-lowercase", help="Default: the vocabulary's build settings, else lower-case."
    ),
    strip_accents: Optional[bool] = typer.Option(
        None, "--strip-accents/--keep-accents", help="Default: the vocabulary's build settings, else as --lowercase."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print tokens as JSON lines."),
) -> None:
    """Show how a text is tokenized: token, id and the span it covers in the text."""
    from zencli.text.tokenizer import Tokenizer

    tok = Tokenizer.from_vocab(vocab, lowercase=lowercase, strip_accents=strip_accents)
    tokens = tok.tokenize(text)
    if as_json:
        for t in tokens:
            row = {"token": t.text, "id": t.id, "start": t.start, "end": t.end, "surface": text[t.start : t.end]}
            typer.echo(json.dumps(row, ensure_ascii=False))
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{len(tokens)} tokens")
    for col in ("#", "token", "id", "start", "end", "surface"):
        table.add_column(col, justify="right" if col in ("#", "id", "start", "end") else "left")
    for k, t in enumerate(tokens):
        surface = escape(text[t.start : t.end])
        table.add_row(str(k), escape(t.text), str(t.id), str(t.start), str(t.end), surface)
    console.print(table)


def _print_build_summary(info: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"vocabulary {info['vocab']}"), show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    table.add_row("language / method", f"{info['language']} / {info['method']}")
    table.add_row("lowercase / strip accents", f"{info['lowercase']} / {info['strip_accents']}")
    table.add_row("corpus lines", f"{info['corpus_lines']:,}")
    table.add_row("corpus chars", f"{info['corpus_chars']:,}")
    table.add_row("corpus tokens", f"{info['corpus_tokens']:,}")
    table.add_row("vocabulary size", f"{info['vocab_size']:,}")
    table.add_row(escape("coverage (tokens not [UNK])"), f"{info['coverage']:.4%}")
    table.add_row("settings", escape(info["settings"]))
    console.print(table)


class _byte_progress:
    """A Rich progress bar over corpus bytes (throughput + ETA) on stderr; yields an `advance(n)`."""

    def __init__(self, label: str, total: int):
        self._progress = make_progress(err_console, amount="bytes", transient=True)
        self._task = self._progress.add_task(label, total=total)

    def __enter__(self):
        self._progress.start()
        return lambda n: self._progress.advance(self._task, n)

    def __exit__(self, *exc) -> None:
        self._progress.stop()
