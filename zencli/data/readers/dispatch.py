"""`read_task_file`: one entry point that reads any fine-tuning file given its task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zencli.data.readers.classification import (
    CLASSIFICATION_FORMATS,
    read_classification,
)
from zencli.data.readers.common import ReadInfo
from zencli.data.readers.mrc import MRC_FORMATS, read_mrc
from zencli.data.readers.pairs import PAIR_FORMATS, read_pairs
from zencli.data.readers.qa import QA_FORMATS, read_qa
from zencli.data.readers.tagging import TAGGING_FORMATS, read_tagging
from zencli.errors import unknown_task

# task → the formats its reader accepts (besides "auto").
TASK_FORMATS: dict[str, tuple[str, ...]] = {
    **TAGGING_FORMATS,
    "dc": CLASSIFICATION_FORMATS,
    "sa": CLASSIFICATION_FORMATS,
    "spm": PAIR_FORMATS,
    "nli": PAIR_FORMATS,
    "qa": QA_FORMATS,
    "mrc": MRC_FORMATS,
}
TASKS = tuple(TASK_FORMATS)


def read_task_file(path: str | Path, task: str, fmt: str = "auto", header: bool | None = None
                   ) -> tuple[list[Any], ReadInfo]:
    """Read a file for `task` (cws, pos, ner, dc, sa, spm, nli, qa, mrc) in format `fmt` ("auto":
    detected from its first lines). `header` overrides header detection for TAB-separated sentence,
    pair and QA files. Returns the examples and a `ReadInfo` with the format used and the counts."""
    if task not in TASK_FORMATS:
        raise unknown_task(task, TASKS)
    if task in TAGGING_FORMATS:
        return read_tagging(path, task, fmt)
    if task in ("dc", "sa"):
        return read_classification(path, fmt, header, task)
    if task in ("spm", "nli"):
        return read_pairs(path, fmt, header, task)
    if task == "qa":
        return read_qa(path, fmt, header)
    return read_mrc(path, fmt)
