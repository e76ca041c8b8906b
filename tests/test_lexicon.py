"""Lexicon extraction: exact counts, PMI, thresholds, map+merge == one pass, bad input."""

import math
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from zencli.config.schema import LexiconConfig
from zencli.errors import ZenError
from zencli.lexicon import extract
from zencli.lexicon.counting import (
    MAGIC,
    count_corpus,
    iter_sections,
    merge_sections,
    read_counts_file,
)
from zencli.lexicon.counting.chunk import _sorted_positions
from zencli.lexicon.ngram_file import Lexicon
from zencli.lexicon.pmi import pmi, select

SIG = {"kind": "test-chars"}


def _corpus(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _random_lines(seed: int, n: int, alphabet: str = "abcde", max_len: int = 25) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, max_len))) for _ in range(n)]


def _naive(lines: list[str], max_n: int) -> tuple[Counter, dict[int, int]]:
    counts: Counter = Counter()
    positions = {n: 0 for n in range(1, max_n + 1)}
    for line in lines:
        for n in range(1, max_n + 1):
            positions[n] += max(0, len(line) - n + 1)
            for i in range(len(line) - n + 1):
                counts[line[i : i + n]] += 1
    return counts, positions


def _naive_pmi(w: str, counts: Counter, positions: dict[int, int]) -> float:
    n = len(w)
    lp = lambda x: math.log2(counts[x] / positions[len(x)])  # noqa: E731
    return min(lp(w) - lp(w[:k]) - lp(w[k:]) for k in range(1, n))


def _frequent(tmp: Path, files, *, max_n: int, min_freq: int, workers: int = 1, chunk_chars: int = 1000,
              partition_entries: int = 8_000_000):
    run = count_corpus(files, list, SIG, out_dir=tmp / "counts", max_n=max_n, workers=workers,
                       chunk_chars=chunk_chars)
    sections = list(iter_sections(run.parts))
    freq = merge_sections(sections, max_n=max_n, min_freq=min_freq, tmp_dir=tmp / "merge",
                          partition_entries=partition_entries)
    return run, sections, freq


def _as_dict(freq, max_n: int) -> dict[str, int]:
    out = {}
    for n in range(1, max_n + 1):
        rows = freq.token_ids(n, np.arange(freq.size(n)))
        for row, c in zip(rows.tolist(), freq.counts[n].tolist()):
            out["".join(freq.tokens[t] for t in row)] = c
    return out


# ----------------------------------------------------------------------------- counting


@pytest.mark.parametrize("min_freq, partition_entries", [(1, 8_000_000), (3, 40)])
def test_counts_equal_naive_counter(tmp_path: Path, min_freq: int, partition_entries: int):
    lines = _random_lines(0, 400)
    path = _corpus(tmp_path / "c.txt", lines)
    run, sections, freq = _frequent(tmp_path, [path], max_n=6, min_freq=min_freq, partition_entries=partition_entries)
    assert len(sections) > 3  # several chunks, several tasks: counts must still be exact
    naive, positions = _naive(lines, 6)
    assert _as_dict(freq, 6) == {w: c for w, c in naive.items() if c >= min_freq}
    assert freq.positions == positions
    assert (run.lines, run.chars, run.tokens) == (400, sum(map(len, lines)), sum(map(len, lines)))
    # Ids are in lexicographic token order at every level.
    for n in range(1, 7):
        rows = freq.token_ids(n, np.arange(freq.size(n))).tolist()
        words = ["".join(freq.tokens[t] for t in r) for r in rows]
        assert words == sorted(words)


def test_ngrams_never_cross_lines(tmp_path: Path):
    path = _corpus(tmp_path / "c.txt", ["ab", "cd", "", "ab"])
    _, _, freq = _frequent(tmp_path, [path], max_n=3, min_freq=1)
    assert _as_dict(freq, 3) == {"a": 2, "b": 2, "c": 1, "d": 1, "ab": 2, "cd": 1}
    assert freq.positions == {1: 6, 2: 3, 3: 0}


