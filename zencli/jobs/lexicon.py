"""`zen lexicon` settings, and the default pipeline's first step: the workspace's vocab.txt and ngram.txt."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from zencli.atomic_write import atomic_write_text
from zencli.jobs.workspace import LEXICON_RECIPE, Workspace, default_corpus, expected_lexicon
from zencli.lexicon.settings import LexiconConfig

# Imports inside functions are lazy on purpose: `zen --help` imports this module; the recipe loader, the
# extractor (numpy) and the vocabulary builder load only for a build.


def build_config(recipe: str | Path | None, overrides: list[str], **options: Any) -> LexiconConfig:
    """Recipe (or the defaults) < --set overrides < plain options; validated like a recipe."""
    from zencli.config.loading import build_job_config

    return build_job_config(LexiconConfig, "lexicon", recipe, overrides, options)


def build_workspace_lexicon(ws: Workspace, *, workers: int | None = None, overwrite: bool = False,
                            data: Path | None = None, console: Console | None = None,
                            show: Callable[[Any, Path], None] | None = None) -> dict:
    """The default pipeline's first step: the character vocabulary (as `zen pretrain` would build it) and the
    PMI + branching-entropy lexicon (recipe lexicon-zh-pd98-entropy) of the default corpus's training text,
    into WORK/lexicon; then lexicon.json, the summary whose presence marks the step finished. A finished step
    is not redone unless `overwrite`. `data`: the corpus's dataset directory (default: located).
    `show(result, ngram_path)` displays the extraction's result (the command's tables). Returns the summary."""
    from zencli.lexicon.extract import build as run_build
    from zencli.text.vocab import write_sidecar
    from zencli.text.vocab_build import build_vocab

    console = console or Console(stderr=True)
    if ws.lexicon_done() and not overwrite:
        summary = json.loads(ws.lexicon_summary.read_text(encoding="utf-8"))
        console.print(f"lexicon: already built ({summary['ngrams']:,} n-grams, {summary['vocab_size']:,} "
                      f"characters) in {ws.lexicon_dir}; --overwrite builds it again", markup=False, highlight=False,
                      soft_wrap=True)
        return summary
    train, _ = default_corpus(data, console=console)
    console.print(expected_lexicon(train), markup=False, highlight=False, soft_wrap=True)
    ws.lexicon_summary.unlink(missing_ok=True)  # unfinished until written again
    ws.lexicon_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    built = build_vocab([train], language="zh", min_freq=1, lowercase=True)
    built.vocab.save(ws.vocab)
    write_sidecar(ws.vocab, built.info)
    vocab_s = time.perf_counter() - t0
    console.print(f"vocab: {len(built.vocab):,} tokens (every character of {train}), coverage "
                  f"{built.info['coverage']:.2%}, {vocab_s:.1f} s → {ws.vocab}", markup=False, highlight=False,
                  soft_wrap=True)
    cfg = build_config(LEXICON_RECIPE, [], output=ws.ngram, corpus=[str(train)], workers=workers)
    result = run_build(cfg, console=console)
    if show is not None:
        show(result, cfg.output)
    summary = {
        "corpus": str(train), "vocab": str(ws.vocab), "vocab_size": len(built.vocab),
        "vocab_coverage": built.info["coverage"], "ngram": str(ws.ngram), "ngrams": len(result.lexicon),
        "ngrams_per_length": {str(n): row["selected"] for n, row in sorted(result.per_length.items())
                              if n >= result.settings["min_n"]},
        "settings": {k: result.settings[k] for k in ("min_n", "max_n", "min_freq", "min_pmi", "min_entropy", "style")},
        "corpus_chars": result.corpus["chars"], "corpus_lines": result.corpus["lines"],
        "seconds": {"vocab": round(vocab_s, 3), "lexicon": round(result.times.get("total", 0.0), 3)},
    }
    atomic_write_text(ws.lexicon_summary, json.dumps(summary, ensure_ascii=False, indent=1) + "\n")
    console.print(f"wrote {ws.vocab}, {ws.ngram} (+ .json sidecars) and {ws.lexicon_summary}; next: "
                  f"`{ws.command('pretrain')}`", markup=False, highlight=False, soft_wrap=True)
    return summary
