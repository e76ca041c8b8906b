"""The CLI as users run it: help, version, recipes, and one-line errors instead of tracebacks."""

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from zencli.cli.app import app

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _zen(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zencli", *args], cwd=cwd, capture_output=True, text=True)


def test_help_lists_commands_and_version():
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    for cmd in ("lexicon", "vocab", "recipe", "bench", "quickstart"):
        assert cmd in r.output
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.startswith("zen ")


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
