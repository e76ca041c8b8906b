"""Pretraining (MLM + NSP, or replaced-token detection): the objective, held-out evaluation, and the
`zen pretrain` pipeline.

    result = run_pretrain(cfg)          # cfg: PretrainConfig (a recipe)

Stages, each skipped when its output is already there:
1. vocabulary and lexicon: `data.vocab` / `data.ngram` (or the `init` checkpoint's files); a missing one is
   built from the corpus into the output directory when `data.build_missing` is set (vocab: characters
   for zh, WordPiece for ar; lexicon: PMI + frequency with the language's thresholds);
2. shards: pretraining examples (NSP pairs, whole n-gram or char masking, n-gram slots) of `data.corpus`
   into OUT/data/train and of `data.heldout` into OUT/data/heldout (`zencli.data.pretraining`; complete
   shards with the same fingerprint are reused);
3. training: ZenForPreTraining from scratch or from `init.pretrained`, with the shared loop
   (`zencli.train`): checkpoints, resume, DDP, progress, metrics.jsonl. Every `train.eval_every` steps
   (and at the end) the held-out examples are scored: MLM loss, masked-char accuracy, NSP accuracy.
   `objective: rtd` trains the same encoder as the discriminator of replaced-token detection (ELECTRA,
   `zencli.tasks.rtd`) on the same shards; the held-out scores add its detection accuracy and AUC;
4. OUT/model (a zen model directory with vocab.txt and ngram.txt) and OUT/results.json.

Output directory:

    pretrain.json             what this run is (compared on the next start: another run is refused)
    recipe.yaml               the resolved recipe
    vocab.txt, ngram.txt      built here when missing (with their .json sidecars)
    data/train, data/heldout  the shards
    run.json, metrics.jsonl, checkpoints/, tensorboard/   the training loop's
    model/                    the pretrained model
    results.json              data, baseline, curve, held-out scores, throughput

While training, the train MLM loss is watched against the unigram MLM loss (`plateau_watch`): a run still
at that plateau after a fifth of its steps says so loudly (a red warning, a "warning" record in
metrics.jsonl, `warnings` in results.json and under the final tables) instead of only at the end.

Held-out accuracy is reported twice: `mlm_acc` over every MLM target, and `masked_acc` over the targets
shown to the model as [MASK] only (10% of the targets are left unchanged in the input and are copied
for free; `masked_acc` is the honest number). The baseline is the best constant guess: always the most
frequent MLM target of the training shards, scored on the same held-out positions, plus the unigram
cross-entropy of those targets (what a model that ignores the context reaches at best).

Distributed (torchrun or `zen pretrain --nproc N`): rank 0 prepares stages 1–2 while the other ranks
wait on a gloo barrier without a timeout worth worrying about; rank 0 evaluates and writes. The n-gram
side of a batch without any n-gram gets no gradient, so DDP runs with find_unused_parameters.
"""

from __future__ import annotations

import glob
import itertools
import json
import shutil
import time
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from rich.console import Console
from rich.markup import escape

from zencli.atomic_write import atomic_write_text
from zencli.config.loading import to_dict
from zencli.config.pretrain import PretrainConfig
from zencli.data.shards import IGNORE_INDEX, PretrainShards
from zencli.diffs import first_difference
from zencli.errors import ZenError
from zencli.model.pretraining import ZenForPreTraining
from zencli.tasks.segmenter import load_model_segmenter
from zencli.train.progress import BaselineWatch

MODEL_DIR = "model"
DATA_DIR = "data"
MARKER_NAME = "pretrain.json"
RESULTS_NAME = "results.json"
RECIPE_NAME = "recipe.yaml"
MARKER_FORMAT = "zen-pretrain-run/1"
BASELINE_MAX_SHARDS = 20  # training shards counted for the unigram baseline (200k examples at the default size)
# How far (nats) below the unigram MLM loss the train MLM loss must be to count as learning: runs stuck at the
# plateau sit within ~0.1 of it (a GPU run stuck at 6.48 vs 6.56; reports/ablation-ner's pretrainings at steps 250-350).
PLATEAU_MARGIN = 0.2


# ----------------------------------------------------------------------------------------------------
# the objective


