"""Character label schemes: checking labels, detecting BIO / IOBES / BMES, words and entity spans.

A label is `PREFIX` (CWS: `B`, `M`, `E`, `S`) or `PREFIX-TYPE` (POS: `B-n`, NER: `B-PER`) or `O` (NER).
BMES is IOBES with `M` for `I`: both mark the inside of a multi-char unit, so they share one span
decoder. Segmentation labels (CWS and the prefixes of POS joint labels) use B/M/E/S; a file written with
B/I/E/S is read with every `I` turned into `M` (the two mean the same thing for segmentation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

SCHEMES = ("BIO", "IOBES", "BMES")
_SEG_PREFIXES = frozenset("BMESI")
_NER_PREFIXES = frozenset("BIMES")


def _has_space(s: str) -> bool:
    return any(c.isspace() for c in s)


def split_label(label: str) -> tuple[str, str]:
    """`B-PER` → (`B`, `PER`); `O` → (`O`, ``); `S` → (`S`, ``)."""
    if len(label) > 2 and label[1] == "-":
        return label[0], label[2:]
    return label, ""


def check_cws_label(label: str) -> str:
    """A CWS label, `I` normalised to `M`; ValueError says what was expected."""
    if label in ("B", "M", "E", "S"):
        return label
    if label == "I":
        return "M"
    raise ValueError(f"expected a segmentation label B, M, E or S (I is read as M), got {label!r}")


def check_pos_label(label: str) -> str:
    """A joint segmentation + POS label `{B,M,E,S}-TAG`, `I-` normalised to `M-`."""
    prefix, tag = split_label(label)
    if prefix not in _SEG_PREFIXES or not tag or _has_space(tag):
        raise ValueError(f"expected a joint label B-TAG, M-TAG, E-TAG or S-TAG (e.g. B-n), got {label!r}")
    return "M-" + tag if prefix == "I" else label


def check_ner_label(label: str) -> str:
    """An entity label `O` or `{B,I,M,E,S}-TYPE` (which scheme is decided over the whole file)."""
    if label == "O":
        return label
    prefix, etype = split_label(label)
    if prefix not in _NER_PREFIXES or not etype or _has_space(etype):
        raise ValueError(f"expected O or an entity label B-/I-/M-/E-/S-TYPE (e.g. B-PER), got {label!r}")
    return label


def detect_scheme(labels: Iterable[str]) -> str:
    """"BMES" if any `M-`, "IOBES" if any `E-`/`S-` (and `I-`, or neither `I-` nor `M-`), else "BIO".

    A file with only B/E/S (no entity longer than two chars) is both IOBES and BMES; it is called IOBES,
    which decodes to the same entities. A file with no entity at all is called BIO. Mixing `M-` and
    `I-` is an error (ValueError), since then neither scheme reads the file correctly.
    """
    prefixes = {split_label(x)[0] for x in set(labels) if x != "O"}
    if "M" in prefixes and "I" in prefixes:
        raise ValueError("labels mix I- and M- prefixes; expected one scheme (BIO, IOBES or BMES)")
    if "M" in prefixes:
        return "BMES"
    if prefixes & {"E", "S"}:
        return "IOBES"
    return "BIO"


def spans_from_labels(labels: Sequence[str], scheme: str) -> list[tuple[int, int, str]]:
    """Entities as (start, end, type), `end` exclusive, read strictly (as seqeval's strict mode does):
    BIO: `B-X` then `I-X`*; IOBES/BMES: `S-X`, or `B-X` (`I-X`|`M-X`)* `E-X`. A broken chunk (`I-X`
    after `O`, `B-X` never closed by `E-X`) is not an entity; it is never repaired into one."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")
    spans: list[tuple[int, int, str]] = []
    start, etype = -1, ""  # open chunk, -1: none
    if scheme == "BIO":
        for i, lab in enumerate(labels):
            p, t = split_label(lab)
            if p == "I" and start >= 0 and t == etype:
                continue
            if start >= 0:
                spans.append((start, i, etype))
                start = -1
            if p == "B":
                start, etype = i, t
        if start >= 0:
            spans.append((start, len(labels), etype))
        return spans
    for i, lab in enumerate(labels):
        p, t = split_label(lab)
        if p in ("I", "M"):
            if start >= 0 and t != etype:
                start = -1
        elif p == "E":
            if start >= 0 and t == etype:
                spans.append((start, i + 1, t))
            start = -1
        elif p == "B":
            start, etype = i, t
        else:  # S or O
            if p == "S":
                spans.append((i, i + 1, t))
            start = -1
    return spans


