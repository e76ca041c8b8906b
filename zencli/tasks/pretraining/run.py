"""`run_pretrain`: the four stages in order (see `zencli.tasks.pretraining`). In a process group rank 0
prepares the data while the other ranks wait, and rank 0 evaluates and writes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from rich.console import Console
from rich.markup import escape

from zencli.config.loading import to_dict
from zencli.config.pretrain import PretrainConfig
from zencli.errors import ZenError
from zencli.tasks.pretraining.heldout import unigram_baseline
from zencli.tasks.pretraining.network import model_and_objective
from zencli.tasks.pretraining.objective import plateau_watch
from zencli.tasks.pretraining.preparation import Prepared, PretrainData, load_prepared, prepare
from zencli.tasks.pretraining.results import PretrainResult, save_model, tokens_per_s, write_results
from zencli.train import LengthGroupedBatches, train
from zencli.train import distributed as D
from zencli.train.checkpoint import CheckpointDir
from zencli.train.dtype import inference_autocast, inference_model, resolve_inference_dtype
from zencli.train.settings import TrainSettings
from zencli.train.threads import torch_threads


def run_pretrain(cfg: PretrainConfig, *, console: Console | None = None, show_progress: bool = True
                 ) -> PretrainResult:
    """All four stages (see `zencli.tasks.pretraining`); in a process group, rank 0 prepares the data."""
    console = console or Console(stderr=True)
    ctx = D.setup(cfg.train.device)  # joins the process group now, so the ranks can wait for rank 0
    try:
        say = ((lambda text: console.print(escape(text), highlight=False, soft_wrap=True)) if ctx.is_main
               else (lambda text: None))
        prepared = _prepare_on_rank_0(cfg, ctx, console)  # stages 1–2
        data = load_prepared(cfg, prepared)
        s, model, loss_fn, eval_fn = model_and_objective(cfg, prepared, data, say)  # stage 3
        out = Path(s.output_dir)
        n_params = sum(p.numel() for p in model.parameters())
        say(_describe(model, n_params, s, data))

        dtype, _ = resolve_inference_dtype(s.eval_dtype, ctx.device, key="train.eval_dtype")
        fresh = CheckpointDir(out / "checkpoints").latest() is None and s.resume in ("auto", "never")
        scores: dict[str, Any] = {"baseline": None, "initial": None}
        if ctx.is_main and data.heldout is not None:
            scores = _scores_before_training(model, eval_fn, data, fresh, dtype, ctx.device, say)
        with torch_threads(s.num_threads):  # the final scoring runs on the training's threads
            result, last_eval = _train(cfg, s, model, loss_fn, eval_fn, data, scores["baseline"], console,
                                       show_progress)
            if not ctx.is_main:
                return PretrainResult(out, None, result.step, result.start_step, result.elapsed_s,
                                      tokens_per_s(result), {})

            # Stage 4, on rank 0: the final held-out scores, the model and results.json.
            scores["final"] = last_eval.get("metrics") if last_eval.get("step") == result.step else None
            if data.heldout is not None and scores["final"] is None:  # resumed a finished run: nothing was evaluated
                with inference_autocast(dtype, ctx.device):
                    scores["final"] = eval_fn(inference_model(model, dtype), data.heldout)
            model_dir = save_model(cfg, model, prepared, out)
            results = write_results(cfg, s, prepared, data, model_dir, result, n_params, scores)
            return PretrainResult(out, model_dir, result.step, result.start_step, result.elapsed_s,
                                  tokens_per_s(result), results)
    finally:
        D.teardown(ctx)


def _prepare_on_rank_0(cfg: PretrainConfig, ctx: Any, console: Console) -> Prepared:
    """Stages 1–2 on rank 0; the other ranks wait for what it made (or for its error, raised everywhere)."""
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
    return prepared


def _describe(model: torch.nn.Module, n_params: int, s: TrainSettings, data: PretrainData) -> str:
    c, heldout = model.config, data.heldout
    return (f"pretrain: {c.encoder} {c.num_hidden_layers} × {c.hidden_size} "
            f"({c.num_hidden_word_layers if c.has_ngrams else 0} n-gram layers), "
            f"{n_params:,} parameters · {len(data.shards):,} training examples · {s.max_steps:,} steps of "
            f"{s.batch_size} ({s.max_steps * s.batch_size / len(data.shards):.2f} epochs)"
            + (f" · {len(heldout.indices):,} held-out examples" if heldout else ""))


def _scores_before_training(model: torch.nn.Module, eval_fn: Callable, data: PretrainData, fresh: bool,
                            dtype: str, device: torch.device, say: Callable[[str], None]) -> dict[str, Any]:
    """The held-out baseline, and on a fresh start the untrained model's scores (step 0)."""
    baseline = unigram_baseline(data.shards, data.heldout, len(data.vocab))
    say(f"baseline (always '{data.vocab.id_to_token(baseline['prediction_id'])}', the most frequent training "
        f"target): held-out masked-char accuracy {baseline['masked_acc']:.4f}, all targets "
        f"{baseline['mlm_acc']:.4f}; unigram MLM loss {baseline['mlm_loss']:.4f}")
    initial = None
    if fresh:
        model.to(device)
        with inference_autocast(dtype, device):
            initial = eval_fn(inference_model(model, dtype), data.heldout)
        say("eval @ step 0: " + " · ".join(f"{k} {v:.4f}" for k, v in initial.items()))
    return {"baseline": baseline, "initial": initial}


def _train(cfg: PretrainConfig, s: TrainSettings, model: torch.nn.Module, loss_fn: Callable, eval_fn: Callable,
           data: PretrainData, baseline: dict[str, Any] | None, console: Console,
           show_progress: bool) -> tuple[Any, dict[str, Any]]:
    """The shared training loop (`zencli.train`); its TrainResult and the last evaluation it ran ({} if none)."""
    last_eval: dict[str, Any] = {}

    def on_eval(step: int, metrics: dict[str, float], improved: bool) -> None:
        last_eval.update(step=step, metrics=metrics)

    heldout = data.heldout
    fingerprint_extra = {
        "task": "pretrain", "language": cfg.language, "init": str(cfg.init.pretrained),
        "data": {"train": data.shards.manifest["fingerprint"],
                 "heldout": heldout.shards.manifest["fingerprint"] if heldout else None},
        "model": model.config.to_dict(),
    }
    if cfg.objective != "mlm":
        fingerprint_extra["objective"] = {"name": cfg.objective, **to_dict(cfg.rtd)}
    batches = LengthGroupedBatches(data.shards.lengths, data.shards.get_batch, seed=s.seed)
    result = train(model, loss_fn, batches, s, eval_fn=(lambda m: eval_fn(m, heldout)) if heldout else None,
                   on_eval=on_eval, fingerprint_extra=fingerprint_extra, console=console,
                   show_progress=show_progress, watch=plateau_watch(baseline) if baseline else None)
    return result, last_eval
