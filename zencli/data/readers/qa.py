"""Answer-selection files (NLPCC-DBQA) read into `QaExample`s: one candidate answer per line.

Format `tsv` (the only one), columns detected from the first 50 non-blank lines:
- a header naming the columns (`qid`, `question`/`query`/`text_a`, `answer`/`candidate`/`text_b`,
  `label`), in any order and possibly among other columns;
- otherwise by width: 4 → `qid<TAB>question<TAB>answer<TAB>label`; 3 → `question<TAB>answer<TAB>label`
  when the last column is 0/1 on every sampled line (the original NLPCC release), else
  `qid<TAB>question<TAB>answer` (unlabelled, for prediction); 2 → `question<TAB>answer`.
  Line 1 is also taken as a header when the label column holds integers on every other sampled line
  but not on line 1.
Without a qid column, each distinct question gets a qid: its number in order of first appearance
("0", "1", …), so candidates of one question group together even when not contiguous.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from zencli.data.readers.common import (
    Columns,
    ReadInfo,
    check_format,
    field_value,
    first_line_is_header,
    header_roles,
    sample_lines,
    tsv_rows,
)
from zencli.errors import ZenError, where

QA_FORMATS = ("tsv",)
_LAYOUTS = {
    4: ("qid", "question", "answer", "label"),
    2: ("question", "answer"),
}


@dataclass
class QaExample:
    """One (question, candidate answer) pair; `label` "1" marks a correct answer, None if unlabelled."""

    qid: str
    question: str
    answer: str
    label: str | None
    line: int


def detect_qa_columns(path: str | Path, header: bool | None = None) -> Columns:
    lines = sample_lines(path)
    sample = [t.split("\t") for _, t in lines]
    first = sample[0]
    named = header_roles(first, ("question", "answer"), ("qid", "label")) if header is not False else None
    if named is not None:
        return Columns(True, len(first), named)
    i = 1 if header and len(sample) > 1 else 0
    width = len(sample[i])
    body = [r for r in sample[1:] if len(r) == width] or [sample[i]]
    if width == 3:
        binary = all(r[2].strip() in ("0", "1") for r in body)
        names = ("question", "answer", "label") if binary else ("qid", "question", "answer")
    elif width in _LAYOUTS:
        names = _LAYOUTS[width]
    else:
        raise ZenError(f"{where(path, lines[i][0])}: expected 4 TAB-separated columns "
                       f"qid<TAB>question<TAB>answer<TAB>label (or 3 or 2, see the docs), got {width}")
    roles = {name: c for c, name in enumerate(names)}
    if header is None:
        header = "label" in roles and first_line_is_header(sample, roles["label"], width)
    return Columns(header, width, roles)


def read_qa(path: str | Path, fmt: str = "auto", header: bool | None = None
            ) -> tuple[list[QaExample], ReadInfo]:
    """Read an NLPCC-DBQA style file (columns detected, see the module docstring)."""
    check_format(fmt, QA_FORMATS, "task qa")
    p = Path(path)
    cols = detect_qa_columns(p, header)
    info = ReadInfo(path=str(p), task="qa", format="tsv", header=cols.header, columns=cols.names(),
                    labelled="label" in cols.roles)
    qids: dict[str, str] = {}  # question → derived qid, when the file has no qid column
    out: list[QaExample] = []
    for lineno, f in tsv_rows(p, cols, info):
        question = field_value(p, lineno, f, cols, "question")
        if "qid" in cols.roles:
            qid = field_value(p, lineno, f, cols, "qid", strip=True)
        else:
            qid = qids.setdefault(question, str(len(qids)))
        label = field_value(p, lineno, f, cols, "label", strip=True) if info.labelled else None
        out.append(QaExample(qid, question, field_value(p, lineno, f, cols, "answer"), label, lineno))
    if "qid" not in cols.roles:
        info.notes.append(f"no qid column: {len(qids)} distinct questions numbered in order of appearance")
    info.examples = len(out)
    info.label_counts = dict(sorted(Counter(e.label for e in out if e.label is not None).items()))
    return out, info
