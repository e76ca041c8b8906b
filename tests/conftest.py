"""What the test modules share: where the repository, its test fixtures and the real corpora are, the
skip-or-fail rule for tests that read a real corpus, the `slow` marker, a UTF-8 file writer and a one-thread
fixture.

A test marked `@pytest.mark.slow` (an end-to-end run of minutes) runs only where ZEN_SLOW=1.

tests/fixtures/ holds the released-format reference checkpoints (zen1_ref/, zen2_ref/; see its README.md), so
every test that needs them runs in a fresh clone. The real corpora (PD98, the review sentiment set) are not in
the repository: they are found where zen finds them, $ZEN_DATA or the `zen data fetch` cache. A test that reads
one is marked `@needs_data(path)` (or `pytestmark = needs_data(path)` for a module), which also marks it `e2e`.
Without the corpus such a test is skipped with the `zen data fetch` that brings it; with ZEN_REQUIRE_DATA=1 —
set by .ci/run, where the corpora are present — it fails instead, so a broken data path cannot pass as a row of
skips. With ZEN_ONLY_E2E_SKIPS=1 — set by .ci/run for its fresh-clone run — a skip of any test not marked e2e
is a failure: on a machine with nothing but the clone, only the real-corpus tests may skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zencli.datasets.cache import data_root

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
REF = FIXTURES / "zen2_ref"  # tiny released ZEN 2.0: 200 tokens, 99 n-grams


def _data_dir() -> Path:
    """Where zen reads its corpora from: $ZEN_DATA when set, else the cache `zen data fetch` fills."""
    env = os.environ.get("ZEN_DATA")
    return Path(env).expanduser() if env else data_root()


DATA = _data_dir()
PD98 = DATA / "pd98"
SENTIMENT = DATA / "sentiment"

REQUIRE_DATA = "ZEN_REQUIRE_DATA"
ONLY_E2E_SKIPS = "ZEN_ONLY_E2E_SKIPS"
SLOW = "ZEN_SLOW"


def needs_data(path: Path) -> pytest.MarkDecorator:
    """Mark a test (or a module, through `pytestmark`) that reads `path` under a real corpus (DATA/NAME/...)."""
    return pytest.mark.needs_data(path)


def _fetch_hint(path: Path) -> str:
    try:
        name = path.relative_to(DATA).parts[0]
    except (ValueError, IndexError):
        return "set ZEN_DATA to the folder holding it"
    return f"run `zen data fetch {name}` or set ZEN_DATA to a folder holding {name}/"


def require_data(path: Path) -> None:
    """Return if `path` exists; otherwise skip the calling test, or fail it where ZEN_REQUIRE_DATA=1."""
    if path.exists():
        return
    if os.environ.get(REQUIRE_DATA) == "1":
        pytest.fail(f"{path} not found, and {REQUIRE_DATA}=1 says the corpora must be there", pytrace=False)
    pytest.skip(f"real corpus not present: {path}; {_fetch_hint(path)}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_data(path): the test reads `path` of a real corpus (marks it e2e; "
                                       "skipped without it; failed where ZEN_REQUIRE_DATA=1)")


@pytest.hookimpl(tryfirst=True)  # before `-m` selects: a needs_data test is selected by `-m e2e`
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("needs_data") and not item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.e2e)
    if os.environ.get(SLOW) == "1":
        return
    skip = pytest.mark.skip(reason=f"slow end-to-end run; set {SLOW}=1")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Runs after the skip marks (tryfirst in pytest's skipping plugin), so a slow test skipped without ZEN_SLOW
    # stays skipped; and before fixtures are set up, so none of them trips over the missing path first.
    for mark in item.iter_markers("needs_data"):
        require_data(Path(mark.args[0]))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get(ONLY_E2E_SKIPS) == "1" and not item.get_closest_marker("e2e"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped ({reason}), but {ONLY_E2E_SKIPS}=1: only e2e tests (real corpora) may skip"


def write(path: Path, content: str | list[str]) -> Path:
    """Write `content` to `path` as UTF-8 (a list as lines, each ending in a newline), making its folder;
    return `path`."""
    text = content if isinstance(content, str) else "".join(line + "\n" for line in content)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture
def dataset_folders(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ZEN_DATA → a root holding made-up pd98/ and sentiment/ files in their layout (docs/data.md), so a built-in
    recipe's `${data}` paths resolve and read, as after `zen data fetch`, for tests that run its defaults."""
    root = tmp_path_factory.mktemp("data-root")
    cws = ["我们 喜欢 北京", "北京 是 首都", "学生 在 学习"]
    blocks = {"ner": "北\tB-LOC\n京\tE-LOC\n好\tO\n\n", "ner-bio": "北\tB-LOC\n京\tI-LOC\n好\tO\n\n",
              "pos": "北\tB-ns\n京\tE-ns\n好\tS-a\n\n"}
    for split in ("train", "dev", "test"):
        write(root / "pd98" / "raw" / f"{split}.txt", [line.replace(" ", "") for line in cws])
        write(root / "pd98" / "cws" / f"{split}.txt", cws)
        for folder, block in blocks.items():
            write(root / "pd98" / folder / f"{split}.tsv", block * 3)
        write(root / "sentiment" / f"{split}.tsv", ["1\t很好", "0\t不好", "1\t喜欢"])
    monkeypatch.setenv("ZEN_DATA", str(root))
    return root


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