def test_sorted_positions_packed_and_argsort_agree():
    rng = np.random.default_rng(0)
    key = rng.integers(0, 50, 1000).astype(np.int64)
    pos = rng.permutation(1000).astype(np.int64)
    k1, p1 = _sorted_positions(key.copy(), pos.copy(), 50, 1000)  # packed into one uint64
    k2, p2 = _sorted_positions(key.copy(), pos.copy(), 1 << 60, 1000)  # too wide to pack: argsort
    assert (k1 == np.sort(key)).all() and (k2 == k1).all()
    assert sorted(zip(k1.tolist(), p1.tolist())) == sorted(zip(key.tolist(), pos.tolist())) \
        == sorted(zip(k2.tolist(), p2.tolist()))


# ----------------------------------------------------------------------------- PMI and selection


def test_pmi_hand_computed(tmp_path: Path):
    # N1 = 16, N2 = 10, N3 = 5; c(a)=5 c(b)=5 c(c)=3 c(ab)=4 c(bc)=3 c(abc)=2.
    path = _corpus(tmp_path / "c.txt", ["abc", "abc", "abd", "abd", "xbc", "a"])
    _, _, freq = _frequent(tmp_path, [path], max_n=3, min_freq=1)
    ids = {w: i for i, w in enumerate("".join(freq.tokens[t] for t in r)
                                      for r in freq.token_ids(2, np.arange(freq.size(2))).tolist())}
    # PMI(ab) = log2( (4/10) / ((5/16) (5/16)) ) = log2(4.096)
    assert pmi(freq, 2, np.array([ids["ab"]]))[0] == pytest.approx(math.log2(4.096), abs=1e-12)
    ids3 = {w: i for i, w in enumerate("".join(freq.tokens[t] for t in r)
                                       for r in freq.token_ids(3, np.arange(freq.size(3))).tolist())}
    # a|bc: (2/5) / ((5/16)(3/10)) = 64/15;  ab|c: (2/5) / ((4/10)(3/16)) = 16/3;  PMI = the smaller split.
    assert pmi(freq, 3, np.array([ids3["abc"]]))[0] == pytest.approx(math.log2(64 / 15), abs=1e-12)


@pytest.mark.parametrize("min_freq, min_pmi", [(2, 0.5), (4, 1.0), (6, -10.0)])
def test_selection_equals_naive_thresholds(tmp_path: Path, min_freq: int, min_pmi: float):
    lines = _random_lines(1, 300, alphabet="abcdefgh", max_len=30)
    path = _corpus(tmp_path / "c.txt", lines)
    _, _, freq = _frequent(tmp_path, [path], max_n=5, min_freq=min_freq)
    cfg = LexiconConfig(min_n=2, max_n=5, min_freq=min_freq, min_pmi=min_pmi)
    lexicon, per_length, _ = extract.select_lexicon(freq, cfg)
    naive, positions = _naive(lines, 5)
    expected = [
        (tuple(w), c) for w, c in naive.items()
        if 2 <= len(w) <= 5 and c >= min_freq and _naive_pmi(w, naive, positions) >= min_pmi
    ]
    expected.sort(key=lambda wc: (-wc[1], wc[0]))
    assert list(zip(lexicon.ngrams, lexicon.freqs)) == expected
    assert sum(v["selected"] for v in per_length.values()) == len(expected)


def test_pmi_in_chunks_is_pmi_at_once(tmp_path: Path, monkeypatch):
    """PMI computed a chunk of n-grams at a time (flat memory on a large level) equals PMI at once."""
    from zencli.lexicon import pmi as pmi_module

    path = _corpus(tmp_path / "c.txt", _random_lines(2, 200, alphabet="abcdef", max_len=25))
    _, _, freq = _frequent(tmp_path, [path], max_n=4, min_freq=1)
    at_once = {n: pmi(freq, n) for n in (2, 3, 4)}
    monkeypatch.setattr(pmi_module, "PMI_CHUNK", 7)
    for n in (2, 3, 4):
        assert freq.size(n) > 7 * 3
        assert np.array_equal(pmi(freq, n), at_once[n])
        some = np.arange(freq.size(n))[::3]
        assert np.array_equal(pmi(freq, n, some), at_once[n][some])


