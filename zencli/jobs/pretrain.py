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
    vocab.txt / ngram.txt, writing WORK/pretrain; `--set` overrides and options still win."""
    from zencli.workspace import PRETRAIN_RECIPE, as_overrides, default_corpus

    vocab, ngram = ws.require_lexicon()
    train, heldout = default_corpus(data, console=console)
    defaults: dict[str, Any] = {"data.corpus": [train], "data.heldout": [heldout], "data.vocab": vocab,
                                "data.ngram": ngram, "data.build_missing": False, "train.output_dir": ws.pretrain_dir}
    return build_config(PRETRAIN_RECIPE, [*as_overrides(defaults), *overrides], options)
