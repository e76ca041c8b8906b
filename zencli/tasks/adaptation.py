"""Adaptation to the user's domain before fine-tuning (`adapt.minutes`, `adapt.text`): the pretrained model
learns the task's text before it learns the task, as T-DNA (Diao et al., 2021) adapts ZEN.

    adapted = adapt_model(cfg, texts, say)     # → OUTPUT/adapt/model, a zen model directory

1. The lexicon grows by the n-grams of that text: the task's training texts plus the raw files of
   `adapt.text`, extracted as `zen lexicon` extracts them (PMI and branching entropy over this text,
   ADAPT_MIN_COUNT / ADAPT_MIN_ENTROPY). New n-grams are appended, so the pretrained rows keep their ids.
2. Each new n-gram embedding row starts as the mean of its characters' embeddings: the n-gram side adds
   a vector into the character layers that is already in their space, instead of noise.
3. Masked-LM pretraining continues (whole n-gram masking over the grown lexicon, NSP) on that text for
   `adapt.minutes`, with the existing pretraining code (`run_pretrain`, its resumable checkpoints).

OUTPUT/adapt/ holds corpus.txt (the training texts), start/ (the grown model before continued pretraining),
the pretraining run and its model/, and adapted.json, written last: a re-run that finds it (for the same
settings and files) skips the whole step; a run killed before it resumes the pretraining from its
checkpoints. The fine-tuning then starts from OUTPUT/adapt/model.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from zencli.atomic_write import atomic_write_text
from zencli.config import load_job_recipe
from zencli.config.finetune import FinetuneConfig
from zencli.errors import ZenError
from zencli.lexicon.extract import build
from zencli.lexicon.ngram_file import Lexicon
from zencli.lexicon.settings import LexiconConfig
from zencli.model.checkpoint import save_zen_model
from zencli.model.sources import checkpoint_kind, load_pretrained
from zencli.tasks.pretraining.run import run_pretrain
from zencli.tasks.training_ngrams import add_ngrams
from zencli.text.vocab import UNK, Vocab, read_sidecar

ADAPT_DIR = "adapt"
DONE_NAME = "adapted.json"
ADAPT_MIN_COUNT = 5  # an n-gram of the user's text is added when seen this often (PD98's lexicon: 10)
ADAPT_MIN_ENTROPY = 1.5  # bits of left and right branching entropy, as the default lexicon's (zen lexicon)
ADAPT_RECIPE = "pretrain-zh-tiny"  # the continued pretraining's optimiser and data settings


def adapt_dir(cfg: FinetuneConfig) -> Path:
    return Path(cfg.train.output_dir) / ADAPT_DIR


def check_adapt_files(cfg: FinetuneConfig) -> None:
    """One-line errors for what adaptation cannot use, before any data is read or trained on."""
    for path in cfg.adapt.text:
        if not Path(path).is_file():
            raise ZenError(f"adapt.text: {path}: no such file")
    if cfg.model.pretrained is None:
        raise ZenError("adapt.minutes: adaptation continues the pretraining of a pretrained model; give --model "
                       "(a zen or released ZEN directory), or remove adapt.minutes")


def fingerprint(cfg: FinetuneConfig, n_texts: int) -> dict[str, Any]:
    """What the adapted model depends on: a change (another model, text file or budget) adapts again."""
    files = [{"path": str(p), "bytes": Path(p).stat().st_size} for p in [cfg.data.train, *cfg.adapt.text]]
    return {"pretrained": str(cfg.model.pretrained), "minutes": cfg.adapt.minutes, "text": files,
            "training_texts": n_texts, "seed": cfg.train.seed}


def adapt_model(cfg: FinetuneConfig, texts: Sequence[str], say: Callable[[str], None], *, console=None,
                show_progress: bool = True) -> Path:
    """Adapt cfg.model.pretrained to `texts` and the `adapt.text` files (module docstring); the adapted model
    directory. Skipped when an earlier run finished it."""
    out = adapt_dir(cfg)
    model_dir = out / "model"
    want = fingerprint(cfg, len(texts))
    done = out / DONE_NAME
    if done.is_file() and json.loads(done.read_text(encoding="utf-8")).get("fingerprint") == want \
            and model_dir.is_dir():
        say(f"adapt: done in an earlier run ({model_dir}); skipping it")
        return model_dir
    out.mkdir(parents=True, exist_ok=True)
    corpus = out / "corpus.txt"
    # one text per line: the line layout reads each as a document (NSP pairs come from within it)
    atomic_write_text(corpus, "".join(" ".join(t.split()) + "\n" for t in texts if t.strip()))
    corpora = [corpus, *(Path(p) for p in cfg.adapt.text)]
    start = out / "start"
    grown = grow_pretrained(Path(cfg.model.pretrained), corpora, start)
    say(f"adapt: lexicon {grown['before']:,} + {grown['added']:,} n-grams of the task's text "
        f"(seen >= {ADAPT_MIN_COUNT} times, PMI and entropy >= {ADAPT_MIN_ENTROPY} bits), new rows from their "
        f"characters; continued pretraining for {cfg.adapt.minutes:g} min on {len(texts):,} training texts"
        + (f" and {len(cfg.adapt.text)} file(s)" if cfg.adapt.text else ""))
    pcfg = pretrain_config(cfg, corpora, start, out)
    result = run_pretrain(pcfg, console=console, show_progress=show_progress)
    atomic_write_text(done, json.dumps({"fingerprint": want, "added_ngrams": grown["added"], "steps": result.step},
                                       indent=2) + "\n")
    return model_dir


def grow_pretrained(pretrained: Path, corpora: Sequence[Path], start: Path) -> dict[str, int]:
    """Write `start`: the pretrained model with its lexicon grown by the n-grams of `corpora` and the new
    n-gram rows initialised from their characters. Returns the lexicon sizes before and added."""
    kind = checkpoint_kind(pretrained) if pretrained.is_dir() else None
    if kind not in ("zen", "released"):
        raise ZenError(f"adapt.minutes: {pretrained}: adaptation continues the pretraining of a zen or released "
                       f"ZEN model directory (`zen pretrain` output); this is {kind or 'no model directory'}")
    p = load_pretrained(pretrained)
    if not p.model.config.has_ngrams or p.ngram is None or p.vocab is None:
        raise ZenError(f"adapt.minutes: {pretrained}: has no n-gram lexicon to grow (a BERT model?); adaptation "
                       f"needs a ZEN model")
    lexicon = Lexicon.load(p.ngram)
    side = read_sidecar(p.vocab) or {}
    found = corpus_ngrams(corpora, p.vocab, lowercase=bool(side.get("lowercase", True)),
                          language=side.get("language", "zh"))
    before = len(lexicon)
    lexicon, added = add_ngrams(lexicon, found, ADAPT_MIN_COUNT)
    encoder = p.model.bert
    encoder.resize_ngram_table(len(lexicon) + 1)
    init_from_chars(encoder, lexicon, Vocab.load(p.vocab), first=before + 1)
    start.mkdir(parents=True, exist_ok=True)
    ngram_path = start / "grown-ngram.txt"
    lexicon.save(ngram_path)
    save_zen_model(p.model, start, vocab=p.vocab, ngram=ngram_path)
    ngram_path.unlink()
    for sidecar in (p.vocab.with_suffix(".json"),):
        if sidecar.is_file():
            (start / sidecar.name).write_bytes(sidecar.read_bytes())  # the tokenizer settings travel along
    return {"before": before, "added": added}


def corpus_ngrams(corpora: Sequence[Path], vocab: Path, *, lowercase: bool, language: str):
    """The n-grams `zen lexicon` extracts from `corpora` with the model's vocabulary: PMI over this text,
    seen >= ADAPT_MIN_COUNT times, left and right entropy >= ADAPT_MIN_ENTROPY bits; without [UNK]."""
    with tempfile.TemporaryDirectory(prefix="zen-adapt-ngrams-") as tmp:
        cfg = LexiconConfig(corpus=list(corpora), output=Path(tmp) / "ngram.txt",
                            language=language if language in ("zh", "ar") else "zh", vocab=vocab,
                            lowercase=lowercase, min_freq=ADAPT_MIN_COUNT, min_entropy=ADAPT_MIN_ENTROPY, workers=1)
        found = build(cfg).lexicon
    return Counter({g: n for g, n in zip(found.ngrams, found.freqs) if UNK not in g})


@torch.no_grad()
def init_from_chars(encoder, lexicon: Lexicon, vocab, *, first: int) -> None:
    """N-gram rows `first`.. (lexicon line i is row i + 1, row 0 is padding) ← the mean of the embeddings of
    the n-gram's tokens; a token the vocabulary lacks counts as [UNK]."""
    chars = encoder.embeddings.char_embeddings.weight  # [V, H]
    table = encoder.ngram_embeddings.table.weight  # [N + 1, H]
    if chars.shape[1] != table.shape[1]:
        return  # an n-gram side of another width keeps its fresh initialisation
    unk = vocab.unk_id
    for row in range(first, table.shape[0]):
        ids = [vocab.get(t) for t in lexicon.ngrams[row - 1]]
        table[row] = chars[torch.tensor([unk if i is None else i for i in ids])].mean(0)


def pretrain_config(cfg: FinetuneConfig, corpora: Sequence[Path], start: Path, out: Path):
    """The continued pretraining: the tiny recipe's optimiser and data settings, the grown model as init,
    whole n-gram masking, `adapt.minutes` of training into `out`."""
    base = load_job_recipe(ADAPT_RECIPE)
    # one masked pass over the text (the recipe makes two): an adaptation budget of minutes rarely trains
    # through one, and making the shards counts against it (MSRA's 45k texts: 47 s of 60 with two passes)
    data = replace(base.data, corpus=list(corpora), heldout=[], vocab=None, ngram=None, build_missing=False,
                   layout="auto", workers=1, dupe_factor=1)
    s = cfg.train
    train = replace(base.train, output_dir=out, max_minutes=cfg.adapt.minutes, max_steps=100_000, warmup_steps=100,
                    seed=s.seed, num_threads=s.num_threads, device=s.device, dtype=s.dtype,
                    tensorboard=s.tensorboard, eval_every=0, save_every=200, overwrite=False)
    return replace(base, data=data, masking=replace(base.masking, scheme="ngram"),
                   init=replace(base.init, pretrained=start), train=train)
