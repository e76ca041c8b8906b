"""`zen lexicon stats`: cut share and coverage against gold word boundaries, counted by hand and naively."""

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zencli.cli.lexicon import app
from zencli.errors import ZenError
from zencli.lexicon import stats as stats_module
from zencli.lexicon.ngram_file import Lexicon
from zencli.lexicon.stats import char_pieces_with_spans, gold_stats
from zencli.text.tokenizer import BasicTokenizer

runner = CliRunner()

LEXICON = ["北 京", "京 大", "大 学", "北 京 大 学", "学 生", "欢 迎", "１ ##９", "##９ ##８"]
# Hand count, line by line (word boundaries in brackets, matches with their char spans):
# 1 "北京 大学 欢迎 你"  [0 2 4 6 7]: 北京 0-2, 京大 1-3 (cuts), 大学 2-4, 北京大学 0-4 (two words), 欢迎 4-6
#                                     multi-char words 北京 大学 欢迎, all covered
# 2 "北京大学 学生"      [0 4 6]:     北京 0-2 (cuts), 京大 1-3 (cuts), 大学 2-4 (cuts), 北京大学 0-4, 学生 4-6
#                                     multi-char words 北京大学 学生, both covered
# 3 ""                   no words, no matches
# 4 "北京欢迎你"         [0 5]:       北京 0-2 (cuts), 欢迎 2-4 (cuts); the 5-char word is not covered
# 5 "１９ ９８年"        tokens １ ##９ ##９ ##８ 年, [0 2 5]: １ ##９ 0-2, ##９ ##８ 2-4 (cuts);
#                      １９ covered, ９８年 not
GOLD = ["北京 大学 欢迎 你", "北京大学 学生", "", "北京欢迎你", "１９ ９８年"]


def _files(tmp_path: Path, lexicon=LEXICON, gold=GOLD) -> tuple[Path, Path]:
    lex = tmp_path / "ngram.txt"
    lex.write_text("".join(f"{g},{i + 1}\n" for i, g in enumerate(lexicon)), encoding="utf-8")
    path = tmp_path / "gold.txt"
    path.write_text("".join(line + "\n" for line in gold), encoding="utf-8")
    return lex, path


def test_hand_counted_figures(tmp_path: Path):
    r = gold_stats(*_files(tmp_path)).to_json()
    assert (r["lines"], r["chars"], r["words"], r["ngrams"]) == (5, 23, 9, 8)
    assert (r["matches"], r["cutting"], r["cut_share"]) == (14, 7, 0.5)
    assert (r["multichar_words"], r["covered"], r["coverage"]) == (8, 6, 0.75)
    assert r["phrase_matches"] == 1  # 北京大学 over the two words 北京 大学
    rows = {row["n"]: row for row in r["per_length"]}
    assert list(rows) == [2, 3, 4, 5, 6, 7, 8, "9+"]
    assert (rows[2]["matches"], rows[2]["cutting"], rows[2]["cut_share"]) == (12, 7, 7 / 12)
    assert (rows[4]["matches"], rows[4]["cutting"], rows[4]["cut_share"]) == (2, 0, 0.0)
    assert rows[3]["matches"] == 0 and rows[3]["cut_share"] is None
    assert (rows[2]["gold_words"], rows[2]["covered"]) == (5, 5)  # 北京 大学 欢迎 学生 １９
    assert (rows[3]["gold_words"], rows[3]["covered"]) == (1, 0)  # ９８年
    assert (rows[4]["gold_words"], rows[4]["covered"]) == (1, 1)  # 北京大学
    assert (rows[5]["gold_words"], rows[5]["covered"], rows[5]["coverage"]) == (1, 0, 0.0)  # 北京欢迎你


def test_long_words_and_lexicon_without_matches(tmp_path: Path):
    lex, gold = _files(tmp_path, ["人 民"], ["中华人民共和国万岁 好", "好"])
    r = gold_stats(lex, gold).to_json()
    assert (r["matches"], r["cutting"], r["multichar_words"], r["covered"]) == (1, 1, 1, 0)
    assert r["per_length"][-1] == {"n": "9+", "matches": 0, "cutting": 0, "cut_share": None, "gold_words": 1,
                                   "covered": 0, "coverage": 0.0}
    lex, gold = _files(tmp_path, ["甲 乙"], ["好"])
    r = gold_stats(lex, gold).to_json()
    assert (r["matches"], r["cut_share"], r["multichar_words"], r["coverage"]) == (0, None, 0, None)


