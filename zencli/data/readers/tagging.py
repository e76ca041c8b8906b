"""Token-level files (CWS, POS, NER) read into one `TaggedSentence` per sentence.

Formats (`fmt`):
- `sighan` (cws): one sentence per line, words separated by whitespace (U+3000 counts) → B/M/E/S labels.
- `conll` (cws, pos, ner): one char per line, `char<TAB>label` (or one run of spaces instead of the TAB),
  a blank line after each sentence; `-DOCSTART-` lines are skipped. Labels: cws `B/M/E/S` (`B/I/E/S`
  is read with I→M), pos joint `B-TAG` (I→M likewise), ner `O`/`B-X`… in BIO, IOBES or BMES.
- `conll-seg` (ner): `conll` whose chars each carry a word-position digit, `中0<TAB>B-PER.NAM` (Weibo NER's
  `weiboNER_2nd_conll.*` files: 0 begins a word, 1, 2… continue it, 10, 11… past the 10th char); the digits
  are dropped, one label per char. A run of U+FFFD before the digits (the files' lost non-BMP chars, each
  written as two) reads as one U+FFFD.
- `x02` (cws, pos, ner): one sentence per line, `chars<TAB>labels`, both lists joined by U+0002
  (`中\\x02国<TAB>B-LOC\\x02E-LOC`).
- `word-slash` (pos): one sentence per line, `word/TAG` tokens separated by whitespace, split on the
  last `/` (so `1/2/m` is the word `1/2`) → char-level joint labels.
- `word-tab` (pos): `word<TAB>TAG` one word per line, a blank line after each sentence → joint labels.
- `raw` (all): unlabelled text for prediction, one sentence per line, every char kept.

In the line-per-sentence formats (sighan, x02, word-slash, raw) an empty line is an empty sentence, kept so
that output written line by line has the input's line count; in the blank-line-separated formats
(conll, word-tab) blank lines only end sentences.

More: docs/design.md, "Token-level files".
"""

from __future__ import annotations

import itertools
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
from zencli.text.tokenizer import is_cjk, is_removed

TAGGING_TASKS = ("cws", "pos", "ner")
TAGGING_FORMATS: dict[str, tuple[str, ...]] = {
    "cws": ("sighan", "conll", "x02", "raw"),
    "pos": ("conll", "conll-word", "conllu", "word-tab", "word-slash", "x02", "raw"),
    "ner": ("conll", "conll-seg", "conll-word", "x02", "raw"),
}
LEVELS = ("char", "word")
_CHECKS: dict[str, Callable[[str], str]] = {"cws": check_cws_label, "pos": check_pos_label,
                                            "ner": check_ner_label}
# Shape of a label during detection only: loose on purpose, so that a bad label such as `X-PER` in a
# char-level file is reported with its line instead of making the file look like raw text.
_LABEL_SHAPE = {
    "cws": re.compile(r"[A-Za-z]\Z"),
    "pos": re.compile(r"[A-Za-z]-\S+\Z"),
    "ner": re.compile(r"(O|[A-Za-z]-\S+)\Z"),
}
_TOKEN_LINES = ("conll", "conll-seg", "conll-word")  # formats with one token a line, a sentence's lines in a row
_SENTENCE_LINES = ("sighan", "x02", "word-slash", "raw")  # one sentence a line
_SLASH_TOKEN = re.compile(r".+/[^/\s]+\Z")
_CONLLU_ID = re.compile(r"[0-9]+(?:[-.][0-9]+)?\Z")
# conll-seg: a char and its word position (Weibo NER): one digit, or more from the 11th char of a word on
# (`e12`); a char the original files lost to a run of U+FFFD (`\ufffd\ufffd0`: a char beyond the BMP written
# as two halves) is one char, read as one U+FFFD.
_SEG_TOKEN = re.compile(r"(?:\ufffd+|\S)[0-9]+\Z")


