"""bin/accuracy-runs: the choice of runs, and failures that must end the script instead of hanging it."""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "bin" / "accuracy-runs"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_an_unknown_run_name_is_refused_before_anything_starts(tmp_path: Path) -> None:
    p = run(str(tmp_path / "out"), "cws", "nre")
    assert p.returncode == 2
    assert "unknown run 'nre'" in p.stderr and "transformer-crf" in p.stderr
    assert not (tmp_path / "out").exists()  # nothing was started


def test_a_run_that_needs_the_pretrained_model_fails_at_once_without_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = run(str(out), "cws")  # pretraining not asked for and not there: waiting for it would hang
    assert p.returncode != 0
    assert "cws needs" in p.stderr and "add 'pretrain'" in p.stderr
    assert not (out / "cws.log").exists()
