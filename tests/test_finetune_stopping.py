"""Early stopping waits for learning: on a small training set (60 sentences, 2 steps an epoch) dev is scored on
a step cadence of 5 to 50 evaluations, and a run whose dev score stalls stops only after its patience (a share
of the planned steps), never inside its warm-up nor before a quarter of the run. Made-up data, a tiny CHTE
from characters: nothing outside the test's folder is read."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.conftest import write
from tests.test_tasks_tagging import SENTENCES, TINY, TINY_CHTE, cws_lines
from zencli.cli.app import app
from zencli.errors import ZenError
from zencli.train.early_stopping import MIN_SHARE
from zencli.train.schedule import MAX_EVALS, MIN_EVALS

runner = CliRunner()


def sixty_sentences(tmp: Path) -> Path:
    rng = random.Random(5)
    words = [w for s in SENTENCES for w in s]
    sentences = [[rng.choice(words) for _ in range(rng.randint(3, 7))] for _ in range(60)]
    return write(tmp / "train.txt", cws_lines(sentences))


def test_sixty_sentences_do_not_stop_inside_the_warmup_nor_before_a_quarter_of_the_run(tmp_path):
    data = sixty_sentences(tmp_path)
    out = tmp_path / "run"
    sets = [*TINY, *TINY_CHTE, "train.batch_size=32", "warmup_ratio=0.05", "train.patience=0.2"]
    # lr 1e-7: dev does not move after the first evaluation, the worst case for early stopping
    r = runner.invoke(app, ["finetune", "--task", "cws", "--encoder", "chte", "--train", str(data), "--dev",
                            str(data), "-o", str(out), "--max-steps", "400", "--lr", "1e-7", "--quiet",
                            *[x for s in sets for x in ("--set", s)]], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    evals = [(row["step"], row["f1"]) for row in rows if row["kind"] == "eval"]
    steps = [step for step, _ in evals]
    planned, warmup = 400, 20  # 5 % of 400
    # an epoch is 2 steps: dev is scored every 8 (at most 50 evaluations), not every 2
    assert steps[:3] == [8, 16, 24] and MIN_EVALS <= len(evals) <= MAX_EVALS
    # dev stalls: the run stops at the first evaluation 80 steps (0.2 × 400) after the best one and past a
    # quarter of the run, not at step 14 inside its warm-up
    best = max(evals, key=lambda e: (e[1], -e[0]))[0]
    stop = next(step for step in steps if step - best >= 0.2 * planned and step >= MIN_SHARE * planned)
    assert steps[-1] == stop < planned and stop >= max(warmup, MIN_SHARE * planned)


@pytest.mark.parametrize("train,needle", [
    ({"patience": 5}, "train.patience: expected a share of the planned steps in [0, 1) (e.g. 0.2; 0: no early "
                      "stopping), got 5, a count of evaluations (what patience meant before)"),
    ({"eval_every": 0}, "train.eval_every: 0 (once per epoch, as fine-tuning read it before) is no longer a cadence"),
])
def test_a_recipe_in_the_old_meaning_is_a_one_line_error_naming_the_key(tmp_path, train, needle):
    from zencli.jobs.finetune import build_config

    recipe = tmp_path / "old.yaml"
    recipe.write_text(yaml.safe_dump({"job": "finetune", "task": {"name": "cws"}, "train": train}), encoding="utf-8")
    with pytest.raises(ZenError) as e:
        build_config(str(recipe), [], {})
    assert needle in str(e.value) and "\n" not in str(e.value)
