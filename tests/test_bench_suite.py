"""`zen bench suite` at tiny size: the released-format tiny ZEN 2.0 fine-tuned on two made-up sets in their
fetched layout, with and without the scratch row; the report, the published numbers, resuming, the errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import REF, write
from zencli.bench import suite
from zencli.cli.app import app
from zencli.errors import ZenError

runner = CliRunner()
CHARS = "北京上海天津我们喜欢学生在大学工作很好不"


@pytest.fixture
def data_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Made-up weibo (NER) and chnsenticorp-htl (SA) sets in the files `zen data fetch` writes."""
    root = tmp_path / "data"
    block = "北\tB-GPE.NAM\n京\tE-GPE.NAM\n很\tO\n好\tO\n\n我\tO\n们\tO\n在\tO\n上\tB-GPE.NAM\n海\tE-GPE.NAM\n\n"
    for split in ("train", "dev", "test"):
        write(root / "weibo" / f"{split}.tsv", block * 4)
        write(root / "chnsenticorp-htl" / f"{split}.tsv",
              [f"{i % 2}\t{CHARS[i % 7:i % 7 + 6]}" for i in range(12)])
    monkeypatch.setenv("ZEN_DATA", str(root))
    monkeypatch.setenv("ZEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    return root


def test_the_suite_trains_scores_and_reports_each_fetched_set(data_root: Path, tmp_path: Path):
    out = tmp_path / "suite"
    r = runner.invoke(app, ["bench", "suite", str(REF), "--minutes", "0.2", "--scratch", "--out", str(out),
                            "--quiet", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["settings"]["sets"] == ["weibo", "chnsenticorp-htl"]  # the fetched ones, in the suite's order
    assert any(line.startswith("msra: not fetched") for line in report["settings"]["skipped"])
    rows = {(row["set"], row["row"]): row for row in report["rows"]}
    assert set(rows) == {("weibo", "pretrained"), ("weibo", "scratch"), ("chnsenticorp-htl", "pretrained"),
                         ("chnsenticorp-htl", "scratch")}
    for row in rows.values():
        assert 0.0 <= row["test_mean"] <= 100.0 and row["seeds"] == 1
        assert row["minutes"] == pytest.approx(0.1)  # the set's 0.2 minutes shared by its two rows
    assert rows[("weibo", "pretrained")]["metric"] == "f1" and rows[("chnsenticorp-htl", "scratch")]["metric"]
    assert rows[("weibo", "pretrained")]["published"]["Lattice LSTM"] == 58.79
    md = (out / suite.REPORT_MD).read_text(encoding="utf-8")
    assert "| weibo | ner | f1 | pretrained |" in md and "Lattice LSTM 58.79" in md
    runs = {(x["set"], x["row"]): x for x in report["runs"]}
    assert runs[("weibo", "scratch")]["encoder"] == runs[("weibo", "pretrained")]["encoder"] == "zen2"
    assert runs[("weibo", "scratch")]["model"].startswith("new zen2")  # the task's small model, not MODEL

    # a second run finds every result and trains nothing
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob(suite.RESULT)}
    again = runner.invoke(app, ["bench", "suite", str(REF), "--minutes", "0.2", "--scratch", "--out", str(out),
                                "--quiet", "--json"], catch_exceptions=False)
    assert again.exit_code == 0 and json.loads(again.stdout)["rows"] == report["rows"]
    assert {p: p.stat().st_mtime_ns for p in out.rglob(suite.RESULT)} == stamps


def test_sets_by_name_and_the_errors(data_root: Path, tmp_path: Path):
    chosen, skipped = suite.fetched_sets(["chnsenticorp-htl"])
    assert [s.name for s in chosen] == ["chnsenticorp-htl"] and skipped == []
    with pytest.raises(ZenError, match=r"--sets: msra is not fetched; run `zen data fetch msra`"):
        suite.fetched_sets(["msra"])
    with pytest.raises(ZenError, match=r"--sets: unknown set nope; known: weibo, resume"):
        suite.fetched_sets(["nope"])
    with pytest.raises(ZenError, match="not a model directory"):
        suite.run_suite(tmp_path / "missing", out=tmp_path / "o")
    with pytest.raises(ZenError, match="--minutes/--seeds"):
        suite.plan(REF, chosen, minutes=1, seeds=0, scratch=False, out=tmp_path / "o")


def test_the_adapted_row_is_the_same_run_with_adaptation_inside_its_budget(data_root: Path, tmp_path: Path):
    chosen, _ = suite.fetched_sets(["chnsenticorp-htl"])
    runs = suite.plan(REF, chosen, minutes=1.2, seeds=2, scratch=True, out=tmp_path / "o", adapt_minutes=0.05)
    assert [(r.row, r.seed) for r in runs] == [("pretrained", 1), ("adapted", 1), ("scratch", 1),
                                               ("pretrained", 2), ("adapted", 2), ("scratch", 2)]
    pre, adapted = runs[0].cfg, runs[1].cfg
    assert pre.adapt.minutes is None and adapted.adapt.minutes == 0.05
    assert adapted.train.max_minutes == pre.train.max_minutes == pytest.approx(0.2)  # adaptation inside it
    assert adapted.data == pre.data and adapted.train.seed == pre.train.seed
    with pytest.raises(ZenError, match=r"--adapt-minutes: each run has 0.2 minutes"):
        suite.plan(REF, chosen, minutes=1.2, seeds=2, scratch=True, out=tmp_path / "o", adapt_minutes=0.2)


def test_no_fetched_set_says_how_to_get_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ZEN_DATA", str(tmp_path / "nothing"))
    monkeypatch.setenv("ZEN_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ZenError, match="no benchmark set is fetched; run `zen data fetch NAME`"):
        suite.fetched_sets()


def test_every_suite_set_is_a_dataset_that_zen_data_fetch_knows_with_the_same_task():
    from zencli.datasets.catalog import datasets

    known = datasets()
    for s in suite.SETS:
        assert s.name in known, s.name
        assert known[s.name].task == s.task, s.name