def test_frequency_threshold_is_inclusive(tmp_path: Path):
    path = _corpus(tmp_path / "c.txt", ["xy"] * 3 + ["zw"] * 2)
    _, _, freq = _frequent(tmp_path, [path], max_n=2, min_freq=3)
    sel = select(freq, min_n=2, max_n=2, min_freq=3, min_pmi=-100)
    assert [freq.tokens[t] for t in freq.token_ids(2, sel.ids[2])[0]] == ["x", "y"]
    assert sel.counts[2].tolist() == [3]


def test_unigrams_selected_by_frequency_alone(tmp_path: Path):
    path = _corpus(tmp_path / "c.txt", ["aab", "ab"])
    _, _, freq = _frequent(tmp_path, [path], max_n=2, min_freq=2)
    lexicon, _, _ = extract.select_lexicon(freq, LexiconConfig(min_n=1, max_n=2, min_freq=2, min_pmi=100.0))
    assert list(zip(lexicon.ngrams, lexicon.freqs)) == [(("a",), 3), (("b",), 2)]


def test_nothing_selected_is_an_error(tmp_path: Path):
    path = _corpus(tmp_path / "c.txt", ["ab", "cd"])
    cfg = LexiconConfig(corpus=[path], output=tmp_path / "out" / "ngram.txt", workers=1)
    with pytest.raises(ZenError, match=r"no n-gram of length 2..8 reached min_freq=15 and min_pmi=3"):
        extract.build(cfg)


# ----------------------------------------------------------------------------- map + merge == one pass


