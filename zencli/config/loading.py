"""Recipes as data: YAML → typed dataclasses, with errors that name the key.

A recipe is a YAML mapping whose shape is a dataclass (nested dataclasses for sections). Loading checks
every key against the dataclass: an unknown key names the closest valid one, a renamed one (a class's
`RENAMED`: old → new name) its new name, a wrong type names the expected type, a missing required field is
reported by its full path. `--set a.b=value` overrides are parsed as YAML scalars and applied before
validation, so they are checked the same way.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import re
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from zencli.errors import ZenError, did_you_mean
from zencli.plain_data import to_dict as to_dict  # re-exported: recipes are dumped with it (defined below the layers)

T = TypeVar("T")

# Built-in recipes are package data (zencli/recipes/*.yaml; the repository's top-level recipes/ links there), read
# through importlib.resources so a wheel and an editable install find them alike. zen is never imported from a
# zip (torch is not zip-safe either), so the resource folder is a real directory and recipe paths stay Paths
# that error messages can name.
RECIPES_DIR = Path(str(importlib.resources.files("zencli") / "recipes"))


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        args = typing.get_args(tp)
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "mapping"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _convert(value: Any, tp: Any, key: str, source: str) -> Any:
    """Check `value` against type `tp`, converting where lossless (int → float, str → Path)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(value, a, key, source)
            except ZenError as e:
                errors.append(e)
        raise ZenError(f"{source}: {key}: expected {_type_name(tp)}, got {value!r}")
    if origin is typing.Literal:
        if value in typing.get_args(tp):
            return value
        raise ZenError(f"{source}: {key}: expected {_type_name(tp)}, got {value!r}")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ZenError(f"{source}: {key}: expected {_type_name(tp)}, got {value!r}")
        (item_tp,) = typing.get_args(tp)[:1] or (Any,)
        out = [_convert(v, item_tp, f"{key}[{i}]", source) for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(value, dict):
            raise ZenError(f"{source}: {key}: expected a mapping, got {value!r}")
        return dict(value)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ZenError(f"{source}: {key}: expected a mapping (section), got {value!r}")
        return from_dict(tp, value, source=source, prefix=key + ".")
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads `1e-4` (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif tp is str:
        if isinstance(value, str):
            return value
    elif tp is Path:
        if isinstance(value, (str, Path)):
            return Path(value)
    else:
        if isinstance(value, tp):
            return value
    raise ZenError(f"{source}: {key}: expected {_type_name(tp)}, got {value!r}")


def from_dict(cls: type[T], data: dict[str, Any], *, source: str = "recipe", prefix: str = "") -> T:
    """Build dataclass `cls` from a mapping, validating every key. Errors name `source` and the key."""
    if not isinstance(data, dict):
        raise ZenError(f"{source}: {prefix.rstrip('.') or 'top level'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    renamed = getattr(cls, "RENAMED", {})
    for k in data:
        if k in renamed and k not in fields:  # an old name is neither read nor ignored
            raise ZenError(f"{source}: recipe key {prefix}{k} was renamed: use {prefix}{renamed[k]}")
        if k not in fields:
            hint = did_you_mean(str(k), fields, prefix)
            valid = ", ".join(fields)
            raise ZenError(f"{source}: unknown key '{prefix}{k}'{hint}; valid keys here: {valid}")
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = _convert(data[name], hints[name], prefix + name, source)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ZenError(f"{source}: missing required key '{prefix}{name}' ({_type_name(hints[name])})")
    obj = cls(**kwargs)
    validate = getattr(obj, "validate", None)
    if validate is not None:
        try:
            validate()
        except ZenError as e:
            raise ZenError(f"{source}: {prefix}{e}") from None
    return obj


_VARIABLE = re.compile(r"\$\{([^}]*)\}")
DATA_VARIABLE = "${data}"


def expand_variables(data: Any, source: str, prefix: str = "") -> list[tuple[str, Any]]:
    """Replace `${data}` at the start of the recipe's strings (in place) with the data root that holds the
    dataset after it (`zencli.datasets.data_path`: $ZEN_DATA, else the cache). Returns
    (key, DataPath) of each path so made, for `check_data_paths`. Any other `${...}` is an error naming the key."""
    found: list[tuple[str, Any]] = []
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, value in list(items):
        key = f"{prefix}.{k}" if isinstance(k, str) and prefix else f"{prefix}[{k}]" if isinstance(k, int) else k
        if isinstance(value, (dict, list)):
            found += expand_variables(value, source, key)
        elif isinstance(value, str) and "${" in value:
            for m in _VARIABLE.finditer(value):
                if m.group(0) != DATA_VARIABLE:
                    raise ZenError(f"{source}: {key}: unknown variable {m.group(0)!r} in {value!r}; the one variable "
                                   f"is {DATA_VARIABLE} (the data root), as in {DATA_VARIABLE}/pd98/ner/train.tsv")
            rest = value.removeprefix(DATA_VARIABLE)
            if DATA_VARIABLE in rest or (rest and not rest.startswith("/")):
                raise ZenError(f"{source}: {key}: {value!r}: {DATA_VARIABLE} goes at the start of a path, followed "
                               f"by /, as in {DATA_VARIABLE}/pd98/ner/train.tsv")
            from zencli.datasets import data_path  # here: recipes without ${data} never import the datasets

            resolved = data_path(rest.lstrip("/"))
            data[k] = str(resolved.path)
            found.append((key, resolved))
    return found


def check_data_paths(found: list[tuple[str, Any]], source: str) -> None:
    """Before a job runs: a `${data}` path whose dataset no data root holds is a one-line error naming the
    key and the `zen data fetch` to run (`zen recipe show` only resolves, so it shows recipes without data)."""
    for key, resolved in found:
        if resolved.missing is not None and not Path(resolved.path).exists():
            raise ZenError(f"{source}: {key}: {resolved.path}: not found: {resolved.missing}")


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b.c=value` → (['a','b','c'], parsed value). The value is read as a YAML scalar/list."""
    if "=" not in text:
        raise ZenError(f"--set {text!r}: expected KEY=VALUE, e.g. --set train.lr=1e-4")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ZenError(f"--set {text!r}: empty key part; expected KEY=VALUE with KEY like a.b.c")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `--set` overrides to raw recipe data (before validation)."""
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            elif not isinstance(nxt, dict):
                raise ZenError(f"--set {text!r}: '{part}' is not a section")
            node = nxt
        node[path[-1]] = value
    return data


def _get(data: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _set(data: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    for part in parents:
        nxt = data.get(part)
        if nxt is None:
            nxt = data[part] = {}
        elif not isinstance(nxt, dict):
            return  # not a section: validation names the key
        data = nxt
    data[last] = value


def settle_alternatives(cls: type, data: dict[str, Any], typed: Iterable[str], source: str) -> None:
    """Settings a class lets you give two ways (`cls.ALTERNATIVES`: (key, derived key, what they set), e.g.
    fine-tuning's `epochs` and `train.max_steps`): what was typed on the command line (`typed`: dotted keys
    from --set and options) beats the recipe's other key; both typed, or both set in one recipe, is an error
    naming the two. The derived key is left null when the first is set: it is computed at run time."""
    typed = set(typed)
    for first, second, what, _how in getattr(cls, "ALTERNATIVES", ()):
        a, b = _get(data, first), _get(data, second)
        typed_a, typed_b = first in typed and a is not None, second in typed and b is not None
        if typed_a and typed_b:
            raise ZenError(f"{first} and {second}: both given on the command line; they set the same thing "
                           f"({what}): give one")
        if typed_b:  # the recipe's `first` gives way
            a = None
            _set(data, first, None)
        elif not typed_a and a is not None and b is not None:
            raise ZenError(f"{source}: {first} and {second} are both set; they set the same thing ({what}): "
                           f"keep one")
        if a is not None:  # typed, or the recipe's alone: the derived key is computed at run time
            _set(data, second, None)


def typed_keys(overrides: Iterable[str], options: dict[str, Any] | None = None) -> set[str]:
    keys = {".".join(parse_override(text)[0]) for text in overrides}
    return keys | {k for k, v in (options or {}).items() if v is not None}


def resolve_recipe_path(name_or_file: str | Path) -> Path:
    """A recipe argument is a YAML file path or the name of a built-in recipe in recipes/."""
    p = Path(name_or_file)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.is_file():
            raise ZenError(f"{p}: no such recipe file")
        return p
    candidate = RECIPES_DIR / f"{name_or_file}.yaml"
    if candidate.is_file():
        return candidate
    names = list_recipes()
    hint = did_you_mean(str(name_or_file), names)
    raise ZenError(f"recipe '{name_or_file}' not found: not a file and not a built-in recipe{hint}; "
                   f"see `zen recipe list`")


def list_recipes() -> list[str]:
    """The built-in recipe names; none found is an error (a broken install), never an empty list."""
    names = sorted(p.stem for p in RECIPES_DIR.glob("*.yaml")) if RECIPES_DIR.is_dir() else []
    if not names:
        raise ZenError(f"{RECIPES_DIR}: no built-in recipe (*.yaml) found; the zencli installation is missing its "
                       f"package data (reinstall it: pip install zencli, or pip install -e . in a clone)")
    return names


def read_recipe_data(name_or_file: str | Path) -> tuple[dict[str, Any], Path]:
    path = resolve_recipe_path(name_or_file)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ZenError(f"{path}{line}: not valid YAML ({getattr(e, 'problem', e)})") from None
    except UnicodeDecodeError as e:
        raise ZenError(f"{path}: invalid UTF-8 at byte offset {e.start}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ZenError(f"{path}: expected a mapping at the top level of the recipe")
    return data, path


def load_recipe(cls: type[T], name_or_file: str | Path | None, overrides: list[str] | None = None) -> T:
    """Load a recipe (or the dataclass defaults when None), apply overrides, validate."""
    if name_or_file is None:
        data, source = {}, "defaults"
    else:
        data, path = read_recipe_data(name_or_file)
        source = str(path)
    data = apply_overrides(data, list(overrides or []))
    expand_variables(data, source)
    settle_alternatives(cls, data, typed_keys(overrides or []), source)
    if overrides:
        source += " (with --set)"
    return from_dict(cls, data, source=source)


def build_job_config(cls: type[T], job: str, recipe: str | Path | None, overrides: list[str],
                     options: dict[str, Any]) -> T:
    """Settings of a command: recipe (or the defaults) < `--set` overrides < plain command-line options
    (dotted keys; None = not given), validated once so every error names the key."""
    if recipe is None:
        data, source = {}, "command line"
    else:
        data, path = read_recipe_data(recipe)
        source = str(path)
        if data.get("job", job) != job:
            raise ZenError(f"{path}: job: this recipe is for `zen {data['job']}`, not `zen {job}`")
    data = apply_overrides(data, list(overrides or []))
    given = {k: (str(v) if isinstance(v, Path) else v) for k, v in options.items() if v is not None}
    for key, value in given.items():
        node = data
        *parents, last = key.split(".")
        for part in parents:
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            elif not isinstance(nxt, dict):
                raise ZenError(f"{source}: '{part}' is not a section")
            node = nxt
        node[last] = value
    found = expand_variables(data, source)
    settle_alternatives(cls, data, typed_keys(overrides or [], given), source)
    if recipe is not None and (overrides or given):
        source += " (with command-line settings)"
    cfg = from_dict(cls, data, source=source)
    check_data_paths(found, source)
    return cfg