def pretraining_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict, torch.Tensor]:
    """MLM + NSP loss of a batch from `PretrainShards.get_batch` (the training loop's loss_fn).

    Metrics: mlm_loss, nsp_loss (means), mlm_acc and nsp_acc as (correct, count) pairs, so the loop sums
    them exactly over micro-batches and processes. `model` may be a DDP wrapper of ZenForPreTraining.
    """
    out = model(**batch)  # MLM logits only at the labelled positions: [N,V]
    labels = batch["mlm_labels"]
    targets = labels[labels != IGNORE_INDEX]  # [N] row-major, the order of mlm_logits
    nsp = batch["nsp_labels"]
    metrics = {
        "mlm_loss": out.mlm_loss.detach(),
        "nsp_loss": out.nsp_loss.detach(),
        "mlm_acc": ((out.mlm_logits.argmax(-1) == targets).sum(), targets.numel()),
        "nsp_acc": ((out.nsp_logits.argmax(-1) == nsp).sum(), nsp.numel()),
    }
    return out.loss, metrics, batch["attention_mask"].sum()


# ----------------------------------------------------------------------------------------------------
# held-out evaluation


@dataclass
class HeldoutSet:
    """A fixed subset of held-out examples: `limit` indices spread evenly over the shards, visited in
    order of length (batches of similar length waste no compute on padding; the sums are the same)."""

    shards: PretrainShards
    mask_id: int
    batch_size: int = 64
    limit: int = 2000
    indices: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.shards)
        k = min(self.limit, n)
        chosen = np.unique(np.linspace(0, n - 1, k).round().astype(np.int64))
        self.indices = chosen[np.argsort(self.shards.lengths[chosen], kind="stable")]

    def batches(self):
        for lo in range(0, len(self.indices), self.batch_size):
            yield self.shards.get_batch(self.indices[lo:lo + self.batch_size])


def _on(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in batch.items()}


def add_mlm_sums(sums: dict[str, float], mlm_logits: torch.Tensor, batch: dict[str, torch.Tensor],
                 mask_id: int) -> None:
    """Add a batch's MLM loss and accuracy sums (all targets, and [MASK]-shown targets) to `sums`."""
    labels = batch["mlm_labels"]
    where = labels != IGNORE_INDEX
    targets = labels[where]  # [N]
    shown_mask = batch["input_ids"][where] == mask_id  # [N]
    ok = mlm_logits.argmax(-1) == targets
    for key, value in (("mlm_loss", F.cross_entropy(mlm_logits.float(), targets, reduction="sum").item()),
                       ("mlm_ok", ok.sum().item()), ("mlm_n", targets.numel()),
                       ("masked_ok", (ok & shown_mask).sum().item()), ("masked_n", shown_mask.sum().item())):
        sums[key] = sums.get(key, 0.0) + value


def mlm_scores(sums: dict[str, float]) -> dict[str, float]:
    """mlm_loss, mlm_acc, masked_acc from `add_mlm_sums`'s sums."""
    n = max(sums.get("mlm_n", 0.0), 1.0)
    return {"mlm_loss": sums.get("mlm_loss", 0.0) / n, "mlm_acc": sums.get("mlm_ok", 0.0) / n,
            "masked_acc": sums.get("masked_ok", 0.0) / max(sums.get("masked_n", 0.0), 1.0)}


@torch.no_grad()
def evaluate(model: ZenForPreTraining, heldout: HeldoutSet) -> dict[str, float]:
    """MLM loss and accuracies (all targets, and [MASK]-shown targets), NSP loss and accuracy."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    sums = dict.fromkeys(("nsp_loss", "nsp_ok", "nsp_n"), 0.0)
    try:
        for batch in heldout.batches():
            batch = _on(batch, device)
            out = model(**batch)
            add_mlm_sums(sums, out.mlm_logits, batch, heldout.mask_id)
            nsp = batch["nsp_labels"]
            sums["nsp_loss"] += F.cross_entropy(out.nsp_logits.float(), nsp, reduction="sum").item()
            sums["nsp_ok"] += (out.nsp_logits.argmax(-1) == nsp).sum().item()
            sums["nsp_n"] += nsp.numel()
    finally:
        model.train(was_training)
    return {
        **mlm_scores(sums),
        "nsp_loss": sums["nsp_loss"] / max(sums["nsp_n"], 1),
        "nsp_acc": sums["nsp_ok"] / max(sums["nsp_n"], 1),
    }


def plateau_watch(baseline: dict[str, Any]) -> BaselineWatch:
    """The training loop's check that the train MLM loss leaves the unigram plateau (see the module doc)."""
    return BaselineWatch(metric="mlm_loss", baseline=baseline["mlm_loss"], label="the unigram MLM loss",
                         mode="min", margin=PLATEAU_MARGIN)