@dataclass
class TaggedSentence:
    """One sentence: its characters and, when the file has them, one label per character.
    `line` is the file line the sentence starts on; `source` the file it came from.

    `level == "word"`: `chars` holds words (one label each), and `offsets` their [start, end) in `text`:
    the input line for `zen predict`, else the words joined by single spaces. A line to predict at char
    level keeps its white space in `line_text` only: `chars` are the other characters, `offsets` where
    each one sits in the line (white space is no token and gets no label)."""

    chars: list[str]
    labels: list[str] | None
    source: str
    line: int
    level: str = "char"
    line_text: str | None = None  # the line the tokens were cut from (offsets point into it)
    offsets: list[tuple[int, int]] | None = None

    @property
    def text(self) -> str:
        if self.line_text is not None:
            return self.line_text
        return " ".join(self.chars) if self.level == "word" else "".join(self.chars)

    def word_offsets(self) -> list[tuple[int, int]]:
        """Each token's (word's, or char's) [start, end) in `text`."""
        if self.offsets is not None:
            return self.offsets
        if self.level == "char":
            return [(i, i + 1) for i in range(len(self.chars))]
        out, pos = [], 0
        for w in self.chars:
            out.append((pos, pos + len(w)))
            pos += len(w) + 1
        return out

    @property
    def words(self) -> list[str] | None:
        """Words cut by segmentation labels (cws, pos); None when unlabelled."""
        if self.level == "word":
            return list(self.chars)
        return None if self.labels is None else words_from_labels(self.chars, self.labels)

    @property
    def tagged_words(self) -> list[tuple[str, str]] | None:
        """(word, POS tag) pairs from pos joint labels; None when unlabelled."""
        if self.level == "word":
            return None if self.labels is None else list(zip(self.chars, self.labels))
        return None if self.labels is None else tagged_words(self.chars, self.labels)


def _split_char_line(text: str) -> list[str]:
    return text.split("\t") if "\t" in text else text.split()


def _has_cjk(texts: list[str]) -> bool:
    return any(is_cjk(c) for t in texts for c in t)


def detect_tagging_format(path: str | Path, task: str) -> str:
    """The format of a cws/pos/ner file, from its first non-blank lines (rules: docs/design.md, "Token-level files")."""
    sample = [t for _, t in sample_lines(path)]
    if any("\x02" in t for t in sample):
        return "x02"
    half = len(sample) / 2
    shape = _LABEL_SHAPE[task]
    conll = 0
    multi = False  # a token of more than one char: one label per word
    seg = task == "ner"  # every token a char and a digit: Weibo NER's word positions (conll-seg)
    for t in sample:
        parts = _split_char_line(t)
        if len(parts) == 2 and shape.match(parts[1].strip()) and parts[0] != "-DOCSTART-":
            if len(parts[0]) == 1 or task != "cws":
                conll += 1
                multi |= len(parts[0]) > 1
                seg &= bool(_SEG_TOKEN.match(parts[0]))
    if conll >= half or any(t.startswith("-DOCSTART-") for t in sample):
        return ("conll-seg" if seg else "conll-word") if multi else "conll"
    if task == "pos":
        rows = [t.split("\t") for t in sample if not t.startswith("#")]
        if rows and any(len(r) == 10 and _CONLLU_ID.match(r[0]) for r in rows):
            return "conllu"
        words = [_split_char_line(t)[0] for t in sample if t.strip()]
        if sum(t.count("\t") == 1 for t in sample) >= half:
            return "word-tab" if _has_cjk(words) else "conll-word"
        if sum(all(_SLASH_TOKEN.match(tok) for tok in t.split()) for t in sample) >= half:
            return "word-slash"
        if sum(len(t.split()) == 2 for t in sample) >= half and not _has_cjk(words):
            return "conll-word"
    if task == "cws":
        multi_lines = [t for t in sample if len(t.strip()) >= 2]
        if multi_lines and sum(any(c.isspace() for c in t.strip()) for t in multi_lines) >= len(multi_lines) / 2:
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


def _read_conll(path: Path, check: _LabelChecker, source: str, seg: bool = False) -> Iterator[TaggedSentence]:
    """`conll`; with `seg` (conll-seg) each token is a char followed by its word-position digit, dropped."""
    chars: list[str] = []
    labels: list[str] = []
    start = 0
    seen = check.seen
    for lineno, text in iter_lines(path):
        # Fast path for the common `X<TAB>LABEL` line with an already-validated label.
        if not seg and len(text) > 2 and text[1] == "\t":
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
        if seg:
            if not _SEG_TOKEN.match(ch):
                raise ZenError(f"{where(path, lineno)}: expected a character and its word-position digit in "
                               f"column 1 (conll-seg, e.g. 中0), got {show(ch)}")
            ch = ch[0]  # the char (a run of U+FFFD: one U+FFFD); its position digits are dropped
        if len(ch) != 1:
            raise ZenError(f"{where(path, lineno)}: expected one character in column 1 of a char-level "
                           f"file, got {show(ch)} ({len(ch)} chars); for one label per word pass "
                           f"--format conll-word")
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


