"""`--model DIR` and the recipe's model keys: the directory brings its own vocab.txt / ngram.txt (a recipe's
files for a model built from scratch give way to them; files given on the command line still conflict),
and the recipe's dropout rates apply to the pretrained encoder."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from tests.conftest import REF
from tests.test_finetune_cli import _sets, error, finetune
from tests.test_tasks_tagging import TINY, VOCAB, write_task_data
from zencli.cli.app import app


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


@pytest.mark.usefixtures("dataset_folders")
def test_files_given_on_the_command_line_still_conflict(tmp_path):
    data = str(write_task_data(tmp_path, "cws"))
    msg = error("--recipe", "finetune-pd98-cws", "--train", data, "-o", str(tmp_path / "x"), "--model", str(REF),
                "--vocab", str(VOCAB))
    assert "its own vocab.txt" in msg


def test_recipe_dropout_applies_to_a_pretrained_encoder_too(tmp_path):
    """model.*_dropout_prob set in a recipe reach a pretrained encoder (null keeps the model's own)."""
    from zencli.model.attention import SelfAttention
    from zencli.model.relative_attention import RelativeSelfAttention
    from zencli.tasks.model_dir import load_task_model

    def rates(model_dir):
        enc = load_task_model(model_dir).model.encoder
        drops = {m.p for m in enc.modules() if isinstance(m, torch.nn.Dropout)}
        attn = {m.dropout_p for m in enc.modules() if isinstance(m, (SelfAttention, RelativeSelfAttention))}
        return drops, attn, enc.config.hidden_dropout_prob, enc.config.attention_probs_dropout_prob

    _, out = finetune(tmp_path, "cws", "--model", str(REF), steps=1, dev=False, scratch=False)
    own = json.loads((REF / "config.json").read_text())
    assert rates(out / "model") == ({own["hidden_dropout_prob"]}, {own["attention_probs_dropout_prob"]},
                                    own["hidden_dropout_prob"], own["attention_probs_dropout_prob"])
    _, out = finetune(tmp_path, "cws", "--model", str(REF), "--set", "model.hidden_dropout_prob=0.25",
                      "--set", "model.attention_probs_dropout_prob=0", out="run2", steps=1, dev=False, scratch=False)
    assert rates(out / "model") == ({0.25}, {0.0}, 0.25, 0.0)
    msg = error("--task", "cws", "--train", str(write_task_data(tmp_path, "cws")), "--model", str(REF),
                "-o", str(tmp_path / "bad"), "--set", "model.hidden_dropout_prob=1.0")
    assert msg == "command line: model.hidden_dropout_prob: expected a probability in [0, 1) or null, got 1.0"
