"""ZEN_REQUIRE_DATA (tests/conftest.py): tests that read a real corpus skip without it in a fresh clone, naming the
`zen data fetch` that brings it, and fail where the flag says the corpora must be there (CI)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ONLY_E2E_SKIPS, REQUIRE_DATA, ROOT, require_data


def test_require_data_returns_skips_or_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    missing = tmp_path / "nope"
    monkeypatch.delenv(REQUIRE_DATA, raising=False)
    require_data(tmp_path)  # present: nothing happens
    with pytest.raises(pytest.skip.Exception, match="real corpus not present"):
        require_data(missing)
    monkeypatch.setenv(REQUIRE_DATA, "1")
    require_data(tmp_path)
    with pytest.raises(pytest.fail.Exception, match=f"{re.escape(str(missing))} not found, and {REQUIRE_DATA}=1"):
        require_data(missing)


def _run_module_without_data(tmp_path: Path, require: bool) -> subprocess.CompletedProcess:
    """pytest on a module whose tests read PD98, with ZEN_DATA pointing at a folder that is not there."""
    env = {k: v for k, v in os.environ.items() if k not in (REQUIRE_DATA, "PYTEST_ADDOPTS")}
    env["ZEN_DATA"] = str(tmp_path / "no-data-here")
    if require:
        env[REQUIRE_DATA] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs",
                           "tests/test_readers_e2e.py"], cwd=ROOT, env=env, capture_output=True, text=True)


def test_a_missing_corpus_skips_without_the_flag_and_fails_with_it(tmp_path: Path):
    plain = _run_module_without_data(tmp_path, require=False)
    assert plain.returncode == 0, plain.stdout[-2000:]
    skipped = re.search(r"(\d+) skipped", plain.stdout)
    assert skipped and "passed" not in plain.stdout and "error" not in plain.stdout, plain.stdout[-2000:]
    assert "run `zen data fetch pd98` or set ZEN_DATA" in plain.stdout  # the skip says how to make it run
    assert "run `zen data fetch sentiment` or set ZEN_DATA" in plain.stdout

    required = _run_module_without_data(tmp_path, require=True)
    assert required.returncode == 1, required.stdout[-2000:]
    assert re.search(rf"\b{skipped.group(1)} errors?\b", required.stdout), required.stdout[-2000:]
    assert "skipped" not in required.stdout and "passed" not in required.stdout
    assert f"no-data-here/pd98/stats.json not found, and {REQUIRE_DATA}=1" in required.stdout


def test_a_real_corpus_test_is_selected_as_e2e():
    """needs_data marks a test e2e, so `-m e2e` takes it and only it."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only",
                        "-m", "e2e", "tests/test_lexicon_cli.py"], cwd=ROOT, capture_output=True, text=True)
    collected = [line for line in r.stdout.splitlines() if "::" in line]
    assert collected == ["tests/test_lexicon_cli.py::test_pd98_train_lexicon"], r.stdout[-2000:]


def test_only_e2e_tests_may_skip_where_the_flag_says_so(tmp_path: Path):
    """The fresh-clone run of .ci/run: a skip outside e2e (a missing optional dependency, a fixture outside the
    repository) fails it; an e2e test's skip stays a skip."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"),
                                                     encoding="utf-8")
    (tmp_path / "tests" / "test_skips.py").write_text(
        "import pytest\n"
        "from tests.conftest import DATA, needs_data\n\n"
        "def test_plain():\n    pytest.skip('an optional dependency is missing')\n\n"
        "@needs_data(DATA / 'no-such-corpus')\ndef test_corpus():\n    pass\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in (REQUIRE_DATA, "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])

    def run(flag: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "tests"],
                              cwd=tmp_path, env={**env, ONLY_E2E_SKIPS: flag}, capture_output=True, text=True)

    plain = run("0")
    assert plain.returncode == 0 and "2 skipped" in plain.stdout, plain.stdout[-2000:]
    strict = run("1")
    assert strict.returncode == 1 and "1 failed, 1 skipped" in strict.stdout, strict.stdout[-2000:]
    assert "only e2e tests (real corpora) may skip" in strict.stdout
