"""Reading-comprehension files (CMRC 2018 / SQuAD v1 JSON, or JSON lines) read into `MrcExample`s.

Formats (`fmt`):
- `squad`: one JSON document `{"data": [{"paragraphs": [{"context": …, "qas": [{"id", "question",
  "answers": [{"text", "answer_start"}]}]}]}]}`; errors name the key path (`data[0].paragraphs[2]…`).
- `jsonl`: one object per line with `question`, `context`, optional `id`/`qid` (default: the line
  number) and optional answers: `answers` as a list of `{"text", "answer_start"}` or of strings, or one
  `answer` string. Used for prediction input (no answers) as well.
Auto-detection: a first line that is a whole JSON object with a `question` key → jsonl, else squad.

Answers are located in their context, never trusted blindly:
- `context[answer_start:answer_start+len(text)] == text` → kept;
- otherwise the occurrence of `text` nearest to `answer_start` is used (or the first one when no start
  is given), then the same for the text with outer whitespace stripped; a moved start is a *repair*,
  counted in `info.repaired_answers`;
- a text that does not occur in the context keeps start None and is counted in `info.unusable_answers`.
An example none of whose answers could be located (or, in a file with answers, one without any) is kept
— evaluation scores it against its texts — but has `trainable=False`, counted in
`info.unusable_examples`. Nothing is dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zencli.data.readers.common import (
    ReadInfo,
    check_format,
    json_records,
    json_text,
    load_json_file,
    parse_json_line,
    sample_lines,
)
from zencli.errors import ZenError, where

MRC_FORMATS = ("squad", "jsonl")


@dataclass
class MrcExample:
    """A question on a context with its gold answers as (text, start) — start None where the text could
    not be found in the context. `trainable` is False when no answer has a start; `line` is the line
    in a JSON-lines file (None for a whole-file JSON document)."""

    qid: str
    question: str
    context: str
    answers: list[tuple[str, int | None]]
    trainable: bool
    line: int | None = None

    @property
    def train_answer(self) -> tuple[str, int] | None:
        """The first located answer: the one a span-extraction model trains on."""
        for text, start in self.answers:
            if start is not None:
                return text, start
        return None


def _nearest(context: str, text: str, start: int | None) -> int | None:
    best: int | None = None
    i = context.find(text)
    while i >= 0:
        if start is None:
            return i
        if best is None or abs(i - start) < abs(best - start):
            best = i
        elif i > start:
            break  # occurrences only get further away from here on
        i = context.find(text, i + 1)
    return best


def locate_answer(context: str, text: str, start: int | None) -> tuple[str, int | None, str]:
    """Where `text` sits in `context`: (text, start, status). Status "ok": the given start was right;
    "located": no start was given, the first occurrence is used; "repaired": the given start was wrong
    (the nearest occurrence is used) or only the text with outer whitespace stripped occurs (that text
    is returned); "missing": the text is not in the context, start None."""
    if not text.strip():
        return text, None, "missing"
    if start is not None and 0 <= start and context[start:start + len(text)] == text:
        return text, start, "ok"
    for candidate in dict.fromkeys((text, text.strip())):
        found = _nearest(context, candidate, start)
        if found is not None:
            status = "repaired" if start is not None or candidate != text else "located"
            return candidate, found, status
    return text, None, "missing"


class _Builder:
    """Turns raw answers into located ones and keeps the counts for `ReadInfo`."""

    def __init__(self, info: ReadInfo):
        self.info = info
        self.seen: dict[str, str] = {}  # qid → where it was defined, to report duplicates

    def example(self, qid: str, question: str, context: str, raw: list[tuple[str, int | None]],
                at: str, line: int | None) -> MrcExample:
        if qid in self.seen:
            raise ZenError(f"{at}: duplicate question id {qid!r} (first at {self.seen[qid]}); "
                           f"expected unique ids")
        self.seen[qid] = at
        answers: list[tuple[str, int | None]] = []
        for raw_text, raw_start in raw:
            text, located, status = locate_answer(context, raw_text, raw_start)
            self.info.repaired_answers += status == "repaired"
            self.info.unusable_answers += status == "missing"
            answers.append((text, located))
        self.info.labelled |= bool(raw)
        return MrcExample(qid, question, context, answers, any(s is not None for _, s in answers), line)


def detect_mrc_format(path: str | Path) -> str:
    first = sample_lines(path, 1)[0][1].strip()
    if first.startswith("{"):
        try:
            obj = json.loads(first)
        except json.JSONDecodeError:
            return "squad"  # the first line of a pretty-printed document
        # A one-line SQuAD document is a whole object too; a record has its question at the top.
        if isinstance(obj, dict) and "question" in obj and "data" not in obj:
            return "jsonl"
    return "squad"


def read_mrc(path: str | Path, fmt: str = "auto") -> tuple[list[MrcExample], ReadInfo]:
    """Read an MRC file; answers are located and repaired as the module docstring says."""
    check_format(fmt, MRC_FORMATS, "task mrc")
    p = Path(path)
    if fmt == "auto":
        fmt = detect_mrc_format(p)
    info = ReadInfo(path=str(p), task="mrc", format=fmt, labelled=False)
    build = _Builder(info)
    examples = _read_squad(p, build) if fmt == "squad" else _read_jsonl(p, build)
    info.examples = len(examples)
    if info.labelled:  # in a prediction file no example has answers, and none is meant to
        info.unusable_examples = sum(not e.trainable for e in examples)
    return examples, info


def _expect(value: Any, kind: type | tuple[type, ...], path: Path, at: str, what: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ZenError(f"{path}: {at}: expected {what}, got {type(value).__name__}")
    return value


def _squad_answers(p: Path, qa: dict[str, Any], at: str) -> list[tuple[str, int | None]]:
    out: list[tuple[str, int | None]] = []
    for k, a in enumerate(_expect(qa.get("answers", []), list, p, f"{at}.answers", "a list")):
        aat = f"{at}.answers[{k}]"
        _expect(a, dict, p, aat, "an object with text and answer_start")
        text = _expect(a.get("text"), str, p, f"{aat}.text", "a string")
        start = a.get("answer_start")
        if start is not None:
            _expect(start, int, p, f"{aat}.answer_start", "an integer")
        out.append((text, start))
    return out


def _read_squad(p: Path, build: _Builder) -> list[MrcExample]:
    doc = load_json_file(p)
    _expect(doc, dict, p, "top level", 'an object with "data"')
    out: list[MrcExample] = []
    for i, article in enumerate(_expect(doc.get("data"), list, p, "data", "a list of articles")):
        _expect(article, dict, p, f"data[{i}]", "an object with paragraphs")
        for j, para in enumerate(_expect(article.get("paragraphs"), list, p, f"data[{i}].paragraphs",
                                         "a list")):
            pat = f"data[{i}].paragraphs[{j}]"
            _expect(para, dict, p, pat, "an object with context and qas")
            context = _expect(para.get("context"), str, p, f"{pat}.context", "a string")
            for k, qa in enumerate(_expect(para.get("qas"), list, p, f"{pat}.qas", "a list")):
                at = f"{pat}.qas[{k}]"
                _expect(qa, dict, p, at, "an object with id, question and answers")
                qid = str(_expect(qa.get("id"), (str, int), p, f"{at}.id", "a string id"))
                question = _expect(qa.get("question"), str, p, f"{at}.question", "a string")
                answers = _squad_answers(p, qa, at)
                out.append(build.example(qid, question, context, answers, f"{p}: {at}", None))
    return out


def _jsonl_answers(p: Path, lineno: int, obj: dict[str, Any]) -> list[tuple[str, int | None]]:
    if "answers" in obj:
        raw = obj["answers"]
        if not isinstance(raw, list):
            raise ZenError(f"{where(p, lineno)}: 'answers': expected a list, got {type(raw).__name__}")
    elif "answer" in obj:
        raw = [obj["answer"]]
    else:
        return []
    out: list[tuple[str, int | None]] = []
    for a in raw:
        if isinstance(a, str):
            out.append((a, None))
        elif isinstance(a, dict) and isinstance(a.get("text"), str) and (
                a.get("answer_start") is None or type(a.get("answer_start")) is int):
            out.append((a["text"], a.get("answer_start")))
        else:
            raise ZenError(f"{where(p, lineno)}: bad answer {str(a)[:40]!r}; expected a string or "
                           f'{{"text": str, "answer_start": int}}')
    return out


def _question(path: str | Path, lineno: int, obj: dict[str, Any]) -> tuple[str, str, str]:
    """(id, question, context) of a JSON-lines record; the id defaults to the line number."""
    qid = obj.get("id", obj.get("qid", lineno))
    if isinstance(qid, bool) or not isinstance(qid, (str, int)):
        raise ZenError(f"{where(path, lineno)}: 'id': expected a string, got {type(qid).__name__}")
    question = json_text(path, lineno, obj, ("question",), "question")
    context = json_text(path, lineno, obj, ("context",), "context")
    return str(qid), question, context


def _read_jsonl(p: Path, build: _Builder) -> list[MrcExample]:
    out: list[MrcExample] = []
    for lineno, obj in json_records(p, build.info):
        qid, question, context = _question(p, lineno, obj)
        out.append(build.example(qid, question, context, _jsonl_answers(p, lineno, obj), where(p, lineno), lineno))
    return out


def parse_mrc_line(path: str | Path, lineno: int, text: str) -> MrcExample:
    """One line of prediction input, read like a `jsonl` record but without answers (none are located).
    An empty line is an empty example, so the output keeps the input's line count."""
    if not text.strip():
        return MrcExample("", "", "", [], False, lineno)
    qid, question, context = _question(path, lineno, parse_json_line(path, lineno, text))
    return MrcExample(qid, question, context, [], False, lineno)
