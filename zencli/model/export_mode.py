"""Export mode: the encoder traced into a static graph (ONNX, `zen model export --format onnx`).

Eager inference on the CPU looks at values to skip work that cannot change the result (a char mask of
no padding, n-gram slots that are padding everywhere, a batch whose n-grams cover nothing: encoder.py),
and caches per-length tables (relative_attention.py). A traced graph must not depend on either: it runs
on every batch size and length. Inside `exporting(max_length)` the encoder takes the plain path — the
mask is always applied, every slot runs through the n-gram tower, the rotation tables are slices of one
table for `max_length` positions — which computes the same numbers (the tests compare both paths).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

_MAX_LENGTH: contextvars.ContextVar[int | None] = contextvars.ContextVar("zen_export_max_length", default=None)


@contextmanager
def exporting(max_length: int) -> Iterator[None]:
    """Trace in export mode for sequences of at most `max_length` tokens."""
    token = _MAX_LENGTH.set(max_length)
    try:
        yield
    finally:
        _MAX_LENGTH.reset(token)


def export_max_length() -> int | None:
    """The longest sequence of the graph being traced; None outside `exporting`."""
    return _MAX_LENGTH.get()


def is_exporting() -> bool:
    return _MAX_LENGTH.get() is not None
