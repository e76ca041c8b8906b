"""`zen pretrain`: MLM + NSP (or replaced-token detection) pretraining from raw text
(zencli.tasks.pretraining does the work).

Without --recipe it is the default pipeline's second step: the tiny recipe (pretrain-zh-tiny) on the
default corpus (PD98 raw train, held-out dev) with the workspace's vocabulary and lexicon from `zen lexicon`,
into WORKDIR/pretrain (zencli.jobs.workspace)."""

from __future__ import annotations

from pathlib import Path

import typer

from zencli.cli.common import (
    OVERRIDES,
    RECIPE,
    WORKDIR_OPTION,
    console,
    encoding_errors_option,
    err_console,
    keyed,
    keyed_options,
)
from zencli.jobs.workspace import Workspace


def pretrain(
    recipe: str | None = RECIPE,
    overrides: list[str] = OVERRIDES,
    output: Path | None = keyed("train.output_dir", "--output", "-o", help="Output directory: data, checkpoints, "
                                "metrics.jsonl, model/, results.json."),
    nproc: int = typer.Option(1, "--nproc", help="Data-parallel processes on this machine (DDP; gloo on CPU, "
                              "nccl on GPUs: one GPU each). train.batch_size stays the global batch. Or start "
                              "`torchrun --nproc-per-node N -m zencli pretrain …` (also across machines)."),
    resume: str | None = keyed("train.resume", "--resume", help="auto (default: continue from the output "
                               "directory's newest checkpoint), never, or a checkpoint file (*.pt)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Delete this command's earlier outputs in the "
                                   "output directory (shards, checkpoints, model) instead of resuming or refusing."),
    max_steps: int | None = keyed("train.max_steps", "--max-steps", help="Optimizer steps."),
    max_minutes: float | None = keyed("train.max_minutes", "--max-minutes", help="Train for at most this many "
                                      "minutes: the step count and schedule are fitted to it."),
    encoding_errors: str | None = encoding_errors_option("data.encoding_errors"),
    workdir: Path | None = WORKDIR_OPTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Pretrain a ZEN 2.0 / ZEN 1.0 / BERT encoder with masked language modelling + next sentence prediction
    (or, with `objective: rtd`, as the discriminator of ELECTRA's replaced-token detection).

    Builds a missing vocabulary and lexicon (data.build_missing), makes the pretraining shards, trains
    (checkpoints, resume, DDP), evaluates on held-out text against a unigram baseline, and writes
    OUTPUT/model (a zen model directory) and OUTPUT/results.json. Run it again to continue.

    Without --recipe (or a corpus, vocab, lexicon or checkpoint in --set): the tiny ZEN 2.0 recipe
    (pretrain-zh-tiny) on the default corpus with the vocab and lexicon of `zen lexicon`, into WORKDIR/pretrain,
    with the training time `zen quickstart` gives the step (--max-minutes changes it)."""
    from zencli.jobs.training import run_training

    options = {**keyed_options(pretrain, locals()), "train.overwrite": True if overwrite else None}
    job, result = run_training("pretrain", recipe, overrides, options, workdir, nproc=nproc, quiet=quiet,
                               console=err_console, out=console)
    if result is not None:
        report(result, job.workspace)


def report(result, ws: Workspace | None = None) -> None:
    """Tables and where the model went; `ws`: the run is the workspace's (suggest the next step)."""
    from rich.markup import escape

    from zencli.tasks.pretraining import RESULTS_NAME, result_tables

    for table in result_tables(result):
        console.print(table)
    r = result.results
    h = r.get("heldout") or {}
    if h.get("final") and h.get("baseline"):
        gain = h["final"]["masked_acc"] - h["baseline"]["masked_acc"]
        whose = " (generator)" if r.get("objective") == "rtd" else ""
        console.print(f"held-out masked-char accuracy{whose} {h['final']['masked_acc']:.4f} vs unigram baseline "
                      f"{h['baseline']['masked_acc']:.4f} ({gain:+.4f})", highlight=False)
    if h.get("final") and r.get("objective") == "rtd":
        f = h["final"]
        console.print(f"held-out replaced-token detection: accuracy {f['rtd_acc']:.4f} (always \"original\": "
                      f"{1 - f['replaced']:.4f}), AUC {f['rtd_auc']:.4f}", highlight=False)
    resumed = f", resumed at step {result.start_step}" if result.start_step else ""
    rate = f", {result.tokens_per_s:,.0f} tokens/s" if result.tokens_per_s else ""
    console.print(f"trained {result.step} steps{resumed} in {result.elapsed_s:.1f} s{rate}; model: "
                  f"{escape(str(result.model_dir))}; results: {escape(str(result.output_dir / RESULTS_NAME))}",
                  highlight=False, soft_wrap=True)
    if ws is not None and result.model_dir == ws.pretrained_model:
        console.print(f"next: {escape(ws.command('finetune --task ner'))} (or cws, pos, sa)", highlight=False,
                      soft_wrap=True)
        return
    console.print(f"export with: zen model export {escape(str(result.model_dir))} -o DIR · fine-tune with: "
                  f"zen finetune --model {escape(str(result.model_dir))} …", highlight=False, soft_wrap=True)
