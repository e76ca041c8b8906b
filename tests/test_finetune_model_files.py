"""`--model DIR` brings its own vocab.txt / ngram.txt: a recipe's files for a model built from scratch give
way to them; files given on the command line still conflict with the directory's."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.test_finetune_cli import _sets, error
from tests.test_tasks_tagging import REF, TINY, VOCAB, write_task_data
from zencli.cli.app import app

pytestmark = pytest.mark.skipif(not REF.is_dir(), reason="shared fixtures not present")


def test_recipe_vocab_and_ngram_give_way_to_the_model_directory(tmp_path):
    data = write_task_data(tmp_path, "cws")
    out = tmp_path / "run"
    # finetune-pd98-cws names runs/quickstart/vocab.txt and ngram.txt, which need not even exist here
    r = CliRunner().invoke(app, ["finetune", "--recipe", "finetune-pd98-cws", "--model", str(REF), "--train",
                                 str(data), "--dev", str(data), "--test", str(data), "-o", str(out), "--quiet",
                                 "--max-steps", "2", *_sets([s for s in TINY if not s.startswith("model.")])],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    model = out / "model"
    assert (model / "vocab.txt").read_bytes() == (REF / "vocab.txt").read_bytes()
    assert json.loads((out / "run.json").read_text())["settings"]["max_steps"] == 2


def test_files_given_on_the_command_line_still_conflict(tmp_path):
    data = str(write_task_data(tmp_path, "cws"))
    msg = error("--recipe", "finetune-pd98-cws", "--train", data, "-o", str(tmp_path / "x"), "--model", str(REF),
                "--vocab", str(VOCAB))
    assert "its own vocab.txt" in msg
