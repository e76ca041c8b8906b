"""zen as an installed package: built-in recipes are package data, `${data}` names the data root wherever zen
is installed, and the version comes from the package metadata. (bin/wheel-smoke runs a built wheel itself.)"""

from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import ROOT, write
from zencli import datasets
from zencli.cli.app import app
from zencli.config import list_recipes, load_job_recipe
from zencli.config import loading as recipe_loading
from zencli.errors import ZenError
from zencli.jobs.finetune import build_config
from zencli.jobs.lexicon import build_config as lexicon_config

runner = CliRunner()


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """ZEN_DATA and the cache as two made-up folders (both empty). Nothing outside them is looked at, e.g. a
    data folder beside the clone."""
    paths = {"zen_data": tmp_path / "zen-data", "cache": tmp_path / "cache"}
    monkeypatch.setenv("ZEN_DATA", str(paths["zen_data"]))
    monkeypatch.setenv("ZEN_CACHE_DIR", str(paths["cache"]))
    return paths


def test_recipes_are_package_data_and_the_repository_folder_is_the_same_one():
    assert recipe_loading.RECIPES_DIR == ROOT / "zencli" / "recipes"
    assert (ROOT / "recipes").resolve() == recipe_loading.RECIPES_DIR.resolve()  # one source of truth
    assert list_recipes() == sorted(p.stem for p in (ROOT / "recipes").glob("*.yaml"))
    assert 'zencli = ["recipes/*.yaml"]' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_no_recipe_found_is_an_error_not_an_empty_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(recipe_loading, "RECIPES_DIR", tmp_path / "recipes")
    r = runner.invoke(app, ["recipe", "list"])
    assert r.exit_code != 0 and isinstance(r.exception, ZenError)
    assert str(r.exception).startswith(f"{tmp_path / 'recipes'}: no built-in recipe (*.yaml) found")


def test_version_comes_from_the_package_metadata():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output == f"zen {version('zencli')}\n"


def test_data_resolves_to_the_first_root_holding_the_dataset(roots: dict[str, Path]):
    assert [what for what, _ in datasets.data_roots()] == ["$ZEN_DATA", "the cache"]
    write(roots["cache"] / "data" / "pd98" / "ner" / "train.tsv", ["甲\tO"])
    cfg = load_job_recipe("finetune-pd98-ner")
    assert cfg.data.train == roots["cache"] / "data" / "pd98" / "ner" / "train.tsv"  # only the cache has it
    (roots["zen_data"] / "pd98").mkdir(parents=True)
    assert load_job_recipe("finetune-pd98-ner").data.test == roots["zen_data"] / "pd98" / "ner" / "test.tsv"
    # each path on its own: sentiment only in the cache, pd98 in ZEN_DATA
    write(roots["cache"] / "data" / "sentiment" / "train.tsv", ["1\t好"])
    assert load_job_recipe("finetune-sentiment-sa").data.train == roots["cache"] / "data" / "sentiment" / "train.tsv"


def test_recipe_show_prints_resolved_paths(roots: dict[str, Path]):
    (roots["zen_data"] / "pd98").mkdir(parents=True)
    r = runner.invoke(app, ["recipe", "show", "lexicon-zh-pd98-entropy"])
    assert r.exit_code == 0, r.output
    assert f"- {roots['zen_data'] / 'pd98' / 'raw' / 'train.txt'}\n" in r.output and "${data}" not in r.output


def test_a_job_on_missing_data_says_which_fetch_to_run(roots: dict[str, Path]):
    # `zen recipe show` still shows the recipe (under ZEN_DATA, the first root) ...
    assert load_job_recipe("finetune-pd98-ner").data.train == roots["zen_data"] / "pd98" / "ner" / "train.tsv"
    # ... a job stops before it starts, naming the key, the path, where it looked and the command
    with pytest.raises(ZenError) as e:
        build_config("finetune-pd98-ner", [], {})
    msg = str(e.value)
    assert "\n" not in msg and "finetune-pd98-ner.yaml: data.train: " in msg
    assert "dataset `pd98/` not found in $ZEN_DATA" in msg and "run `zen data fetch pd98`" in msg
    with pytest.raises(ZenError, match=r"lexicon-ar-quran.yaml: corpus\[0\]: .*run `zen data fetch ar`"):
        lexicon_config("lexicon-ar-quran", [])
    with pytest.raises(ZenError, match=r"finetune-xnli-nli.yaml: data.train: .*`xnli/` is not a dataset zen "
                                       r"fetches: set ZEN_DATA"):
        build_config("finetune-xnli-nli", [], {})


def test_user_recipes_use_data_too_and_an_unknown_variable_names_its_key(roots: dict[str, Path], tmp_path: Path):
    write(roots["zen_data"] / "mine" / "train.tsv", ["甲\tO"])
    recipe = write(tmp_path / "mine.yaml", ["job: finetune", "task: {name: ner}",
                                            "data:", "  train: ${data}/mine/train.tsv"])
    assert load_job_recipe(recipe).data.train == roots["zen_data"] / "mine" / "train.tsv"
    on_command_line = load_job_recipe(recipe, ["data.dev=${data}/mine/train.tsv"])
    assert on_command_line.data.dev == roots["zen_data"] / "mine" / "train.tsv"
    write(recipe, ["job: finetune", "data:", "  train: ${dta}/mine/train.tsv"])
    with pytest.raises(ZenError) as e:
        load_job_recipe(recipe)
    assert str(e.value).startswith(f"{recipe}: data.train: unknown variable '${{dta}}'") and "\n" not in str(e.value)
    write(recipe, ["job: finetune", "data:", "  train: runs/${data}/x.tsv"])
    with pytest.raises(ZenError, match=r"data.train: 'runs/\$\{data\}/x.tsv': \$\{data\} goes at the start"):
        load_job_recipe(recipe)
