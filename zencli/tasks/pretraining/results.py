"""Stage 4: OUT/model (a zen model directory with vocab.txt and ngram.txt), OUT/results.json (data,
baseline, curve, held-out scores, throughput) and the tables `zen pretrain` prints from it."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.table import Table
from rich.text import Text

from zencli.atomic_write import atomic_write_text
from zencli.config.loading import to_dict
from zencli.config.pretrain import PretrainConfig
from zencli.model.checkpoint import save_zen_model
from zencli.tasks.pretraining.preparation import Prepared, PretrainData
from zencli.tasks.pretraining.rundir import MODEL_DIR, RESULTS_NAME
from zencli.train.progress import read_metrics
from zencli.train.settings import TrainSettings


@dataclass
class PretrainResult:
    output_dir: Path
    model_dir: Path | None
    step: int
    start_step: int
    elapsed_s: float
    tokens_per_s: float | None
    results: dict[str, Any]


def curve(records: list[dict[str, Any]], points: int = 10) -> list[dict[str, Any]]:
    """About `points` train records spread over the run (first and last included)."""
    train = [r for r in records if r.get("kind") == "train"]
    if len(train) <= points + 1:
        return train
    picks = sorted(set(np.linspace(0, len(train) - 1, points + 1).round().astype(int).tolist()))
    return [train[i] for i in picks]


def tokens_per_s(result: Any) -> float | None:
    """This invocation's training throughput (`result`: the loop's TrainResult); None when it trained nothing."""
    return result.tokens / result.elapsed_s if result.elapsed_s > 0 and result.tokens else None


def save_model(cfg: PretrainConfig, model: torch.nn.Module, prepared: Prepared, out: Path) -> Path:
    """OUT/model: the encoder with its heads (with RTD the discriminator), its text files and their sidecars."""
    model_dir = out / MODEL_DIR
    saved = model.discriminator if cfg.objective == "rtd" else model  # the encoder with its heads
    save_zen_model(saved, model_dir, vocab=prepared.vocab,
                   ngram=prepared.ngram if model.config.has_ngrams else None)
    for sidecar in (prepared.vocab.with_suffix(".json"), prepared.ngram.with_suffix(".json")):
        if sidecar.is_file() and (model.config.has_ngrams or sidecar.stem == "vocab"):
            shutil.copyfile(sidecar, model_dir / sidecar.name)  # tokenizer settings travel with the model
    return model_dir


def write_results(cfg: PretrainConfig, s: TrainSettings, prepared: Prepared, data: PretrainData, model_dir: Path,
                  result: Any, n_params: int, scores: dict[str, Any]) -> dict[str, Any]:
    """OUT/results.json; `result`: the loop's TrainResult, `scores`: held-out baseline, initial, final."""
    out = Path(s.output_dir)
    records = read_metrics(out)
    train_records = [r for r in records if r.get("kind") == "train"]
    shards, heldout = data.shards, data.heldout
    results = {
        "output_dir": str(out), "model_dir": str(model_dir), "recipe": to_dict(cfg), "objective": cfg.objective,
        "world_size": result.world_size, "dtype": result.dtype, "parameters": n_params,
        "steps": result.step, "started_at_step": result.start_step,
        "elapsed_s_this_invocation": round(result.elapsed_s, 3),
        "tokens_per_s_this_invocation": tokens_per_s(result),
        "training_examples": len(shards), "epochs": result.step * s.batch_size / len(shards),
        "vocab": {"path": str(prepared.vocab), "size": len(data.vocab)},
        "lexicon": {"path": str(prepared.ngram), "size": len(data.lexicon)},
        "data": {k: v.as_dict() for k, v in prepared.generation.items()},
        "first_train_record": train_records[0] if train_records else None,
        "last_train_record": train_records[-1] if train_records else None,
        "curve": curve(records),
        "warnings": [r for r in records if r.get("kind") == "warning"],  # every invocation's
        "heldout": {
            "examples": len(heldout.indices), "baseline": scores["baseline"], "initial": scores["initial"],
            "final": scores["final"], "evals": [r for r in records if r.get("kind") == "eval"],
        } if heldout is not None else None,
    }
    atomic_write_text(out / RESULTS_NAME, json.dumps(results, indent=1, ensure_ascii=False, default=str) + "\n")
    return results


def result_tables(result: PretrainResult):
    """Rich tables: the loss curve, held-out scores against the baseline (with RTD also the discriminator's
    detection scores against always answering "original"), and the run's warnings in red."""
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
