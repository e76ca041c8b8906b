"""`zen bench suite MODEL`: the model fine-tuned and scored on every fetched benchmark set, one table with the
published numbers beside (zencli.bench.suite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from zencli.cli.common import console, err_console


def suite(
    model: Path = typer.Argument(..., help="A pretrained model directory (zen or released format)."),
    sets: Optional[str] = typer.Option(None, "--sets", help="Comma-separated sets (default: every fetched one; "
                                       "`zen data list` shows them)."),
    minutes: float = typer.Option(3.0, "--minutes", help="Training minutes per set, shared by its seeds and rows "
                                  "(test scoring comes on top)."),
    seeds: int = typer.Option(1, "--seeds", help="Seeds per set (mean ± sd in the table)."),
    scratch: bool = typer.Option(False, "--scratch", help="Also train the task's small model from scratch at the "
                                 "same budget, a row beside each set."),
    adapt_minutes: Optional[float] = typer.Option(None, "--adapt-minutes", help="Also an `adapted` row: the "
                                                  "same run with its first minutes adapting the model to the "
                                                  "set's text (`zen finetune --adapt-minutes`)."),
    out: Path = typer.Option(Path("runs/suite"), "--out", "-o", help="Runs and the report (suite.json, "
                             "suite.md); run again to continue, finished runs are kept."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Fine-tune MODEL on each fetched benchmark set and score it on the test split."""
    from rich.table import Table

    from zencli.bench.suite import REPORT_JSON, REPORT_MD, run_suite

    names = [s.strip() for s in sets.split(",") if s.strip()] if sets else None
    report = run_suite(model, out=out, sets=names, minutes=minutes, seeds=seeds, scratch=scratch,
                       adapt_minutes=adapt_minutes, console=err_console, show_progress=not quiet and not as_json)
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    table = Table(title=f"zen bench suite {model}: test scores ×100, {minutes:g} min per set, {seeds} seed(s)")
    for c in ("set", "task", "metric", "row", "test", "published"):
        table.add_column(c, justify="right" if c == "test" else "left")
    for r in report["rows"]:
        score = "—" if r["test_mean"] is None else f"{r['test_mean']:.2f}" + (
            f" ± {r['test_sd']:.2f}" if r["test_sd"] is not None else "")
        table.add_row(r["set"], r["task"], r["metric"] or "—", r["row"], score,
                      ", ".join(f"{k} {v:.2f}" for k, v in r["published"].items()) or "—")
    console.print(table)
    console.print(f"{out / REPORT_JSON}, {out / REPORT_MD}", highlight=False)
