"""Pretraining (MLM + NSP, or replaced-token detection): the objective, held-out evaluation, and the
`zen pretrain` pipeline.

    result = run_pretrain(cfg)          # cfg: PretrainConfig (a recipe)

Stages, each skipped when its output is already there:
1. vocabulary and lexicon: `data.vocab` / `data.ngram` (or the `init` checkpoint's files); a missing one is
   built from the corpus into the output directory when `data.build_missing` is set (vocab: characters
   for zh, WordPiece for ar; lexicon: PMI + frequency with the language's thresholds);
2. shards: pretraining examples (NSP pairs, whole n-gram or char masking, n-gram slots) of `data.corpus`
   into OUT/data/train and of `data.heldout` into OUT/data/heldout (`zencli.data.pretraining`; complete
   shards with the same fingerprint are reused);
3. training: ZenForPreTraining from scratch or from `init.pretrained`, with the shared loop
   (`zencli.train`): checkpoints, resume, DDP, progress, metrics.jsonl. Every `train.eval_every` steps
   (and at the end) the held-out examples are scored: MLM loss, masked-char accuracy, NSP accuracy.
   `objective: rtd` trains the same encoder as the discriminator of replaced-token detection (ELECTRA,
   rtd.py) on the same shards; the held-out scores add its detection accuracy and AUC;
4. OUT/model (a zen model directory with vocab.txt and ngram.txt) and OUT/results.json.

Output directory:

    pretrain.json             what this run is (compared on the next start: another run is refused)
    recipe.yaml               the resolved recipe
    vocab.txt, ngram.txt      built here when missing (with their .json sidecars)
    data/train, data/heldout  the shards
    run.json, metrics.jsonl, checkpoints/, tensorboard/   the training loop's
    model/                    the pretrained model
    results.json              data, baseline, curve, held-out scores, throughput

While training, the train MLM loss is watched against the unigram MLM loss (`plateau_watch`): a run still
at that plateau after a fifth of its steps says so loudly (a red warning, a "warning" record in
metrics.jsonl, `warnings` in results.json and under the final tables) instead of only at the end.

Held-out accuracy is reported twice: `mlm_acc` over every MLM target, and `masked_acc` over the targets
shown to the model as [MASK] only (10% of the targets are left unchanged in the input and are copied
for free; `masked_acc` is the honest number). The baseline is the best constant guess: always the most
frequent MLM target of the training shards, scored on the same held-out positions, plus the unigram
cross-entropy of those targets (what a model that ignores the context reaches at best).

Distributed (torchrun or `zen pretrain --nproc N`): rank 0 prepares stages 1–2 while the other ranks
wait on a gloo barrier without a timeout worth worrying about; rank 0 evaluates and writes. The n-gram
side of a batch without any n-gram gets no gradient, so DDP runs with find_unused_parameters.

One module per stage: rundir.py (the output directory: names, marker, recipe, --overwrite) ·
vocab_lexicon.py (stage 1) · shards.py (stage 2) · preparation.py (`prepare`: stages 1–2) ·
objective.py (MLM + NSP loss, the plateau watch) · heldout.py (held-out scores, the unigram baseline) ·
model.py (stage 3's model and objective) · results.py (stage 4: model, results.json, tables) ·
run.py (`run_pretrain`, which runs them in order).
"""

from zencli.tasks.pretraining.heldout import (
    BASELINE_MAX_SHARDS,
    HeldoutSet,
    add_mlm_sums,
    evaluate,
    mlm_scores,
    unigram_baseline,
)
from zencli.tasks.pretraining.model import build_model
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
