"""`zen pretrain`'s job: a recipe with overrides or the defaults chain's recipe on the workspace, run here or as
`--nproc` processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zencli.config.loading import build_job_config
from zencli.config.pretrain import PretrainConfig
from zencli.errors import ZenError
from zencli.jobs.common import launch, reports
from zencli.jobs.workspace import (
    PRETRAIN_RECIPE,
    STEP_MINUTES,
    Workspace,
    as_overrides,
    default_corpus,
    expected_training,
    overridden,
)

WORKDIR_ERROR = ("--workdir: the workspace is used by `zen pretrain` without a recipe, corpus, vocab or lexicon; "
                 "here those name the run (set its output with --output)")


def uses_workspace(recipe: str | None, overrides: list[str], options: dict[str, Any] | None = None) -> bool:
    """The defaults chain applies when nothing says what to pretrain on: no recipe, and no corpus, vocab,
    lexicon or starting checkpoint given with --set."""
    return recipe is None and not overridden(overrides, "data.corpus", "data.vocab", "data.ngram", "init.pretrained")


def build_config(recipe: str | Path | None, overrides: list[str], options: dict[str, Any]) -> PretrainConfig:
    """Recipe (or the defaults) < --set overrides < command-line options, validated once."""
    return build_job_config(PretrainConfig, "pretrain", recipe, overrides, options)


def workspace_config(ws: Workspace, overrides: list[str], options: dict[str, Any], *, data: Path | None = None,
                     console=None) -> PretrainConfig:
    """The settings of `zen pretrain` on the defaults chain: recipe pretrain-zh-tiny on the default corpus
    (PD98 raw train, held-out dev; `data`: its dataset directory, default located) with the workspace's
    vocab.txt / ngram.txt, writing WORK/pretrain, for the training time `zen quickstart` gives the step
    (zencli.jobs.workspace.STEP_MINUTES); `--set` overrides and options still win."""
    vocab, ngram = ws.require_lexicon()
    train, heldout = default_corpus(data, console=console)
    defaults: dict[str, Any] = {"data.corpus": [train], "data.heldout": [heldout], "data.vocab": vocab,
                                "data.ngram": ngram, "data.build_missing": False, "train.output_dir": ws.pretrain_dir,
                                "train.max_minutes": STEP_MINUTES["pretrain_minutes"]}
    return build_config(PRETRAIN_RECIPE, [*as_overrides(defaults), *overrides], options)


def expected_duration(cfg: PretrainConfig) -> str:
    """The line the pipeline's pretraining step prints before it starts: how long it is expected to take."""
    return expected_training("pretrain", cfg.train.max_minutes, f"all {cfg.train.max_steps:,} steps",
                             "making the shards once and scoring the held-out text")


def finished(ws: Workspace, cfg: PretrainConfig, options: dict[str, Any]) -> str | None:
    """The line `zen pretrain` prints instead of training when the workspace's step already ran (None: train;
    --overwrite trains again, --resume continues)."""
    if options.get("train.overwrite") or options.get("train.resume") is not None \
            or Path(cfg.train.output_dir) != ws.pretrain_dir or not ws.pretrain_done():
        return None
    return (f"pretrain: already finished in {ws.pretrain_dir} (model: {ws.pretrained_model}); --overwrite trains "
            f"again · next: {ws.command('finetune --task ner')}")


def run_job(cfg: PretrainConfig, *, nproc: int = 1, quiet: bool = False, console=None):
    """Pretrain here (`zencli.tasks.pretraining.run_pretrain`), or prepare the data here (once) and start `nproc`
    processes training on it. Returns the PretrainResult where this process reports it, else None."""
    # lazy, here and below: these import torch, and a recipe's errors (jobs.training imports this module)
    # come before torch loads
    from zencli.train.distributed import launches

    if cfg.train.overwrite and cfg.train.resume not in ("auto", "never"):
        ckpt = Path(cfg.train.resume).resolve()
        if Path(cfg.train.output_dir).resolve() in ckpt.parents:
            raise ZenError(f"--overwrite would delete the checkpoint given to --resume ({cfg.train.resume}); "
                           "use one or the other")
    if launches(nproc, cfg.train.device):
        from zencli.tasks.pretraining import RECIPE_NAME, prepare

        cfg.train.micro_batch_size(nproc)  # a global batch the processes cannot split: said before any data work

        prepare(cfg, console=console)  # writes OUTPUT/recipe.yaml (overwrite off: the outputs are fresh now)
        args = ["pretrain", "--recipe", str(Path(cfg.train.output_dir) / RECIPE_NAME), "--resume", cfg.train.resume]
        launch([*args, *(["--quiet"] if quiet else [])], nproc)
        return None
    from zencli.tasks.pretraining import run_pretrain

    result = run_pretrain(cfg, console=console, show_progress=not quiet)
    return result if reports() else None
