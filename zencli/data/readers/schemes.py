"""The label checks the tagging readers apply to each distinct label of a file.

Label grammar, scheme detection, strict entity spans and word decoding live in `zencli.text.labels`,
shared with the metrics and the CRF; the names the readers use from there are re-exported here. A check
returns the label as the readers store it: for segmentation (CWS, POS) a file written with B/I/E/S is
read with every `I` turned into `M`, which means the same there; NER labels are kept as written (their
scheme is decided over the whole file). A ValueError says what was expected; the reader adds file:line.
"""

from __future__ import annotations

from zencli.text.labels import (
    SCHEMES,
    detect_scheme,
    is_well_formed,
    labels_from_spans,
    parse_entity_label,
    parse_segment_label,
    segment_labels,
    spans_from_labels,
    tagged_words,
    words_from_labels,
)
from zencli.text.labels import parse_label as split_label

__all__ = [
    "SCHEMES",
    "check_cws_label",
    "check_ner_label",
    "check_pos_label",
    "detect_scheme",
    "is_well_formed",
    "labels_from_spans",
    "segment_labels",
    "spans_from_labels",
    "split_label",
    "tagged_words",
    "words_from_labels",
]


def check_cws_label(label: str) -> str:
    """A CWS label `B`, `M`, `E` or `S`, with `I` normalised to `M`."""
    return parse_segment_label(label, tagged=False)[0]


def check_pos_label(label: str) -> str:
    """A joint segmentation + POS label `{B,M,E,S}-TAG`, with `I-` normalised to `M-`."""
    prefix, tag = parse_segment_label(label, tagged=True)
    return label if prefix == label[0] else f"{prefix}-{tag}"


def check_ner_label(label: str) -> str:
    """An entity label `O` or `{B,I,M,E,S}-TYPE`, kept as written."""
    parse_entity_label(label)
    return label
