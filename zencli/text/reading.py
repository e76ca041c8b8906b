"""Careful, streaming reading of UTF-8 text files.

Every reader in zen goes through `iter_lines`, so all of them treat input the same way: a UTF-8 BOM is
dropped, CRLF and CR line ends become plain lines, and each problem (missing file, directory, empty file,
invalid UTF-8) is a one-line ZenError naming the file, the line and, for bad bytes, the byte offset.
Files are read in binary and decoded line by line, so memory stays flat on files of any size.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from zencli.errors import ZenError, where

_BOM = b"\xef\xbb\xbf"


def check_readable(path: str | Path) -> Path:
    """Return `path` as a Path, or raise a one-line error if it cannot be read as a file."""
    p = Path(path)
    if not p.exists():
        raise ZenError(f"{p}: no such file")
    if p.is_dir():
        raise ZenError(f"{p}: is a directory, expected a text file")
    if not os.access(p, os.R_OK):
        raise ZenError(f"{p}: permission denied")
    return p


def iter_lines(
    path: str | Path, *, allow_empty: bool = False, start_byte: int = 0, end_byte: int | None = None
) -> Iterator[tuple[int, str]]:
    """Yield `(line_number, text)` for each line of a UTF-8 file, line ends removed.

    Line numbers are 1-based and count every line, blank ones included, so an error message can point
    at the line a user sees in an editor. `start_byte`/`end_byte` restrict reading to the lines that
    *start* in that byte range (used to split a file into shards at line boundaries); line numbers are
    then relative to the shard and the caller must not rely on them for messages.
    """
    p = check_readable(path)
    size = p.stat().st_size
    if size == 0 and not allow_empty:
        raise ZenError(f"{p}: file is empty")
    with open(p, "rb") as f:
        offset = 0
        if start_byte > 0:
            f.seek(start_byte - 1)
            # Align to the first line that starts at or after start_byte.
            if f.read(1) != b"\n":
                f.readline()
            offset = f.tell()
        lineno = 0
        for raw in f:
            if end_byte is not None and offset >= end_byte:
                break
            lineno += 1
            line_start = offset
            offset += len(raw)
            if line_start == 0 and raw.startswith(_BOM):
                raw = raw[3:]
                line_start = 3
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ZenError(
                    f"{where(p, lineno)}: invalid UTF-8 at byte offset {line_start + e.start} "
                    f"(byte 0x{raw[e.start]:02x}); expected a UTF-8 text file"
                ) from None
            # A CR-only file arrives as one long "line": split it so CR behaves like LF.
            text = text.rstrip("\n").rstrip("\r")
            if "\r" in text:
                for i, part in enumerate(text.split("\r")):
                    yield lineno + i, part
                lineno += text.count("\r")
            else:
                yield lineno, text


def shard_byte_ranges(path: str | Path, n: int) -> list[tuple[int, int]]:
    """Split a file into `n` byte ranges; combined with iter_lines(start_byte, end_byte) every line is
    read by exactly one shard."""
    size = check_readable(path).stat().st_size
    n = max(1, min(n, max(size, 1)))
    cuts = [size * i // n for i in range(n + 1)]
    return [(cuts[i], cuts[i + 1]) for i in range(n)]
