"""`zen pretrain` settings: a recipe with overrides, and the defaults chain's recipe on the workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zencli.config.pretrain import PretrainConfig
from zencli.workspace import Workspace


def build_config(recipe: str | Path | None, overrides: list[str], options: dict[str, Any]) -> PretrainConfig:
    """Recipe (or the defaults) < --set overrides < command-line options, validated once."""
    from zencli.config.loading import build_job_config

    return build_job_config(PretrainConfig, "pretrain", recipe, overrides, options)


def workspace_config(ws: Workspace, overrides: list[str], options: dict[str, Any], *, data: Path | None = None,
                     console=None) -> PretrainConfig:
    """The settings of `zen pretrain` on the defaults chain: recipe pretrain-zh-tiny on the default corpus
    (PD98 raw train, held-out dev; `data`: its dataset directory, default located) with the workspace's
    vocab.txt / ngram.txt, writing WORK/pretrain, for the training time `zen quickstart` gives the step
    (zencli.workspace.STEP_MINUTES); `--set` overrides and options still win."""
    from zencli.workspace import PRETRAIN_RECIPE, STEP_MINUTES, as_overrides, default_corpus

    vocab, ngram = ws.require_lexicon()
    train, heldout = default_corpus(data, console=console)
    defaults: dict[str, Any] = {"data.corpus": [train], "data.heldout": [heldout], "data.vocab": vocab,
                                "data.ngram": ngram, "data.build_missing": False, "train.output_dir": ws.pretrain_dir,
                                "train.max_minutes": STEP_MINUTES["pretrain_minutes"]}
    return build_config(PRETRAIN_RECIPE, [*as_overrides(defaults), *overrides], options)


def expected_duration(cfg: PretrainConfig) -> str:
    """The line the pipeline's pretraining step prints before it starts: how long it is expected to take."""
    from zencli.workspace import expected_training

    return expected_training("pretrain", cfg.train.max_minutes, f"all {cfg.train.max_steps:,} steps",
                             "making the shards once and scoring the held-out text")
