"""Where two settings records differ: the message of every "this folder holds another run" refusal."""

from __future__ import annotations

from typing import Any


def first_difference(old: Any, new: Any, prefix: str = "") -> str | None:
    """`key.sub: 1 there, 2 now` for the first (in key order) leaf where nested dicts `old` and `new`
    differ — a key on one side only reads as None on the other; None when they are equal."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            diff = first_difference(old.get(key), new.get(key), f"{prefix}{key}.")
            if diff:
                return diff
        return None
    return None if old == new else f"{prefix.rstrip('.')}: {old!r} there, {new!r} now"
