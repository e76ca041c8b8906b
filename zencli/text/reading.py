"""Careful, streaming reading of UTF-8 text files.

Every reader in zen goes through `iter_lines` (files) or `decode_lines` (streams such as stdin), so all
of them treat input the same way: a UTF-8 BOM is dropped, CRLF and CR line ends become plain lines, and
each problem (missing file, directory, empty file, invalid UTF-8) is a one-line ZenError naming the file,
the line and, for bad bytes, the byte offset.
Files are read in binary and decoded line by line, so memory stays flat on files of any size.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
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
        yield from decode_lines(f, p, offset=offset, end_byte=end_byte)


def _without_bom(raw: bytes | str) -> tuple[bytes | str, int]:
    """The first line without its BOM (bytes) or U+FEFF (text), and the byte offset its content starts at."""
    if isinstance(raw, str):
        return raw.removeprefix("\ufeff"), 0
    return (raw[3:], 3) if raw.startswith(_BOM) else (raw, 0)


def decode_lines(
    raw_lines: Iterable[bytes] | Iterable[str], name: str | Path, *, offset: int = 0, end_byte: int | None = None,
    expected: str = "a UTF-8 text file",
) -> Iterator[tuple[int, str]]:
    """`(line_number, text)` of raw lines as a binary file or stream yields them (line ends kept), decoded
    the way every zen reader decodes: UTF-8, a BOM at byte 0 dropped, LF / CRLF / CR line ends, invalid
    bytes a one-line error naming `name`, the line and the byte offset (`expected` ends the message).

    `offset` is the byte offset of the first raw line (a BOM is looked for only at 0); reading stops at the
    first line starting at or after `end_byte`. Lines already decoded (a text stream) pass through with
    only a leading U+FEFF dropped and the line ends handled, so `zen predict` reads a pipe either way.
    """
    lineno = 0
    for raw in raw_lines:
        if end_byte is not None and offset >= end_byte:
            break
        lineno += 1
        line_start = offset
        offset += len(raw)
        if line_start == 0:
            raw, line_start = _without_bom(raw)
        try:
            text = raw.decode("utf-8")
        except AttributeError:  # a text stream's line, decoded already (no type test on the hot path)
            text = raw
        except UnicodeDecodeError as e:
            raise ZenError(
                f"{where(name, lineno)}: invalid UTF-8 at byte offset {line_start + e.start} "
                f"(byte 0x{raw[e.start]:02x}); expected {expected}"
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
