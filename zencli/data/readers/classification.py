"""Sentence-level files (DC, SA) read into `TextExample`s.

Formats (`fmt`):
- `tsv`: two TAB-separated columns, label and text in either order, with or without a header line.
  A header names its columns (`label`, `text`, `text_a`, `sentence`, `review`, `content`, … see
  `ROLE_NAMES`) and may then have more columns than these two; the named ones are used.
  Header detection: line 1 is a header if it names a text column (and maybe a label column), or if
  the label column holds integers on every other sampled line but not on line 1.
  Without a header, the label column is the one with fewer distinct values over the first 50 lines
  (labels come from a small set, texts rarely repeat); on a tie, the one with the shorter mean length;
  on a further tie, column 1.
- `label-text` / `text-label`: `tsv` with the column order given instead of detected.
- `jsonl`: one JSON object per line, text under `text` (or `sentence`, `content`, `text_a`, `review`),
  label under `label` (or `gold_label`); all records labelled or none.
- `text`: unlabelled, one text per line (for prediction); empty lines are kept as empty examples so the
  output has the input's line count.

Auto-detection: a first line that is a JSON object → jsonl; no TAB on any sampled line → text; else tsv.
In tsv and jsonl files blank lines carry no example and are skipped (and counted in `info.blank_lines`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from zencli.data.readers.common import (
    Columns,
    LabelPresence,
    ReadInfo,
    check_format,
    field_value,
    first_line_is_header,
    header_roles,
    json_records,
    json_text,
    looks_like_json_lines,
    sample_lines,
    tsv_rows,
)
from zencli.errors import ZenError
from zencli.text.reading import iter_lines

CLASSIFICATION_FORMATS = ("tsv", "label-text", "text-label", "jsonl", "text")
TEXT_KEYS = ("text", "sentence", "content", "text_a", "review")
LABEL_KEYS = ("label", "gold_label")


@dataclass
class TextExample:
    """One text and its label (None when the file has no labels); `line` is its line in the file."""

    text: str
    label: str | None
    line: int


def detect_label_column(rows: list[list[str]]) -> int:
    """Which of two columns holds the label: fewer distinct values, then shorter mean length, then 0."""
    def key(c: int) -> tuple[int, float, int]:
        values = [r[c] for r in rows]
        return len(set(values)), sum(map(len, values)) / max(len(values), 1), c

    return min((0, 1), key=key)


def detect_columns(path: str | Path, header: bool | None = None, order: str | None = None) -> Columns:
    """The column layout of a `tsv` file (rules in the module docstring). `header` and `order`
    ("label-text" / "text-label") override the detection."""
    sample = [t.split("\t") for _, t in sample_lines(path)]
    first = sample[0]
    named = header_roles(first, ("text",), ("label",)) if header is not False else None
    if named is not None:
        return Columns(True, len(first), named)
    rows = [r for r in sample if len(r) == 2]
    if not rows:
        raise ZenError(f"{path}: expected 2 TAB-separated columns (label and text) on the first lines, "
                       f"got {len(first)}")
    if order is not None:
        label_col = 0 if order == "label-text" else 1
    else:
        body = rows[1:] if len(rows) > 1 else rows
        label_col = detect_label_column(body)
    if header is None:
        header = first_line_is_header(sample, label_col, 2)
    roles = {"label": label_col, "text": 1 - label_col}
    return Columns(header, 2, roles)


def detect_classification_format(path: str | Path) -> str:
    sample = sample_lines(path)
    if looks_like_json_lines(sample):
        return "jsonl"
    if not any("\t" in t for _, t in sample):
        return "text"
    return "tsv"


def read_classification(path: str | Path, fmt: str = "auto", header: bool | None = None, task: str = "dc"
                        ) -> tuple[list[TextExample], ReadInfo]:
    """Read a DC/SA file; `fmt="auto"` detects the format, `header` overrides header detection."""
    check_format(fmt, CLASSIFICATION_FORMATS, f"task {task}")
    p = Path(path)
    if fmt == "auto":
        fmt = detect_classification_format(p)
    info = ReadInfo(path=str(p), task=task, format=fmt)
    if fmt == "jsonl":
        examples = _read_jsonl(p, info)
    elif fmt == "text":
        examples = [TextExample(t, None, ln) for ln, t in iter_lines(p)]
        info.labelled = False
        info.empty = sum(not e.text for e in examples)
    else:
        cols = detect_columns(p, header, None if fmt == "tsv" else fmt)
        info.header, info.columns = cols.header, cols.names()
        info.labelled = "label" in cols.roles
        examples = _read_tsv(p, cols, info)
    info.examples = len(examples)
    info.tokens = sum(len(e.text) for e in examples)
    info.label_counts = dict(sorted(Counter(e.label for e in examples if e.label is not None).items()))
    return examples, info


def _read_tsv(p: Path, cols: Columns, info: ReadInfo) -> list[TextExample]:
    out: list[TextExample] = []
    has_label = "label" in cols.roles
    for lineno, fields in tsv_rows(p, cols, info):
        label = field_value(p, lineno, fields, cols, "label", strip=True) if has_label else None
        out.append(TextExample(field_value(p, lineno, fields, cols, "text"), label, lineno))
    return out


def _read_jsonl(p: Path, info: ReadInfo) -> list[TextExample]:
    out: list[TextExample] = []
    label_of = LabelPresence(p, LABEL_KEYS)
    for lineno, obj in json_records(p, info):
        out.append(TextExample(json_text(p, lineno, obj, TEXT_KEYS, "text"), label_of(lineno, obj), lineno))
    info.labelled = bool(label_of.labelled)
    return out
