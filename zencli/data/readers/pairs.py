"""Sentence-pair files (SPM, NLI) read into `PairExample`s.

Formats (`fmt`):
- `tsv`: `a<TAB>b<TAB>label` (LCQMC; XNLI `premise<TAB>hypothesis<TAB>label`), or `a<TAB>b` without
  labels for prediction. Header detection: line 1 is a header if it names both sentence columns
  (`sentence1`/`sentence2`, `text_a`/`text_b`, `premise`/`hypothesis`/`hypo`, `query1`/`query2`, …; a
  label column `label`/`gold_label` is optional) — then a wider file (the original XNLI) is read by
  those names — or if, in a 3-column file, the label column of every other sampled line is a label value
  (an integer or a word such as entailment/neutral/contradiction) and line 1's is not.
- `jsonl`: one JSON object per line with `sentence1`/`sentence2` (or `text_a`/`text_b`,
  `premise`/`hypothesis`, `query1`/`query2`) and `gold_label` or `label` (BQ); all records labelled or none.

The NLI label `contradictory` (XNLI's Chinese release) is read as `contradiction`, and said so in
`info.notes`. Blank lines carry no example: they are skipped and counted in `info.blank_lines`.
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
from zencli.errors import ZenError, where

PAIR_FORMATS = ("tsv", "jsonl")
A_KEYS = ("sentence1", "text_a", "premise", "query1", "question1")
B_KEYS = ("sentence2", "text_b", "hypothesis", "query2", "question2")
LABEL_KEYS = ("gold_label", "label")
LABEL_ALIASES = {"contradictory": "contradiction"}


@dataclass
class PairExample:
    """Two texts and their label (None when unlabelled); `line` is the example's line in the file."""

    a: str
    b: str
    label: str | None
    line: int


def detect_pair_columns(path: str | Path, header: bool | None = None) -> Columns:
    lines = sample_lines(path)
    sample = [t.split("\t") for _, t in lines]
    first = sample[0]
    named = header_roles(first, ("a", "b"), ("label",)) if header is not False else None
    if named is not None:
        return Columns(True, len(first), named)
    # A forced header says nothing about the data's width: take it from the next line.
    i = 1 if header and len(sample) > 1 else 0
    width = len(sample[i])
    if width not in (2, 3):
        raise ZenError(f"{where(path, lines[i][0])}: expected 3 TAB-separated columns "
                       f"a<TAB>b<TAB>label (or 2 without labels), got {width}")
    roles = {"a": 0, "b": 1} | ({"label": 2} if width == 3 else {})
    if header is None:
        header = width == 3 and first_line_is_header(sample, 2, 3)
    return Columns(header, width, roles)


def detect_pair_format(path: str | Path) -> str:
    return "jsonl" if looks_like_json_lines(sample_lines(path)) else "tsv"


def read_pairs(path: str | Path, fmt: str = "auto", header: bool | None = None, task: str = "spm"
               ) -> tuple[list[PairExample], ReadInfo]:
    """Read an SPM/NLI file; `fmt="auto"` detects the format, `header` overrides header detection."""
    check_format(fmt, PAIR_FORMATS, f"task {task}")
    p = Path(path)
    if fmt == "auto":
        fmt = detect_pair_format(p)
    info = ReadInfo(path=str(p), task=task, format=fmt)
    examples = _read_jsonl(p, info) if fmt == "jsonl" else _read_tsv(p, detect_pair_columns(p, header), info)
    aliased = Counter(e.label for e in examples if e.label in LABEL_ALIASES)
    for old, n in sorted(aliased.items()):
        info.notes.append(f"label {old!r} read as {LABEL_ALIASES[old]!r} ({n} examples)")
    for e in examples:
        if e.label in LABEL_ALIASES:
            e.label = LABEL_ALIASES[e.label]
    info.examples = len(examples)
    info.tokens = sum(len(e.a) + len(e.b) for e in examples)
    info.label_counts = dict(sorted(Counter(e.label for e in examples if e.label is not None).items()))
    return examples, info


def _read_tsv(p: Path, cols: Columns, info: ReadInfo) -> list[PairExample]:
    info.header, info.columns = cols.header, cols.names()
    info.labelled = "label" in cols.roles
    out: list[PairExample] = []
    for lineno, f in tsv_rows(p, cols, info):
        label = field_value(p, lineno, f, cols, "label", strip=True) if info.labelled else None
        out.append(PairExample(field_value(p, lineno, f, cols, "a"), field_value(p, lineno, f, cols, "b"),
                               label, lineno))
    return out


def _read_jsonl(p: Path, info: ReadInfo) -> list[PairExample]:
    out: list[PairExample] = []
    label_of = LabelPresence(p, LABEL_KEYS)
    for lineno, obj in json_records(p, info):
        a = json_text(p, lineno, obj, A_KEYS, "first sentence")
        b = json_text(p, lineno, obj, B_KEYS, "second sentence")
        out.append(PairExample(a, b, label_of(lineno, obj), lineno))
    info.labelled = bool(label_of.labelled)
    return out
