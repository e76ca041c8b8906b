"""The compute dtype setting was `precision` (a word P/R/F also uses): `--dtype`, `train.dtype` and
`train.eval_dtype` now. The old names are one-line errors naming the new ones, and a run recorded under the
old fingerprint key resumes as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import typer.main
import yaml
from typer.testing import CliRunner

from tests.test_pretrain_cli import assert_resumed_at_3_like, micro_recipe, records, zen
from zencli.cli.app import app
from zencli.config.loading import from_dict, load_recipe
from zencli.config.pretrain import PretrainConfig
from zencli.errors import ZenError
from zencli.tasks.pretraining import MARKER_NAME
from zencli.train.checkpoint import fingerprint, with_current_names
from zencli.train.run_dir import refuse_another_run
from zencli.train.settings import TrainSettings

runner = CliRunner()


def _cli_error(*args: str) -> str:
    r = runner.invoke(app, list(args))
    assert isinstance(r.exception, ZenError), r.output
    message = str(r.exception)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(("old", "new"), [("precision", "dtype"), ("eval_precision", "eval_dtype")])
def test_an_old_recipe_key_is_an_error_naming_the_new_one(tmp_path: Path, old: str, new: str) -> None:
    with pytest.raises(ZenError, match=rf"^r.yaml: recipe key train.{old} was renamed: use train.{new}$"):
        from_dict(PretrainConfig, {"train": {old: "fp32"}}, source="r.yaml")
    with pytest.raises(ZenError, match=rf"recipe key {old} was renamed: use {new}$"):
        from_dict(TrainSettings, {old: "fp32"})
    assert from_dict(TrainSettings, {new: "fp32"}).__getattribute__(new) == "fp32"
    # in a recipe file, and as --set: neither read nor ignored
    recipe = micro_recipe(tmp_path)
    assert f"train.{old} was renamed: use train.{new}" in _cli_error("pretrain", "-r", str(recipe), "--set",
                                                                     f"train.{old}=fp32")
    data = yaml.safe_load(recipe.read_text(encoding="utf-8"))
    data["train"][old] = "fp32"
    recipe.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ZenError, match=rf"recipe key train.{old} was renamed: use train.{new}$"):
        load_recipe(PretrainConfig, str(recipe))


def test_the_old_flag_is_an_error_naming_the_new_one() -> None:
    for args in (["predict", "m", "--precision", "fp32"], ["evaluate", "m", "--data", "d", "--precision", "int8"],
                 ["quickstart", "--precision", "bf16"], ["bench", "model", "--precision", "fp32"],
                 ["bench", "predict", "--precision", "fp32"], ["bench", "gpu", "--precision", "auto"]):
        assert _cli_error(*args) == "--precision was renamed: use --dtype", args
    # every command that takes --dtype refuses --precision, and its help does not show it
    commands = []
    stack = [typer.main.get_command(app)]
    while stack:
        command = stack.pop()
        stack += list(getattr(command, "commands", {}).values())
        opts = {o: p for p in command.params for o in p.opts}
        if "--dtype" in opts:
            commands.append(command.name)
            assert "--precision" in opts and opts["--precision"].hidden, command.name
    assert {"predict", "evaluate", "quickstart", "model", "gpu"} <= set(commands)
    r = runner.invoke(app, ["predict", "--help"])
    assert "--dtype" in r.output and "--precision" not in r.output


def test_an_old_fingerprint_compares_equal_after_the_rename(tmp_path: Path) -> None:
    new = {"lr": 0.001, "dtype": "fp32", "parameters": {"w": [2, 2]}}
    old = {"lr": 0.001, "precision": "fp32", "parameters": {"w": [2, 2]}}
    assert fingerprint(old) != fingerprint(new)
    assert with_current_names(fingerprint(old), old) == (fingerprint(new), new)
    assert with_current_names(fingerprint(new), new) == (fingerprint(new), new)  # recorded since: unchanged
    (tmp_path / "run.json").write_text(json.dumps({"fingerprint": fingerprint(old), "fingerprint_values": old}))
    refuse_another_run(tmp_path, fingerprint(new), new)  # the same run: not refused
    other = {**new, "dtype": "bf16"}
    with pytest.raises(ZenError, match="holds another run"):
        refuse_another_run(tmp_path, fingerprint(other), other)


def _as_before_the_rename(values: dict) -> dict:
    return {("precision" if k == "dtype" else k): v for k, v in values.items()}


def test_a_run_recorded_with_the_old_key_resumes_exactly(tmp_path: Path) -> None:
    recipe = micro_recipe(tmp_path)
    out = tmp_path / "run"
    zen("pretrain", "-r", str(recipe), "--quiet")
    first = records(out, "train")
    # As if an older zen had written the step-3 checkpoint, run.json and the run's marker, and was killed.
    ckpt = out / "checkpoints" / "step-00000003.pt"
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    state["fingerprint_values"] = _as_before_the_rename(state["fingerprint_values"])
    assert "precision" in state["fingerprint_values"]
    state["fingerprint"] = fingerprint(state["fingerprint_values"])
    torch.save(state, ckpt)
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    run["fingerprint_values"] = _as_before_the_rename(run["fingerprint_values"])
    run["fingerprint"] = fingerprint(run["fingerprint_values"])
    (out / "run.json").write_text(json.dumps(run), encoding="utf-8")
    marker = json.loads((out / MARKER_NAME).read_text(encoding="utf-8"))
    marker["plan"]["train"] = _as_before_the_rename(marker["plan"]["train"])
    (out / MARKER_NAME).write_text(json.dumps(marker), encoding="utf-8")
    (out / "checkpoints" / "step-00000006.pt").unlink()
    shutil.rmtree(out / "model")

    zen("pretrain", "-r", str(recipe), "--quiet")
    assert_resumed_at_3_like(out, first)
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["fingerprint_values"]["dtype"] == "fp32"
