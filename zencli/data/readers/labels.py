"""`LabelSet`: the label ↔ id mapping of a fine-tuned model, built from training data.

Ids follow a deterministic order: `LabelSet.build` sorts the labels (numerically when every label is an
integer, so "2" < "10"; otherwise by code point), and a saved set (a JSON list) keeps its order on load.
A label that was not in the training data (an unseen POS tag in a test file) maps to `unk_id`, which is
`len(labels)`: not a class of the model, so it is never predicted and always scores as an error. Each
such label is counted in `unseen`, which evaluation reports; nothing crashes on it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from zencli.atomic_write import atomic_write_text
from zencli.data.readers.common import load_json_file
from zencli.errors import ZenError

UNK_LABEL = "[UNK]"


_INT = re.compile(r"-?\d+\Z")


def _ordered(labels: set[str]) -> list[str]:
    if all(_INT.match(x) for x in labels):
        return sorted(labels, key=lambda x: (int(x), x))
    return sorted(labels)


class LabelSet:
    """Labels in a fixed order with `encode`/`decode`; unseen labels → `unk_id`, counted in `unseen`."""

    def __init__(self, labels: Iterable[str]):
        self.labels: list[str] = list(labels)
        self.index: dict[str, int] = {}
        for i, lab in enumerate(self.labels):
            if not isinstance(lab, str) or not lab:
                raise ZenError(f"label set: label {i + 1} is {lab!r}; expected a non-empty string")
            if lab in self.index:
                raise ZenError(f"label set: label {lab!r} occurs twice; expected distinct labels")
            self.index[lab] = i
        self.unseen: Counter[str] = Counter()

    @classmethod
    def build(cls, labels: Iterable[str | None]) -> LabelSet:
        """The distinct labels of training data (None, i.e. unlabelled, is ignored), sorted."""
        distinct = {lab for lab in labels if lab is not None}
        if not distinct:
            raise ZenError("label set: the training data has no labels; expected a labelled file")
        return cls(_ordered(distinct))

    @property
    def unk_id(self) -> int:
        return len(self.labels)

    @property
    def unseen_total(self) -> int:
        return sum(self.unseen.values())

    def __len__(self) -> int:
        return len(self.labels)

    def __contains__(self, label: object) -> bool:
        return label in self.index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LabelSet) and self.labels == other.labels

    def __repr__(self) -> str:
        return f"LabelSet({self.labels!r})"

    def encode(self, label: str) -> int:
        i = self.index.get(label)
        if i is None:
            self.unseen[label] += 1
            return self.unk_id
        return i

    def encode_all(self, labels: Iterable[str]) -> list[int]:
        return [self.encode(lab) for lab in labels]

    def decode(self, i: int) -> str:
        if i == self.unk_id:
            return UNK_LABEL
        if not 0 <= i < len(self.labels):
            raise IndexError(f"label id {i} out of range 0..{len(self.labels)}")
        return self.labels[i]

    def save(self, path: str | Path) -> None:
        atomic_write_text(path, json.dumps(self.labels, ensure_ascii=False, indent=0) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> LabelSet:
        data = load_json_file(path)
        if not isinstance(data, list):
            raise ZenError(f"{path}: expected a JSON list of labels, got {type(data).__name__}")
        try:
            return cls(data)
        except ZenError as e:
            raise ZenError(f"{path}: {e}") from None