def test_map_merge_equals_one_pass(tmp_path: Path):
    lines = _random_lines(2, 900, alphabet="甲乙丙丁戊己庚辛", max_len=40)
    full = _corpus(tmp_path / "full.txt", lines)
    cuts = [0, 100, 450, 451, 900]
    shards = [_corpus(tmp_path / f"shard{i}.txt", lines[a:b]) for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    common = dict(min_freq=3, min_pmi=0.5, max_n=6)

    one = LexiconConfig(corpus=[full], output=tmp_path / "one" / "ngram.txt", workers=2, chunk_chars=3000, **common)
    extract.build(one)
    single = LexiconConfig(corpus=[full], output=tmp_path / "single" / "ngram.txt", workers=1, chunk_chars=1000,
                           **common)
    extract.build(single)

    c01 = tmp_path / "c01.counts"  # shards 0 and 1 together in one counts file
    extract.count(LexiconConfig(workers=1, chunk_chars=1000, **common), shards[:2], c01)
    c2 = tmp_path / "c2.counts"
    extract.count(LexiconConfig(workers=1, chunk_chars=5000, **common), [shards[2]], c2)
    c3 = tmp_path / "c3.counts"
    extract.count(LexiconConfig(workers=2, chunk_chars=1000, **common), [shards[3]], c3)
    counts = [c01, c2, c3]
    merged = LexiconConfig(output=tmp_path / "merged" / "ngram.txt", **common)
    result = extract.merge(merged, counts)

    reference = (tmp_path / "one" / "ngram.txt").read_bytes()
    assert len(result.lexicon) > 50
    assert (tmp_path / "single" / "ngram.txt").read_bytes() == reference
    assert (tmp_path / "merged" / "ngram.txt").read_bytes() == reference
    side = extract.sidecar_path(tmp_path / "merged" / "ngram.txt").read_text(encoding="utf-8")
    assert all(str(s) in side for s in shards)
    # The selection is also what a naive count gives.
    naive, positions = _naive(lines, 6)
    lex = Lexicon.load(tmp_path / "merged" / "ngram.txt")
    expected = {w for w, c in naive.items() if 2 <= len(w) <= 6 and c >= 3 and _naive_pmi(w, naive, positions) >= 0.5}
    assert {"".join(g) for g in lex.ngrams} == expected


def test_build_sidecar_and_progress(tmp_path: Path):
    from rich.console import Console

    lines = ["北京欢迎你", "北京大学", "欢迎北京"] * 6
    path = _corpus(tmp_path / "c.txt", lines)
    out = tmp_path / "out" / "ngram.txt"
    console = Console(file=open(tmp_path / "log.txt", "w"), force_terminal=False)
    result = extract.build(LexiconConfig(corpus=[path], output=out, workers=1, min_freq=5, min_pmi=0.0),
                           console=console)
    assert result.lexicon.ngrams[0] == ("北", "京") and result.lexicon.freqs[0] == 18
    assert "counting" in (tmp_path / "log.txt").read_text(encoding="utf-8")
    import json

    side = json.loads((tmp_path / "out" / "ngram.json").read_text(encoding="utf-8"))
    assert side["ngrams"] == len(result.lexicon)
    assert side["corpus"]["lines"] == 18 and side["corpus"]["chars"] == sum(map(len, lines))
    assert side["settings"]["min_freq"] == 5 and side["settings"]["tokenizer"]["kind"] == "char_pieces"
    assert side["per_length"]["2"]["selected"] == sum(1 for g in result.lexicon.ngrams if len(g) == 2)
    assert side["memory_bytes"]["peak_rss_main"] > 0 and side["time_s"]["total"] > 0
    by_stage = side["memory_bytes"]["peak_rss_total_sampled_by_stage"]
    assert set(by_stage) == {"first_passes", "count", "merge", "select"} and min(by_stage.values()) > 0
    assert not any(p.name.startswith(".zen-lexicon-") for p in out.parent.iterdir())  # temp folder removed


def test_raw_style_strips_continuations_and_folds_duplicates(tmp_path: Path):
    # char_pieces: "ab" → a ##b;  "a b" → a b: the same raw spelling "ab".
    path = _corpus(tmp_path / "c.txt", ["ab"] * 4 + ["a b"] * 3 + ["北京"] * 5)
    out = tmp_path / "ngram.txt"
    result = extract.build(LexiconConfig(corpus=[path], output=out, workers=1, min_freq=3, min_pmi=0.0, style="raw"))
    assert out.read_text(encoding="utf-8") == "ab,7\n北京,5\n"
    assert result.merged_raw == 1
    tokens = extract.build(LexiconConfig(corpus=[path], output=tmp_path / "t.txt", workers=1, min_freq=3, min_pmi=0.0))
    assert tokens.lexicon.ngrams == [("北", "京"), ("a", "##b"), ("a", "b")]


# ----------------------------------------------------------------------------- bad input


def test_bom_and_crlf_count_like_clean_text(tmp_path: Path):
    lines = _random_lines(3, 50)
    clean = _corpus(tmp_path / "clean.txt", lines)
    messy = tmp_path / "messy.txt"
    messy.write_bytes(b"\xef\xbb\xbf" + "".join(x + "\r\n" for x in lines).encode())
    _, _, a = _frequent(tmp_path / "a", [clean], max_n=4, min_freq=1)
    _, _, b = _frequent(tmp_path / "b", [messy], max_n=4, min_freq=1)
    assert _as_dict(a, 4) == _as_dict(b, 4)


def test_empty_missing_and_directory_corpus(tmp_path: Path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    for bad, msg in [(empty, "empty.txt: file is empty"), (tmp_path / "nope.txt", "nope.txt: no such file"),
                     (tmp_path, "is a directory")]:
        with pytest.raises(ZenError, match=msg):
            count_corpus([bad], list, SIG, out_dir=tmp_path / "o", max_n=3, workers=1, chunk_chars=1000)


@pytest.mark.parametrize("workers", [1, 2])
def test_invalid_utf8_names_the_file_line_and_byte_offset(tmp_path: Path, workers: int):
    lines = ["abcdefghij"] * 2000  # 22,000 bytes: several tasks at chunk_chars=1000
    data = bytearray("".join(x + "\n" for x in lines).encode())
    data[1500 * 11 + 3] = 0xFF  # line 1501, 4th byte
    bad = tmp_path / "bad.txt"
    bad.write_bytes(bytes(data))
    with pytest.raises(ZenError) as e:
        count_corpus([bad], list, SIG, out_dir=tmp_path / "o", max_n=3, workers=workers, chunk_chars=1000)
    msg = str(e.value)
    assert msg.startswith(f"{bad}:1501: invalid UTF-8 at byte offset {1500 * 11 + 3}") and "\n" not in msg


def test_arabic_without_vocab_is_an_error(tmp_path: Path):
    with pytest.raises(ZenError, match="vocab: Arabic n-grams are counted over WordPiece pieces"):
        extract.build(LexiconConfig(corpus=[_corpus(tmp_path / "c.txt", ["x"])], language="ar"))


def test_damaged_and_mismatched_counts_files(tmp_path: Path):
    path = _corpus(tmp_path / "c.txt", _random_lines(4, 50))
    good = tmp_path / "good.counts"
    extract.count(LexiconConfig(workers=1, max_n=4), [path], good)
    assert len(read_counts_file(good)) == 1

    not_counts = _corpus(tmp_path / "x.counts", ["hello"])
    with pytest.raises(ZenError, match="x.counts: not a zen counts file"):
        read_counts_file(not_counts)
    cut = tmp_path / "cut.counts"
    cut.write_bytes(good.read_bytes()[:-40])
    with pytest.raises(ZenError, match=r"cut.counts: section 1 .* damaged or truncated"):
        read_counts_file(cut)
    assert good.read_bytes().startswith(MAGIC)

    with pytest.raises(ZenError, match=r"holds n-grams up to length 4, expected at least max_n=8"):
        extract.merge(LexiconConfig(output=tmp_path / "m" / "ngram.txt"), [good])

    other = tmp_path / "other.counts"
    extract.count(LexiconConfig(workers=1, max_n=4, lowercase=False), [path], other)
    with pytest.raises(ZenError, match="expected counts files made with the same tokenizer settings"):
        extract.merge(LexiconConfig(output=tmp_path / "m" / "ngram.txt", max_n=4, min_freq=1), [good, other])


def test_byte_ranges_without_a_line_start_give_empty_sections(tmp_path: Path):
    lines = ["ab" * 3500, "abc", "", "ba"]  # one 7,000-byte line: 3 ranges, two start inside it
    path = _corpus(tmp_path / "c.txt", lines)
    run, sections, freq = _frequent(tmp_path, [path], max_n=3, min_freq=1)
    assert len(run.parts) == 3 and any(s.header["lines"] == 0 for s in sections)
    naive, positions = _naive(lines, 3)
    assert _as_dict(freq, 3) == dict(naive) and freq.positions == positions and run.lines == 4


def test_selection_with_the_levels_released_is_the_same(tmp_path: Path, monkeypatch):
    """`build`'s selection lets go of the merge's levels before the n-grams become tuples (a chunk at a time):
    the same lexicon and counts per length."""
    from zencli.lexicon import pmi as pmi_module

    path = _corpus(tmp_path / "c.txt", _random_lines(3, 300, alphabet="abcdefgh", max_len=30))
    cfg = LexiconConfig(min_n=2, max_n=5, min_freq=2, min_pmi=0.5)
    _, _, kept = _frequent(tmp_path / "a", [path], max_n=5, min_freq=2)
    lexicon, per_length, _ = extract.select_lexicon(kept, cfg)
    _, _, freed = _frequent(tmp_path / "b", [path], max_n=5, min_freq=2)
    monkeypatch.setattr(pmi_module, "PMI_CHUNK", 5)
    lexicon2, per_length2, _ = extract.select_lexicon(freed, cfg, release=True)
    assert len(lexicon) > 15 and list(zip(lexicon.ngrams, lexicon.freqs)) == list(zip(lexicon2.ngrams, lexicon2.freqs))
    assert per_length == per_length2
    assert not freed.counts and kept.size(3) > 0
