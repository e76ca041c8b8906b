"""Stage 2: pretraining examples of `data.corpus` into OUT/data/train and of `data.heldout` into
OUT/data/heldout, made by `zencli.data.pretraining` (complete shards with the same fingerprint are reused)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zencli.config.pretrain import PretrainConfig
from zencli.data.pretraining import generate_shards
from zencli.tasks.pretraining.rundir import DATA_DIR
from zencli.tasks.segmenter import load_model_segmenter


def make_shards(cfg: PretrainConfig, corpus: list[Path], heldout: list[Path], vocab: Path, ngram: Path, out: Path,
                say: Any, console: Any) -> tuple[Path, Path | None, dict[str, Any]]:
    """(train shards' dir, held-out shards' dir or None, "train"/"heldout" → GenerationResult)."""
    d = cfg.data
    common: dict[str, Any] = {
        "max_seq_len": d.max_seq_len, "masking": cfg.masking.scheme, "segmenter": cfg.masking.segmenter.strip(),
        "mask_rate": cfg.masking.rate, "short_seq_prob": d.short_seq_prob, "max_ngrams": d.max_ngrams,
        "ngram_rules": d.ngram_rules, "released_version": d.released_version,
        "examples_per_shard": d.examples_per_shard, "layout": d.layout, "lowercase": d.lowercase,
        "workers": d.workers, "console": console, "load_model": load_model_segmenter,
    }
    generation = {}
    train_dir = out / DATA_DIR / "train"
    res = generate_shards(corpus, vocab, ngram, train_dir, dupe_factor=d.dupe_factor, seed=d.seed, **common)
    generation["train"] = res
    _say_shards(say, "training", res)
    heldout_dir = None
    if heldout:
        heldout_dir = out / DATA_DIR / "heldout"
        res = generate_shards(heldout, vocab, ngram, heldout_dir, dupe_factor=1, seed=d.seed + 1, **common)
        generation["heldout"] = res
        _say_shards(say, "held-out", res)
    return train_dir, heldout_dir, generation


def _say_shards(say, what: str, res) -> None:
    t = res.manifest["totals"]
    how = (f"made {res.made} shard(s) in {res.seconds_read + res.seconds_generate:.1f} s" if res.made
           else f"reused {res.reused} shard(s)")
    say(f"{what} data: {t['examples']:,} examples, {t['tokens_per_example']:.1f} tokens/example, "
        f"{t['masked_fraction']:.3f} masked, {t['ngrams_per_example']:.1f} n-grams/example; {how} → {res.out_dir}")