def _read_conll_word(path: Path, check: _LabelChecker, source: str) -> Iterator[TaggedSentence]:
    words: list[str] = []
    labels: list[str] = []
    start = 0
    for lineno, text in iter_lines(path):
        if not text.strip() and "\t" not in text:
            if words:
                yield TaggedSentence(words, labels, source, start, "word")
                words, labels = [], []
            continue
        parts = _split_char_line(text)
        if parts[0] == "-DOCSTART-":
            continue
        if len(parts) != 2 or not parts[0].strip():
            raise ZenError(f"{where(path, lineno)}: expected 2 columns word<TAB>label (or word label), got "
                           f"{len(parts)} in {show(text)}")
        if not words:
            start = lineno
        words.append(parts[0].strip())
        labels.append(check(parts[1].strip(), lineno))
    if words:
        yield TaggedSentence(words, labels, source, start, "word")


def _read_word_slash_words(path: Path, check: _LabelChecker, source: str) -> Iterator[TaggedSentence]:
    for lineno, text in iter_lines(path):
        words: list[str] = []
        labels: list[str] = []
        for tok in text.split():
            word, slash, tag = tok.rpartition("/")
            if not slash or not word or not tag:
                raise ZenError(f"{where(path, lineno)}: token {show(tok)}: expected word/TAG with a non-empty word "
                               f"and tag")
            words.append(word)
            labels.append(check(tag, lineno))
        yield TaggedSentence(words, labels, source, lineno, "word")


def _read_conllu(path: Path, check: _LabelChecker, source: str) -> Iterator[TaggedSentence]:
    words: list[str] = []
    labels: list[str] = []
    start = 0
    for lineno, text in iter_lines(path):
        if not text.strip():
            if words:
                yield TaggedSentence(words, labels, source, start, "word")
                words, labels = [], []
            continue
        if text.startswith("#"):
            continue
        cols = text.split("\t")
        if len(cols) != 10 or not _CONLLU_ID.match(cols[0]):
            raise ZenError(f"{where(path, lineno)}: expected 10 TAB-separated CoNLL-U columns starting with a word "
                           f"id (ID FORM LEMMA UPOS XPOS …), got {len(cols)} in {show(text)}")
        if not cols[0].isdigit():
            continue  # a multi-word token (1-2) or an empty node (1.1): its words have their own lines
        tag = cols[3] if cols[3] != "_" else cols[4]
        if not cols[1] or tag == "_":
            raise ZenError(f"{where(path, lineno)}: word {cols[0]} has no form or no tag (UPOS and XPOS are both '_')")
        if not words:
            start = lineno
        words.append(cols[1])
        labels.append(check(tag, lineno))
    if words:
        yield TaggedSentence(words, labels, source, start, "word")


def _read_raw(path: Path, source: str) -> Iterator[TaggedSentence]:
    for lineno, text in iter_lines(path):
        yield TaggedSentence(list(text), None, source, lineno)


def check_word_tag(label: str) -> str:
    """A word-level POS tag: any non-empty tag without white space (`NOUN`, `DET+NOUN`, `N------S1D`)."""
    if not label or any(c.isspace() for c in label):
        raise ValueError(f"expected a POS tag without white space, got {label!r}")
    return label


def read_tagging(path: str | Path, task: str, fmt: str = "auto") -> tuple[list[TaggedSentence], ReadInfo]:
    """Read a cws/pos/ner file; `fmt="auto"` detects the format (see the module docstring)."""
    if task not in TAGGING_TASKS:
        raise ZenError(f"task {task!r}: expected one of {', '.join(TAGGING_TASKS)}")
    check_format(fmt, TAGGING_FORMATS[task], f"task {task}")
    p = Path(path)
    if fmt == "auto":
        fmt = detect_tagging_format(p, task)
    source = str(p)
    word_slash = fmt == "word-slash" and not _has_cjk([t for _, t in sample_lines(p)])
    level = "word" if fmt in ("conll-word", "conllu") or word_slash else "char"
    checker = _LabelChecker(p, task)
    if level == "word" and task == "pos":
        checker.check = check_word_tag
    readers: dict[str, Callable[[], Iterator[TaggedSentence]]] = {
        "conll": lambda: _read_conll(p, checker, source),
        "conll-seg": lambda: _read_conll(p, checker, source, seg=True),
        "conll-word": lambda: _read_conll_word(p, checker, source),
        "conllu": lambda: _read_conllu(p, checker, source),
        "x02": lambda: _read_x02(p, checker, source),
        "sighan": lambda: _read_sighan(p, source),
        "word-slash": lambda: (_read_word_slash_words(p, checker, source) if word_slash
                               else _read_word_slash(p, source)),
        "word-tab": lambda: _read_word_tab(p, source),
        "raw": lambda: _read_raw(p, source),
    }
    with gc_paused():
        sentences = list(readers[fmt]())
        info = ReadInfo(path=source, task=task, format=fmt, examples=len(sentences), labelled=fmt != "raw",
                        level=level)
        if fmt == "conll-seg":
            info.notes.append("each char's word-position digit (中0, 中1: Weibo NER's word segmentation) was dropped")
        if level == "word" and task == "ner":
            _iob1_to_iob2(sentences, info)
        _summarise(sentences, info, checker)
    return sentences, info


