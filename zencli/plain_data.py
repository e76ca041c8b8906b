"""Settings dataclasses as plain data (dicts, lists, strings, numbers) for YAML and JSON files.

It sits below every layer: recipes are dumped with it (zencli.config), and the training loop records its
settings in run.json with it (zencli.train), which must not depend on the recipe layer above it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any


def to_dict(obj: Any) -> Any:
    """Dataclass → plain YAML-able data (Paths as strings)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, Path):
        return str(obj)
    return obj
