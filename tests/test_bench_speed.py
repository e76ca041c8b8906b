"""`zen bench speed` on a made-up corpus with a micro model size and --quick: every section in one run, the
ratios in the JSON agree with the sections they come from, and one-line errors."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zencli.bench.speed import MATCHER_ROW, ratio_lines, settings
from zencli.cli.app import app
from zencli.errors import ZenError

runner = CliRunner()


def make_corpus(root: Path) -> Path:
    """raw/train.txt, raw/dev.txt and cws/train.txt of invented text: a word-level Markov chain over 40
    made-up words, so the matcher finds frequent n-grams."""
    rng = random.Random(5)
    chars = [chr(c) for c in range(0x4E00 + 700, 0x4E00 + 760)]
    words = ["".join(rng.choice(chars) for _ in range(rng.choice([1, 2, 2, 3]))) for _ in range(40)]

    def lines(n: int) -> list[list[str]]:
        out = []
        for _ in range(n):
            i, sent = rng.randrange(40), []
            for _ in range(rng.randint(6, 14)):
                i = (i * 3 + rng.choice([1, 2])) % 40
                sent.append(words[i])
            out.append(sent)
        return out

    train, dev = lines(400), lines(80)
    for rel, text in (("raw/train.txt", ["".join(s) for s in train]), ("raw/dev.txt", ["".join(s) for s in dev]),
                      ("cws/train.txt", [" ".join(s) for s in train])):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("".join(x + "\n" for x in text), encoding="utf-8")
    return root


def test_quick_settings_shorten_every_section_and_explicit_sizes_win():
    q = settings(quick=True, sizes=None, lexicon_sizes=None)
    full = settings(quick=False, sizes=None, lexicon_sizes=None)
    assert q["sizes"] == ["tiny"] and full["sizes"] == ["tiny", "small", "base"]
    assert q["model"]["steps"] == 2 and q["model"]["curve_steps"] == 0 and full["model"]["dense_opt"]
    assert q["matcher"]["repeats"] == 1 and full["matcher"]["repeats"] == 3
    assert q["lexicon_sizes"] == [] and full["lexicon_sizes"] == [12_500_000]
    assert settings(quick=True, sizes=["small"], lexicon_sizes=[5000])["sizes"] == ["small"]


def test_quick_speed_run_has_every_section_and_the_ratios(tmp_path):
    data = make_corpus(tmp_path / "data")
    out = tmp_path / "speed.json"
    r = runner.invoke(app, ["bench", "speed", "--quick", "--sizes", "1x32x1", "--data", str(data), "--threads", "1",
                            "--json", str(out)])
    assert r.exit_code == 0, r.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert {"settings", "machine", "model", "matcher", "lexicon", "summary"} <= set(report)
    assert report["settings"]["quick"] and report["machine"]["cpu_count"] >= 1
    sm = report["summary"]
    assert sm["clock"] == "cpu"  # one thread: judged by process CPU time
    # models: the three encoders side by side; the ratios are the model benchmark's own
    res = report["model"]["results"][0]
    assert res["size"] == "1x32x1" and {row["encoder"] for row in res["rows"]} == {"zen2", "zen1", "bert"}
    per = sm["models"]["1x32x1"]
    for prec, p in per.items():
        rows = {row["encoder"]: row for row in res["rows"] if row["dtype"] == prec}
        for enc in ("zen2", "zen1"):
            assert p[f"{enc}_train_ratio_vs_bert"] == rows[enc]["cpu_train_ratio_vs_bert"] > 0
            assert p[f"{enc}_infer_ratio_vs_bert"] == rows[enc]["cpu_infer_ratio_vs_bert"] > 0
        assert set(p["train_tokens_per_s"]) == {"zen2", "zen1", "bert"}
        assert all(0 < v for v in p["train_pct_of_gemm_peak"].values())
    # GEMM peak: the larger of start and end
    for prec, peak in sm["gemm_peak_gflops"].items():
        g = report["model"]["gemm_peak_gflops"][prec]
        assert peak == max(g["start"], g["end"]) > 0
    # matcher: checked against the naive loop, speed-up of the batched padded call
    assert report["matcher"]["identical_to_naive"] and report["matcher"]["lexicon"]["ngrams"] > 0
    row = next(x for x in report["matcher"]["rows"] if x["method"] == MATCHER_ROW)
    assert sm["matcher"]["speedup_vs_naive"] == row["speedup"] > 0
    # lexicon: the raw train text only in quick mode
    assert [x["corpus"] for x in report["lexicon"]["rows"]] == ["train.txt"]
    assert sm["lexicon_chars_per_s"]["train.txt"] > 0 and report["lexicon"]["rows"][0]["ngrams"] > 0
    # the printed sections and ratios
    for title in ("models: tokens/s", "GEMM peak", "n-gram matcher", "lexicon extraction", "ratios",
                  "ZEN 2 / BERT training step time", "ZEN 1 / BERT inference time", "n-gram matcher (match_batch"):
        assert title in r.output, title
    assert len(ratio_lines(sm)) == len(per) * (4 + 3) + len(sm["gemm_peak_gflops"]) + 2


def test_missing_dataset_files_are_one_line_errors(tmp_path):
    data = make_corpus(tmp_path / "data")
    (data / "raw" / "dev.txt").unlink()
    r = runner.invoke(app, ["bench", "speed", "--quick", "--data", str(data)])
    assert isinstance(r.exception, ZenError) and "raw/dev.txt: no such file" in str(r.exception)
    r = runner.invoke(app, ["bench", "speed", "--quick", "--data", str(tmp_path / "nowhere")])
    assert isinstance(r.exception, ZenError) and "is not a directory" in str(r.exception)
    d2 = make_corpus(tmp_path / "d2")
    r = runner.invoke(app, ["bench", "speed", "--quick", "--data", str(d2), "--sizes", "huge"])
    assert isinstance(r.exception, ZenError) and "--sizes" in str(r.exception)
    (tmp_path / "d2" / "cws" / "train.txt").unlink()
    r = runner.invoke(app, ["bench", "speed", "--quick", "--data", str(tmp_path / "d2"), "--lexicon-sizes", "5K"])
    assert isinstance(r.exception, ZenError) and "cws/train.txt: no such file" in str(r.exception)


@pytest.mark.parametrize("bad", ["x", "10"])
def test_bad_lexicon_sizes_are_one_line_errors(tmp_path, bad):
    r = runner.invoke(app, ["bench", "speed", "--quick", "--data", str(make_corpus(tmp_path)), "--lexicon-sizes", bad])
    assert isinstance(r.exception, ZenError) and str(r.exception).startswith("--lexicon-sizes: expected")


def test_machine_facts_name_the_checkout_commit():
    import subprocess
    from pathlib import Path

    from zencli.bench.common import machine_facts

    root = Path(__file__).resolve().parents[1]
    facts = machine_facts()
    if not (root / ".git").exists():
        assert facts["commit"] is None
        return
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert facts["commit"] == head and isinstance(facts["dirty"], bool) and facts["zen"]
