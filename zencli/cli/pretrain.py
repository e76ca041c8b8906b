"""`zen pretrain`: MLM + NSP pretraining from raw text (zencli.tasks.pretraining does the work)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from zencli.cli.common import OVERRIDES, RECIPE, console, err_console
from zencli.errors import ZenError


def build_config(recipe: str | None, overrides: list[str], options: dict[str, Any]):
    """Recipe (or the defaults) < --set overrides < command-line options, validated once."""
    from zencli.config.loading import build_job_config
    from zencli.config.pretrain import PretrainConfig

    return build_job_config(PretrainConfig, "pretrain", recipe, overrides, options)


def pretrain(
    recipe: str | None = RECIPE,
    overrides: list[str] = OVERRIDES,
    output: Path | None = typer.Option(None, "--output", "-o", help="Output directory (train.output_dir): "
                                          "data, checkpoints, metrics.jsonl, model/, results.json."),
    nproc: int = typer.Option(1, "--nproc", help="Data-parallel processes on this machine (DDP; gloo on CPU, "
                              "nccl on GPUs). Or start `torchrun --nproc-per-node N -m zencli pretrain …`."),
    resume: str | None = typer.Option(None, "--resume", help="auto (default: continue from the output "
                                         "directory's newest checkpoint), never, or a checkpoint file (*.pt)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Delete this command's earlier outputs in the "
                                   "output directory (shards, checkpoints, model) instead of resuming or refusing."),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Optimizer steps (train.max_steps)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Pretrain a ZEN 2.0 / ZEN 1.0 / BERT encoder with masked language modelling + next sentence prediction.

    Builds a missing vocabulary and lexicon (data.build_missing), makes the pretraining shards, trains
    (checkpoints, resume, DDP), evaluates on held-out text against a unigram baseline, and writes
    OUTPUT/model (a zen model directory) and OUTPUT/results.json. Run it again to continue."""
    options = {"train.output_dir": output, "train.resume": resume, "train.max_steps": max_steps,
               "train.overwrite": True if overwrite else None}
    cfg = build_config(recipe, overrides, options)
    if nproc < 1:
        raise ZenError(f"--nproc: expected an integer >= 1, got {nproc}")
    if overwrite and cfg.train.resume not in ("auto", "never"):
        ckpt = Path(cfg.train.resume).resolve()
        if Path(cfg.train.output_dir).resolve() in ckpt.parents:
            raise ZenError(f"--overwrite would delete the checkpoint given to --resume ({cfg.train.resume}); "
                           "use one or the other")
    if nproc > 1 and not os.environ.get("WORLD_SIZE"):
        _launch(cfg, nproc, quiet)
        return
    from zencli.tasks.pretraining import run_pretrain

    result = run_pretrain(cfg, console=err_console, show_progress=not quiet)
    if int(os.environ.get("RANK", "0") or 0) == 0:
        report(result)


def _launch(cfg, nproc: int, quiet: bool) -> None:
    """Prepare data here (once), then start `nproc` processes training on it."""
    from zencli.tasks.pretraining import RECIPE_NAME, prepare
    from zencli.train.distributed import launch_local, python_module_command

    prepare(cfg, console=err_console)  # writes OUTPUT/recipe.yaml (overwrite off: the outputs are fresh now)
    args = ["pretrain", "--recipe", str(Path(cfg.train.output_dir) / RECIPE_NAME), "--resume", cfg.train.resume]
    code = launch_local(nproc, python_module_command(*args, *(["--quiet"] if quiet else [])))
    if code:
        raise ZenError(f"pretrain: a training process exited with status {code}")


def report(result) -> None:
    from rich.markup import escape

    from zencli.tasks.pretraining import RESULTS_NAME, result_tables

    for table in result_tables(result):
        console.print(table)
    r = result.results
    h = r.get("heldout") or {}
    if h.get("final") and h.get("baseline"):
        gain = h["final"]["masked_acc"] - h["baseline"]["masked_acc"]
        console.print(f"held-out masked-char accuracy {h['final']['masked_acc']:.4f} vs unigram baseline "
                      f"{h['baseline']['masked_acc']:.4f} ({gain:+.4f})", highlight=False)
    resumed = f", resumed at step {result.start_step}" if result.start_step else ""
    rate = f", {result.tokens_per_s:,.0f} tokens/s" if result.tokens_per_s else ""
    console.print(f"trained {result.step} steps{resumed} in {result.elapsed_s:.1f} s{rate}; model: "
                  f"{escape(str(result.model_dir))}; results: {escape(str(result.output_dir / RESULTS_NAME))}",
                  highlight=False, soft_wrap=True)
    console.print(f"export with: zen model export {escape(str(result.model_dir))} -o DIR · fine-tune with: "
                  f"zen finetune --model {escape(str(result.model_dir))} …", highlight=False, soft_wrap=True)
