"""`zen finetune`: read the task's data, build the model, train it with the shared loop, export the best
model and score it on dev and test.

    result = run_finetune(cfg)          # cfg: FinetuneConfig (a recipe)

Output directory (`train.output_dir`):

    run.json, metrics.jsonl, tensorboard/   the training loop's records (train and eval lines)
    checkpoints/step-*.pt, best.pt          resumable training state; weights of the best dev evaluation
    recipe.yaml                             the resolved recipe of this run
    model/                                  the fine-tuned model (zencli.tasks.model_dir), with
                                            dev_scores.json / test_scores.json beside its files

Running the same command again continues from the newest checkpoint (`train.resume: auto`): a finished
run re-exports its model without training further. With a dev file the model is evaluated about once per
epoch (5 to 50 times a run; or every `train.eval_every` steps), `checkpoints/best.pt` keeps the weights with
the best main score, a share `train.patience` of the planned steps without improvement stops the run (not
before the warm-up ends nor before a quarter of the run), and the exported model is the best one.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from rich.console import Console
from rich.markup import escape

from zencli.atomic_write import atomic_write_text
from zencli.config.finetune import AUTO_EPOCHS, AUTO_MIN_STEPS, FinetuneConfig, auto_epochs
from zencli.config.loading import to_dict
from zencli.data.collate import collate
from zencli.errors import ZenError
from zencli.tasks.adaptation import adapt_model, check_adapt_files
from zencli.tasks.base import Task, task_class
from zencli.tasks.inference import set_dtype
from zencli.tasks.model_dir import LoadedModel, save_task_model
from zencli.tasks.network_build import build_task_model
from zencli.tasks.ngram_bag import BAG_FIT, fit_bag, mix_on_dev
from zencli.tasks.predict import predict_examples
from zencli.tasks.run_checks import Baseline, end_warnings, majority_baseline, plan_line
from zencli.tasks.scoring import Evaluation, GoldData
from zencli.tasks.training_vocab import coverage, unk_warning
from zencli.tasks.transfer import auto_lr, lr_scales
from zencli.train import LengthGroupedBatches, train
from zencli.train.checkpoint import CheckpointDir, load_checkpoint, seed_everything
from zencli.train.progress import warning_panel
from zencli.train.threads import torch_threads

MODEL_DIR = "model"


@dataclass
class FinetuneResult:
    model_dir: Path
    step: int
    start_step: int
    best_step: int | None
    stopped_early: bool
    elapsed_s: float
    dev: Evaluation | None = None
    test: Evaluation | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # at the start ([UNK] share) and the end (run_checks)
    baseline: Baseline | None = None  # the majority baseline's dev score
    lr: float | None = None  # the peak learning rate the run used (train.lr, or the rule's for auto)


def _file_id(path: Path | None) -> Any:
    """What identifies a data file for resuming: path and size (a changed file is another run)."""
    if path is None:
        return None
    p = Path(path)
    return {"path": str(p), "bytes": p.stat().st_size if p.is_file() else None}


def _read(task_cls: type[Task], path: Path | None, fmt: str, what: str) -> GoldData | None:
    if path is None:
        return None
    gold = task_cls.read(path, fmt)
    if not gold.examples:
        raise ZenError(f"{path}: no examples in the {what} file")
    return gold


def scores_json(evaluation: Evaluation, task: Task, gold: GoldData, *, step: int | None, model_dir: Path
                ) -> dict[str, Any]:
    """The JSON written beside the model: the evaluation plus unseen gold labels and provenance."""
    out = evaluation.to_dict()
    unseen = task.unseen_labels(gold)
    out["unseen_gold_labels"] = unseen
    out["unseen_gold_label_count"] = sum(unseen.values())
    out["model"] = str(model_dir)
    out["step"] = step
    return out


@dataclass
class _Splits:
    """The task built from the training data, and the gold of each split (None: no file)."""

    task: Task
    settings: Any  # the task section with its decoder resolved
    train: Any
    dev: Any
    test: Any
    notes: list[str]


def run_finetune(cfg: FinetuneConfig, *, console: Console | None = None, show_progress: bool = True
                 ) -> FinetuneResult:
    """Fine-tune per `cfg` (see the module docstring); returns where the model went and its scores."""
    console = console or Console(stderr=True)
    rank = int(os.environ.get("RANK", "0") or 0)
    say = console.print if rank == 0 else (lambda *a, **k: None)
    if cfg.adapt.minutes is not None:
        check_adapt_files(cfg)  # before reading the data: a mistyped file name is a quick error
    splits = _read_splits(cfg)
    task, notes = splits.task, splits.notes
    recipe = cfg  # recipe.yaml: the settings as given (the whole budget, the model adapted from)
    if cfg.adapt.minutes is not None:
        cfg = _adapted(cfg, splits, say, console, show_progress)

    seed_everything(cfg.train.seed)  # model initialisation (fresh heads, new n-gram sides) is reproducible
    model, inputs, spec = build_task_model(cfg, task, splits.train.examples)
    notes += spec.notes
    records, record_notes = task.training_records(splits.train.examples, inputs)
    notes += record_notes
    if not records:
        raise ZenError(f"{cfg.data.train}: no training examples with content")
    s, steps_per_epoch, lr_why = _train_settings(cfg, task, model, len(records), has_dev=splits.dev is not None,
                                                 notes=notes)
    scales = lr_scales(model, layer_decay=s.layer_lr_decay,
                       head_scale=s.head_lr_scale if cfg.model.pretrained is not None else 1.0)
    bag = getattr(model.head, "bag", None)
    if bag is not None:  # no encoder pass: cheap; a resumed run's checkpoint then replaces what it fitted
        started = time.perf_counter()
        notes.append(fit_bag(bag, records, pad_id=inputs.pad_id))
        if splits.dev is not None:  # the encoder trains alone; the two are mixed on dev at the end
            model.head.shares = (1.0, 0.0)
            bag.requires_grad_(False)  # out of the optimizer, and of DDP's gradient reduction
        if s.max_minutes is not None:  # the budget covers it
            s.max_minutes = round(max(s.max_minutes - (time.perf_counter() - started) / 60, 0.05), 2)
    model_dir = Path(s.output_dir) / MODEL_DIR
    fingerprint_extra = {
        "task": to_dict(splits.settings), "state": task.state(), "model": to_dict(cfg.model),
        "encoder": spec.encoder, "chte": spec.chte, "inputs": spec.inputs.to_dict(),
        "data": {k: _file_id(getattr(cfg.data, k)) for k in ("train", "dev")}, "format": cfg.data.format,
        "examples": len(records), "ngram_bag": BAG_FIT if bag is not None else None,
    }
    warnings = []
    if spec.encoder is not None:  # CHTE from characters builds its vocabulary from this very data
        found = coverage(task, splits.train.examples, inputs.vocab, inputs.settings)
        unk = unk_warning(found, cfg.model.extend_vocab)
        if unk:
            warnings.append(unk)
        elif found is not None and found.unknown:
            notes.append(found.describe())
    n_labels = len(task.state().get("labels", []))
    say(f"[bold]{task.name}[/bold] ({escape(task.description)}) · {escape(spec.source)} · "
        + (f"{n_labels} labels · " if n_labels else "") +
        f"{len(splits.train.examples):,} training examples → {len(records):,} inputs · "
        f"{s.max_steps:,} steps ({s.max_steps / steps_per_epoch:.2f} epochs of {steps_per_epoch:,})", highlight=False)
    for note in notes:
        say(f"note: {escape(note)}", highlight=False, soft_wrap=True)
    baseline = majority_baseline(task, splits.train, splits.dev)
    say(escape(plan_line(s, steps_per_epoch, baseline, lr_why=lr_why)), highlight=False, soft_wrap=True)
    for text in warnings:
        say(warning_panel(text))

    def loss_fn(m, batch):
        loss, metrics = m(batch)
        return loss, metrics, batch["attention_mask"].sum()

    def eval_fn(m) -> dict[str, float]:
        predictions = task.predict(m, inputs, splits.dev.examples)
        return task.scores(task.evaluate(splits.dev, predictions, name="dev predictions", train=splits.train))

    # Batches of similar length: random ones of PD98 sentences spend ~45% of their compute on padding.
    lengths = np.array([len(r["input_ids"]) for r in records])
    data = LengthGroupedBatches(lengths, lambda ids: collate([records[i] for i in ids], pad_id=inputs.pad_id),
                                seed=s.seed)
    with torch_threads(s.num_threads):  # the dev/test scoring after training runs on the training's threads
        result = train(model, loss_fn, data, s, eval_fn=eval_fn if splits.dev is not None else None,
                       fingerprint_extra=fingerprint_extra, console=console, show_progress=show_progress,
                       lr_scales=scales, epoch_steps=steps_per_epoch)
        final = FinetuneResult(model_dir, result.step, result.start_step, result.best_step, result.stopped_early,
                               result.elapsed_s, notes=notes, warnings=warnings, baseline=baseline, lr=s.lr)
        if rank == 0:
            _export(recipe, s, splits, model, inputs, spec, result.step, final, say)
            late = end_warnings(steps=result.step, best_step=result.best_step, best_value=result.best_value,
                                baseline=baseline, lr=s.lr)
            for text in late:
                say(warning_panel(text))
            final.warnings += late
    return final


def _adapted(cfg: FinetuneConfig, splits: _Splits, say, console: Console, show_progress: bool) -> FinetuneConfig:
    """Adapt the pretrained model to the task's text first (zencli.tasks.adaptation); the settings that
    fine-tune the adapted model in the rest of the budget."""
    minutes, total = cfg.adapt.minutes, cfg.train.max_minutes
    rest = None if total is None else total - minutes
    say(escape(f"budget: {total:g} min = {minutes:g} adapting to the task's text + {rest:g} fine-tuning" if total
               else f"adapting to the task's text for {minutes:g} min, then fine-tuning"), highlight=False)
    texts = splits.task.training_texts(splits.train.examples)
    if texts is None:  # tagging: the sentences the labels sit on (words of word-level data joined by spaces)
        sep = " " if getattr(splits.task, "level", "char") == "word" else ""
        texts = [sep.join(e.chars) for e in splits.train.examples if getattr(e, "chars", None)]
    if not texts:
        raise ZenError(f"adapt.minutes: task {splits.task.name} has no training texts to adapt to")
    model_dir = adapt_model(cfg, texts, lambda text: say(escape(text), highlight=False, soft_wrap=True),
                            console=console, show_progress=show_progress)
    # the adapted model brings its own vocab.txt and grown ngram.txt
    return replace(cfg, model=replace(cfg.model, pretrained=model_dir, vocab=None, ngram=None),
                   train=replace(cfg.train, max_minutes=rest))


def _read_splits(cfg: FinetuneConfig) -> _Splits:
    """Check the task settings, read train/dev/test, build the task from the training data, and collect
    the data notes (what the readers repaired, labels dev or test has that training lacks)."""
    if cfg.task.name is None:
        raise ZenError("task.name: no task given; use --task (e.g. cws, pos, ner) or a recipe")
    task_cls = task_class(cfg.task.name)
    task_cls.check_settings(cfg.task)
    if cfg.model.encoder == "chte" and not task_cls.supports_chte:
        raise ZenError(f"model.encoder: chte encodes characters for tagging tasks (cws, pos, ner); task "
                       f"{task_cls.name} needs zen2, zen1 or bert")
    if cfg.data.train is None:
        raise ZenError("data.train: no training file; give it in the recipe or with --train")
    settings = replace(cfg.task)
    if settings.decoder is None:
        settings.decoder = "crf" if cfg.model.encoder == "chte" else task_cls.decoder_default
    if settings.ngram_bag is None and task_cls.ngram_bag_default is not None:
        settings.ngram_bag = task_cls.ngram_bag_default  # saved resolved, so the model loads as it trained

    train_gold = _read(task_cls, cfg.data.train, cfg.data.format, "training")
    task = task_cls.from_training_data(settings, train_gold)
    dev_gold = _read(task_cls, cfg.data.dev, cfg.data.format, "dev")
    test_gold = _read(task_cls, cfg.data.test, cfg.data.format, "test")
    notes = [n for g in (train_gold, dev_gold, test_gold) if g is not None for n in task.data_notes(g)]
    for name, gold in (("dev", dev_gold), ("test", test_gold)):
        unseen = task.unseen_labels(gold) if gold is not None else {}
        if unseen:
            notes.append(f"{name}: {sum(unseen.values())} labels not seen in training ({', '.join(list(unseen)[:6])}"
                         f"{' …' if len(unseen) > 6 else ''}); they are scored as errors")
    return _Splits(task, settings, train_gold, dev_gold, test_gold, notes)


def _train_settings(cfg: FinetuneConfig, task: Task, model, n_records: int, *, has_dev: bool,
                    notes: list[str]) -> tuple[Any, int, str]:
    """The training loop's settings for this run (the learning rate, steps from epochs, dev evaluation and
    best-model choice), the steps per epoch, and why the learning rate is what it is ("" when given)."""
    s = replace(cfg.train)
    why = ""
    if s.lr == "auto":
        pretrained = cfg.model.pretrained is not None and model.encoder is not None
        rule = auto_lr(pretrained=pretrained, hidden_size=model.encoder.config.hidden_size if pretrained else 0)
        s.lr, why = rule.value, rule.why
    steps_per_epoch = max(1, math.ceil(n_records / s.batch_size))
    s.max_steps, s.warmup_steps, s.warmup_ratio = cfg.step_counts(n_records)
    if cfg.epochs_auto:
        notes.append(f"epochs auto: {auto_epochs(n_records, s.batch_size)} epochs of {n_records:,} inputs "
                     f"(at least {AUTO_MIN_STEPS} updates, {AUTO_EPOCHS[0]} to {AUTO_EPOCHS[1]} epochs)")
    if has_dev:
        if s.best_metric is None:
            s.best_metric = task.main_metric
    else:
        if s.best_metric is not None or s.patience != type(s).patience:
            notes.append("no dev file: train.best_metric / patience have nothing to watch; the last model is kept")
        s.best_metric, s.patience = None, 0
    if model.encoder is not None and (not task.uses_pooled or model.encoder.config.has_ngrams):
        # DDP: the unused pooler gets no gradient, nor does the n-gram tower in a batch without a matched n-gram
        s.find_unused_parameters = True
    s.validate()
    return s, steps_per_epoch, why


def _export(cfg: FinetuneConfig, s, splits: _Splits, model, inputs, spec, last_step: int, final: FinetuneResult,
            say) -> None:
    """Rank 0, after training: the best dev checkpoint's weights (else the last), the model directory,
    recipe.yaml, and the dev and test scores beside the model."""
    out, model_dir = Path(s.output_dir), final.model_dir
    task = splits.task
    best = CheckpointDir(out / "checkpoints").best_path
    chosen = last_step
    if splits.dev is not None and best.is_file():
        state = load_checkpoint(best)
        model.load_state_dict(state["model"])
        chosen = state["step"]
        say(f"best dev {s.best_metric} {state['value']:.4f} at step {chosen}: exporting that model", highlight=False)
    if getattr(model.head, "bag", None) is not None and model.head.shares == (1.0, 0.0):
        model.eval()
        note = mix_on_dev(model, task, inputs, splits.dev, s.best_metric)
        final.notes.append(note)
        say(f"note: {escape(note)}", highlight=False, soft_wrap=True)
    save_task_model(model, inputs, spec, model_dir)
    atomic_write_text(out / "recipe.yaml", _yaml(cfg))
    model.eval()
    # scored as `zen evaluate --dtype train.eval_dtype` would score the exported model
    loaded = set_dtype(LoadedModel(model, task, inputs, spec, model_dir), s.eval_dtype, key="train.eval_dtype")
    for name, gold in (("dev", splits.dev), ("test", splits.test)):
        if gold is None:
            continue
        evaluation = task.evaluate(gold, predict_examples(loaded, gold.examples), name=f"{model_dir}",
                                   train=splits.train)
        evaluation.inference_dtype = loaded.dtype
        report = scores_json(evaluation, task, gold, step=chosen, model_dir=model_dir)
        atomic_write_text(model_dir / f"{name}_scores.json", json.dumps(report, ensure_ascii=False, indent=2) + "\n")
        setattr(final, name, evaluation)


def _yaml(cfg: FinetuneConfig) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False, allow_unicode=True)

