"""Numbers in summary tables (`zen quickstart`, `zen bench gpu`): a missing value reads "n/a"."""

from __future__ import annotations


def number(v: float | None, digits: int = 3) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def percent(v: float | None) -> str:
    """A fraction as a percentage with two decimals (F1 0.8532 → 85.32)."""
    return "n/a" if v is None else f"{100 * v:.2f}"


def count(v: int | None) -> str:
    return "n/a" if v is None else f"{v:,}"


def seconds(s: float) -> str:
    return f"{s:,.0f} s" if s >= 10 else f"{s:.1f} s"
