"""bin/accuracy-runs: the choice of runs, and failures that must end the script instead of hanging it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "bin" / "accuracy-runs"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_an_unknown_run_name_is_refused_before_anything_starts(tmp_path: Path) -> None:
    p = run(str(tmp_path / "out"), "cws", "nre")
    assert p.returncode == 2
    assert "unknown run 'nre'" in p.stderr and "transformer-crf" in p.stderr
    assert not (tmp_path / "out").exists()  # nothing was started


@pytest.mark.parametrize(("name", "pretraining"), [("cws", "pretrain"), ("ner", "pretrain"), ("sa", "pretrain-sa")])
def test_a_run_that_needs_the_pretrained_model_fails_at_once_without_it(
        tmp_path: Path, name: str, pretraining: str) -> None:
    out = tmp_path / "out"
    p = run(str(out), name)  # its pretraining not asked for and not there: waiting for it would hang
    assert p.returncode != 0
    assert f"{name} needs {out}/{pretraining}/model" in p.stderr and f"add '{pretraining}'" in p.stderr
    assert not (out / f"{name}.log").exists()


def test_a_pretraining_that_cannot_start_stops_the_run_that_waits_for_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {"PATH": "/usr/bin:/bin", "ZEN_DATA": str(tmp_path / "missing")}
    p = subprocess.run(["bash", str(SCRIPT), str(out), "pretrain-sa", "sa"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert p.returncode != 0
    assert not (out / "pretrain-sa" / "model").exists() and not (out / "sa.log").exists()
