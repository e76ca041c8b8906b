"""Counts files: the magic line `ZENCOUNTS 1` followed by sections, one per counted chunk (layout in the
package docstring). Sections are appended as they are counted and read back header first, arrays on demand."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zencli.errors import ZenError
from zencli.text.reading import check_readable

MAGIC = b"ZENCOUNTS 1\n"
_SECTION = b"SECT"
_ALIGN = 8


def write_section(f, header: dict[str, Any], arrays: Iterator[tuple[str, np.ndarray]]) -> None:
    """Append one section: `SECT`, u64 data length, the arrays (8-byte aligned), u64 header length, JSON
    header (with each array's name, dtype, length, offset). Arrays are written as they come, so a chunk's
    levels never have to be in memory together; the data length is patched in at the end."""
    start = f.tell()
    f.write(_SECTION + struct.pack("<Q", 0))
    specs, offset = [], 0
    for name, arr in arrays:
        data = np.ascontiguousarray(arr).tobytes()
        specs.append({"name": name, "dtype": arr.dtype.str, "length": int(arr.size), "offset": offset})
        f.write(data + b"\0" * (-len(data) % _ALIGN))
        offset += len(data) + (-len(data) % _ALIGN)
        del data
    head = json.dumps({**header, "arrays": specs}, ensure_ascii=False).encode("utf-8")
    head += b" " * (-len(head) % _ALIGN)
    f.write(struct.pack("<Q", len(head)) + head)
    end = f.tell()
    f.seek(start + len(_SECTION))
    f.write(struct.pack("<Q", offset))
    f.seek(end)


@dataclass
class CountsSection:
    """One counted chunk inside a counts file; arrays are read from disk on demand."""

    path: Path
    index: int
    data_offset: int
    header: dict[str, Any]

    @property
    def table(self) -> list[str]:
        return self.header["table"]

    @property
    def max_n(self) -> int:
        return int(self.header["max_n"])

    def array(self, name: str) -> np.ndarray:
        spec = next((a for a in self.header["arrays"] if a["name"] == name), None)
        if spec is None:
            raise ZenError(f"{self.path}: section {self.index + 1} has no array {name!r}; not a complete counts file")
        dtype = np.dtype(spec["dtype"])
        with open(self.path, "rb") as f:
            f.seek(self.data_offset + spec["offset"])
            arr = np.fromfile(f, dtype=dtype, count=spec["length"])
        if arr.size != spec["length"]:
            raise ZenError(f"{self.path}: truncated in section {self.index + 1} ({name}); "
                           "expected a complete counts file")
        return arr


_HEADER_KEYS = ("max_n", "lines", "chars", "tokens", "positions", "table", "arrays", "tokenizer", "source")


def read_counts_file(path: str | Path) -> list[CountsSection]:
    """The sections of a counts file (headers only; arrays stay on disk)."""
    p = check_readable(path)
    size = p.stat().st_size
    sections: list[CountsSection] = []
    with open(p, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise ZenError(f"{p}: not a zen counts file (expected it to start with {MAGIC!r}; "
                           f"make one with `zen lexicon count`)")
        while True:
            start = f.tell()
            tag = f.read(len(_SECTION))
            if not tag:
                break
            raw_len = f.read(8)
            if tag != _SECTION or len(raw_len) != 8:
                raise ZenError(f"{p}: byte {start}: expected a counts section; the file is damaged or truncated")
            (data_len,) = struct.unpack("<Q", raw_len)
            data_offset = f.tell()
            header = None
            if data_offset + data_len + 8 <= size:
                f.seek(data_offset + data_len)
                (head_len,) = struct.unpack("<Q", f.read(8))
                head = f.read(head_len)
                try:
                    header = json.loads(head.decode("utf-8")) if len(head) == head_len else None
                except (UnicodeDecodeError, json.JSONDecodeError):
                    header = None
            if not isinstance(header, dict) or any(k not in header for k in _HEADER_KEYS):
                raise ZenError(f"{p}: section {len(sections) + 1} (byte {start}) is damaged or truncated; "
                               f"expected a complete counts file")
            sections.append(CountsSection(p, len(sections), data_offset, header))
    if not sections:
        raise ZenError(f"{p}: counts file holds no sections")
    return sections


def concat_counts_files(parts: Sequence[Path], out: Path) -> None:
    """Join counts files (sections in order) into one file, atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "wb") as w:
        w.write(MAGIC)
        for part in parts:
            with open(part, "rb") as r:
                if r.read(len(MAGIC)) != MAGIC:
                    raise ZenError(f"{part}: not a zen counts file")
                shutil.copyfileobj(r, w, 16 << 20)
    tmp.replace(out)


def iter_sections(paths: Sequence[str | Path]) -> Iterator[CountsSection]:
    """The sections of several counts files, in order."""
    for p in paths:
        yield from read_counts_file(p)