def unigram_baseline(train: PretrainShards, heldout: HeldoutSet, vocab_size: int,
                     max_shards: int = BASELINE_MAX_SHARDS) -> dict[str, Any]:
    """The best context-free predictor, scored on the held-out examples `evaluate` uses.

    Unigram of the MLM targets of (up to `max_shards`) training shards: accuracy of always answering its
    most frequent token (over all targets and over [MASK]-shown ones), and the cross-entropy (nats) of
    the add-one smoothed unigram on the held-out targets.
    """
    counts = np.zeros(vocab_size, np.int64)
    for name in train.names[:max_shards]:  # mlm_ids.npy: the documented shard column of MLM targets
        ids = np.load(train.dir / name / "mlm_ids.npy", mmap_mode="r")
        counts += np.bincount(np.asarray(ids, np.int64), minlength=vocab_size)[:vocab_size]
    top = int(counts.argmax())
    logp = np.log((counts + 1) / (counts.sum() + vocab_size))
    ok = n = ok_masked = n_masked = 0
    nll = 0.0
    for batch in heldout.batches():
        labels = batch["mlm_labels"].numpy()
        where = labels != IGNORE_INDEX
        targets = labels[where]
        shown_mask = batch["input_ids"].numpy()[where] == heldout.mask_id
        hit = targets == top
        ok += int(hit.sum())
        n += len(targets)
        ok_masked += int((hit & shown_mask).sum())
        n_masked += int(shown_mask.sum())
        nll -= float(logp[targets].sum())
    return {
        "prediction_id": top,
        "training_targets_counted": int(counts.sum()),
        "mlm_acc": ok / max(n, 1),
        "masked_acc": ok_masked / max(n_masked, 1),
        "mlm_loss": nll / max(n, 1),
        "heldout_targets": n,
    }


# ----------------------------------------------------------------------------------------------------
# stage 1 + 2: vocabulary, lexicon, shards


def expand_corpus(entries: list[Path], key: str) -> list[Path]:
    """Paths as given, glob patterns expanded (sorted); a missing file or an empty pattern is an error."""
    files: list[Path] = []
    for entry in entries:
        text = str(entry)
        if glob.has_magic(text):
            found = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
            if not found:
                raise ZenError(f"{key}: pattern {text!r} matches no file")
            files.extend(found)
        elif not entry.is_file():
            raise ZenError(f"{key}: {entry}: no such file; expected raw text, one sentence per line")
        else:
            files.append(entry)
    return files


def check_documents(files: list[Path], layout: str, key: str) -> None:
    """At least two documents with text (NSP draws its random B from another document). Stops reading
    at the second document, so a real corpus costs nothing."""
    from zencli.data.documents import read_documents

    names = ", ".join(map(str, files))
    n = sum(1 for _ in itertools.islice(read_documents(files, layout), 2))  # type: ignore[arg-type]
    if n == 0:
        raise ZenError(f"{key}: {names}: no text to pretrain on (empty, or blank lines only); "
                       "expected sentences, one per line")
    if n == 1:
        raise ZenError(f"{key}: {names}: holds a single document, so next-sentence prediction has no random "
                       "next segment; expected at least two documents (a blank line between documents, or "
                       "one document per line with data.layout: line)")


@dataclass
class Prepared:
    """What stages 1–2 produced (plain data: it is broadcast to the other ranks)."""

    vocab: Path
    ngram: Path
    train_dir: Path
    heldout_dir: Path | None
    init_kind: str | None = None
    built: list[str] = field(default_factory=list)
    generation: dict[str, Any] = field(default_factory=dict)  # "train"/"heldout" → GenerationResult


def run_plan(cfg: PretrainConfig) -> dict[str, Any]:
    """The settings that make a run what it is (not cadence, workers or paths of outputs)."""
    data = to_dict(cfg.data)
    for key in ("workers", "heldout_examples", "eval_batch_size"):
        data.pop(key)
    for key, off in (("normalize", []), ("ngram_min_entropy", None)):  # keys added later: runs made before
        if data.get(key) == off:                                        # them keep their plan when they are off
            data.pop(key)
    plan = {"language": cfg.language, "data": data, "masking": to_dict(cfg.masking), "model": to_dict(cfg.model),
            "init": to_dict(cfg.init), "train": {**to_dict(cfg.train.fingerprint_fields()),
                                                "precision": cfg.train.precision}}
    if cfg.objective != "mlm":  # only then, so MLM runs made before objectives existed keep their plan
        plan.update(objective=cfg.objective, rtd=to_dict(cfg.rtd))
    return plan


