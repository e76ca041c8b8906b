"""Token-level files (CWS, POS, NER) read into one `TaggedSentence` per sentence.

Formats (`fmt`):
- `sighan` (cws): one sentence per line, words separated by whitespace (U+3000 counts) → B/M/E/S labels.
- `conll` (cws, pos, ner): one char per line, `char<TAB>label` (or one run of spaces instead of the TAB),
  a blank line after each sentence; `-DOCSTART-` lines are skipped. Labels: cws `B/M/E/S` (`B/I/E/S`
  is read with I→M), pos joint `B-TAG` (I→M likewise), ner `O`/`B-X`… in BIO, IOBES or BMES.
- `x02` (cws, pos, ner): one sentence per line, `chars<TAB>labels`, both lists joined by U+0002
  (`中\\x02国<TAB>B-LOC\\x02E-LOC`).
- `word-slash` (pos): one sentence per line, `word/TAG` tokens separated by whitespace, split on the
  last `/` (so `1/2/m` is the word `1/2`) → char-level joint labels.
- `word-tab` (pos): `word<TAB>TAG` one word per line, a blank line after each sentence → joint labels.
- `raw` (all): unlabelled text for prediction, one sentence per line, every char kept.

In the line-per-sentence formats (sighan, x02, word-slash, raw) an empty line is an empty sentence, kept so
that output written line by line has the input's line count; in the blank-line-separated formats
(conll, word-tab) blank lines only end sentences.

Detection (`fmt="auto"`) looks at the first 50 non-blank lines: any U+0002 → x02; a `-DOCSTART-` line
→ conll; at least half the
lines shaped `one-char<sep>label` with a label shaped for the task → conll; pos: at least half the lines
with two TAB fields → word-tab, at least half the lines made of `word/TAG` tokens → word-slash; cws: at
least half the lines of two or more chars contain whitespace → sighan; otherwise raw.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from zencli.data.readers.common import (
    ReadInfo,
    check_format,
    gc_paused,
    sample_lines,
    show,
)
from zencli.data.readers.schemes import (
    check_cws_label,
    check_ner_label,
    check_pos_label,
    detect_scheme,
    is_well_formed,
    segment_labels,
    spans_from_labels,
    split_label,
    tagged_words,
    words_from_labels,
)
from zencli.errors import ZenError, where
from zencli.text.reading import iter_lines

TAGGING_TASKS = ("cws", "pos", "ner")
TAGGING_FORMATS: dict[str, tuple[str, ...]] = {
    "cws": ("sighan", "conll", "x02", "raw"),
    "pos": ("conll", "word-tab", "word-slash", "x02", "raw"),
    "ner": ("conll", "x02", "raw"),
}
_CHECKS: dict[str, Callable[[str], str]] = {"cws": check_cws_label, "pos": check_pos_label,
                                            "ner": check_ner_label}
# Shape of a label during detection only: loose on purpose, so that a bad label such as `X-PER` in a
# char-level file is reported with its line instead of making the file look like raw text.
_LABEL_SHAPE = {
    "cws": re.compile(r"[A-Za-z]\Z"),
    "pos": re.compile(r"[A-Za-z]-\S+\Z"),
    "ner": re.compile(r"(O|[A-Za-z]-\S+)\Z"),
}
_SLASH_TOKEN = re.compile(r".+/[^/\s]+\Z")


@dataclass
class TaggedSentence:
    """One sentence: its characters and, when the file has them, one label per character.
    `line` is the file line the sentence starts on; `source` the file it came from."""

    chars: list[str]
    labels: list[str] | None
    source: str
    line: int

    @property
    def text(self) -> str:
        return "".join(self.chars)

    @property
    def words(self) -> list[str] | None:
        """Words cut by segmentation labels (cws, pos); None when unlabelled."""
        return None if self.labels is None else words_from_labels(self.chars, self.labels)

    @property
    def tagged_words(self) -> list[tuple[str, str]] | None:
        """(word, POS tag) pairs from pos joint labels; None when unlabelled."""
        return None if self.labels is None else tagged_words(self.chars, self.labels)


def _split_char_line(text: str) -> list[str]:
    return text.split("\t") if "\t" in text else text.split()


def detect_tagging_format(path: str | Path, task: str) -> str:
    """The format of a cws/pos/ner file, from its first non-blank lines (rules in the module docstring)."""
    sample = [t for _, t in sample_lines(path)]
    if any("\x02" in t for t in sample):
        return "x02"
    if any(t.startswith("-DOCSTART-") for t in sample):
        return "conll"
    half = len(sample) / 2
    shape = _LABEL_SHAPE[task]
    conll = 0
    for t in sample:
        parts = _split_char_line(t)
        if len(parts) == 2 and len(parts[0]) == 1 and shape.match(parts[1].strip()):
            conll += 1
    if conll >= half:
        return "conll"
    if task == "pos":
        if sum(t.count("\t") == 1 for t in sample) >= half:
            return "word-tab"
        if sum(all(_SLASH_TOKEN.match(tok) for tok in t.split()) for t in sample) >= half:
            return "word-slash"
    if task == "cws":
        multi = [t for t in sample if len(t.strip()) >= 2]
        if multi and sum(any(c.isspace() for c in t.strip()) for t in multi) >= len(multi) / 2:
            return "sighan"
    return "raw"


class _LabelChecker:
    """Validates each distinct label once (labels repeat, so a dict lookup does the rest) and remembers
    the line each was first seen on, for the scheme check and its error message."""

    def __init__(self, path: str | Path, task: str):
        self.path, self.check = path, _CHECKS[task]
        self.seen: dict[str, str] = {}
        self.first_line: dict[str, int] = {}

    def __call__(self, label: str, lineno: int) -> str:
        norm = self.seen.get(label)
        if norm is None:
            try:
                norm = self.check(label)
            except ValueError as e:
                raise ZenError(f"{where(self.path, lineno)}: {e}") from None
            self.seen[label] = norm
            self.first_line[label] = lineno
        return norm


def _read_conll(path: Path, check: _LabelChecker, source: str) -> Iterator[TaggedSentence]:
    chars: list[str] = []
    labels: list[str] = []
    start = 0
    seen = check.seen
    for lineno, text in iter_lines(path):
        # Fast path for the common `X<TAB>LABEL` line with an already-validated label.
        if len(text) > 2 and text[1] == "\t":
            norm = seen.get(text[2:])
            if norm is not None:
                if not chars:
                    start = lineno
                chars.append(text[0])
                labels.append(norm)
                continue
        if not text.strip() and "\t" not in text:
            if chars:
                yield TaggedSentence(chars, labels, source, start)
                chars, labels = [], []
            continue
        parts = _split_char_line(text)
        if parts[0] == "-DOCSTART-":
            continue
        if len(parts) != 2:
            raise ZenError(f"{where(path, lineno)}: expected 2 columns char<TAB>label, got {len(parts)} "
                           f"in {show(text)}")
        ch, lab = parts
        if len(ch) != 1:
            raise ZenError(f"{where(path, lineno)}: expected one character in column 1 of a char-level "
                           f"file, got {show(ch)} ({len(ch)} chars)")
        if not chars:
            start = lineno
        chars.append(ch)
        labels.append(check(lab.strip(), lineno))
    if chars:
        yield TaggedSentence(chars, labels, source, start)


def _read_x02(path: Path, check: _LabelChecker, source: str) -> Iterator[TaggedSentence]:
    for lineno, text in iter_lines(path):
        if not text:
            yield TaggedSentence([], [], source, lineno)
            continue
        parts = text.split("\t")
        if len(parts) != 2:
            raise ZenError(f"{where(path, lineno)}: expected 2 TAB-separated columns chars<TAB>labels "
                           f"(each joined by \\x02), got {len(parts)}")
        chars, labels = parts[0].split("\x02"), parts[1].split("\x02")
        if len(chars) != len(labels):
            raise ZenError(f"{where(path, lineno)}: {len(chars)} chars but {len(labels)} labels; "
                           f"expected one label per char")
        for i, ch in enumerate(chars):
            if len(ch) != 1:
                raise ZenError(f"{where(path, lineno)}: item {i + 1} of the chars column is {show(ch)}; "
                               f"expected one character between \\x02 separators")
        yield TaggedSentence(chars, [check(lab.strip(), lineno) for lab in labels], source, lineno)


def _read_sighan(path: Path, source: str) -> Iterator[TaggedSentence]:
    for lineno, text in iter_lines(path):
        chars: list[str] = []
        labels: list[str] = []
        for w in text.split():  # str.split() splits on U+3000 as well
            chars.extend(w)
            labels.extend(segment_labels(len(w)))
        yield TaggedSentence(chars, labels, source, lineno)


def _word_to_chars(path: Path, lineno: int, word: str, tag: str, chars: list[str], labels: list[str]
                   ) -> None:
    if not word or not tag or tag != tag.strip():
        raise ZenError(f"{where(path, lineno)}: expected word/TAG (or word<TAB>TAG) with a non-empty word "
                       f"and tag, got {show(word + '/' + tag)}")
    chars.extend(word)
    labels.extend(segment_labels(len(word), tag))


def _read_word_slash(path: Path, source: str) -> Iterator[TaggedSentence]:
    for lineno, text in iter_lines(path):
        chars: list[str] = []
        labels: list[str] = []
        for tok in text.split():
            word, slash, tag = tok.rpartition("/")
            if not slash:
                raise ZenError(f"{where(path, lineno)}: token {show(tok)} has no '/'; expected word/TAG")
            _word_to_chars(path, lineno, word, tag, chars, labels)
        yield TaggedSentence(chars, labels, source, lineno)


def _read_word_tab(path: Path, source: str) -> Iterator[TaggedSentence]:
    chars: list[str] = []
    labels: list[str] = []
    start = 0
    for lineno, text in iter_lines(path):
        if not text.strip() and "\t" not in text:
            if chars:
                yield TaggedSentence(chars, labels, source, start)
                chars, labels = [], []
            continue
        parts = text.split("\t")
        if len(parts) != 2:
            raise ZenError(f"{where(path, lineno)}: expected 2 TAB-separated columns word<TAB>TAG, "
                           f"got {len(parts)}")
        if not chars:
            start = lineno
        _word_to_chars(path, lineno, parts[0], parts[1].strip(), chars, labels)
    if chars:
        yield TaggedSentence(chars, labels, source, start)


def _read_raw(path: Path, source: str) -> Iterator[TaggedSentence]:
    for lineno, text in iter_lines(path):
        yield TaggedSentence(list(text), None, source, lineno)


def read_tagging(path: str | Path, task: str, fmt: str = "auto") -> tuple[list[TaggedSentence], ReadInfo]:
    """Read a cws/pos/ner file; `fmt="auto"` detects the format (see the module docstring)."""
    if task not in TAGGING_TASKS:
        raise ZenError(f"task {task!r}: expected one of {', '.join(TAGGING_TASKS)}")
    check_format(fmt, TAGGING_FORMATS[task], f"task {task}")
    p = Path(path)
    if fmt == "auto":
        fmt = detect_tagging_format(p, task)
    source = str(p)
    checker = _LabelChecker(p, task)
    readers: dict[str, Callable[[], Iterator[TaggedSentence]]] = {
        "conll": lambda: _read_conll(p, checker, source),
        "x02": lambda: _read_x02(p, checker, source),
        "sighan": lambda: _read_sighan(p, source),
        "word-slash": lambda: _read_word_slash(p, source),
        "word-tab": lambda: _read_word_tab(p, source),
        "raw": lambda: _read_raw(p, source),
    }
    with gc_paused():
        sentences = list(readers[fmt]())
        info = ReadInfo(path=source, task=task, format=fmt, examples=len(sentences), labelled=fmt != "raw")
        _summarise(sentences, info, checker)
    return sentences, info


def _summarise(sentences: list[TaggedSentence], info: ReadInfo, checker: _LabelChecker) -> None:
    counts: Counter[str] = Counter()
    for s in sentences:
        info.tokens += len(s.chars)
        info.empty += not s.chars
        if s.labels is not None:
            counts.update(s.labels)
    info.label_counts = dict(sorted(counts.items()))
    if not info.labelled:
        return
    if info.task == "ner":
        try:
            info.scheme = detect_scheme(counts)
        except ValueError as e:
            # Name the line where the second inside-prefix (I- vs M-) first appeared.
            firsts = {p: min((ln for lab, ln in checker.first_line.items() if lab.startswith(p + "-")),
                             default=0) for p in ("I", "M")}
            lineno = max(firsts.values())
            raise ZenError(f"{where(info.path, lineno)}: {e}") from None
        # In a well-formed sentence every entity has exactly one `B-`/`S-` label (`B-` in BIO), so the
        # label counts give the entities; only ill-formed sentences need their spans read one by one.
        openers = ("B",) if info.scheme == "BIO" else ("B", "S")
        entities: Counter[str] = Counter()
        for lab, n in counts.items():
            p, t = split_label(lab)
            if p in openers:
                entities[t] += n
        for s in sentences:
            assert s.labels is not None
            if not is_well_formed(s.labels, info.scheme):
                info.ill_formed += 1
                entities.subtract(split_label(lab)[1] for lab in s.labels if split_label(lab)[0] in openers)
                entities.update(t for _, _, t in spans_from_labels(s.labels, info.scheme))
        info.entities = {t: n for t, n in sorted(entities.items()) if n}
    else:
        info.scheme = "BMES"
        info.words = sum(n for lab, n in counts.items() if split_label(lab)[0] in ("B", "S"))
        info.ill_formed = sum(not is_well_formed(s.labels, "BMES") for s in sentences if s.labels)
    if any(lab != norm for lab, norm in checker.seen.items()):
        info.notes.append("labels with prefix I were read as M (B/I/E/S = B/M/E/S for segmentation)")
