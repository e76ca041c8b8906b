"""Recipes: typed loading, errors naming the key path, --set overrides, built-in recipes by name."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from zencli.config import list_recipes, load_job_recipe, load_recipe, read_recipe_data
from zencli.config.loading import from_dict, parse_override
from zencli.errors import ZenError


@dataclass
class Optim:
    lr: float = 1e-4
    warmup: int = 10


@dataclass
class Job:
    name: str
    mode: Literal["a", "b"] = "a"
    optim: Optim = field(default_factory=Optim)
    files: list[Path] = field(default_factory=list)
    limit: int | None = None


def test_valid_mapping_builds_typed_objects():
    job = from_dict(Job, {"name": "x", "optim": {"lr": "1e-3", "warmup": 5}, "files": ["a.txt"]})
    assert job.optim.lr == pytest.approx(1e-3) and job.optim.warmup == 5
    assert job.files == [Path("a.txt")] and job.limit is None


def test_unknown_key_names_path_and_closest_key():
    with pytest.raises(ZenError) as e:
        from_dict(Job, {"name": "x", "optim": {"lrr": 1}}, source="r.yaml")
    msg = str(e.value)
    assert "r.yaml" in msg and "'optim.lrr'" in msg and "did you mean 'optim.lr'" in msg


def test_wrong_type_and_missing_key():
    with pytest.raises(ZenError, match=r"optim\.warmup: expected int, got 'ten'"):
        from_dict(Job, {"name": "x", "optim": {"warmup": "ten"}})
    with pytest.raises(ZenError, match=r"optim\.warmup: expected int"):
        from_dict(Job, {"name": "x", "optim": {"warmup": True}})
    with pytest.raises(ZenError, match="missing required key 'name'"):
        from_dict(Job, {})
    with pytest.raises(ZenError, match=r"mode: expected one of 'a', 'b'"):
        from_dict(Job, {"name": "x", "mode": "c"})


def test_overrides_are_parsed_and_validated(tmp_path: Path):
    assert parse_override("optim.lr=2e-5") == (["optim", "lr"], "2e-5")
    assert parse_override("limit=3") == (["limit"], 3)
    with pytest.raises(ZenError, match="expected KEY=VALUE"):
        parse_override("optim.lr")
    r = tmp_path / "job.yaml"
    r.write_text("# zen something --recipe job.yaml\nname: x\noptim:\n  warmup: 3\n", encoding="utf-8")
    job = load_recipe(Job, r, ["optim.lr=2e-5", "limit=7"])
    assert job.optim.lr == pytest.approx(2e-5) and job.optim.warmup == 3 and job.limit == 7
    with pytest.raises(ZenError, match="unknown key 'optim.beta'"):
        load_recipe(Job, r, ["optim.beta=1"])


def test_bad_yaml_names_file_and_line(tmp_path: Path):
    r = tmp_path / "bad.yaml"
    r.write_text("name: x\noptim: [1,\n", encoding="utf-8")
    with pytest.raises(ZenError, match=r"bad\.yaml:\d+: not valid YAML"):
        load_recipe(Job, r)


def test_unknown_recipe_name_suggests_closest():
    with pytest.raises(ZenError, match="did you mean"):
        load_job_recipe(list_recipes()[0] + "x")


def test_every_builtin_recipe_is_valid_and_starts_with_its_command():
    for name in list_recipes():
        data, path = read_recipe_data(name)
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# ") and "zen " in first and name in first, f"{path}: first line {first!r}"
        load_job_recipe(name)  # validates
