"""`zen lexicon build|count|merge|show` through Typer, recipes, and the benchmark's corpus generator."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import PD98, needs_data
from zencli.cli.lexicon import app
from zencli.config import load_job_recipe, read_recipe_data
from zencli.errors import ZenError

runner = CliRunner()

LINES = ["北京欢迎你", "北京大学很好", "欢迎来北京", "大学生活很好"] * 5


def _corpus(path: Path, lines=LINES) -> Path:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


def _ok(args: list[str]):
    result = runner.invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_build_with_arguments_and_show(tmp_path: Path):
    corpus = _corpus(tmp_path / "c.txt")
    out = tmp_path / "lex" / "ngram.txt"
    res = _ok(["build", str(corpus), "-o", str(out), "--min-freq", "5", "--min-pmi", "0", "--workers", "1"])
    assert "top" in res.output and "peak RSS" in res.output and "北 京" in res.output
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "北 京,15"
    side = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert side["settings"]["min_freq"] == 5 and side["settings"]["min_pmi"] == 0.0
    assert side["ngrams"] == len(lines)
    shown = _ok(["show", str(out), "--top", "3"])
    assert "北 京" in shown.output and f"{len(lines):,} n-grams" in shown.output


def test_recipe_set_and_plain_options_in_order(tmp_path: Path):
    corpus = _corpus(tmp_path / "c.txt")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"# bin/zen lexicon build --recipe {recipe}\njob: lexicon\ncorpus: [{corpus}]\n"
        f"output: {tmp_path / 'from-recipe.txt'}\nmin_freq: 100\nmin_pmi: 0\nworkers: 1\nstyle: raw\n",
        encoding="utf-8",
    )
    out = tmp_path / "plain.txt"
    # --set beats the recipe (min_freq 100 → 10); the plain option beats both (output).
    _ok(["build", "-r", str(recipe), "--set", "min_freq=10", "--set", f"output={tmp_path / 'set.txt'}", "-o", str(out)])
    assert out.read_text(encoding="utf-8").splitlines()[0] == "北京,15"  # raw style from the recipe
    assert not (tmp_path / "set.txt").exists() and not (tmp_path / "from-recipe.txt").exists()
    assert json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))["settings"]["min_freq"] == 10


@pytest.mark.parametrize("entropy", [False, True])
def test_count_then_merge_equals_build(tmp_path: Path, entropy: bool):
    """Counting shards apart (as on different machines) and merging the counts gives the lexicon one run over
    the whole corpus gives, also with the branching-entropy filter (its neighbour counts add up too)."""
    a = _corpus(tmp_path / "a.txt", LINES[:7])
    b = _corpus(tmp_path / "b.txt", LINES[7:])
    full = _corpus(tmp_path / "full.txt")
    with_entropy = ["--set", "min_entropy=0.5"] if entropy else []  # counting needs it too: one more n-gram level
    opts = ["--min-freq", "3", "--min-pmi", "0.5", *with_entropy]
    _ok(["build", str(full), "-o", str(tmp_path / "one.txt"), "-j", "1", *opts])
    _ok(["count", str(a), "-o", str(tmp_path / "a.counts"), "-j", "1", *with_entropy])
    res = _ok(["count", str(b), "-o", str(tmp_path / "b.counts"), "-j", "1", *with_entropy])
    assert "sections" in res.output
    _ok(["merge", str(tmp_path / "a.counts"), str(tmp_path / "b.counts"), "-o", str(tmp_path / "two.txt"), *opts])
    assert (tmp_path / "two.txt").read_bytes() == (tmp_path / "one.txt").read_bytes()
    assert len((tmp_path / "one.txt").read_text(encoding="utf-8").splitlines()) >= 3  # a lexicon, not two empties


def test_max_size_keeps_the_most_frequent(tmp_path: Path):
    """`max_size` cuts the ranked lexicon: the first N lines of the uncapped one, and the sidecar says so."""
    full = _corpus(tmp_path / "full.txt")
    opts = ["--min-freq", "2", "--min-pmi", "0.5", "-j", "1"]
    _ok(["build", str(full), "-o", str(tmp_path / "all.txt"), *opts])
    lines = (tmp_path / "all.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) > 3
    res = _ok(["build", str(full), "-o", str(tmp_path / "top.txt"), *opts, "--max-size", "3"])
    assert (tmp_path / "top.txt").read_text(encoding="utf-8").splitlines() == lines[:3]
    assert f"the most frequent of {len(lines):,} that passed: max_size" in res.output
    assert json.loads((tmp_path / "top.json").read_text(encoding="utf-8"))["settings"]["max_size"] == 3
    _ok(["count", str(full), "-o", str(tmp_path / "all.counts"), "-j", "1"])  # the merge step cuts the same way
    _ok(["merge", str(tmp_path / "all.counts"), "-o", str(tmp_path / "merged.txt"), "--min-freq", "2", "--min-pmi",
         "0.5", "--max-size", "3"])
    assert (tmp_path / "merged.txt").read_text(encoding="utf-8").splitlines() == lines[:3]
    with pytest.raises(ZenError, match="max_size: expected an integer >= 1"):
        runner.invoke(app, ["build", str(full), "-o", str(tmp_path / "x.txt"), "--set", "max_size=0"],
                      catch_exceptions=False)


def test_errors_are_zen_errors(tmp_path: Path):
    with pytest.raises(ZenError, match="corpus: no corpus files given"):
        runner.invoke(app, ["build", "-o", str(tmp_path / "x.txt")], catch_exceptions=False)
    with pytest.raises(ZenError, match="command line: language: expected one of 'zh', 'ar'"):
        runner.invoke(app, ["build", str(_corpus(tmp_path / "c.txt")), "--language", "en"], catch_exceptions=False)
    with pytest.raises(ZenError, match="min_n/max_n"):
        runner.invoke(app, ["build", str(tmp_path / "c.txt"), "--max-n", "9"], catch_exceptions=False)
    with pytest.raises(ZenError, match="missing.txt: no such file"):
        runner.invoke(app, ["build", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "x.txt")],
                      catch_exceptions=False)
    bad = tmp_path / "bad.txt"
    bad.write_text("北 京,9\n北京\n", encoding="utf-8")
    with pytest.raises(ZenError, match=r"bad.txt:2: expected 'ngram,freq'"):
        runner.invoke(app, ["show", str(bad)], catch_exceptions=False)


@pytest.mark.parametrize("name", ["lexicon-zh-pd98", "lexicon-ar-quran"])
def test_builtin_recipes(name: str):
    data, path = read_recipe_data(name)
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first == f"# bin/zen lexicon build --recipe {name}"
    assert data["job"] == "lexicon"
    cfg = load_job_recipe(name, expected_job="lexicon")
    assert cfg.corpus and cfg.output.name == "ngram.txt"
    assert (cfg.freq_threshold, cfg.pmi_threshold) == ({"zh": 15, "ar": 20}[cfg.language],
                                                       {"zh": 3.0, "ar": 10.0}[cfg.language])


def test_synthetic_corpus_is_deterministic(tmp_path: Path):
    from zencli.bench.lexicon import prefix_file, synthesize

    cws = tmp_path / "cws.txt"
    cws.write_text("我们 喜欢 北京\n北京 是 首都\n我们 是 学生\n", encoding="utf-8")
    a = synthesize(cws, 500, tmp_path / "a.txt", seed=3, batch=16)
    b = synthesize(cws, 500, tmp_path / "b.txt", seed=3, batch=16)
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()
    assert a["chars"] >= 500 and a == b
    text = (tmp_path / "a.txt").read_text(encoding="utf-8")
    assert set(text) <= set("我们喜欢北京是首都学生\n")
    prefix_file(tmp_path / "a.txt", 100, tmp_path / "p.txt")
    assert text.startswith((tmp_path / "p.txt").read_text(encoding="utf-8"))


PD98_TRAIN = PD98 / "raw" / "train.txt"


@needs_data(PD98_TRAIN)
def test_pd98_train_lexicon(tmp_path: Path):
    from zencli.lexicon.ngram_file import Lexicon

    out = tmp_path / "ngram.txt"
    _ok(["build", str(PD98_TRAIN), "-o", str(out), "--workers", "2"])
    lex = Lexicon.load(out)
    side = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert side["corpus"]["chars"] == 1_333_216 and side["corpus"]["lines"] == 14_029
    assert 10_000 < len(lex) < 30_000
    assert lex.id(("中", "国")) > 0 and lex.freq(("中", "国")) >= 1000
    assert all(f >= 15 for f in lex.freqs) and lex.freqs == sorted(lex.freqs, reverse=True)
    assert {len(g) for g in lex.ngrams} <= set(range(2, 9))


def test_bench_lexicon_runs_and_writes_json(tmp_path: Path):
    import typer

    from zencli.cli.bench_lexicon import _size, lexicon

    assert [_size(s) for s in ("12.5M", "3k", "2000")] == [12_500_000, 3000, 2000]
    with pytest.raises(ZenError, match="--sizes"):
        _size("lots")
    cws = tmp_path / "cws.txt"
    cws.write_text("我们 喜欢 北京\n北京 是 首都\n我们 是 学生\n", encoding="utf-8")
    raw = _corpus(tmp_path / "raw.txt")
    bench = typer.Typer()
    bench.command()(lexicon)
    out = tmp_path / "bench.json"
    res = runner.invoke(bench, ["--sizes", "3K", "--workers", "1", "--raw", str(raw), "--cws", str(cws),
                                "--tmp-dir", str(tmp_path), "--json", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = json.loads(out.read_text(encoding="utf-8"))["rows"]
    assert [r["corpus"] for r in rows] == ["raw.txt", "synthetic 0.003M"]
    assert rows[0]["chars"] == sum(map(len, LINES)) and rows[1]["chars"] >= 3000
    assert all(r["ngrams"] > 0 and r["peak_rss_total"] > 0 and r["chars_per_s"] > 0 for r in rows)
    assert not any(p.name.startswith("zen-bench-lexicon-") for p in tmp_path.iterdir())  # temp corpora removed
