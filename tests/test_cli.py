"""The CLI as users run it: help, version, recipes, and one-line errors instead of tracebacks."""

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zencli.cli.app import app

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _zen(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zencli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env)


def test_help_lists_commands_and_version():
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    for cmd in ("lexicon", "vocab", "recipe", "bench", "quickstart"):
        assert cmd in r.output
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.startswith("zen ")


def test_help_says_zen_keeps_paragraphs_whole_and_shows_no_value_after_flags():
    from zencli.cli.finetune import finetune

    wide = {**os.environ, "COLUMNS": "1000"}  # wide enough for any paragraph on one line
    r = _zen("finetune", "--help", env=wide)  # as bin/zen runs it
    assert r.returncode == 0, r.stderr
    assert "Usage: zen finetune [OPTIONS]" in r.stdout and "python -m" not in r.stdout
    lines = [line.strip() for line in r.stdout.splitlines()]
    for paragraph in inspect.getdoc(finetune).split("\n\n"):  # one line each, however the source wraps it
        assert paragraph.replace("\n", " ") in lines
    assert re.search(r"│ --quiet +-q +No progress display\.", r.stdout)  # a flag: no <bool> between
    assert "<bool>" not in r.stdout and "<int>" in r.stdout  # options that take a value still show its type
    r = _zen("bench", "model", "--help", env=wide)
    assert re.search(r"│ --dense-adamw +--no-dense-adamw +Also time", r.stdout) and "<bool>" not in r.stdout


def test_recipe_show_resolves_overrides():
    r = runner.invoke(app, ["recipe", "show", "lexicon-zh-pd98", "--set", "min_freq=20"])
    assert r.exit_code == 0, r.output
    assert "min_freq: 20" in r.output and "job: lexicon" in r.output


def test_user_errors_are_one_line_with_exit_code_2(tmp_path: Path):
    r = _zen("recipe", "show", "lexicon-zh-pd98", "--set", "min_frq=20")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "min_frq" in lines[0] and "did you mean 'min_freq'" in lines[0]
    assert "Traceback" not in r.stderr
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\xfe\n")
    r = _zen("lexicon", "build", str(bad), "-o", str(tmp_path / "out" / "ngram.txt"), "--workers", "1")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{bad}:2" in r.stderr and "invalid UTF-8" in r.stderr


def test_each_shortcut_flag_declares_its_recipe_key_once_and_says_it(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    """`keyed` flags: `keyed_options` maps every given flag to the key it declares, the key exists in the
    command's typed config, and --help names it. (A data root with an empty pd98/ lets the PD98 recipe build,
    as on a machine where `zen data fetch pd98` has run.)"""
    (tmp_path / "pd98").mkdir()
    monkeypatch.setenv("ZEN_DATA", str(tmp_path))
    from zencli.cli import finetune, pretrain
    from zencli.cli.common import keyed_options
    from zencli.jobs.finetune import build_config as finetune_config
    from zencli.jobs.pretrain import build_config as pretrain_config

    for command, cfg, name in ((finetune.finetune, finetune_config("finetune-pd98-ner", [], {}), "finetune"),
                               (pretrain.pretrain, pretrain_config("pretrain-zh-tiny", [], {}), "pretrain")):
        params = inspect.signature(command).parameters
        options = keyed_options(command, {p: f"<{p}>" for p in params})
        flags = [p for p in params.values() if hasattr(p.default, "recipe_key")]
        assert len(options) == len(flags) >= 4  # no two flags set the same key
        for key, value in options.items():
            node = cfg
            for part in key.split("."):
                assert hasattr(node, part), f"{name}: {value} sets {key}, which {type(node).__name__} lacks"
                node = getattr(node, part)
        text = re.sub(r"[\s│]+", " ", runner.invoke(app, [name, "--help"], terminal_width=200).output)
        for key in options:
            assert f"(recipe key {key})" in text, (name, key)
    ft = keyed_options(finetune.finetune, {p: None for p in inspect.signature(finetune.finetune).parameters}
                       | {"max_steps": 7, "train": Path("t.tsv")})
    assert ft["train.max_steps"] == 7 and ft["data.train"] == Path("t.tsv") and ft["train.lr"] is None
