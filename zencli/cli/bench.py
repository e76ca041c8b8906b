"""`zen bench …`: speed measurements (benchmarks, not tests). Each benchmark has its own module."""

from __future__ import annotations

import typer

from zencli.cli import bench_lexicon, bench_matcher, bench_model

app = typer.Typer(help="Measure speed and memory (lexicon extraction, n-gram matcher, models).", no_args_is_help=True)
app.command("lexicon")(bench_lexicon.lexicon)
app.command("matcher")(bench_matcher.matcher)
app.command("model")(bench_model.model)
