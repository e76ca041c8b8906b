"""`zen quickstart`: zen's main job on its built-in default — the whole life of a model, in minutes.

On the People's Daily 1998 corpus beside the repository (../shared/data): character vocabulary → PMI
n-gram lexicon → n-gram matching of held-out sentences → a short ZEN 2.0 word-segmentation fine-tuning
(recipe `finetune-pd98-cws`, from scratch) → test-set scoring → prediction on held-out text. Each step is
the library call its dedicated command makes; outputs land in one folder (`runs/quickstart`). Pretraining
is left to `zen pretrain --recipe pretrain-zh-tiny` (about 10 minutes on 2 cores).
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
    steps: int = typer.Option(400, "--steps", help="Fine-tuning steps for the CWS model (0 skips fine-tuning)."),
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

    stages = 3 if steps == 0 else 5
    console.rule(f"1/{stages}  character vocabulary")
    built = build_vocab([train], language="zh")
    vocab_path = output / "vocab.txt"
    built.vocab.save(vocab_path)
    write_sidecar(vocab_path, built.info)
    console.print(f"{len(built.vocab):,} tokens, coverage {built.info['coverage']:.2%} → {vocab_path}")

    console.rule(f"2/{stages}  PMI n-gram lexicon")
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

    console.rule(f"3/{stages}  n-gram matching on held-out text")
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
    if steps > 0:
        summary["cws"] = _finetune_cws(output, data.parent / "cws", vocab_path, cfg.output, steps, lines)
    (output / "quickstart.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1), encoding="utf-8")
    console.print(f"summary → {output / 'quickstart.json'}")


def _finetune_cws(output: Path, cws: Path, vocab: Path, ngram: Path, steps: int, lines: list[str]) -> dict:
    """Stages 4–5: fine-tune the tiny CWS recipe for `steps`, score it on test, segment held-out lines."""
    from zencli.cli.finetune import build_config
    from zencli.metrics import rich_tables
    from zencli.tasks.finetune import run_finetune
    from zencli.tasks.model import load_task_model
    from zencli.tasks.predict import evaluate_model, predict_chunks

    for name in ("train.txt", "dev.txt", "test.txt"):
        if not (cws / name).is_file():
            raise ZenError(f"{cws / name}: not found; expected the PD98 CWS files beside the raw text")
    console.rule(f"4/5  fine-tune ZEN 2.0 word segmentation ({steps} steps, recipe finetune-pd98-cws)")
    cfg = build_config("finetune-pd98-cws", [], {
        "data.train": cws / "train.txt", "model.vocab": vocab,
        "model.ngram": ngram, "train.output_dir": output / "cws", "train.max_steps": steps,
        "train.overwrite": True,
    })
    cfg.data.dev = cfg.data.test = None  # a short run: no per-epoch dev pass; test is scored below
    result = run_finetune(cfg, console=console)
    console.rule("5/5  score on the test set, segment held-out text")
    loaded = load_task_model(result.model_dir)
    evaluation = evaluate_model(loaded, cws / "test.txt")
    for table in rich_tables(evaluation.result):
        console.print(table)
    segmented = [line for chunk in predict_chunks(loaded, enumerate(lines, 1)) for line in chunk]
    for line in segmented:
        console.print(line[:120] + ("…" if len(line) > 120 else ""), highlight=False)
    console.print(f"model → {result.model_dir}   (try: bin/zen predict {result.model_dir} < text.txt)")
    return {"model": str(result.model_dir), "steps": steps, "test": evaluation.to_dict(), "segmented": segmented}