def labels_from_spans(n: int, spans: Iterable[tuple[int, int, str]], scheme: str) -> list[str]:
    """The inverse of `spans_from_labels`: `n` labels marking `spans` in `scheme` (converts schemes)."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")
    out = ["O"] * n
    inside = "M" if scheme == "BMES" else "I"
    for start, end, t in spans:
        if scheme == "BIO":
            out[start:end] = [f"B-{t}"] + [f"I-{t}"] * (end - start - 1)
        elif end - start == 1:
            out[start] = f"S-{t}"
        else:
            out[start:end] = [f"B-{t}"] + [f"{inside}-{t}"] * (end - start - 2) + [f"E-{t}"]
    return out


# Well-formed label sequences as regular expressions over the labels joined by "\n" (with a final
# "\n"); the backreference makes a chunk keep one type. Matching in C is ~10x faster than a Python loop
# over 1.3M labels. Group 1 is `-TYPE` or empty, so segmentation labels without a tag match as well.
_WELL_FORMED = {
    "BIO": re.compile(r"(?:O\n|B(-[^\n]+|)\n(?:I\1\n)*)*"),
    "IOBES": re.compile(r"(?:O\n|S(?:-[^\n]+)?\n|B(-[^\n]+|)\n(?:[IM]\1\n)*E\1\n)*"),
}
_WELL_FORMED["BMES"] = _WELL_FORMED["IOBES"]


def is_well_formed(labels: Sequence[str], scheme: str) -> bool:
    """True if every label continues the previous one legally: BIO `I-X` follows `B-X`/`I-X`; IOBES and
    BMES chunks are `S-X` or `B-X` (`I-X`|`M-X`)* `E-X`. Segmentation labels (B/M/E/S, with or without
    a POS tag) use "BMES". Equivalently: `spans_from_labels` then `labels_from_spans` gives `labels` back."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")
    if not labels:
        return True
    return _WELL_FORMED[scheme].fullmatch("\n".join(labels) + "\n") is not None


def segment_labels(n: int, tag: str | None = None) -> list[str]:
    """Labels of one word of `n` chars: `S` or `B M… E`, with `-tag` appended for POS joint labels."""
    suffix = f"-{tag}" if tag is not None else ""
    if n == 1:
        return ["S" + suffix]
    return ["B" + suffix] + ["M" + suffix] * (n - 2) + ["E" + suffix]


def word_bounds(labels: Sequence[str]) -> list[tuple[int, int]]:
    """Word (start, end) spans from segmentation labels. Total: a word starts at `B`/`S` or after an
    `E`/`S`, so even an ill-formed sequence gives a segmentation (used for predictions too)."""
    bounds: list[tuple[int, int]] = []
    start = 0
    for i, lab in enumerate(labels):
        p = lab[0]
        if p not in "BMESI":
            raise ValueError(f"expected a segmentation label (B/M/E/S, optionally -TAG), got {lab!r}")
        if i > start and p in "BS":
            bounds.append((start, i))
            start = i
        if p in "ES":
            bounds.append((start, i + 1))
            start = i + 1
    if start < len(labels):
        bounds.append((start, len(labels)))
    return bounds


def words_from_labels(chars: Sequence[str], labels: Sequence[str]) -> list[str]:
    """The words that segmentation labels (CWS `B/M/E/S` or POS `B-TAG`…) cut `chars` into."""
    return ["".join(chars[s:e]) for s, e in word_bounds(labels)]


def tagged_words(chars: Sequence[str], labels: Sequence[str]) -> list[tuple[str, str]]:
    """(word, tag) pairs from POS joint labels; a word's tag is the tag of its first char."""
    return [("".join(chars[s:e]), split_label(labels[s])[1]) for s, e in word_bounds(labels)]
