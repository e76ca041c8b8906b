"""`zen finetune --compare-scratch`: the run as asked (from a pretrained model), then a small model from scratch
at the same budget, both scored on dev and test, so a user sees what their pretraining is worth.

The scratch model is the task's from-scratch recipe (the one `zen finetune --task T --train F` uses: a tiny
encoder, its sizes and learning rate) reading the same inputs: the pretrained model's vocab.txt and
ngram.txt, the same encoder kind (CHTE from characters where CHTE sits on the pretrained encoder). Data,
task settings, batch size, epochs or steps, time budget, warm-up, patience and seed are the run's own.

Outputs: the pretrained run in OUTPUT as always, the scratch run in OUTPUT/scratch, and the comparison in
OUTPUT/compare-scratch.json.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from zencli.atomic_write import atomic_write_text
from zencli.config.finetune import FinetuneConfig
from zencli.config.loading import build_job_config
from zencli.errors import ZenError
from zencli.jobs.workspace import scratch_base
from zencli.model.checkpoint import NGRAM_NAME, VOCAB_NAME
from zencli.tasks.finetune import FinetuneResult, run_finetune
from zencli.tasks.run_checks import format_lr
from zencli.tasks.transfer import SCRATCH_LR

SCRATCH_DIR = "scratch"
REPORT_NAME = "compare-scratch.json"


@dataclass
class Comparison:
    pretrained: FinetuneResult
    scratch: FinetuneResult
    scratch_model: str  # what the scratch model is, in words
    report: dict[str, Any]  # what compare-scratch.json holds
    path: Path  # compare-scratch.json


def scratch_config(cfg: FinetuneConfig, encoder: str | None) -> tuple[FinetuneConfig, str]:
    """The scratch run beside `cfg` (module docstring) and a few words on its model; `encoder` is the kind
    the pretrained run's model has (task.json's `encoder`)."""
    base = scratch_base(cfg.task.name)
    assert base is not None  # the task is named: the run read its data
    recipe, cleared = base
    small = build_job_config(FinetuneConfig, "finetune", recipe, cleared, {})
    d = Path(cfg.model.pretrained)  # type: ignore[arg-type]
    sizes = {k: getattr(small.model, k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                  "intermediate_size", "num_hidden_word_layers")}
    if cfg.model.encoder == "chte":
        model = replace(cfg.model, pretrained=None, vocab=None, ngram=None, training_ngrams=None,
                        extend_vocab=None, hidden_dropout_prob=None, attention_probs_dropout_prob=None)
        what = "CHTE from characters"
    else:
        vocab = cfg.model.vocab or d / VOCAB_NAME
        ngram = cfg.model.ngram or (d / NGRAM_NAME if (d / NGRAM_NAME).is_file() else None)
        kind = encoder or "zen2"
        model = replace(cfg.model, pretrained=None, encoder=kind, vocab=vocab,
                        ngram=ngram if kind != "bert" else None, hidden_dropout_prob=None,
                        attention_probs_dropout_prob=None, **sizes)
        what = (f"new {kind} {sizes['num_hidden_layers']} × {sizes['hidden_size']} with the pretrained model's "
                f"vocabulary{' and lexicon' if kind != 'bert' else ''}")
    lr = SCRATCH_LR if small.train.lr == "auto" else small.train.lr
    train = replace(cfg.train, lr=lr, output_dir=Path(cfg.train.output_dir) / SCRATCH_DIR, layer_lr_decay=1.0,
                    head_lr_scale=1.0)
    model = replace(model, reinit_top_layers=0)
    return replace(cfg, model=model, train=train), f"{what}, lr {format_lr(lr)}"


def compare_scratch(cfg: FinetuneConfig, *, console: Console | None = None, show_progress: bool = True
                    ) -> Comparison:
    """Fine-tune `cfg` (from its pretrained model), then the scratch model beside it; write the comparison."""
    if cfg.model.pretrained is None:
        raise ZenError("--compare-scratch: compares a pretrained model with one trained from scratch; give the "
                       "pretrained model with --model (or model.pretrained)")
    console = console or Console(stderr=True)
    pretrained = run_finetune(cfg, console=console, show_progress=show_progress)
    encoder = json.loads((pretrained.model_dir / "task.json").read_text(encoding="utf-8")).get("encoder")
    scratch_cfg, what = scratch_config(cfg, encoder)
    console.print(f"[bold]from scratch[/bold] at the same budget: {what}", highlight=False)
    scratch = run_finetune(scratch_cfg, console=console, show_progress=show_progress)
    report = _report(cfg, pretrained, scratch, what)
    path = Path(cfg.train.output_dir) / REPORT_NAME
    atomic_write_text(path, json.dumps(report, ensure_ascii=False, indent=2) + "\n")
    return Comparison(pretrained, scratch, what, report, path)


def _row(name: str, result: FinetuneResult, model: str) -> dict[str, Any]:
    return {"run": name, "model": model, "model_dir": str(result.model_dir), "steps": result.step,
            "best_step": result.best_step, "elapsed_s": round(result.elapsed_s, 1),
            "dev": None if result.dev is None else result.dev.main_score,
            "test": None if result.test is None else result.test.main_score}


def _report(cfg: FinetuneConfig, pretrained: FinetuneResult, scratch: FinetuneResult, what: str) -> dict[str, Any]:
    metric = next((e.result.main for e in (pretrained.test, pretrained.dev) if e is not None), None)
    rows = [_row("pretrained", pretrained, f"{cfg.model.pretrained}, lr {format_lr(pretrained.lr)}"),
            _row("scratch", scratch, what)]
    gain = {split: (rows[0][split] - rows[1][split] if rows[0][split] is not None and rows[1][split] is not None
                    else None) for split in ("dev", "test")}
    budget = {"epochs": cfg.epochs, "max_steps": cfg.train.max_steps, "max_minutes": cfg.train.max_minutes,
              "batch_size": cfg.train.batch_size, "seed": cfg.train.seed}
    return {"task": cfg.task.name, "metric": metric, "budget": budget, "runs": rows, "pretrained_gain": gain}
