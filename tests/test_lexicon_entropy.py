"""Branching-entropy filter: exact neighbour statistics, shard invariance, the `##` rules, selection."""

import json
import math
import random
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from zencli.cli.lexicon import app
from zencli.config import load_job_recipe
from zencli.config.loading import from_dict
from zencli.config.schema import LexiconConfig
from zencli.errors import ZenError
from zencli.lexicon import extract
from zencli.lexicon.counting import count_corpus, iter_sections, merge_sections
from zencli.lexicon.extract import TextTokenizer
from zencli.lexicon.ngram_file import Lexicon

TOKENIZE = TextTokenizer()  # char_pieces, lower-cased: what `zen lexicon` counts for Chinese
SIG = {"kind": "test"}


def _corpus(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _mixed_lines(seed: int, n: int) -> list[str]:
    """Chinese chars with runs of full-width digits and Latin letters (these become `##` pieces)."""
    rng = random.Random(seed)
    parts = ["甲", "乙", "丙", "丁", "年", "１９", "９８", "ａｂ", "ｂ", "，"]
    return ["".join(rng.choice(parts) for _ in range(rng.randint(0, 14))) for _ in range(n)]


def _freq(tmp: Path, files, *, max_n: int, min_freq: int, entropy_from: int | None = 1, workers: int = 1,
          chunk_chars: int = 1000, partition_entries: int = 8_000_000):
    run = count_corpus(files, TOKENIZE, SIG, out_dir=tmp / "counts", max_n=max_n + 1, workers=workers,
                       chunk_chars=chunk_chars)
    return merge_sections(list(iter_sections(run.parts)), max_n=max_n, min_freq=min_freq, tmp_dir=tmp / "merge",
                          partition_entries=partition_entries, entropy_from=entropy_from)


def _entropy(c: Counter) -> float:
    t = sum(c.values())
    return math.log2(t) - sum(v * math.log2(v) for v in c.values()) / t


def _naive_entropies(lines: list[str], max_n: int) -> dict[tuple[str, ...], tuple[float, float]]:
    """Straight from the definition (pmi.py): line edges distinct neighbours, `##` right neighbours one
    neighbour "inside", an n-gram starting with `##` has no left entropy."""
    left: dict[tuple, Counter] = defaultdict(Counter)
    right: dict[tuple, Counter] = defaultdict(Counter)
    edge = 0
    for line in lines:
        toks = TOKENIZE(line)
        for n in range(1, max_n + 1):
            for i in range(len(toks) - n + 1):
                w = tuple(toks[i : i + n])
                edge += 1
                left[w][toks[i - 1] if i > 0 else ("edge", edge)] += 1
                b = toks[i + n] if i + n < len(toks) else ("edge", edge)
                right[w]["inside" if isinstance(b, str) and b.startswith("##") else b] += 1
    return {w: (0.0 if w[0].startswith("##") else _entropy(left[w]), _entropy(right[w])) for w in left}


def test_entropies_equal_the_definition(tmp_path: Path):
    lines = _mixed_lines(0, 300)
    freq = _freq(tmp_path, [_corpus(tmp_path / "c.txt", lines)], max_n=4, min_freq=3)
    naive = _naive_entropies(lines, 4)
    checked = glued = 0
    for n in range(1, 5):
        rows = freq.token_ids(n, np.arange(freq.size(n)))
        assert len(freq.entropy_left[n]) == len(freq.entropy_right[n]) == freq.size(n) > 0
        for row, hl, hr in zip(rows.tolist(), freq.entropy_left[n], freq.entropy_right[n]):
            w = tuple(freq.tokens[t] for t in row)
            assert (hl, hr) == pytest.approx(naive[w], abs=1e-9), w
            checked += 1
            glued += w[0].startswith("##")
    assert checked > 200 and glued > 10


def test_sharded_counting_equals_one_pass_with_entropy(tmp_path: Path):
    lines = _mixed_lines(1, 600)
    full = _corpus(tmp_path / "full.txt", lines)
    one = _freq(tmp_path / "one", [full], max_n=5, min_freq=2, chunk_chars=100_000)
    cuts = [0, 150, 151, 600]
    shards = [_corpus(tmp_path / f"s{i}.txt", lines[a:b]) for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    # Many sections, two workers, key ranges far smaller than a level: every merge path is taken.
    many = _freq(tmp_path / "many", shards, max_n=5, min_freq=2, workers=2, chunk_chars=1000, partition_entries=40)
    for n in range(1, 6):
        assert np.array_equal(one.counts[n], many.counts[n])
        assert np.array_equal(one.entropy_left[n], many.entropy_left[n])  # bit for bit, not approximately
        assert np.array_equal(one.entropy_right[n], many.entropy_right[n])
    assert one.size(3) > 50

    common = dict(min_freq=2, min_pmi=0.0, min_entropy=0.8, max_n=5)
    extract.build(LexiconConfig(corpus=[full], output=tmp_path / "b" / "ngram.txt", workers=1, **common))
    parts = []
    for i, shard in enumerate(shards):
        parts.append(tmp_path / f"s{i}.counts")
        extract.count(LexiconConfig(workers=2, chunk_chars=1000, **common), [shard], parts[-1])
    merged = extract.merge(LexiconConfig(output=tmp_path / "m" / "ngram.txt", **common), parts)
    assert (tmp_path / "m" / "ngram.txt").read_bytes() == (tmp_path / "b" / "ngram.txt").read_bytes()
    assert 20 < len(merged.lexicon) < merged.per_length[2]["pmi"] + merged.per_length[3]["pmi"] + 1000


WORDS_CORPUS = [left + word + right for word in ("社会主义", "北京") for left in "甲乙丙丁" for right in "子丑寅卯"]


def test_entropy_keeps_words_and_drops_fragments(tmp_path: Path):
    # 社会主义 and 北京 sit between 4 × 4 different neighbours (2 bits each side); their fragments 会主义,
    # 社会主, 主义 … always have the same neighbour on one side (0 bits); n-grams over a word edge (甲社) are
    # seen 4 times only, below min_freq.
    path = _corpus(tmp_path / "c.txt", WORDS_CORPUS)
    common = dict(corpus=[path], workers=1, min_freq=5, min_pmi=0.0)
    plain = extract.build(LexiconConfig(output=tmp_path / "p.txt", **common))
    assert {"".join(g) for g in plain.lexicon.ngrams} == {"社会", "会主", "主义", "社会主", "会主义", "社会主义",
                                                          "北京"}
    result = extract.build(LexiconConfig(output=tmp_path / "e.txt", min_entropy=1.0, **common))
    assert {"".join(g) for g in result.lexicon.ngrams} == {"社会主义", "北京"}
    assert result.per_length[3] == {"candidates": result.per_length[3]["candidates"], "frequent": 2, "pmi": 2,
                                    "selected": 0}
    side = json.loads((tmp_path / "e.json").read_text(encoding="utf-8"))
    assert side["settings"]["min_entropy"] == 1.0 and "branching entropy" in side["settings"]["entropy"]
    # 2 bits each side: kept at 2, dropped above.
    assert len(extract.build(LexiconConfig(output=tmp_path / "2.txt", min_entropy=2.0, **common)).lexicon) == 2
    with pytest.raises(ZenError, match=r"min_pmi=0 and min_entropy=2.1 in"):
        extract.build(LexiconConfig(output=tmp_path / "3.txt", min_entropy=2.1, **common))


def test_word_piece_rules(tmp_path: Path):
    # 1998 is `１ ##９ ##９ ##８`. `##９ ##９ ##８ 年` follows four different digits (2 bits of plain entropy) but
    # always starts inside a number; `年 １` is followed by four different `##` digits, i.e. always ends
    # inside a number: both get entropy 0 on that side and are dropped.
    lines = [f"{d}９９８年{r}" for d in "１２３４" for r in "子丑寅卯"]
    lines += [f"{first}年１{d}{r}" for first in "甲乙丙丁" for d in "２３４５" for r in "子丑"]
    freq = _freq(tmp_path, [_corpus(tmp_path / "c.txt", lines)], max_n=4, min_freq=4)

    def h(*tokens: str) -> tuple[float, float]:
        n = len(tokens)
        for j, row in enumerate(freq.token_ids(n, np.arange(freq.size(n))).tolist()):
            if tuple(freq.tokens[t] for t in row) == tokens:
                return float(freq.entropy_left[n][j]), float(freq.entropy_right[n][j])
        raise AssertionError(tokens)

    assert h("##９", "##９", "##８", "年") == (0.0, pytest.approx(2.0))
    assert h("年", "１") == (pytest.approx(2.0), 0.0)
    assert h("##８", "年") == (0.0, pytest.approx(2.0))
    path = _corpus(tmp_path / "c2.txt", lines)
    kept = extract.build(LexiconConfig(corpus=[path], output=tmp_path / "k.txt", workers=1, min_freq=4, min_pmi=0.0,
                                       min_entropy=1.0)).lexicon.ngrams
    assert ("##９", "##９", "##８", "年") not in kept and ("年", "１") not in kept
    assert ("１", "##９", "##９", "##８", "年") in kept  # a whole number: line start on the left, 4 neighbours right


def test_counts_without_the_extra_level_and_bad_settings(tmp_path: Path):
    path = _corpus(tmp_path / "c.txt", WORDS_CORPUS)
    counts = tmp_path / "c.counts"
    extract.count(LexiconConfig(workers=1, max_n=4), [path], counts)
    with pytest.raises(ZenError, match=r"holds n-grams up to length 4, expected at least 5: max_n=4 plus one level "
                                       r"for the branching entropy \(count again with --max-n 5"):
        extract.merge(LexiconConfig(output=tmp_path / "m.txt", max_n=4, min_entropy=1.0), [counts])
    assert LexiconConfig(max_n=4, min_entropy=0.0).counted_n == 5 and LexiconConfig(max_n=4).counted_n == 4
    with pytest.raises(ZenError, match=r"r.yaml: min_entropy: expected a number of bits >= 0"):
        from_dict(LexiconConfig, {"min_entropy": -1}, source="r.yaml")


def test_cli_option_and_recipe(tmp_path: Path):
    path = _corpus(tmp_path / "c.txt", WORDS_CORPUS)
    out = tmp_path / "ngram.txt"
    res = CliRunner().invoke(app, ["build", str(path), "-o", str(out), "--min-freq", "5", "--min-pmi", "0",
                                   "--min-entropy", "1", "--workers", "1"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "+ entropy ≥ 1" in res.output
    assert {"".join(g) for g in Lexicon.load(out).ngrams} == {"社会主义", "北京"}
    cfg = load_job_recipe("lexicon-zh-pd98-entropy", expected_job="lexicon")
    assert (cfg.freq_threshold, cfg.pmi_threshold, cfg.min_entropy, cfg.counted_n) == (10, 3.0, 1.5, 9)
