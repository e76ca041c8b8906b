"""`zen bench …`: speed measurements (benchmarks, not tests). Each benchmark has its own module."""

from __future__ import annotations

import typer

from zencli.cli import (
    bench_ablation,
    bench_gpu,
    bench_lexicon,
    bench_matcher,
    bench_model,
    bench_peers,
    bench_predict,
    bench_speed,
)

app = typer.Typer(help="Measure speed and memory (lexicon, matcher, models, all at once), run the papers' ablations "
                  "and check a GPU end to end.", no_args_is_help=True)
app.command("lexicon")(bench_lexicon.lexicon)
app.command("matcher")(bench_matcher.matcher)
app.command("model")(bench_model.model)
app.command("speed")(bench_speed.speed)
app.command("peers")(bench_peers.peers)
app.command("predict")(bench_predict.predict)
app.command("ablation")(bench_ablation.ablation)
app.command("gpu")(bench_gpu.gpu)
