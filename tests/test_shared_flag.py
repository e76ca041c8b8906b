"""ZEN_REQUIRE_SHARED (tests/conftest.py): tests that read ../shared skip without it in a plain checkout, and fail
where the flag says it must be there (CI)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REQUIRE_SHARED, ROOT, require_shared


def test_require_shared_returns_skips_or_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    missing = tmp_path / "missing"
    monkeypatch.delenv(REQUIRE_SHARED, raising=False)
    require_shared(tmp_path)  # present: nothing happens
    with pytest.raises(pytest.skip.Exception, match="shared data not present"):
        require_shared(missing)
    monkeypatch.setenv(REQUIRE_SHARED, "1")
    require_shared(tmp_path)
    with pytest.raises(pytest.fail.Exception, match=f"{re.escape(str(missing))} not found, and {REQUIRE_SHARED}=1"):
        require_shared(missing)


def _run_module_without_shared(tmp_path: Path, require: bool) -> subprocess.CompletedProcess:
    """pytest on a module whose tests read ../shared data, with ZEN_SHARED pointing at a folder that is not there."""
    env = {k: v for k, v in os.environ.items() if k not in (REQUIRE_SHARED, "PYTEST_ADDOPTS")}
    env["ZEN_SHARED"] = str(tmp_path / "no-shared-here")
    if require:
        env[REQUIRE_SHARED] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_readers_e2e.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True)


def test_a_missing_shared_folder_skips_without_the_flag_and_fails_with_it(tmp_path: Path):
    plain = _run_module_without_shared(tmp_path, require=False)
    assert plain.returncode == 0, plain.stdout[-2000:]
    skipped = re.search(r"(\d+) skipped", plain.stdout)
    assert skipped and "passed" not in plain.stdout and "error" not in plain.stdout, plain.stdout[-2000:]

    required = _run_module_without_shared(tmp_path, require=True)
    assert required.returncode == 1, required.stdout[-2000:]
    assert re.search(rf"\b{skipped.group(1)} errors?\b", required.stdout), required.stdout[-2000:]
    assert "skipped" not in required.stdout and "passed" not in required.stdout
    assert f"no-shared-here/data/pd98/stats.json not found, and {REQUIRE_SHARED}=1" in required.stdout