def check_output_dir(cfg: PretrainConfig, out: Path) -> None:
    """Refuse an output directory holding another run (unless train.overwrite)."""
    if cfg.train.overwrite or not out.is_dir():
        return
    marker = out / MARKER_NAME
    if marker.is_file():
        try:
            old = json.loads(marker.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise ZenError(f"{marker}: not valid JSON; use a new output dir or pass --overwrite") from None
        diff = first_difference(old.get("plan", {}), run_plan(cfg)) if isinstance(old, dict) else "unreadable"
        if diff and ((out / "run.json").is_file() or (out / "checkpoints").is_dir()):
            raise ZenError(f"{out}: holds a pretraining run with other settings ({diff}); continue it with its own "
                           f"recipe ({out / RECIPE_NAME}), use a new output dir, or pass --overwrite")
        return
    if (out / "run.json").is_file() or (out / "checkpoints").is_dir():
        raise ZenError(f"{out}: holds another run's checkpoints (not a zen pretrain run: no {MARKER_NAME}); "
                       "use a new output dir or pass --overwrite")


def clear_outputs(out: Path) -> None:
    """What `--overwrite` removes: this module's files and the training loop's (nothing else)."""
    from zencli.train.checkpoint import CheckpointDir

    built: list[str] = []
    try:  # the vocab/lexicon files this command built (a vocab.txt the user put there is input, not output)
        built = list(json.loads((out / MARKER_NAME).read_text(encoding="utf-8")).get("built", []))
    except (OSError, ValueError, UnicodeDecodeError, AttributeError):
        pass
    for path in map(Path, built):
        if path.parent.resolve() == out.resolve():
            path.unlink(missing_ok=True)
            path.with_suffix(".json").unlink(missing_ok=True)
    for name in (MARKER_NAME, RESULTS_NAME, RECIPE_NAME, "metrics.jsonl", "run.json"):
        (out / name).unlink(missing_ok=True)
    for name in (MODEL_DIR, DATA_DIR):
        if (out / name).is_dir():
            shutil.rmtree(out / name)
    CheckpointDir(out / "checkpoints").clear()
    tb = out / "tensorboard"
    if tb.is_dir():
        for f in tb.glob("events.out.tfevents.*"):
            f.unlink()


def _init_files(cfg: PretrainConfig) -> tuple[str | None, Path | None, Path | None]:
    """(kind, vocab.txt, ngram.txt) of the init checkpoint (files None where it has none)."""
    if cfg.init.pretrained is None:
        return None, None, None
    from zencli.model.sources import checkpoint_kind

    d = Path(cfg.init.pretrained)
    kind = checkpoint_kind(d)
    vocab = d / "vocab.txt" if (d / "vocab.txt").is_file() else None
    ngram = d / "ngram.txt" if kind != "bert" and (d / "ngram.txt").is_file() else None
    return kind, vocab, ngram


def _build_vocab(cfg: PretrainConfig, corpus: list[Path], path: Path, say) -> None:
    from zencli.text.vocab import write_sidecar
    from zencli.text.vocab_build import build_vocab

    t0 = time.perf_counter()
    lowercase = True if cfg.data.lowercase is None else cfg.data.lowercase
    built = build_vocab(corpus, language=cfg.language, min_freq=cfg.data.vocab_min_freq, size=cfg.data.vocab_size,
                        lowercase=lowercase, normalize=cfg.data.normalize)
    built.vocab.save(path)
    write_sidecar(path, built.info)
    say(f"built vocab ({'characters' if cfg.language == 'zh' else 'WordPiece'}): {len(built.vocab):,} tokens, "
        f"coverage {built.info['coverage']:.2%}, {time.perf_counter() - t0:.1f} s → {path}")


def _build_lexicon(cfg: PretrainConfig, corpus: list[Path], vocab: Path, path: Path, console) -> str:
    from zencli.lexicon.extract import build
    from zencli.lexicon.settings import LexiconConfig

    t0 = time.perf_counter()
    lex_cfg = LexiconConfig(
        corpus=corpus, output=path, language=cfg.language,
        vocab=vocab if cfg.language == "ar" else None,  # zh: vocabulary-free characters (as `zen lexicon`)
        lowercase=cfg.data.lowercase, min_freq=cfg.data.ngram_min_freq, min_pmi=cfg.data.ngram_min_pmi,
        min_entropy=cfg.data.ngram_min_entropy, workers=cfg.data.workers,
    )
    lex_cfg.validate()
    result = build(lex_cfg, console=console)
    entropy = "" if lex_cfg.min_entropy is None else f", branching entropy ≥ {lex_cfg.min_entropy:g}"
    return (f"built lexicon: {len(result.lexicon):,} n-grams (freq ≥ {lex_cfg.freq_threshold}, PMI ≥ "
            f"{lex_cfg.pmi_threshold:g}{entropy}), {time.perf_counter() - t0:.1f} s → {path}")


def prepare(cfg: PretrainConfig, *, console: Console | None = None) -> Prepared:
    """Stages 1–2 (see the module docstring) in `cfg.train.output_dir`; idempotent."""
    from zencli.data.pretraining import generate_shards

    d = cfg.data
    out = Path(cfg.train.output_dir)

    def say(text: str) -> None:
        if console:
            console.print(escape(text), highlight=False, soft_wrap=True)

    if not d.corpus:
        raise ZenError("data.corpus: no corpus files; give raw text files in the recipe (data.corpus)")
    corpus = expand_corpus(d.corpus, "data.corpus")
    heldout = expand_corpus(d.heldout, "data.heldout") if d.heldout else []
    check_output_dir(cfg, out)
    check_documents(corpus, d.layout, "data.corpus")
    if heldout:
        check_documents(heldout, d.layout, "data.heldout")
    if cfg.train.overwrite and out.is_dir():
        clear_outputs(out)
    out.mkdir(parents=True, exist_ok=True)
    built: list[str] = []
    try:
        built = list(json.loads((out / MARKER_NAME).read_text(encoding="utf-8")).get("built", []))
    except (OSError, ValueError, UnicodeDecodeError, AttributeError):
        pass

    def mark() -> None:
        marker = {"format": MARKER_FORMAT, "plan": run_plan(cfg), "built": built}
        atomic_write_text(out / MARKER_NAME, json.dumps(marker, indent=1, ensure_ascii=False, default=str) + "\n")

    mark()
    atomic_write_text(out / RECIPE_NAME, recipe_yaml(cfg))
    init_kind, init_vocab, init_ngram = _init_files(cfg)

    def need(given: Path | None, from_init: Path | None, name: str, key: str, what: str) -> tuple[Path, bool]:
        """(path, must build) for the vocab or the lexicon."""
        if given is not None and Path(given).is_file():
            return Path(given), False
        if given is None and from_init is not None:
            return from_init, False
        local = out / name
        if local.is_file():  # built by an earlier start of this run
            return local, False
        if not d.build_missing:
            missing = f"{given}: no such file" if given is not None else "not given"
            raise ZenError(f"{key}: {missing}; expected {what} (or set data.build_missing: true to build it "
                           f"from the corpus)")
        return local, True

    vocab, build_v = need(d.vocab, init_vocab, "vocab.txt", "data.vocab", "a vocab.txt")
    if build_v:
        if init_kind is not None:
            raise ZenError(f"data.vocab: {init_kind} checkpoint {cfg.init.pretrained} has no vocab.txt; its embedding "
                           "rows need the vocabulary they were trained with: give data.vocab")
        _build_vocab(cfg, corpus, vocab, say)
        built.append(str(vocab))
        mark()
    ngram, build_n = need(d.ngram, init_ngram, "ngram.txt", "data.ngram", "an n-gram lexicon (ngram.txt)")
    if build_n:
        if init_kind in ("zen", "released"):
            raise ZenError(f"data.ngram: {init_kind} checkpoint {cfg.init.pretrained} has no ngram.txt; its n-gram "
                           "table needs the lexicon it was trained with: give data.ngram")
        say(_build_lexicon(cfg, corpus, vocab, ngram, console))
        built.append(str(ngram))
        mark()

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
    return Prepared(vocab, ngram, train_dir, heldout_dir, init_kind, built, generation)


def _say_shards(say, what: str, res) -> None:
    t = res.manifest["totals"]
    how = (f"made {res.made} shard(s) in {res.seconds_read + res.seconds_generate:.1f} s" if res.made
           else f"reused {res.reused} shard(s)")
    say(f"{what} data: {t['examples']:,} examples, {t['tokens_per_example']:.1f} tokens/example, "
        f"{t['masked_fraction']:.3f} masked, {t['ngrams_per_example']:.1f} n-grams/example; {how} → {res.out_dir}")


def recipe_yaml(cfg: PretrainConfig) -> str:
    """The resolved recipe, as the way to continue this run: `overwrite` off, `resume` auto."""
    import yaml

    data = to_dict(cfg)
    data["train"].update(overwrite=False, resume="auto")
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


# ----------------------------------------------------------------------------------------------------
# stage 3 + 4: model, training, export


def build_model(cfg: PretrainConfig, prepared: Prepared, vocab_size: int,
                n_ngrams: int) -> tuple[ZenForPreTraining, list[str]]:
    """A fresh ZenForPreTraining (global torch RNG: seed first) or the `init` checkpoint; notes."""
    from zencli.model.checkpoint import check_text_files
    from zencli.model.config import ZenConfig
    from zencli.model.sources import load_pretrained

    notes: list[str] = []
    if cfg.init.pretrained is None:
        config = ZenConfig(vocab_size=vocab_size, word_size=n_ngrams + 1, **cfg.model.zen_config_kwargs())
        return ZenForPreTraining(config), notes
    p = load_pretrained(cfg.init.pretrained, encoder=cfg.model.encoder, ngram=prepared.ngram,
                        num_hidden_word_layers=cfg.model.num_hidden_word_layers)
    model = p.model
    config = model.config
    # The shards' token and n-gram ids must index the checkpoint's tables.
    check_text_files(config, prepared.vocab, prepared.ngram if config.has_ngrams else None)
    if not config.relative_positions and config.max_position_embeddings < cfg.data.max_seq_len:
        raise ZenError(f"data.max_seq_len: {cfg.data.max_seq_len} exceeds the {config.max_position_embeddings} "
                       f"positions of {cfg.init.pretrained}")
    notes.append(f"init: {p.kind} checkpoint {cfg.init.pretrained} ({config.encoder}, {config.num_hidden_layers} × "
                 f"{config.hidden_size}); model.* sizes are taken from it")
    if p.notes:
        fresh = sum(n.startswith("initialised") for n in p.notes)
        notes.append(f"init: {fresh} tensor(s) initialised fresh, {len(p.notes) - fresh} not used")
    return model, notes


def _rtd_objective(cfg: PretrainConfig, model: ZenForPreTraining, shards: PretrainShards, vocab: Any, lexicon: Any,
                   notes: list[str]):
    """(model, loss_fn, eval_fn) of replaced-token detection around `model` (see zencli.tasks.rtd)."""
    from zencli.tasks import rtd

    slots = rtd.corrupted_slots(shards, vocab, lexicon)
    model = rtd.build_rtd_model(cfg, model, vocab)
    notes.append(rtd.describe(model))
    return (model, rtd.rtd_loss_fn(slots, cfg.rtd.nsp),
            lambda m, heldout: rtd.evaluate_rtd(m, heldout, slots, cfg.rtd.nsp))


@dataclass
class PretrainResult:
    output_dir: Path
    model_dir: Path | None
    step: int
    start_step: int
    elapsed_s: float
    tokens_per_s: float | None
    results: dict[str, Any]


def read_metrics(out: Path) -> list[dict[str, Any]]:
    path = out / "metrics.jsonl"
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def curve(records: list[dict[str, Any]], points: int = 10) -> list[dict[str, Any]]:
    """About `points` train records spread over the run (first and last included)."""
    train = [r for r in records if r.get("kind") == "train"]
    if len(train) <= points + 1:
        return train
    picks = sorted(set(np.linspace(0, len(train) - 1, points + 1).round().astype(int).tolist()))
    return [train[i] for i in picks]


def run_pretrain(cfg: PretrainConfig, *, console: Console | None = None, show_progress: bool = True
                 ) -> PretrainResult:
    """All four stages (see the module docstring); in a process group, rank 0 prepares the data."""
    import torch.distributed as dist

    from zencli.lexicon.ngram_file import Lexicon
    from zencli.model.checkpoint import save_zen_model
    from zencli.text.vocab import Vocab
    from zencli.train import LengthGroupedBatches, train
    from zencli.train import distributed as D
    from zencli.train.checkpoint import CheckpointDir, seed_everything
    from zencli.train.precision import autocast, resolve_precision

    console = console or Console(stderr=True)
    ctx = D.setup(cfg.train.device)  # joins the process group now, so the ranks can wait for rank 0
    try:
        say = ((lambda text: console.print(escape(text), highlight=False, soft_wrap=True)) if ctx.is_main
               else (lambda text: None))
        prepared: Prepared | ZenError | None = None
        if ctx.is_main:
            try:
                prepared = prepare(cfg, console=console)
            except ZenError as e:
                if not ctx.distributed:
                    raise
                prepared = e  # tell the waiting ranks, then fail everywhere
        if ctx.distributed:
            # gloo, generous timeout: building a lexicon and shards may take hours on a big corpus
            group = dist.new_group(backend="gloo", timeout=timedelta(days=7))
            box = [prepared if ctx.is_main else None]
            dist.broadcast_object_list(box, src=0, group=group)
            prepared = box[0]
        if isinstance(prepared, ZenError):
            raise ZenError(str(prepared))
        assert prepared is not None

        vocab = Vocab.load(prepared.vocab)
        lexicon = Lexicon.load(prepared.ngram)
        shards = PretrainShards(prepared.train_dir, vocab=vocab, lexicon=lexicon)
        heldout = None
        if prepared.heldout_dir is not None:
            heldout = HeldoutSet(PretrainShards(prepared.heldout_dir, vocab=vocab, lexicon=lexicon), vocab.mask_id,
                                 cfg.data.eval_batch_size, cfg.data.heldout_examples)

        s = replace(cfg.train)
        s.overwrite = False  # prepare() has cleared the directory already
        seed_everything(s.seed)  # model initialisation is reproducible
        model, notes = build_model(cfg, prepared, len(vocab), len(lexicon))
        if model.config.has_ngrams:
            s.find_unused_parameters = True  # DDP: a batch without n-grams leaves the n-gram side without gradient
        loss_fn, eval_fn = pretraining_loss, evaluate
        if cfg.objective == "rtd":
            model, loss_fn, eval_fn = _rtd_objective(cfg, model, shards, vocab, lexicon, notes)
            s.find_unused_parameters = True  # DDP: the discriminator's MLM head is not trained
        s.validate()
        for note in notes:
            say(f"note: {note}")
        out = Path(s.output_dir)
        n_params = sum(p.numel() for p in model.parameters())
        say(f"pretrain: {model.config.encoder} {model.config.num_hidden_layers} × {model.config.hidden_size} "
            f"({model.config.num_hidden_word_layers if model.config.has_ngrams else 0} n-gram layers), "
            f"{n_params:,} parameters · {len(shards):,} training examples · {s.max_steps:,} steps of "
            f"{s.batch_size} ({s.max_steps * s.batch_size / len(shards):.2f} epochs)"
            + (f" · {len(heldout.indices):,} held-out examples" if heldout else ""))

        baseline: dict[str, Any] | None = None
        initial: dict[str, float] | None = None
        precision = resolve_precision(s.precision, ctx.device)
        fresh = CheckpointDir(out / "checkpoints").latest() is None and s.resume in ("auto", "never")
        if ctx.is_main and heldout is not None:
            baseline = unigram_baseline(shards, heldout, len(vocab))
            say(f"baseline (always '{vocab.id_to_token(baseline['prediction_id'])}', the most frequent training "
                f"target): held-out masked-char accuracy {baseline['masked_acc']:.4f}, all targets "
                f"{baseline['mlm_acc']:.4f}; unigram MLM loss {baseline['mlm_loss']:.4f}")
            if fresh:
                model.to(ctx.device)
                with autocast(precision, ctx.device):
                    initial = eval_fn(model, heldout)
                say("eval @ step 0: " + " · ".join(f"{k} {v:.4f}" for k, v in initial.items()))

        last_eval: dict[str, Any] = {}

        def on_eval(step: int, metrics: dict[str, float], improved: bool) -> None:
            last_eval.update(step=step, metrics=metrics)

        fingerprint_extra = {
            "task": "pretrain", "language": cfg.language, "init": str(cfg.init.pretrained),
            "data": {"train": shards.manifest["fingerprint"],
                     "heldout": heldout.shards.manifest["fingerprint"] if heldout else None},
            "model": model.config.to_dict(),
        }
        if cfg.objective != "mlm":
            fingerprint_extra["objective"] = {"name": cfg.objective, **to_dict(cfg.rtd)}
        data = LengthGroupedBatches(shards.lengths, shards.get_batch, seed=s.seed)
        result = train(model, loss_fn, data, s, eval_fn=(lambda m: eval_fn(m, heldout)) if heldout else None,
                       on_eval=on_eval, fingerprint_extra=fingerprint_extra, console=console,
                       show_progress=show_progress, watch=plateau_watch(baseline) if baseline else None)
        tokens_per_s = result.tokens / result.elapsed_s if result.elapsed_s > 0 and result.tokens else None
        if not ctx.is_main:
            return PretrainResult(out, None, result.step, result.start_step, result.elapsed_s, tokens_per_s, {})

        final = last_eval.get("metrics") if last_eval.get("step") == result.step else None
        if heldout is not None and final is None:  # resumed a finished run: nothing was trained or evaluated
            with autocast(result.precision, ctx.device):
                final = eval_fn(model, heldout)
        model_dir = out / MODEL_DIR
        saved = model.discriminator if cfg.objective == "rtd" else model  # the encoder with its heads
        save_zen_model(saved, model_dir, vocab=prepared.vocab,
                       ngram=prepared.ngram if model.config.has_ngrams else None)
        for sidecar in (prepared.vocab.with_suffix(".json"), prepared.ngram.with_suffix(".json")):
            if sidecar.is_file() and (model.config.has_ngrams or sidecar.stem == "vocab"):
                shutil.copyfile(sidecar, model_dir / sidecar.name)  # tokenizer settings travel with the model
        records = read_metrics(out)
        train_records = [r for r in records if r.get("kind") == "train"]
        results = {
            "output_dir": str(out), "model_dir": str(model_dir), "recipe": to_dict(cfg), "objective": cfg.objective,
            "world_size": result.world_size, "precision": result.precision, "parameters": n_params,
            "steps": result.step, "started_at_step": result.start_step,
            "elapsed_s_this_invocation": round(result.elapsed_s, 3),
            "tokens_per_s_this_invocation": tokens_per_s,
            "training_examples": len(shards), "epochs": result.step * s.batch_size / len(shards),
            "vocab": {"path": str(prepared.vocab), "size": len(vocab)},
            "lexicon": {"path": str(prepared.ngram), "size": len(lexicon)},
            "data": {k: v.as_dict() for k, v in prepared.generation.items()},
            "first_train_record": train_records[0] if train_records else None,
            "last_train_record": train_records[-1] if train_records else None,
            "curve": curve(records),
            "warnings": [r for r in records if r.get("kind") == "warning"],  # every invocation's
            "heldout": {
                "examples": len(heldout.indices), "baseline": baseline, "initial": initial,
                "final": final, "evals": [r for r in records if r.get("kind") == "eval"],
            } if heldout is not None else None,
        }
        atomic_write_text(out / RESULTS_NAME, json.dumps(results, indent=1, ensure_ascii=False, default=str) + "\n")
        return PretrainResult(out, model_dir, result.step, result.start_step, result.elapsed_s, tokens_per_s, results)
    finally:
        D.teardown(ctx)


def result_tables(result: PretrainResult):
    """Rich tables: the loss curve, held-out scores against the baseline (with RTD also the discriminator's
    detection scores against always answering "original"), and the run's warnings in red."""
    from rich.table import Table
    from rich.text import Text

    r = result.results
    rtd = r.get("objective") == "rtd"
    metrics = ("loss", "mlm_loss", "mlm_acc", *(("rtd_loss", "rtd_acc") if rtd else ()), "nsp_acc")
    curve_t = Table(title="training curve (train windows)" + (": generator mlm_*, discriminator rtd_*" if rtd else ""))
    for col in ("step", *metrics, "lr", "tokens/s", "elapsed"):
        curve_t.add_column(col, justify="right")
    for rec in r.get("curve", []):
        curve_t.add_row(str(rec["step"]), *(_num(rec.get(k)) for k in metrics), f"{rec.get('lr', 0):.2e}",
                        f"{rec.get('tokens_per_s', 0):,.0f}", f"{rec.get('elapsed_s', 0):,.0f} s")
    tables = [curve_t]
    h = r.get("heldout")
    if h and h.get("final"):
        cols = ("masked_acc", "mlm_acc", "mlm_loss", *(("rtd_acc", "rtd_auc", "replaced") if rtd else ()), "nsp_acc")
        t = Table(title=f"held-out ({h['examples']:,} examples)")
        for col in ("", *cols):
            t.add_column(col, justify="right")
        b = h.get("baseline") or {}
        if b:
            t.add_row("unigram baseline", *(_num(b.get(k)) for k in cols[:3]), *(["n/a"] * (len(cols) - 4)),
                      "0.5 (chance)")
        f = h["final"]
        if rtd:
            t.add_row('always "original"', *(["n/a"] * 3), _num(1 - f["replaced"]), "0.5 (chance)",
                      _num(f["replaced"]), "n/a")
        if h.get("initial"):
            t.add_row("step 0", *(_num(h["initial"].get(k)) for k in cols))
        t.add_row(f"step {r['steps']}", *(_num(f.get(k)) for k in cols))
        tables.append(t)
    for w in r.get("warnings") or []:
        tables.append(Text(f"WARNING: {w['message']}", style="bold red"))
    return tables


def _num(v: Any) -> str:
    return "n/a" if v is None else f"{v:.4f}"
