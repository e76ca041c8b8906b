"""Pieces every reader shares: the `ReadInfo` report, sampling the first lines for format detection,
JSON parsing with file:line errors, TAB-separated column layouts with header detection, and the loops
that turn a JSON-lines or TAB-separated file into records (blank lines skipped and counted)."""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from zencli.errors import ZenError, where
from zencli.text.reading import iter_lines

# Lines (non-empty ones) looked at when a format is detected.
SAMPLE_LINES = 50


@dataclass
class ReadInfo:
    """What a reader found: the format it used (detected or given) and counts a user can check."""

    path: str
    task: str
    format: str
    examples: int = 0
    labelled: bool = True
    header: bool = False
    columns: list[str] = field(default_factory=list)  # role of each TAB column, e.g. ["label", "text"]
    scheme: str | None = None  # tagging: BMES / BIO / IOBES
    level: str = "char"  # tagging: one label per char, or per word (word-level formats)
    tokens: int = 0  # characters (words for word-level tagging): of the sentences, of the texts (dc/sa/spm/nli)
    words: int = 0  # cws / pos: words
    empty: int = 0  # examples with no text (kept so line-aligned output keeps its line count)
    blank_lines: int = 0  # blank lines skipped in formats where they carry no example
    ill_formed: int = 0  # tagging: sentences whose label sequence breaks the scheme (kept as they are)
    label_counts: dict[str, int] = field(default_factory=dict)
    entities: dict[str, int] = field(default_factory=dict)  # ner: well-formed entities per type
    repaired_answers: int = 0  # mrc: answer_start wrong, text found elsewhere in the context
    unusable_answers: int = 0  # mrc: answer text not in the context at all
    unusable_examples: int = 0  # mrc: no answer could be located, so not usable for training
    notes: list[str] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        return sorted(self.label_counts)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["labels"] = self.labels
        return d


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a reader builds millions of small strings and lists:
    none of them form cycles, yet each allocation burst triggers full collections (about a third of
    the reading time on the PD98 training files)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def show(value: str, limit: int = 40) -> str:
    """A value quoted for an error message, shortened so the message stays one readable line."""
    return repr(value if len(value) <= limit else value[:limit] + "…")


def sample_lines(path: str | Path, n: int = SAMPLE_LINES) -> list[tuple[int, str]]:
    """The first `n` non-blank lines of a file, read lazily (detection never reads the whole file)."""
    out: list[tuple[int, str]] = []
    for lineno, text in iter_lines(path):
        if text.strip():
            out.append((lineno, text))
            if len(out) >= n:
                break
    if not out:
        raise ZenError(f"{path}: only blank lines; expected at least one example")
    return out


def check_format(fmt: str, allowed: Iterable[str], what: str) -> None:
    allowed = tuple(allowed)
    if fmt != "auto" and fmt not in allowed:
        raise ZenError(f"format {fmt!r} for {what}: expected 'auto' or one of {', '.join(allowed)}")


def parse_json_line(path: str | Path, lineno: int, text: str) -> dict[str, Any]:
    """One JSON-lines record, which must be an object."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ZenError(f"{where(path, lineno)}: invalid JSON at column {e.colno} ({e.msg}); "
                       f"expected one JSON object per line") from None
    if not isinstance(obj, dict):
        raise ZenError(f"{where(path, lineno)}: expected a JSON object, got {type(obj).__name__}")
    return obj


def json_records(path: Path, info: ReadInfo) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each record of a JSON-lines file; blank lines carry no record and are
    counted in `info.blank_lines`."""
    for lineno, text in iter_lines(path):
        if not text.strip():
            info.blank_lines += 1
            continue
        yield lineno, parse_json_line(path, lineno, text)


def looks_like_json_lines(sample: list[tuple[int, str]]) -> bool:
    """True when the first non-blank line is a complete JSON object on its own."""
    text = sample[0][1].strip()
    if not text.startswith("{"):
        return False
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


def load_json_file(path: str | Path) -> Any:
    """A whole-file JSON document. Lines are re-joined with "\\n" so json's line numbers are the file's."""
    text = "\n".join(t for _, t in iter_lines(path))
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ZenError(f"{where(path, e.lineno)}: invalid JSON at column {e.colno} ({e.msg})") from None


