"""The one map between zen's module names and the released ZEN names.

The released checkpoints call the char table, the n-gram module and its table all `word_embeddings`, and the
n-gram layers `word_layers` (docs/checkpoints.md). zen calls them what they are:

    released (and zen before the rename)     zen
    embeddings.word_embeddings               embeddings.char_embeddings
    word_embeddings.word_embeddings          ngram_embeddings.table
    word_embeddings.<rest>                   ngram_embeddings.<rest>
    encoder.word_layers.<j>                  encoder.ngram_layers.<j>

zen's own files written before the rename (model.safetensors, training checkpoints, a run's fingerprint) use
the released names too, so the same map reads them: `to_zen` takes either naming to zen's (a zen name passes
unchanged), `to_released` is its inverse for export. Names are matched segment by segment, so any prefix
(`bert.`, `encoder.`, `module.`, `discriminator.bert.`) is kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")

# (released, zen) pairs in the order they apply: the doubled table name before the module name alone.
_PAIRS = (
    ("embeddings.word_embeddings.", "embeddings.char_embeddings."),
    ("word_embeddings.word_embeddings.", "ngram_embeddings.table."),
    ("word_embeddings.", "ngram_embeddings."),
    ("encoder.word_layers.", "encoder.ngram_layers."),
)


def _rule(old: str, new: str) -> tuple[re.Pattern[str], str]:
    # a whole segment at the start or after a dot: `embeddings.` must not match inside `word_embeddings.`
    return re.compile(r"(^|\.)" + re.escape(old)), r"\g<1>" + new


_TO_ZEN = [_rule(released, zen) for released, zen in _PAIRS]
_TO_RELEASED = [_rule(zen, released) for released, zen in _PAIRS]


def _apply(rules: list[tuple[re.Pattern[str], str]], name: str) -> str:
    for pattern, replacement in rules:
        renamed = pattern.sub(replacement, name, count=1)
        if renamed != name:
            return renamed  # one rule per name: a renamed name is never renamed again
    return name


def to_zen(name: str) -> str:
    """A parameter name in the released naming (or zen's old one) → zen's; zen's names come back unchanged."""
    return _apply(_TO_ZEN, name)


def to_released(name: str) -> str:
    """A zen parameter name → the released checkpoints' name for it."""
    return _apply(_TO_RELEASED, name)


def zen_state(state: Mapping[str, T]) -> dict[str, T]:
    """`state` (a state dict, or any mapping keyed by parameter names) with zen's names, order kept."""
    return {to_zen(k): v for k, v in state.items()}


def released_state(state: Mapping[str, T]) -> dict[str, T]:
    """`state` keyed by zen's names → the released names, order kept."""
    return {to_released(k): v for k, v in state.items()}
