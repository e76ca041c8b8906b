"""Adaptation to the user's domain before fine-tuning (`adapt.minutes`, `adapt.text`; zencli.tasks.adaptation),
end to end at tiny size on made-up text: the lexicon grows by the review words, the new n-gram rows start
as the mean of their characters, masked-LM pretraining continues, the fine-tuning starts from the adapted
model, and a re-run skips the finished adaptation. Also the flags and their recipe keys, and bad input."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import torch
import yaml
from rich.console import Console
from typer.testing import CliRunner

from tests.conftest import write
from tests.helpers_domain import NEGATIVE, POSITIVE, TINY_SETS, pretrained_model, review_files, reviews
from tests.test_tasks_tagging import settings_dict
from zencli.cli.app import app
from zencli.config.finetune import FinetuneConfig
from zencli.config.loading import from_dict
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.model.checkpoint import read_zen_checkpoint
from zencli.tasks.finetune import run_finetune
from zencli.text.vocab import Vocab

runner = CliRunner()


def config(tmp: Path, *extra: str) -> FinetuneConfig:
    model = pretrained_model(tmp) if not (tmp / "pretrained").is_dir() else tmp / "pretrained"
    train, dev = review_files(tmp)
    sets = [*TINY_SETS, "task.name=sa", f"data.train={train}", f"data.dev={dev}", f"train.output_dir={tmp / 'run'}",
            f"model.pretrained={model}", "train.max_steps=10", *extra]
    return from_dict(FinetuneConfig, settings_dict(sets), source="test")


def run(cfg: FinetuneConfig):
    out = io.StringIO()
    result = run_finetune(cfg, console=Console(file=out, width=300), show_progress=False)
    return result, out.getvalue()


def test_adaptation_grows_the_lexicon_pretrains_and_fine_tunes_from_the_adapted_model(tmp_path):
    raw = write(tmp_path / "raw.txt", [line.split("\t")[1] for line in reviews(100, 5)])
    cfg = config(tmp_path, "adapt.minutes=0.03", f"adapt.text=[{raw}]")
    result, said = run(cfg)
    adapt = tmp_path / "run" / "adapt"

    before = Lexicon.load(tmp_path / "pretrained" / "ngram.txt")
    grown = Lexicon.load(adapt / "start" / "ngram.txt")
    assert grown.ngrams[:len(before)] == before.ngrams  # the pretrained n-grams keep their ids
    added = grown.ngrams[len(before):]
    assert {tuple(w) for w in POSITIVE + NEGATIVE} <= set(added), added  # the review words were found
    assert f"lexicon {len(before):,} + {len(added):,} n-grams" in said

    # each new n-gram row is the mean of its characters' embedding rows
    _, _, start = read_zen_checkpoint(adapt / "start")
    chars, table = start["bert.embeddings.char_embeddings.weight"], start["bert.ngram_embeddings.table.weight"]
    vocab = Vocab.load(adapt / "start" / "vocab.txt")
    assert table.shape[0] == len(grown) + 1
    for i, gram in enumerate(added, start=len(before) + 1):
        torch.testing.assert_close(table[i], chars[[vocab.token_to_id(t) for t in gram]].mean(0))
    _, _, pretrained = read_zen_checkpoint(tmp_path / "pretrained")
    torch.testing.assert_close(table[:len(before) + 1], pretrained["bert.ngram_embeddings.table.weight"])

    # the continued pretraining ran on that text and changed the weights
    results = json.loads((adapt / "results.json").read_text(encoding="utf-8"))
    assert results["steps"] >= 1 and results["lexicon"]["size"] == len(grown)
    recipe = yaml.safe_load((adapt / "recipe.yaml").read_text(encoding="utf-8"))
    assert recipe["data"]["dupe_factor"] == 1  # one masked pass: making the shards counts against the budget
    _, _, adapted = read_zen_checkpoint(adapt / "model")
    assert not torch.equal(adapted["bert.ngram_embeddings.table.weight"], table)

    # the fine-tuning started from the adapted model: its lexicon, and its weights where the head is not
    model_dir = result.model_dir
    assert (model_dir / "ngram.txt").read_text(encoding="utf-8") == (adapt / "model" / "ngram.txt").read_text(
        encoding="utf-8")
    assert str(adapt / "model") in json.loads((model_dir / "task.json").read_text(encoding="utf-8"))["source"]
    assert json.loads((adapt / "adapted.json").read_text(encoding="utf-8"))["added_ngrams"] == len(added)

    # a re-run skips the finished adaptation (and the finished fine-tuning)
    stamp = (adapt / "model" / "model.safetensors").stat().st_mtime_ns
    again, said = run(cfg)
    assert "adapt: done in an earlier run" in said and "continued pretraining" not in said
    assert (adapt / "model" / "model.safetensors").stat().st_mtime_ns == stamp
    assert again.step == result.step and again.start_step == result.step


def test_the_budget_covers_adaptation_and_fine_tuning(tmp_path):
    cfg = config(tmp_path, "adapt.minutes=0.03", "train.max_minutes=0.1")
    result, said = run(cfg)
    assert "budget: 0.1 min = 0.03 adapting to the task's text + 0.07 fine-tuning" in " ".join(said.split())
    recipe = (tmp_path / "run" / "recipe.yaml").read_text(encoding="utf-8")
    assert "max_minutes: 0.1" in recipe  # the run's recipe keeps the user's budget


@pytest.mark.usefixtures("dataset_folders")
def test_flags_set_the_adapt_keys(tmp_path):
    from zencli.jobs.finetune import build_config

    a, b = write(tmp_path / "a.txt", ["一"]), write(tmp_path / "b.txt", ["二"])
    cfg = build_config("finetune-sentiment-sa", [], {"adapt.minutes": 2.0, "adapt.text": [a, b],
                                                     "train.max_minutes": 5.0})
    assert (cfg.adapt.minutes, cfg.adapt.text) == (2.0, [a, b])
    assert build_config("finetune-sentiment-sa", [], {}).adapt.minutes is None  # off unless asked


def one_line_error(*args: str) -> str:
    """The ZenError `zen finetune ARGS` stops with (the CLI prints it as one line, exit 2)."""
    r = runner.invoke(app, ["finetune", "--quiet", *args])
    assert isinstance(r.exception, ZenError), r.output
    assert "\n" not in str(r.exception)
    return str(r.exception)


def test_bad_adaptation_input_is_a_one_line_error(tmp_path):
    model = pretrained_model(tmp_path)
    train, dev = review_files(tmp_path)
    base = ["--train", str(train), "--dev", str(dev), "--model", str(model), "--task", "sa",
            "-o", str(tmp_path / "run")]
    missing = tmp_path / "nope.txt"
    msg = one_line_error(*base, "--adapt-minutes", "1", "--adapt-text", str(missing))
    assert msg.startswith("adapt.text:") and str(missing) in msg and "no such file" in msg
    msg = one_line_error(*base, "--adapt-minutes", "3", "--max-minutes", "2")
    assert "adapt.minutes: 3 of the 2-minute budget" in msg and "leaves no time to fine-tune" in msg
    msg = one_line_error(*base, "--adapt-text", str(train))
    assert re.search(r"adapt\.text: .*--adapt-minutes", msg)
    msg = one_line_error(*base, "--adapt-minutes", "0")
    assert "adapt.minutes: expected minutes > 0" in msg


def test_adaptation_needs_a_pretrained_zen_model(tmp_path):
    cfg = config(tmp_path, "adapt.minutes=0.03")
    cfg.model.pretrained = None
    with pytest.raises(ZenError, match="adapt.minutes: adaptation continues the pretraining of a pretrained model"):
        run(cfg)
