"""Recipes: typed settings loaded from YAML with key-path validation."""

from zencli.config.loading import (
    RECIPES_DIR,
    apply_overrides,
    expand_variables,
    from_dict,
    list_recipes,
    load_recipe,
    read_recipe_data,
    resolve_recipe_path,
    settle_alternatives,
    to_dict,
    typed_keys,
)
from zencli.config.schema import JOBS
from zencli.errors import ZenError


def load_job_recipe(name_or_file, overrides=None, expected_job: str | None = None):
    """Load a recipe whose class is chosen by its `job:` key (or `expected_job` when given)."""
    if name_or_file is None:
        if expected_job is None:
            raise ZenError("no recipe given")
        return load_recipe(JOBS[expected_job], None, overrides)
    data, path = read_recipe_data(name_or_file)
    job = data.get("job", expected_job)
    if job not in JOBS:
        raise ZenError(f"{path}: job: expected one of {', '.join(JOBS)}, got {job!r}")
    if expected_job is not None and job != expected_job:
        raise ZenError(f"{path}: job: this recipe is for `zen {job}`, not `zen {expected_job}`")
    data = apply_overrides(data, list(overrides or []))
    expand_variables(data, str(path))
    settle_alternatives(JOBS[job], data, typed_keys(overrides or []), str(path))
    source = str(path) + (" (with --set)" if overrides else "")
    return from_dict(JOBS[job], data, source=source)


__all__ = [
    "RECIPES_DIR",
    "JOBS",
    "from_dict",
    "to_dict",
    "list_recipes",
    "load_recipe",
    "load_job_recipe",
    "read_recipe_data",
    "resolve_recipe_path",
]