def pick_key(obj: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of `keys` present in a JSON object (so synonyms such as text/sentence/content work)."""
    for k in keys:
        if k in obj:
            return k
    return None


def json_str(path: str | Path, lineno: int | None, obj: dict[str, Any], key: str, *, required: bool = True
             ) -> str | None:
    """A string field of a JSON record; numbers are accepted for labels and ids and turned into text."""
    if key not in obj or obj[key] is None:
        if required:
            raise ZenError(f"{where(path, lineno)}: missing key {key!r}")
        return None
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise ZenError(f"{where(path, lineno)}: key {key!r}: expected a string, got {type(v).__name__}")
    return str(v)


def json_text(path: str | Path, lineno: int, obj: dict[str, Any], keys: tuple[str, ...], what: str) -> str:
    """A required, non-empty text field found under the first present of `keys`."""
    k = pick_key(obj, keys)
    if k is None:
        raise ZenError(f"{where(path, lineno)}: no {what}; expected a key {' or '.join(map(repr, keys))}")
    v = json_str(path, lineno, obj, k) or ""
    if not v.strip():
        raise ZenError(f"{where(path, lineno)}: empty {k!r}; expected a non-empty {what}")
    return v


class LabelPresence:
    """Checks that a JSON-lines file is all labelled or all unlabelled, and reads each label."""

    def __init__(self, path: str | Path, keys: tuple[str, ...]):
        self.path, self.keys = path, keys
        self.labelled: bool | None = None

    def __call__(self, lineno: int, obj: dict[str, Any]) -> str | None:
        k = pick_key(obj, self.keys)
        label = json_str(self.path, lineno, obj, k, required=False) if k else None
        if label is not None:
            label = label.strip()
            if not label:
                raise ZenError(f"{where(self.path, lineno)}: empty {k!r}; expected a non-empty label")
        if self.labelled is None:
            self.labelled = label is not None
        elif self.labelled != (label is not None):
            want = "a label" if self.labelled else "no label"
            raise ZenError(f"{where(self.path, lineno)}: expected {want} ({'/'.join(self.keys)}) like the "
                           f"records before it; a file is either all labelled or all unlabelled")
        return label


# --- TAB-separated columns -----------------------------------------------------------------------

# Header words that name a column's role (lower-cased). Order inside a tuple is priority: when several
# header fields match one role, the earliest name in the tuple wins (XNLI has both gold_label and label1).
ROLE_NAMES: dict[str, tuple[str, ...]] = {
    "label": ("label", "gold_label", "labels", "class", "category", "sentiment", "polarity", "y",
              "标签", "类别"),
    "text": ("text", "text_a", "sentence", "review", "content", "comment", "document", "doc",
             "文本", "句子", "评论", "内容"),
    "a": ("sentence1", "text_a", "premise", "query1", "question1", "q1", "s1", "sentence_a", "句子1"),
    "b": ("sentence2", "text_b", "hypothesis", "hypo", "query2", "question2", "q2", "s2", "sentence_b",
          "句子2"),
    "qid": ("qid", "question_id", "id"),
    "question": ("question", "query", "text_a", "q"),
    "answer": ("answer", "text_b", "candidate", "sentence", "a"),
}

_INT = re.compile(r"[+-]?\d+\Z")
# Label words that never name a column: a first line made of them is data, not a header.
_LABEL_WORDS = {"entailment", "neutral", "contradiction", "contradictory", "positive", "negative", "pos",
                "neg", "true", "false", "yes", "no"}


def looks_like_label(value: str) -> bool:
    v = value.strip().lower()
    return bool(_INT.match(v)) or v in _LABEL_WORDS


def first_line_is_header(sample: list[list[str]], col: int, width: int) -> bool:
    """Whether line 1 of a headerless-looking sample is a header after all: it has `width` fields and its
    column `col` is not a label value, while that column holds one on every other sampled line of `width`
    fields (a header names its columns with words, the data below it has labels)."""
    first = sample[0]
    rest = [r[col] for r in sample[1:] if len(r) == width]
    return (len(first) == width and bool(rest) and all(map(looks_like_label, rest))
            and not looks_like_label(first[col]))


def header_roles(fields: list[str], required: tuple[str, ...], optional: tuple[str, ...] = ()
                 ) -> dict[str, int] | None:
    """Map roles to column indices if `fields` is a header naming every required role, else None."""
    names = [f.strip().lower() for f in fields]
    roles: dict[str, int] = {}
    taken: set[int] = set()
    for role in required + optional:
        for name in ROLE_NAMES[role]:
            if name in names and names.index(name) not in taken:
                roles[role] = names.index(name)
                taken.add(roles[role])
                break
        else:
            if role in required:
                return None
    return roles


@dataclass
class Columns:
    """How to read one TAB-separated file: whether line 1 is a header, how many fields a line has
    (None: a named header picked its columns out of a wider file) and which column plays which role."""

    header: bool
    width: int
    roles: dict[str, int]

    def names(self) -> list[str]:
        by_index = {i: r for r, i in self.roles.items()}
        return [by_index.get(i, "-") for i in range(self.width)]


def split_row(path: str | Path, lineno: int, text: str, cols: Columns) -> list[str]:
    fields = text.split("\t")
    if len(fields) != cols.width:
        expected = "\\t".join(cols.names())
        raise ZenError(f"{where(path, lineno)}: expected {cols.width} TAB-separated columns ({expected}), "
                       f"got {len(fields)}")
    return fields


def tsv_rows(path: Path, cols: Columns, info: ReadInfo) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each data line of a TAB-separated file read with layout `cols`: the header
    line is passed over, blank lines carry no example and are counted in `info.blank_lines`, and a line of
    another width is a one-line file:line error."""
    for lineno, text in iter_lines(path):
        if cols.header and lineno == 1:
            continue
        if not text.strip():
            info.blank_lines += 1
            continue
        yield lineno, split_row(path, lineno, text, cols)


def field_value(path: str | Path, lineno: int, fields: list[str], cols: Columns, role: str, *,
                strip: bool = False) -> str:
    v = fields[cols.roles[role]]
    if strip:
        v = v.strip()
    if not v.strip():
        raise ZenError(f"{where(path, lineno)}: empty {role} in column {cols.roles[role] + 1}; "
                       f"expected a non-empty {role}")
    return v
