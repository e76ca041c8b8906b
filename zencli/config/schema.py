"""Typed settings for each zen job. A recipe file is one of these dataclasses written as YAML, with a
top-level `job:` key saying which. Defaults here are the built-in defaults of the command."""

from __future__ import annotations

from zencli.config.finetune import FinetuneConfig
from zencli.config.pretrain import PretrainConfig
from zencli.lexicon.settings import LexiconConfig

JOBS: dict[str, type] = {"lexicon": LexiconConfig, "finetune": FinetuneConfig, "pretrain": PretrainConfig}
