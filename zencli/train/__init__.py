"""The shared training loop (pretraining and fine-tuning): see `zencli.train.loop` for the API.

Names are imported lazily so that `from zencli.train.settings import TrainSettings` (used by recipe
schemas) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "TrainSettings": "zencli.train.settings",
    "train": "zencli.train.loop",
    "TrainResult": "zencli.train.loop",
    "ResumableBatches": "zencli.train.data",
    "IndexedBatches": "zencli.train.data",
    "LengthGroupedBatches": "zencli.train.data",
    "LazyAdamW": "zencli.train.optim",
    "LinearWarmupDecay": "zencli.train.schedule",
    "seed_everything": "zencli.train.checkpoint",
    "load_checkpoint": "zencli.train.checkpoint",
    "launch_local": "zencli.train.distributed",
    "resolve_dtype": "zencli.train.dtype",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'zencli.train' has no attribute {name!r}")
