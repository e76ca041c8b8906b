"""Pretraining (MLM + NSP, or replaced-token detection): the objective, held-out evaluation, and the
`zen pretrain` pipeline.

    result = run_pretrain(cfg)          # cfg: PretrainConfig (a recipe)

Four stages, each skipped when its output is already there, so a run continues where it stopped: 1. the
vocabulary and lexicon (built when missing), 2. the pretraining shards, 3. training with the shared loop
(held-out scores against a unigram baseline every `train.eval_every` steps), 4. OUT/model and
OUT/results.json.

One module per stage: rundir.py (the output directory: names, marker, recipe, --overwrite) ·
vocab_lexicon.py (stage 1) · shards.py (stage 2) · preparation.py (`prepare`: stages 1–2) ·
objective.py (MLM + NSP loss, the plateau watch) · heldout.py (held-out scores, the unigram baseline) ·
network.py (stage 3's model and objective) · rtd.py (replaced-token detection) · results.py (stage 4: model,
results.json, tables) · run.py (`run_pretrain`, which runs them in order).

More: docs/design.md, "Pretraining".
"""

from zencli.tasks.pretraining.heldout import (
    BASELINE_MAX_SHARDS,
    HeldoutSet,
    add_mlm_sums,
    evaluate,
    mlm_scores,
    unigram_baseline,
)
from zencli.tasks.pretraining.network import build_model
from zencli.tasks.pretraining.objective import PLATEAU_MARGIN, plateau_watch, pretraining_loss
from zencli.tasks.pretraining.preparation import Prepared, check_documents, expand_corpus, prepare
from zencli.tasks.pretraining.results import PretrainResult, curve, result_tables
from zencli.tasks.pretraining.run import run_pretrain
from zencli.tasks.pretraining.rundir import (
    DATA_DIR,
    MARKER_FORMAT,
    MARKER_NAME,
    MODEL_DIR,
    RECIPE_NAME,
    RESULTS_NAME,
    check_output_dir,
    clear_outputs,
    recipe_yaml,
    run_plan,
)

__all__ = [
    "BASELINE_MAX_SHARDS", "DATA_DIR", "MARKER_FORMAT", "MARKER_NAME", "MODEL_DIR", "PLATEAU_MARGIN", "RECIPE_NAME",
    "RESULTS_NAME", "HeldoutSet", "Prepared", "PretrainResult", "add_mlm_sums", "build_model", "check_documents",
    "check_output_dir", "clear_outputs", "curve", "evaluate", "expand_corpus", "mlm_scores", "plateau_watch",
    "prepare", "pretraining_loss", "recipe_yaml", "result_tables", "run_plan", "run_pretrain",
    "unigram_baseline",
]
