"""ngram.txt I/O: both released styles, ids = line numbers, strict errors, lossless round trips."""

from pathlib import Path

import pytest

from tests.conftest import write
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon, raw_form


def test_tokens_style_ids_and_frequencies(tmp_path: Path):
    p = write(tmp_path / "ngram.txt", "北 京,9000\n中 国 人,12\n， 他,3\n")
    lex = Lexicon.load(p)
    assert lex.style == "tokens"
    assert len(lex) == 3
    assert lex.ngrams == [("北", "京"), ("中", "国", "人"), ("，", "他")]
    assert lex.id(("北", "京")) == 1 and lex.id(["中", "国", "人"]) == 2 and lex.id(("，", "他")) == 3
    assert lex.id(("京", "北")) == 0
    assert lex.freq(("中", "国", "人")) == 12 and lex.freq(("x",)) == 0


def test_raw_style_each_char_is_a_token(tmp_path: Path):
    p = write(tmp_path / "ngram.txt", "北京,9000\n中国人,12\n")
    lex = Lexicon.load(p)
    assert lex.style == "raw"
    assert lex.ngrams == [("北", "京"), ("中", "国", "人")]
    assert lex.id(("中", "国", "人")) == 2


def test_split_on_last_comma(tmp_path: Path):
    # An n-gram may itself contain ASCII or full-width commas.
    p = write(tmp_path / "ngram.txt", "1 ,,5\n, 2,7\n好 ，,8\n")
    lex = Lexicon.load(p)
    assert lex.ngrams == [("1", ","), (",", "2"), ("好", "，")]
    assert lex.freqs == [5, 7, 8]
    q = write(tmp_path / "raw.txt", "好,,5\n")
    assert Lexicon.load(q).ngrams == [("好", ",")]


@pytest.mark.parametrize(
    "text",
    ["北 京,9000\n中 国,12\n1 ,,5\n", "北京,9000\n中国,12\n1,,5\n，他,0\n", "a ##b,3\n##c d,2\n"],
)
def test_round_trip_is_byte_identical(tmp_path: Path, text: str):
    p = write(tmp_path / "in.txt", text)
    lex = Lexicon.load(p)
    out = tmp_path / "out.txt"
    lex.save(out)
    assert out.read_bytes() == p.read_bytes()
    again = Lexicon.load(out)
    assert again.ngrams == lex.ngrams and again.freqs == lex.freqs and again.style == lex.style


def test_save_in_the_other_style(tmp_path: Path):
    lex = Lexicon([("北", "京"), ("ａ", "##ｂ", "##ｃ")], [9, 4], "tokens")
    lex.save(tmp_path / "raw.txt", style="raw")
    assert (tmp_path / "raw.txt").read_text(encoding="utf-8") == "北京,9\nａｂｃ,4\n"
    assert raw_form(("a", "##b", "##")) == "ab##"


def test_raw_spelling_collision_is_an_error(tmp_path: Path):
    lex = Lexicon([("a", "##b"), ("a", "b")], [5, 4], "tokens")
    with pytest.raises(ZenError, match="both 'ab'"):
        lex.save(tmp_path / "x.txt", style="raw")


def test_trailing_newline_optional_and_bom_crlf_accepted(tmp_path: Path):
    a = Lexicon.load(write(tmp_path / "a.txt", "北 京,9\n中 国,8"))
    (tmp_path / "b.txt").write_bytes(b"\xef\xbb\xbf" + "北 京,9\r\n中 国,8\r\n".encode())
    b = Lexicon.load(tmp_path / "b.txt")
    assert a.ngrams == b.ngrams == [("北", "京"), ("中", "国")]
    assert a.freqs == b.freqs == [9, 8]


@pytest.mark.parametrize(
    "text, line, what",
    [
        ("北 京,9\n\n中 国,8\n", 2, "an empty line"),
        ("北 京,9\n中 国\n", 2, "'中 国'"),
        ("北 京,9\n中 国,x\n", 2, "'中 国,x'"),
        ("北 京,-1\n", 1, "'北 京,-1'"),
        ("北 京,9\n,5\n", 2, "',5'"),
        ("北 京,9\n中 国,1.5\n", 2, "'中 国,1.5'"),
        ("北 京,\n", 1, "'北 京,'"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path: Path, text: str, line: int, what: str):
    p = write(tmp_path / "ngram.txt", text)
    with pytest.raises(ZenError) as e:
        Lexicon.load(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}: expected 'ngram,freq'") and what in msg and "\n" not in msg


def test_duplicate_ngram_names_both_lines(tmp_path: Path):
    p = write(tmp_path / "ngram.txt", "北 京,9\n中 国,8\n北 京,7\n")
    with pytest.raises(ZenError, match=r"ngram.txt:3: n-gram '北 京' already on line 1"):
        Lexicon.load(p)


def test_double_space_in_tokens_style_is_an_error(tmp_path: Path):
    p = write(tmp_path / "ngram.txt", "北 京,9\n中  国,8\n")
    with pytest.raises(ZenError, match=r"ngram.txt:2: expected the n-gram's tokens separated by single spaces"):
        Lexicon.load(p)


def test_empty_missing_and_invalid_utf8_files(tmp_path: Path):
    with pytest.raises(ZenError, match="file is empty"):
        Lexicon.load(write(tmp_path / "empty.txt", ""))
    with pytest.raises(ZenError, match="no such file"):
        Lexicon.load(tmp_path / "missing.txt")
    bad = tmp_path / "bad.txt"
    bad.write_bytes("北 京,9\n".encode() + b"\xff\xfe,3\n")
    with pytest.raises(ZenError, match=r"bad.txt:2: invalid UTF-8 at byte offset 10"):
        Lexicon.load(bad)


def test_tokens_with_spaces_cannot_be_saved(tmp_path: Path):
    with pytest.raises(ZenError, match="without spaces"):
        Lexicon([("a b", "c")], [1]).save(tmp_path / "x.txt")


def test_save_writes_block_by_block_the_same_file(tmp_path, monkeypatch):
    """ngram.txt written a block of lines at a time (a large lexicon is never one string) is the same file."""
    from zencli.lexicon import ngram_file

    lex = Lexicon([("北", "京"), ("a", "##b"), ("中", "国", "人"), ("x",), ("上", "海")], [9, 7, 5, 3, 1])
    lex.save(tmp_path / "one.txt")
    monkeypatch.setattr(ngram_file, "_SAVE_BLOCK", 2)
    lex.save(tmp_path / "blocks.txt")
    expected = "".join(line + "\n" for line in lex.lines()).encode("utf-8")
    assert (tmp_path / "blocks.txt").read_bytes() == (tmp_path / "one.txt").read_bytes() == expected
    assert Lexicon.load(tmp_path / "blocks.txt").ngrams == lex.ngrams
