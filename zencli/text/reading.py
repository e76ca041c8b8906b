"""Careful, streaming reading of UTF-8 text files.

Every reader in zen goes through `iter_lines` (files) or `decode_lines` (streams such as stdin), so all
of them treat input the same way: a UTF-8 BOM is dropped, CRLF and CR line ends become plain lines, and
each problem (missing file, directory, empty file, invalid UTF-8) is a one-line ZenError naming the file,
the line and, for bad bytes, the byte offset.
Files are read in binary and decoded line by line, so memory stays flat on files of any size.

Invalid UTF-8 is an error unless a command runs inside `decoding("replace")` (`--encoding-errors replace`,
recipe key `data.encoding_errors` or `encoding_errors`): then each undecodable byte sequence becomes one U+FFFD,
a surrogate half encoded as UTF-8 (3 bytes, `ED A0..BF xx`: half of an emoji split in two) included, so a
file with one character per line keeps its alignment; the `Replaced` tally counts the lines and sequences.
"""

from __future__ import annotations

import codecs
import os
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from zencli.errors import ZenError, where

_BOM = b"\xef\xbb\xbf"

EncodingErrors = Literal["strict", "replace"]
ENCODING_ERRORS: tuple[str, ...] = ("strict", "replace")


@dataclass
class Replaced:
    """What `decoding("replace")` replaced: U+FFFD count per damaged line, keyed by (file, the line's byte
    offset), so a file read twice (format detection, then reading) counts once."""

    lines: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def sequences(self) -> int:
        return sum(self.lines.values())

    def add(self, other: Replaced) -> None:
        self.lines.update(other.lines)

    def summary(self) -> str | None:
        """The one line a command prints when it replaced anything, else None."""
        if not self.lines:
            return None
        per_file: dict[str, int] = {}
        for name, _ in self.lines:
            per_file[name] = per_file.get(name, 0) + 1
        files = ", ".join(f"{name}: {n:,}" for name, n in list(per_file.items())[:3])
        more = f" and {len(per_file) - 3} more files" if len(per_file) > 3 else ""
        return (f"--encoding-errors replace: {self.sequences:,} undecodable byte sequence(s) on {len(self.lines):,} "
                f"line(s) became U+FFFD (lines per file: {files}{more})")


_policy: dict[str, object] = {"errors": "strict", "replaced": None}


def _one_per_sequence(e: UnicodeDecodeError) -> tuple[str, int]:
    """One U+FFFD per undecodable sequence; a 3-byte surrogate half (ED A0..BF 80..BF) is one sequence, where
    Python's "replace" gives it three (its lead byte ED only allows 80..9F next)."""
    bad = e.object[e.start:e.start + 3]
    if len(bad) == 3 and bad[0] == 0xED and 0xA0 <= bad[1] <= 0xBF and 0x80 <= bad[2] <= 0xBF:
        return "\ufffd", e.start + 3
    return "\ufffd", e.end


codecs.register_error("zen-replace", _one_per_sequence)


@contextmanager
def decoding(errors: str) -> Iterator[Replaced]:
    """Within the block every zen reader decodes with `errors` ("strict": invalid UTF-8 is a one-line error;
    "replace": U+FFFD, tallied in the yielded `Replaced`)."""
    if errors not in ENCODING_ERRORS:
        raise ZenError(f"encoding errors: expected one of {', '.join(ENCODING_ERRORS)}, got {errors!r}")
    saved = dict(_policy)
    replaced = Replaced()
    _policy.update(errors=errors, replaced=replaced)
    try:
        yield replaced
    finally:
        _policy.update(saved)


@contextmanager
def text_decoding(errors: str | None) -> Iterator[None]:
    """Every text the block reads is decoded with `errors` (None: strict); what was replaced is one line on
    stderr at the end, also when the command fails later (the count is still true)."""
    with decoding(errors or "strict") as replaced:
        try:
            yield
        finally:
            line = replaced.summary()
            if line:
                print(f"zen: {line}", file=sys.stderr)


def encoding_errors() -> str:
    """The decoding policy now in force (worker processes start with the default: they get this one)."""
    return str(_policy["errors"])


def record_replaced(lines: dict[tuple[str, int], int]) -> None:
    """Add what a worker process replaced (its `Replaced.lines`) to the tally now in force."""
    if lines and isinstance(_policy["replaced"], Replaced):
        _policy["replaced"].lines.update(lines)


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
            if _policy["errors"] != "replace":
                raise ZenError(
                    f"{where(name, lineno)}: invalid UTF-8 at byte offset {line_start + e.start} "
                    f"(byte 0x{raw[e.start]:02x}); expected {expected} (--encoding-errors replace reads it "
                    f"with U+FFFD)"
                ) from None
            text = raw.decode("utf-8", "zen-replace")
            # new U+FFFD only: the line may hold real ones already
            _policy["replaced"].lines[(str(name), line_start)] = text.count("\ufffd") - raw.count(b"\xef\xbf\xbd")
        # A CR-only file arrives as one long "line": split it so CR behaves like LF.
        text = text.rstrip("\n").rstrip("\r")
        if "\r" in text:
            for i, part in enumerate(text.split("\r")):
                yield lineno + i, part
            lineno += text.count("\r")
        else:
            yield lineno, text


def absolute_line_error(err: ZenError, path: str, start: int) -> ZenError:
    """An error of iter_lines(start_byte=start), which numbers lines from the start of its byte range, with
    `file:N:` rewritten to the line of the file."""
    prefix = f"{Path(path)}:"
    msg = str(err)
    m = re.match(r"(\d+):", msg[len(prefix):]) if msg.startswith(prefix) and start > 0 else None
    if m is None:
        return err
    before = 0
    with open(path, "rb") as f:
        f.seek(start - 1)
        if f.read(1) != b"\n":
            f.readline()
        aligned = f.tell()
        f.seek(0)
        left = aligned
        while left > 0:
            block = f.read(min(left, 16 << 20))
            if not block:
                break
            before += block.count(b"\n")
            left -= len(block)
    line = int(m.group(1)) + before
    return ZenError(f"{prefix}{line}:{msg[len(prefix) + m.end():]}")


def shard_byte_ranges(path: str | Path, n: int) -> list[tuple[int, int]]:
    """Split a file into `n` byte ranges; combined with iter_lines(start_byte, end_byte) every line is
    read by exactly one shard."""
    size = check_readable(path).stat().st_size
    n = max(1, min(n, max(size, 1)))
    cuts = [size * i // n for i in range(n + 1)]
    return [(cuts[i], cuts[i + 1]) for i in range(n)]
