"""What a training command (`zen pretrain`, `zen finetune`) runs: the workspace's pipeline step when nothing
names what to train on, else the recipe with its overrides; here, or as `--nproc` processes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zencli.errors import ZenError
from zencli.jobs import finetune, pretrain
from zencli.jobs.workspace import Workspace
from zencli.text.reading import text_decoding


@dataclass
class Job:
    """A training command's settings, and whether it is the workspace's pipeline step."""

    cfg: Any  # PretrainConfig or FinetuneConfig
    workspace: Workspace | None = None  # set when the run is the workspace's step (suggest the next one)
    finished: str | None = None  # the step already ran: the line to print instead of training again


def training_job(command: str, recipe: str | None, overrides: list[str], options: dict[str, Any],
                 workdir: Path | None, *, console: Any) -> Job:
    """`command`'s (pretrain, finetune) settings: the workspace's step when nothing names what to train on
    (`uses_workspace`), else the recipe with its overrides. The workspace's step says on `console` how long it
    is expected to take, or, already finished, returns the line saying so (--overwrite trains again)."""
    job = {"pretrain": pretrain, "finetune": finetune}[command]
    ws = finished = None
    if job.uses_workspace(recipe, overrides, options):
        ws = Workspace.at(workdir)
        cfg = job.workspace_config(ws, overrides, options, console=console)
        finished = job.finished(ws, cfg, options)
        if finished is None:
            console.print(job.expected_duration(cfg), markup=False, highlight=False, soft_wrap=True)
    elif workdir is not None:
        raise ZenError(job.WORKDIR_ERROR)
    else:
        cfg = job.build_config(recipe, overrides, options)
    if command == "finetune":
        finetune.use_model_files(cfg, options)  # --model brings its own vocab.txt / ngram.txt
    return Job(cfg, ws, finished)


def run_training(command: str, recipe: str | None, overrides: list[str], options: dict[str, Any],
                 workdir: Path | None, *, nproc: int = 1, quiet: bool = False, console: Any, out: Any,
                 compare_scratch: bool = False) -> tuple[Job, Any]:
    """`zen <command>`: its job (`training_job`, notes on `console`) and the result where this process reports
    it (None: the step had already run, said on `out`, or another process reports). `compare_scratch`
    (finetune): the result is the comparison with a from-scratch model (`jobs.compare_scratch`)."""
    job = training_job(command, recipe, overrides, options, workdir, console=console)
    if job.finished:
        out.print(job.finished, markup=False, highlight=False, soft_wrap=True)
        return job, None
    run_job = {"pretrain": pretrain.run_job, "finetune": finetune.run_job}[command]
    extra = {"compare_scratch": True} if compare_scratch else {}
    with text_decoding(job.cfg.data.encoding_errors):
        return job, run_job(job.cfg, nproc=nproc, quiet=quiet, console=console, **extra)
