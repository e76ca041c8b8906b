"""`zen quickstart`: zen's main job on its built-in default — the longest pipeline that works end to end.

Today: character vocabulary → PMI n-gram lexicon → n-gram matching of held-out sentences, on the People's
Daily 1998 text shipped beside the repository (../shared/data). Each step is the same library call the
dedicated command makes; outputs land in one folder so they can be inspected or reused.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from zencli.cli.common import console
from zencli.errors import ZenError

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "pd98" / "raw"


def quickstart(
    output: Path = typer.Option(Path("runs/quickstart"), "--output", "-o", help="Folder for everything it writes."),
    data: Path = typer.Option(DEFAULT_DATA, "--data", help="Folder with train.txt and dev.txt (raw text)."),
    show: int = typer.Option(3, "--show", help="Held-out sentences to show with their matched n-grams."),
) -> None:
    """Build a vocabulary and an n-gram lexicon from the PD98 corpus and match held-out text against it."""
    from rich.table import Table

    from zencli.config.schema import LexiconConfig
    from zencli.lexicon import extract
    from zencli.lexicon.matcher import NgramMatcher
    from zencli.lexicon.ngram_file import Lexicon
    from zencli.text.reading import iter_lines
    from zencli.text.tokenizer import Tokenizer
    from zencli.text.vocab import write_sidecar
    from zencli.text.vocab_build import build_vocab

    train, dev = data / "train.txt", data / "dev.txt"
    for p in (train, dev):
        if not p.is_file():
            raise ZenError(f"{p}: not found; pass --data with a folder holding train.txt and dev.txt")
    output.mkdir(parents=True, exist_ok=True)

    console.rule("1/3  character vocabulary")
    built = build_vocab([train], language="zh")
    vocab_path = output / "vocab.txt"
    built.vocab.save(vocab_path)
    write_sidecar(vocab_path, built.info)
    console.print(f"{len(built.vocab):,} tokens, coverage {built.info['coverage']:.2%} → {vocab_path}")

    console.rule("2/3  PMI n-gram lexicon")
    cfg = LexiconConfig(corpus=[train], output=output / "ngram.txt", language="zh")
    result = extract.build(cfg, console=console)
    lexicon = result.lexicon
    per = result.per_length
    t = Table(title=f"{len(lexicon):,} n-grams (freq ≥ {cfg.freq_threshold}, PMI ≥ {cfg.pmi_threshold:g} bits)")
    for col in ("n", "selected", "top n-grams"):
        t.add_column(col)
    by_len: dict[int, list[str]] = {}
    for g, f in zip(lexicon.ngrams, lexicon.freqs):
        if len(by_len.setdefault(len(g), [])) < 4:
            by_len[len(g)].append(f"{''.join(x.removeprefix('##') for x in g)} ({f})")
    for n in sorted(n for n in per if n >= cfg.min_n):
        t.add_row(str(n), f"{per[n]['selected']:,}", "  ".join(by_len.get(n, [])))
    console.print(t)
    console.print(f"→ {cfg.output} (+ {extract.sidecar_path(cfg.output).name})")

    console.rule("3/3  n-gram matching on held-out text")
    lex = Lexicon.load(cfg.output)
    tok = Tokenizer.from_vocab(vocab_path)
    matcher = NgramMatcher.from_lexicon(lex, lambda s: tok.vocab.get(s))
    lines = [text for _, text in iter_lines(dev) if text.strip()][:show]
    seqs = [tok.tokenize(text) for text in lines]
    matches = matcher.match_batch([[t.id for t in s] for s in seqs])
    examples = []
    for b, (text, toks) in enumerate(zip(lines, seqs)):
        found = []
        for _, start, length, freq in matches.sequence(b):
            s, e = toks[start].start, toks[start + length - 1].end
            found.append({"text": text[s:e], "start": s, "end": e, "freq": int(freq)})
        examples.append({"text": text, "ngrams": found})
        shown = ", ".join(f"{m['text']}" for m in found[:12]) + (" …" if len(found) > 12 else "")
        console.print(f"[bold]{text[:60]}{'…' if len(text) > 60 else ''}[/bold]\n  {len(found)} n-grams: {shown}")
    summary = {
        "vocab": str(vocab_path),
        "vocab_size": len(built.vocab),
        "lexicon": str(cfg.output),
        "ngrams": len(lexicon),
        "ngrams_per_length": {str(n): per[n]["selected"] for n in sorted(per) if n >= cfg.min_n},
        "examples": examples,
    }
    (output / "quickstart.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1), encoding="utf-8")
    console.print(f"summary → {output / 'quickstart.json'}")
