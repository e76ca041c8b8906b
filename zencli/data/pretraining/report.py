"""What a generation run reports: the result and its timings, the totals over shards kept in the
manifest, progress bars while it runs, and the summary table of `zen data pretrain`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class GenerationResult:
    out_dir: Path
    manifest: dict[str, Any]
    made: int  # shards made by this run
    reused: int  # complete shards found from an earlier run
    seconds_read: float = 0.0  # reading + tokenizing the corpus
    seconds_generate: float = 0.0  # making the shards (all workers, wall clock)
    corpus_chars: int = 0
    made_examples: int = 0

    def as_dict(self) -> dict[str, Any]:
        rate = self.made_examples / self.seconds_generate if self.seconds_generate > 0 else None
        # Characters the made shards cover (all shards of a round cover the corpus once).
        rounds = self.made / max(self.manifest["n_parts"], 1)
        chars = self.corpus_chars * rounds
        return {
            "out_dir": str(self.out_dir),
            "shards_made": self.made,
            "shards_reused": self.reused,
            "seconds_read": round(self.seconds_read, 3),
            "seconds_generate": round(self.seconds_generate, 3),
            "examples_per_second": None if rate is None else round(rate, 1),
            "chars_per_second": None if not self.seconds_generate else round(chars / self.seconds_generate, 1),
            "totals": self.manifest["totals"],
        }


def shard_totals(shards: list[dict[str, Any]]) -> dict[str, Any]:
    """The manifest's `totals`: the shards' statistics summed, and the fractions and means they give."""
    keys = ("examples", "tokens", "maskable", "masked", "masked_as_mask", "masked_as_random", "masked_units",
            "masked_multi_token_units", "nsp_random", "ngram_slots")
    t: dict[str, Any] = {k: sum(int(s[k]) for s in shards) for k in keys}
    t["max_slots"] = max((int(s["max_slots"]) for s in shards), default=0)
    ex = t["examples"]
    t["masked_fraction"] = round(t["masked"] / t["maskable"], 6) if t["maskable"] else 0.0
    t["nsp_random_fraction"] = round(t["nsp_random"] / ex, 6) if ex else 0.0
    t["ngrams_per_example"] = round(t["ngram_slots"] / ex, 3) if ex else 0.0
    t["tokens_per_example"] = round(t["tokens"] / ex, 3) if ex else 0.0
    units = t["masked_units"]
    t["multi_token_unit_fraction"] = round(t["masked_multi_token_units"] / units, 6) if units else 0.0
    return t


def summary_table(result: GenerationResult):
    """A Rich table of the run and the dataset (the same numbers as `result.as_dict()`)."""
    from rich.table import Table  # lazy: recipe checks (`zen recipe show`) import this module, no table needed

    d = result.as_dict()
    t = d["totals"]
    table = Table(title=f"pretraining shards: {result.out_dir}")
    table.add_column("", style="bold")
    table.add_column("value", justify="right")
    rows = [
        ("shards made / reused", f"{d['shards_made']} / {d['shards_reused']}"),
        ("examples", f"{t['examples']:,}"),
        ("tokens per example", f"{t['tokens_per_example']:.1f}"),
        ("masked fraction", f"{t['masked_fraction']:.4f}"),
        ("multi-token masked units", f"{t['multi_token_unit_fraction']:.4f}"),
        ("NSP random fraction", f"{t['nsp_random_fraction']:.4f}"),
        ("n-grams per example (max)", f"{t['ngrams_per_example']:.1f} ({t['max_slots']})"),
        ("time reading", f"{d['seconds_read']:.2f} s"),
        ("time generating", f"{d['seconds_generate']:.2f} s"),
    ]
    if d["examples_per_second"] is not None:
        rate = f"{d['examples_per_second']:,.0f} examples/s, {d['chars_per_second'] / 1e3:,.0f} k chars/s"
        rows.append(("throughput", rate))
    for k, v in rows:
        table.add_row(k, v)
    return table
