"""Stage 1: the vocabulary and the n-gram lexicon. Each is the recipe's file, else the `init` checkpoint's,
else one an earlier start built in the output directory, else (with `data.build_missing`) built from the
corpus: characters (zh) or WordPiece (ar); PMI + frequency n-grams with the language's thresholds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from zencli.config.pretrain import PretrainConfig
from zencli.cpus import usable_cpus
from zencli.errors import ZenError
from zencli.lexicon.extract import build
from zencli.lexicon.settings import LexiconConfig
from zencli.model.sources import checkpoint_kind
from zencli.tasks.pretraining.rundir import write_marker
from zencli.text.vocab import write_sidecar
from zencli.text.vocab_build import build_vocab


def vocab_and_lexicon(cfg: PretrainConfig, corpus: list[Path], out: Path, built: list[str], say: Any,
                      console: Any) -> tuple[Path, Path, str | None]:
    """(vocab.txt, ngram.txt, the init checkpoint's kind); a file built here is added to `built` and the
    marker rewritten at once, so `--overwrite` removes it even when a later stage fails."""
    init_kind, init_vocab, init_ngram = _init_files(cfg)
    vocab, build_v = _locate(cfg, out, cfg.data.vocab, init_vocab, "vocab.txt", "data.vocab", "a vocab.txt")
    if build_v:
        if init_kind is not None:
            raise ZenError(f"data.vocab: {init_kind} checkpoint {cfg.init.pretrained} has no vocab.txt; its embedding "
                           "rows need the vocabulary they were trained with: give data.vocab")
        build_vocab_file(cfg, corpus, vocab, say)
        built.append(str(vocab))
        write_marker(cfg, out, built)
    ngram, build_n = _locate(cfg, out, cfg.data.ngram, init_ngram, "ngram.txt", "data.ngram",
                             "an n-gram lexicon (ngram.txt)")
    if build_n:
        if init_kind in ("zen", "released"):
            raise ZenError(f"data.ngram: {init_kind} checkpoint {cfg.init.pretrained} has no ngram.txt; its n-gram "
                           "table needs the lexicon it was trained with: give data.ngram")
        say(build_lexicon_file(cfg, corpus, vocab, ngram, console))
        built.append(str(ngram))
        write_marker(cfg, out, built)
    return vocab, ngram, init_kind


def _locate(cfg: PretrainConfig, out: Path, given: Path | None, from_init: Path | None, name: str, key: str,
            what: str) -> tuple[Path, bool]:
    """(path, must build) for the vocab or the lexicon."""
    if given is not None and Path(given).is_file():
        return Path(given), False
    if given is None and from_init is not None:
        return from_init, False
    local = out / name
    if local.is_file():  # built by an earlier start of this run
        return local, False
    if not cfg.data.build_missing:
        missing = f"{given}: no such file" if given is not None else "not given"
        raise ZenError(f"{key}: {missing}; expected {what} (or set data.build_missing: true to build it "
                       f"from the corpus)")
    return local, True


def _init_files(cfg: PretrainConfig) -> tuple[str | None, Path | None, Path | None]:
    """(kind, vocab.txt, ngram.txt) of the init checkpoint (files None where it has none)."""
    if cfg.init.pretrained is None:
        return None, None, None

    d = Path(cfg.init.pretrained)
    kind = checkpoint_kind(d)
    vocab = d / "vocab.txt" if (d / "vocab.txt").is_file() else None
    ngram = d / "ngram.txt" if kind != "bert" and (d / "ngram.txt").is_file() else None
    return kind, vocab, ngram


def build_vocab_file(cfg: PretrainConfig, corpus: list[Path], path: Path, say: Any) -> None:
    """Build the recipe's vocabulary from `corpus` into `path` (with its .json sidecar)."""
    t0 = time.perf_counter()
    lowercase = True if cfg.data.lowercase is None else cfg.data.lowercase
    built = build_vocab(corpus, language=cfg.language, min_freq=cfg.data.vocab_min_freq, size=cfg.data.vocab_size,
                        lowercase=lowercase, normalize=cfg.data.normalize, workers=cfg.data.workers or usable_cpus())
    built.vocab.save(path)
    write_sidecar(path, built.info)
    say(f"built vocab ({'characters' if cfg.language == 'zh' else 'WordPiece'}): {len(built.vocab):,} tokens, "
        f"coverage {built.info['coverage']:.2%}, {time.perf_counter() - t0:.1f} s → {path}")


def build_lexicon_file(cfg: PretrainConfig, corpus: list[Path], vocab: Path, path: Path, console: Any) -> str:
    """Build the recipe's n-gram lexicon from `corpus` into `path`; returns the line that describes it."""
    t0 = time.perf_counter()
    lex_cfg = LexiconConfig(
        corpus=corpus, output=path, language=cfg.language,
        vocab=vocab if cfg.language == "ar" else None,  # zh: vocabulary-free characters (as `zen lexicon`)
        lowercase=cfg.data.lowercase, min_freq=cfg.data.ngram_min_freq, min_pmi=cfg.data.ngram_min_pmi,
        min_entropy=cfg.data.ngram_min_entropy, max_size=cfg.data.ngram_max_size, workers=cfg.data.workers,
    )
    lex_cfg.validate()
    result = build(lex_cfg, console=console)
    entropy = "" if lex_cfg.min_entropy is None else f", branching entropy ≥ {lex_cfg.min_entropy:g}"
    entropy += "" if lex_cfg.max_size is None else f"; the {lex_cfg.max_size:,} most frequent"
    return (f"built lexicon: {len(result.lexicon):,} n-grams (freq ≥ {lex_cfg.freq_threshold}, PMI ≥ "
            f"{lex_cfg.pmi_threshold:g}{entropy}), {time.perf_counter() - t0:.1f} s → {path}")
