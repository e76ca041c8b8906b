"""Careful file reading: every bad input is a one-line ZenError naming the file (and line)."""

from pathlib import Path

import pytest

from zencli.errors import ZenError
from zencli.text.reading import iter_lines, shard_byte_ranges


def _lines(path, **kw):
    return list(iter_lines(path, **kw))


def test_plain_lines_numbered_from_one(tmp_path: Path):
    p = tmp_path / "a.txt"
    p.write_text("甲乙\n\n丙\n", encoding="utf-8")
    assert _lines(p) == [(1, "甲乙"), (2, ""), (3, "丙")]


def test_no_trailing_newline(tmp_path: Path):
    p = tmp_path / "a.txt"
    p.write_bytes("甲\n乙".encode())
    assert _lines(p) == [(1, "甲"), (2, "乙")]


def test_bom_is_dropped(tmp_path: Path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"\xef\xbb\xbf" + "甲乙\n丙\n".encode())
    assert _lines(p) == [(1, "甲乙"), (2, "丙")]


def test_crlf_and_cr_line_ends(tmp_path: Path):
    p = tmp_path / "a.txt"
    p.write_bytes("甲\r\n乙\r\n".encode())
    assert _lines(p) == [(1, "甲"), (2, "乙")]
    q = tmp_path / "b.txt"
    q.write_bytes("甲\r乙\r丙".encode())
    assert [t for _, t in _lines(q)] == ["甲", "乙", "丙"]


def test_invalid_utf8_names_line_and_byte_offset(tmp_path: Path):
    p = tmp_path / "bad.txt"
    p.write_bytes("好\n".encode() + b"ab\xff\n")
    with pytest.raises(ZenError) as e:
        _lines(p)
    msg = str(e.value)
    assert f"{p}:2" in msg and "byte offset 6" in msg and "\n" not in msg


def test_missing_empty_and_directory(tmp_path: Path):
    with pytest.raises(ZenError, match="no such file"):
        _lines(tmp_path / "nope.txt")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(ZenError, match="empty"):
        _lines(empty)
    assert _lines(empty, allow_empty=True) == []
    with pytest.raises(ZenError, match="directory"):
        _lines(tmp_path)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 50])
def test_byte_range_shards_cover_every_line_once(tmp_path: Path, n: int):
    p = tmp_path / "a.txt"
    lines = [("字" * (i % 5)) + str(i) for i in range(40)]
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    got = []
    for start, end in shard_byte_ranges(p, n):
        got.extend(t for _, t in iter_lines(p, start_byte=start, end_byte=end))
    assert got == lines
