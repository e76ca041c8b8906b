"""Readers for every fine-tuning data format: one module per family, each detecting its formats and
raising a one-line ZenError naming file:line for malformed input. Start from `read_task_file`."""

from zencli.data.readers.classification import TextExample, read_classification
from zencli.data.readers.common import ReadInfo
from zencli.data.readers.dispatch import TASK_FORMATS, TASKS, read_task_file
from zencli.data.readers.labels import LabelSet
from zencli.data.readers.mrc import MrcExample, locate_answer, read_mrc
from zencli.data.readers.pairs import PairExample, read_pairs
from zencli.data.readers.qa import QaExample, read_qa
from zencli.data.readers.schemes import (
    detect_scheme,
    is_well_formed,
    labels_from_spans,
    spans_from_labels,
    tagged_words,
    words_from_labels,
)
from zencli.data.readers.tagging import (
    TaggedSentence,
    detect_tagging_format,
    read_tagging,
)

__all__ = [
    "LabelSet",
    "MrcExample",
    "PairExample",
    "QaExample",
    "ReadInfo",
    "TASKS",
    "TASK_FORMATS",
    "TaggedSentence",
    "TextExample",
    "detect_scheme",
    "detect_tagging_format",
    "is_well_formed",
    "labels_from_spans",
    "locate_answer",
    "read_classification",
    "read_mrc",
    "read_pairs",
    "read_qa",
    "read_tagging",
    "read_task_file",
    "spans_from_labels",
    "tagged_words",
    "words_from_labels",
]