def test_lexicon_case_follows_its_sidecar(tmp_path: Path):
    lex, gold = _files(tmp_path, ["ａ ##ｂ"], ["ＡＢ ｃ", "ａｂ"])
    assert gold_stats(lex, gold).total_covered == 2  # lower-cased, as `zen lexicon build` counts by default
    lex.with_suffix(".json").write_text(json.dumps({"settings": {"tokenizer": {
        "kind": "char_pieces", "lowercase": False, "strip_accents": False}}}), encoding="utf-8")
    assert gold_stats(lex, gold).total_covered == 1
    sidecar = {"settings": {"tokenizer": {"kind": "wordpiece"}}}
    lex.with_suffix(".json").write_text(json.dumps(sidecar), encoding="utf-8")
    with pytest.raises(ZenError, match=r"ngram.json: the lexicon was counted over wordpiece tokens"):
        gold_stats(lex, gold)
    lex.with_suffix(".json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ZenError, match=r"ngram.json: not a valid lexicon sidecar"):
        gold_stats(lex, gold)


def test_piece_spans():
    basic = BasicTokenizer(lowercase=True)
    pieces, starts, ends = char_pieces_with_spans(basic, "北京ＡＢ１９，x")
    assert pieces == ["北", "京", "ａ", "##ｂ", "##１", "##９", "，", "x"]
    assert starts.tolist() == [0, 1, 2, 3, 4, 5, 6, 7] and ends.tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    pieces, starts, ends = char_pieces_with_spans(basic, "e\u0301a")  # e + combining acute: "ea", 3 chars
    assert pieces == ["e", "##a"] and starts.tolist()[0] == 0 and ends.tolist()[-1] == 3
    assert pieces == basic.char_pieces("e\u0301a")


def _naive(lexicon: list[str], gold: list[str]) -> tuple[int, int, int, int]:
    """Substring look-up over every span of 2..8 chars (lexicon of CJK chars only: one token per char)."""
    grams = {g.replace(" ", "") for g in lexicon}
    matches = cutting = words = covered = 0
    for line in gold:
        ws = line.split()
        text = "".join(ws)
        bounds = {0}
        for w in ws:
            bounds.add(max(bounds) + len(w))
        spans = set()
        for n in range(2, 9):
            for a in range(len(text) - n + 1):
                if text[a : a + n] in grams:
                    matches += 1
                    cutting += a not in bounds or a + n not in bounds
                    spans.add((a, a + n))
        pos = 0
        for w in ws:
            if len(w) >= 2:
                words += 1
                covered += (pos, pos + len(w)) in spans
            pos += len(w)
    return matches, cutting, words, covered


@pytest.mark.parametrize("batch_lines, batch_cells", [(1, 2_000_000), (3, 2_000_000), (512, 2_000_000), (512, 40)])
def test_random_text_equals_naive_count_in_any_batching(tmp_path: Path, monkeypatch, batch_lines: int,
                                                        batch_cells: int):
    rng = random.Random(7)
    alphabet = "甲乙丙丁戊"
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(30)]
    gold = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 12))) for _ in range(60)]
    seen: set[str] = set()
    for w in words + ["".join(rng.choice(alphabet) for _ in range(rng.randint(2, 8))) for _ in range(40)]:
        if len(w) >= 2:
            seen.add(" ".join(w))
    lexicon = sorted(seen)
    monkeypatch.setattr(stats_module, "_BATCH_LINES", batch_lines)
    monkeypatch.setattr(stats_module, "_BATCH_CELLS", batch_cells)
    s = gold_stats(*_files(tmp_path, lexicon, gold))
    assert (s.total_matches, s.total_cutting, s.multichar_words, s.total_covered) == _naive(lexicon, gold)
    assert s.total_matches > 100 and 0 < s.total_cutting < s.total_matches


def test_bad_input_is_one_line_error(tmp_path: Path):
    lex, gold = _files(tmp_path)
    bad = tmp_path / "bad.txt"
    bad.write_bytes("北京 大学\n".encode() + b"\xff\xfe oops\n")
    with pytest.raises(ZenError, match=r"bad.txt:2: invalid UTF-8 at byte offset"):
        gold_stats(lex, bad)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(ZenError, match=r"empty.txt: file is empty"):
        gold_stats(lex, empty)
    with pytest.raises(ZenError, match=r"missing.txt: no such file"):
        gold_stats(lex, tmp_path / "missing.txt")
    broken = tmp_path / "broken.txt"
    broken.write_text("北 京,3\n北京\n", encoding="utf-8")
    with pytest.raises(ZenError, match=r"broken.txt:2: expected 'ngram,freq'"):
        gold_stats(broken, gold)


def test_cli_table_and_json(tmp_path: Path):
    lex, gold = _files(tmp_path)
    res = runner.invoke(app, ["stats", str(lex), "--gold", str(gold)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "50.0% (7)" in res.output and "75.0% (6 of 8)" in res.output and "9+" in res.output
    res = runner.invoke(app, ["stats", str(lex), "--gold", str(gold), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)
    assert (r["cut_share"], r["coverage"], r["matches"]) == (0.5, 0.75, 14)
    assert Lexicon.load(lex).ngrams[0] == ("北", "京")