def _note_odd_characters(sentences: list[TaggedSentence], info: ReadInfo) -> None:
    """Notes for characters that are no text: control characters and the others BERT's tokenizer drops (NUL,
    U+FFFD, …; `is_removed`) — a char-level file reads each as one character with a label, which the model
    sees as [UNK], and in a word the tokenizer drops them —, and white space as a labelled character (never
    a token of the text `zen predict` reads). Like the other readers, the file is read as it is; the note
    says how many, which, and the line of the first sentence holding one."""
    word = info.level == "word"
    distinct = set(itertools.chain.from_iterable(s.chars for s in sentences))
    if word:
        distinct = set(itertools.chain.from_iterable(distinct))
    kinds = [("control characters", {c for c in distinct if is_removed(c)},
              "dropped by the tokenizer from their words" if word
              else "read as characters with labels, each [UNK] to the model (check the file's encoding)")]
    if not word and info.labelled:
        kinds.append(("white-space characters", {c for c in distinct if c.isspace() and not is_removed(c)},
                      "read as characters with labels (`zen predict` never reads white space as a character)"))
    for what, odd, how in kinds:
        if not odd:
            continue
        found: Counter[str] = Counter()
        first = None
        for s in sentences:
            here = [i for i, tok in enumerate(s.chars) if any(c in odd for c in tok)]
            if here and first is None:  # one token a line: its own line; else the sentence's (its line)
                first = s.line + here[0] if info.format in _TOKEN_LINES else s.line
            found.update(c for i in here for c in s.chars[i] if c in odd)
        shown = ", ".join(f"U+{ord(c):04X} ×{n:,}" for c, n in found.most_common(5))
        at = f"line {first}" if info.format in _TOKEN_LINES + _SENTENCE_LINES else f"the sentence at line {first}"
        info.notes.append(f"{sum(found.values()):,} {what} ({shown}{', …' if len(found) > 5 else ''}) {how}; "
                          f"the first at {at}")


def _iob1_to_iob2(sentences: list[TaggedSentence], info: ReadInfo) -> None:
    """An IOB1 file (entities start with `I-X`; `B-X` only where an entity follows one of the same type)
    is relabelled in IOB2: the same entities as conlleval reads them in either. Files with any other
    scheme are left alone."""
    prefixes = {lab.split("-", 1)[0] for s in sentences for lab in (s.labels or [])}
    if not prefixes <= {"O", "B", "I"}:
        return
    starts_with_i = b_after_other = 0
    for s in sentences:
        prev = "O"
        for lab in s.labels or []:
            if lab.startswith("I-") and (prev == "O" or prev[2:] != lab[2:]):
                starts_with_i += 1
            elif lab.startswith("B-") and (prev == "O" or prev[2:] != lab[2:]):
                b_after_other += 1
            prev = lab
    if not starts_with_i or b_after_other:
        return  # IOB2 (entities start with B-), or a mixture neither reading fits: kept as written
    for s in sentences:
        assert s.labels is not None
        prev = "O"
        out = []
        for lab in s.labels:
            out.append("B-" + lab[2:] if lab.startswith("I-") and (prev == "O" or prev[2:] != lab[2:]) else lab)
            prev = lab
        s.labels = out
    info.notes.append(f"read as IOB1 ({starts_with_i} entities start with I-) and relabelled in IOB2 "
                      f"(the same entities)")


def _summarise(sentences: list[TaggedSentence], info: ReadInfo, checker: _LabelChecker) -> None:
    counts: Counter[str] = Counter()
    for s in sentences:
        info.tokens += len(s.chars)
        info.empty += not s.chars
        if s.labels is not None:
            counts.update(s.labels)
    info.label_counts = dict(sorted(counts.items()))
    _note_odd_characters(sentences, info)
    if not info.labelled:
        return
    if info.level == "word":
        info.words = info.tokens
        if info.task == "pos":
            return  # one tag per word: no scheme
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
