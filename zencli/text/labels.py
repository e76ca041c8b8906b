"""Character labels: their grammar, the BIO / IOBES / BMES schemes, entity spans and segmentation words.

The one implementation the readers (data/), the scorers (metrics/) and the CRF constraints (model/) share,
so a label sequence means the same thing when it is read, trained on, decoded and scored.

A label is `O`, a position prefix alone (CWS: `B M E S`), or a prefix, `-` and a non-empty type without
white space (NER `B-PER`, POS `M-n`). The prefixes are `B` begin, `I`/`M` inside, `E` end, `S` single.
Schemes, and the chunks (entities) each one marks:

- BIO (also called IOB2): `B-X` followed by the longest run of `I-X`.
- IOBES: `S-X`, or `B-X (I-X)* E-X`.
- BMES: IOBES with `M` for `I` (the Chinese convention). Segmentation labels (CWS, and the prefixes of
  POS joint labels) are BMES without `O`; there a `B/I/E/S` file means the same, so `I` is read as `M`.

Chunks are read strictly, as seqeval's strict mode does: an `I-X` that continues no `B-X`, a `B-X` that
`E-X` never closes, or a change of type inside a chunk is not an entity and is never repaired into one.
Words are different: every character belongs to exactly one, so `decode_words` cuts even an ill-formed
sequence into words by one deterministic rule.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from functools import lru_cache
from typing import Literal

Scheme = Literal["BIO", "IOBES", "BMES"]
Span = tuple[int, int, str]  # [start, end) and type ("" for untyped labels)

SCHEMES: tuple[Scheme, ...] = ("BIO", "IOBES", "BMES")
SCHEME_PREFIXES: dict[Scheme, frozenset[str]] = {
    "BIO": frozenset("OBI"),
    "IOBES": frozenset("OBIES"),
    "BMES": frozenset("OBMES"),
}
SCHEME_ALIASES: dict[str, Scheme] = {
    "BIO": "BIO", "IOB2": "BIO",
    "IOBES": "IOBES", "BIOES": "IOBES",
    "BMES": "BMES", "BMESO": "BMES",
}

_LABEL = re.compile(r"([BIMES])(?:-(\S+))?")


def scheme_name(name: str) -> Scheme:
    """The canonical name of a scheme, case-insensitive: `iob2` → BIO, `BIOES` → IOBES, `BMESO` → BMES."""
    try:
        return SCHEME_ALIASES[name.upper()]
    except (KeyError, AttributeError):
        raise ValueError(f"scheme: expected one of {', '.join(SCHEME_ALIASES)}, got {name!r}") from None


# --- one label ---------------------------------------------------------------------------------------


# Label sets are small (tens to a few hundred) and every label of every sentence is parsed, so the
# parsers cache their results (a bad label raises, and exceptions are not cached).
@lru_cache(maxsize=4096)
def parse_label(label: str) -> tuple[str, str]:
    """`B-PER` → (`B`, `PER`); `S-NR-x` → (`S`, `NR-x`); `B` → (`B`, ``); `O` → (`O`, ``).

    ValueError for anything else (an unknown prefix, `B-` with no type, a type with white space).
    """
    if label == "O":
        return "O", ""
    m = _LABEL.fullmatch(label)
    if m is None:
        raise ValueError(f"expected O, a position tag B/I/M/E/S, or one with a type like B-PER, got {label!r}")
    return m[1], m[2] or ""


@lru_cache(maxsize=4096)
def parse_entity_label(label: str) -> tuple[str, str]:
    """An NER label: `O` or `B-/I-/M-/E-/S-TYPE`; a prefix without a type is a ValueError."""
    try:
        prefix, etype = parse_label(label)
    except ValueError:
        prefix, etype = "", ""
    if prefix == "O" or etype:
        return prefix, etype
    raise ValueError(f"expected O or an entity label B-/I-/M-/E-/S-TYPE (e.g. B-PER), got {label!r}")


_SEGMENT_EXPECTED = {
    False: "a segmentation label B, M, E or S (I is read as M)",
    True: "a joint label B-TAG, M-TAG, E-TAG or S-TAG (e.g. B-n; I- is read as M-)",
    None: "a segmentation label B, M, E or S, optionally with -TAG (I is read as M)",
}


@lru_cache(maxsize=4096)
def parse_segment_label(label: str, tagged: bool | None = None) -> tuple[str, str]:
    """A segmentation label as (prefix in B/M/E/S, tag), `I` read as `M`: CWS `S` → (`S`, ``), POS
    `I-n` → (`M`, `n`). `tagged`: True requires a tag (POS), False forbids one (CWS), None allows both."""
    try:
        prefix, tag = parse_label(label)
    except ValueError:
        prefix, tag = "O", ""
    if prefix != "O" and (tagged is None or tagged == bool(tag)):
        return ("M" if prefix == "I" else prefix), tag
    raise ValueError(f"expected {_SEGMENT_EXPECTED[tagged]}, got {label!r}")


# --- schemes -----------------------------------------------------------------------------------------


def scheme_of_prefixes(prefixes: Collection[str]) -> Scheme | None:
    """The scheme label prefixes are written in; None when they hold no chunk prefix (only `O`).

    `M` means BMES; otherwise `E`/`S` mean IOBES; otherwise BIO. Labels with only `B/E/S` (no chunk
    longer than two) are both IOBES and BMES; they are called IOBES, which reads the same chunks.
    Both `I` and `M` is a ValueError: neither scheme reads such labels correctly.
    """
    if "I" in prefixes and "M" in prefixes:
        raise ValueError("labels mix I- and M- prefixes; expected one scheme (BIO/IOB2, IOBES or BMES)")
    if "M" in prefixes:
        return "BMES"
    if "E" in prefixes or "S" in prefixes:
        return "IOBES"
    if "B" in prefixes or "I" in prefixes:
        return "BIO"
    return None


def detect_scheme(labels: Iterable[str]) -> Scheme:
    """The scheme of a label set or sequence (see `scheme_of_prefixes`); no chunk at all reads as BIO.
    ValueError for a label that is not one, or for `I-` and `M-` together."""
    return scheme_of_prefixes({parse_label(label)[0] for label in set(labels)}) or "BIO"


# --- entity spans ------------------------------------------------------------------------------------


def spans_from_labels(labels: Sequence[str], scheme: str) -> list[Span]:
    """The chunks of one sentence as (start, end, type), `end` exclusive, read strictly in `scheme`
    (any name `scheme_name` knows). A label whose prefix the scheme lacks only breaks chunks."""
    canonical = scheme_name(scheme)
    spans: list[Span] = []
    start, etype = -1, ""  # the open chunk; start -1: none
    if canonical == "BIO":
        for i, label in enumerate(labels):
            prefix, t = parse_label(label)
            if prefix == "I" and start >= 0 and t == etype:
                continue
            if start >= 0:
                spans.append((start, i, etype))
            start, etype = (i, t) if prefix == "B" else (-1, "")
        if start >= 0:
            spans.append((start, len(labels), etype))
        return spans
    inside = "M" if canonical == "BMES" else "I"
    for i, label in enumerate(labels):
        prefix, t = parse_label(label)
        if prefix == inside and start >= 0 and t == etype:
            continue
        # Anything else ends the open chunk: as an entity only if it is its E- of the same type.
        if prefix == "E" and start >= 0 and t == etype:
            spans.append((start, i + 1, t))
        elif prefix == "S":
            spans.append((i, i + 1, t))
        start, etype = (i, t) if prefix == "B" else (-1, "")
    return spans


def labels_from_spans(n: int, spans: Iterable[Span], scheme: str) -> list[str]:
    """`n` labels marking `spans` in `scheme`, `O` elsewhere: the inverse of `spans_from_labels`, so the
    two convert between schemes. Spans must lie in [0, n) and not overlap."""
    canonical = scheme_name(scheme)
    out = ["O"] * n
    inside = "M" if canonical == "BMES" else "I"
    for start, end, t in spans:
        if not 0 <= start < end <= n:
            raise ValueError(f"span ({start}, {end}, {t!r}) is not inside a sentence of {n} labels")
        if any(label != "O" for label in out[start:end]):
            raise ValueError(f"span ({start}, {end}, {t!r}) overlaps another span")
        if canonical == "BIO":
            out[start:end] = [f"B-{t}"] + [f"I-{t}"] * (end - start - 1)
        elif end - start == 1:
            out[start] = f"S-{t}"
        else:
            out[start:end] = [f"B-{t}"] + [f"{inside}-{t}"] * (end - start - 2) + [f"E-{t}"]
    return out


# Well-formed sequences as regular expressions over the labels joined by "\n" (with a final "\n"); the
# backreference keeps one type per chunk, and group 1 may be empty, so untyped labels (CWS) match too.
# Matching in C, not a Python loop over the labels: a 1.3M-label file is checked in a fraction of the time.
_WELL_FORMED: dict[Scheme, re.Pattern[str]] = {
    "BIO": re.compile(r"(?:O\n|B(-[^\n]+|)\n(?:I\1\n)*)*"),
    "IOBES": re.compile(r"(?:O\n|S(?:-[^\n]+)?\n|B(-[^\n]+|)\n(?:I\1\n)*E\1\n)*"),
    "BMES": re.compile(r"(?:O\n|S(?:-[^\n]+)?\n|B(-[^\n]+|)\n(?:M\1\n)*E\1\n)*"),
}


def is_well_formed(labels: Sequence[str], scheme: str) -> bool:
    """True if the labels split into `O` and whole chunks of `scheme` (segmentation labels, with or
    without a POS tag: "BMES"). Equivalently, `labels_from_spans(spans_from_labels(...))` gives them back."""
    canonical = scheme_name(scheme)
    if not labels:
        return True
    return _WELL_FORMED[canonical].fullmatch("\n".join(labels) + "\n") is not None


# --- segmentation words ------------------------------------------------------------------------------


def segment_labels(n: int, tag: str | None = None) -> list[str]:
    """The labels of one word of `n` chars: `S`, or `B M… E`; with `-tag` appended for POS joint labels."""
    if n < 1:
        raise ValueError(f"a word has at least one char, got length {n}")
    suffix = f"-{tag}" if tag is not None else ""
    if n == 1:
        return ["S" + suffix]
    return ["B" + suffix] + ["M" + suffix] * (n - 2) + ["E" + suffix]


def decode_words(parsed: Sequence[tuple[str, str]]) -> list[Span]:
    """Cut parsed segmentation labels ((prefix, tag) pairs, see `parse_segment_label`) into words
    (start, end, tag).

    Every char belongs to exactly one word, so an ill-formed sequence (a prediction) cannot be dropped
    the way a broken entity is; one rule cuts gold and prediction alike. A new word starts at char
    i > 0 iff
        label i is B or S,  or  label i-1 is E or S,  or  the tag of label i differs from label i-1's.
    Otherwise (M/E after B/M of the same tag) char i continues the word. So `M-n E-n` at the start of a
    sentence is one word `n`, `S-v M-n` two, `B-n E-v` two, and a word's tag is the one all its chars
    share. On well-formed labels these are exactly the words the labels mark.
    """
    words: list[Span] = []
    if not parsed:
        return words
    start = 0
    prev_prefix, prev_tag = parsed[0]
    for i in range(1, len(parsed)):
        prefix, tag = parsed[i]
        if prefix in "BS" or prev_prefix in "ES" or tag != prev_tag:
            words.append((start, i, prev_tag))  # all chars of a word share its tag
            start = i
        prev_prefix, prev_tag = prefix, tag
    words.append((start, len(parsed), prev_tag))
    return words


def word_spans(labels: Sequence[str]) -> list[Span]:
    """Words (start, end, tag) of CWS or POS labels by `decode_words`' rule; ValueError on a label that
    is not a segmentation label."""
    return decode_words([parse_segment_label(label, None) for label in labels])


def words_from_labels(chars: Sequence[str], labels: Sequence[str]) -> list[str]:
    """The words that segmentation labels (CWS `B/M/E/S` or POS `B-TAG`…) cut `chars` into."""
    if len(chars) != len(labels):
        raise ValueError(f"{len(chars)} chars but {len(labels)} labels; expected one label per char")
    return ["".join(chars[s:e]) for s, e, _ in word_spans(labels)]


def tagged_words(chars: Sequence[str], labels: Sequence[str]) -> list[tuple[str, str]]:
    """(word, tag) pairs from POS joint labels."""
    if len(chars) != len(labels):
        raise ValueError(f"{len(chars)} chars but {len(labels)} labels; expected one label per char")
    return [("".join(chars[s:e]), tag) for s, e, tag in word_spans(labels)]


# --- word labels on word pieces ----------------------------------------------------------------------


def continuation_labels(label: str, n: int, scheme: str | None) -> list[str]:
    """The labels of the `n` pieces of one word labelled `label`, each piece labelled (word-level tagging
    with `task.word_labels: continuation`). Without a scheme (POS tags) every piece takes the word's tag.
    In a scheme the word's chunk position is spread over its pieces, so the pieces read as the same chunks
    the words do: BIO `B-X` → `B-X I-X…`; IOBES/BMES `B-X` → `B-X I-X…`, `I-X` → `I-X…`, `E-X` →
    `I-X… E-X`, `S-X` → `B-X I-X… E-X` (`M` for `I` in BMES); `O` stays `O`. The first piece keeps the
    word's label unless the word ends a chunk (`E`, `S`), which its last piece says."""
    if n < 1:
        raise ValueError(f"a word has at least one piece, got {n}")
    if scheme is None or n == 1:
        return [label] * n
    prefix, t = parse_label(label)
    if prefix == "O":
        return ["O"] * n
    inside = "M" if scheme_name(scheme) == "BMES" else "I"
    if scheme_name(scheme) == "BIO":
        return [label] + [f"I-{t}"] * (n - 1)
    begins, ends = prefix in "BS", prefix in "ES"
    first = f"B-{t}" if begins else f"{inside}-{t}"
    return [first] + [f"{inside}-{t}"] * (n - 2) + [f"E-{t}" if ends else f"{inside}-{t}"]


def word_label_of_pieces(labels: Sequence[str], scheme: str | None) -> str:
    """The inverse of `continuation_labels`: one word's label from its pieces' labels (as decoded). The
    first piece gives the label (without a scheme, or in BIO, it is the label); in IOBES/BMES the first
    piece says whether the word begins a chunk (`B`, `S`) and of which type, the last whether it ends one
    (`E`, `S`). Any decoded sequence maps to one label per word."""
    if not labels:
        raise ValueError("a word has at least one piece")
    first = labels[0]
    if scheme is None or len(labels) == 1 or scheme_name(scheme) == "BIO":
        return first
    prefix, t = parse_label(first)
    if prefix == "O":
        return "O"
    inside = "M" if scheme_name(scheme) == "BMES" else "I"
    begins, ends = prefix in "BS", parse_label(labels[-1])[0] in "ES"
    return f"{('S' if ends else 'B') if begins else ('E' if ends else inside)}-{t}"


def scheme_labels(types: Iterable[str], scheme: str) -> list[str]:
    """Every label `scheme` writes for entities of `types`, and `O`."""
    prefixes = sorted(SCHEME_PREFIXES[scheme_name(scheme)] - {"O"})
    return ["O", *(f"{p}-{t}" for t in types for p in prefixes)]
