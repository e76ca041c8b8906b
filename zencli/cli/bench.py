"""`zen bench …`: speed measurements (benchmarks, not tests). Each benchmark has its own module."""

from __future__ import annotations

import typer

from zencli.cli import (
    bench_ablation,
    bench_gpu,
    bench_lexicon,
    bench_matcher,
    bench_model,
    bench_predict,
    bench_speed,
    bench_suite,
)
from zencli.cli.common import reads_text

app = typer.Typer(help="Measure speed and memory (lexicon, matcher, models, all at once), run the papers' ablations "
                  "and check a GPU end to end.", no_args_is_help=True)
app.command("lexicon")(reads_text(bench_lexicon.lexicon))
app.command("matcher")(reads_text(bench_matcher.matcher))
app.command("model")(reads_text(bench_model.model))
app.command("speed")(reads_text(bench_speed.speed))
app.command("predict")(reads_text(bench_predict.predict))
app.command("ablation")(reads_text(bench_ablation.ablation))
app.command("gpu")(reads_text(bench_gpu.gpu))
app.command("suite")(reads_text(bench_suite.suite))
