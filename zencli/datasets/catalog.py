"""All datasets of `registry.MODULES`, by name: the modules' `DATASETS` collected once.

Separate from `registry` because the modules import `registry` for its types: collecting them there would
make an import circle."""

from __future__ import annotations

import functools
import importlib

from zencli.datasets import registry
from zencli.datasets.registry import Dataset
from zencli.errors import ZenError


@functools.cache
def datasets() -> dict[str, Dataset]:
    """name → Dataset over all of `registry.MODULES` present (a name defined twice is an error)."""
    found: dict[str, Dataset] = {}
    for module_name in registry.MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name == module_name:
                continue  # that language's converters are not part of this installation
            raise
        for ds in getattr(module, "DATASETS", ()):
            if ds.name in found:
                raise ZenError(f"dataset {ds.name!r} is defined twice ({module_name} and an earlier module)")
            found[ds.name] = ds
    return found


def get(name: str) -> Dataset | None:
    return datasets().get(name)
