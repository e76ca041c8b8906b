"""`zen quickstart`: the default pipeline in one command, on a fresh machine, within `--minutes` (15). The
steps, their skipping and resuming, and WORK/quickstart.json are the library's (zencli.jobs.quickstart); this
module parses the options, lends the steps their commands' screens, and prints the summary table.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import typer

from zencli import formatting as fmt
from zencli.cli.common import DTYPE_OPTION, WORKDIR_OPTION, console, err_console
from zencli.jobs.quickstart import Display, Step
from zencli.jobs.workspace import QUICKSTART_MINUTES, Workspace


def quickstart(
    minutes: float = typer.Option(QUICKSTART_MINUTES, "--minutes", "-m", help="Time budget of the whole run: 45% for "
                                  "pretraining, 25% for fine-tuning, the rest for the other steps."),
    workdir: Optional[Path] = WORKDIR_OPTION,
    pretrain_set: list[str] = typer.Option([], "--pretrain-set", help="KEY=VALUE for the pretraining step, as "
                                           "`zen pretrain --set` (repeatable), e.g. model.hidden_size=256."),
    finetune_set: list[str] = typer.Option([], "--finetune-set", help="KEY=VALUE for the fine-tuning step, as "
                                           "`zen finetune --set` (repeatable), e.g. epochs=5."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No training progress display."),
    dtype: str = DTYPE_OPTION,
) -> None:
    """PD98 → lexicon → tiny ZEN 2.0 pretraining → NER fine-tuning → test P/R/F → prediction, in --minutes.

    Everything goes to the workspace (./zen-work, --workdir); run it again to skip the finished steps and
    resume an interrupted one. The steps are `zen lexicon`, `zen pretrain`, `zen finetune --task ner`,
    `zen evaluate`, `zen predict`: run them one by one for the same result."""
    from zencli.cli import evaluate, finetune, lexicon, pretrain
    from zencli.jobs import finetune as finetune_job
    from zencli.jobs import pretrain as pretrain_job
    from zencli.jobs.quickstart import run_quickstart

    ws = Workspace.at(workdir)
    display = Display(out=console, err=err_console, lexicon_result=lexicon.print_result,
                      pretrain_announce=_announce(pretrain_job.expected_duration), pretrain_report=pretrain.report,
                      finetune_announce=_announce(finetune_job.expected_duration), finetune_report=finetune.report,
                      evaluation=evaluate.print_evaluation)
    steps, summary = run_quickstart(ws, minutes, pretrain_sets=list(pretrain_set), finetune_sets=list(finetune_set),
                                    quiet=quiet, display=display, dtype=dtype)
    _print_summary(ws, steps, summary)


def _announce(duration: Callable[[Any], str]) -> Callable[[Any], None]:
    """Say before a step starts how long it is expected to take, as the step's own command does."""
    return lambda cfg: err_console.print(duration(cfg), markup=False, highlight=False, soft_wrap=True)


def _short(ws: Workspace, path: str) -> str:
    """A path inside the workspace relative to it (the table's title names the workspace)."""
    try:
        return str(Path(path).relative_to(ws.root))
    except ValueError:
        return path


def _print_summary(ws: Workspace, steps: list[Step], summary: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    minutes = summary["budget"]["minutes"]
    t = Table(title=f"zen quickstart · workspace {escape(str(ws.root))} · budget {minutes:g} min")
    for col in ("step", "time", "result", "written to"):
        t.add_column(col, justify="right" if col == "time" else "left", overflow="fold")
    for s in steps:
        if s.status == "skipped":
            took = "skipped" + (f" (ran {fmt.seconds(s.ran_seconds)})" if s.ran_seconds else "")
        else:
            took = fmt.seconds(s.seconds)
        t.add_row(s.name, took, escape(s.result), escape("\n".join(_short(ws, p) for p in s.outputs)))
    t.add_row("total", fmt.seconds(summary["seconds"]), "", escape(_short(ws, str(ws.quickstart_json))),
              end_section=True)
    console.print(t)
    speed = []
    for name in ("pretrain", "finetune"):
        sec = (summary.get(name) or {}).get("seconds_per_step")
        if sec:
            speed.append(f"{name} {sec:.3f} s/step")
    if speed:
        console.print("training speed: " + " · ".join(speed), highlight=False)
    console.print("the same, step by step:", highlight=False)
    for s in steps[1:]:
        console.print(f"  {escape(s.command)}", highlight=False, soft_wrap=True)
