"""What the test modules share: where the repository and ../shared are, the skip-or-fail rule for tests that
read ../shared, the `slow` marker, a UTF-8 file writer and a one-thread fixture.

A test marked `@pytest.mark.slow` (an end-to-end run of minutes) runs only where ZEN_SLOW=1.

../shared holds the released reference checkpoints (fixtures/) and the PD98 and sentiment corpora (data/). A
test that reads them is marked `@needs_shared(path)` (or `pytestmark = needs_shared(path)` for a module). In a
checkout without ../shared such tests are skipped; with ZEN_REQUIRE_SHARED=1 — set by .ci/run, where ../shared
always sits beside the checkout — they fail instead, so a broken data path cannot pass as a row of skips.
ZEN_SHARED points the tests at a copy of ../shared elsewhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("ZEN_SHARED") or ROOT.parent / "shared")
FIXTURES = SHARED / "fixtures"
REF = FIXTURES / "zen2_ref"  # tiny released ZEN 2.0: 200 tokens, 99 n-grams
SHARED_DATA = SHARED / "data"
PD98 = SHARED_DATA / "pd98"

REQUIRE_SHARED = "ZEN_REQUIRE_SHARED"
SLOW = "ZEN_SLOW"


def needs_shared(path: Path) -> pytest.MarkDecorator:
    """Mark a test (or a module, through `pytestmark`) that reads `path` under ../shared."""
    return pytest.mark.needs_shared(path)


def require_shared(path: Path) -> None:
    """Return if `path` exists; otherwise skip the calling test, or fail it where ZEN_REQUIRE_SHARED=1."""
    if path.exists():
        return
    if os.environ.get(REQUIRE_SHARED) == "1":
        pytest.fail(f"{path} not found, and {REQUIRE_SHARED}=1 says ../shared must be there", pytrace=False)
    pytest.skip(f"shared data not present: {path}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_shared(path): the test reads `path` under ../shared "
                                       "(skipped without it; failed where ZEN_REQUIRE_SHARED=1)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(SLOW) == "1":
        return
    skip = pytest.mark.skip(reason=f"slow end-to-end run; set {SLOW}=1")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Runs after the skip marks (tryfirst in pytest's skipping plugin), so a slow test skipped without ZEN_SLOW
    # stays skipped; and before fixtures are set up, so none of them trips over the missing path first.
    for mark in item.iter_markers("needs_shared"):
        require_shared(Path(mark.args[0]))


def write(path: Path, content: str | list[str]) -> Path:
    """Write `content` to `path` as UTF-8 (a list as lines, each ending in a newline), making its folder;
    return `path`."""
    text = content if isinstance(content, str) else "".join(line + "\n" for line in content)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture
def one_thread():
    """Tiny tensors: a second thread only adds synchronisation, and the CPU is shared with other jobs."""
    import torch  # here, not at the top: loading this conftest (every pytest run) stays cheap

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


class Clock:
    """A stand-in for time.perf_counter that moves only when a test sets `now`."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The clock the training time budget reads (zencli.train.budget), under the test's control."""
    from zencli.train import budget

    c = Clock()
    monkeypatch.setattr(budget.time, "perf_counter", c)
    return c
