"""The n-gram bag of sentence classification heads (`task.ngram_bag`, zencli.model.heads.NgramBag): which
features a window gives, on by default for dc/sa, learned, saved and loaded with the model, `zen predict`,
and models saved before it existed still loading (without it). Made-up data, no real corpus."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
import torch
from rich.console import Console
from typer.testing import CliRunner

from tests.helpers_domain import TINY_SETS, pretrained_model, review_files
from tests.test_tasks_tagging import settings_dict
from zencli.cli.app import app
from zencli.config.finetune import FinetuneConfig
from zencli.config.loading import from_dict
from zencli.data.readers import TextExample
from zencli.errors import ZenError
from zencli.model.heads import NgramBag
from zencli.tasks.finetune import run_finetune
from zencli.tasks.model_dir import load_task_model

runner = CliRunner()


def test_a_window_gives_its_char_1_to_3_grams_and_matched_ngrams_weighted_by_one_over_sqrt_count():
    bag = NgramBag(2, buckets=1 << 20)
    #                         [CLS] a  b   c  [SEP] pad        [CLS] a [SEP] pad pad pad
    ids = torch.tensor([[2, 10, 11, 12, 3, 0], [2, 10, 3, 0, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]])
    ngrams, ngram_mask = torch.tensor([[5, 7], [9, 0]]), torch.tensor([[1, 1], [1, 0]])
    rows, weights = bag.features(ids, mask, ngrams, ngram_mask)
    kept = [sorted(set(rows[b][weights[b] > 0].tolist())) for b in range(2)]
    # row 0: 3 chars + 2 bigrams + 1 trigram + 2 n-grams; row 1: 1 char + 1 n-gram ([CLS]/[SEP] never count)
    assert [len(k) for k in kept] == [8, 2]
    assert weights[0][weights[0] > 0].tolist() == pytest.approx([1 / math.sqrt(8)] * 8)
    assert weights[1][weights[1] > 0].tolist() == pytest.approx([1 / math.sqrt(2)] * 2)
    assert set(kept[0]) & set(kept[1]) == {rows[0][1].item()}  # char 10 is the one feature they share
    assert rows[0][1].item() == 10 and rows[1][1].item() == 10


def config(tmp: Path, *extra: str) -> FinetuneConfig:
    model = pretrained_model(tmp)
    train, dev = review_files(tmp, n_train=300)
    sets = [*TINY_SETS, "task.name=sa", f"data.train={train}", f"data.dev={dev}", f"train.output_dir={tmp / 'run'}",
            f"model.pretrained={model}", *extra]
    return from_dict(FinetuneConfig, settings_dict(sets), source="test")


def finetune(cfg: FinetuneConfig):
    return run_finetune(cfg, console=Console(file=io.StringIO()), show_progress=False)


def test_sa_learns_with_the_bag_by_default_and_the_model_predicts_the_same_after_loading(tmp_path):
    result = finetune(config(tmp_path, "train.max_steps=60", "train.eval_every=20"))
    assert result.dev.main_score >= 0.95  # the positive/negative words are bag features (chance: about 0.5)
    task = json.loads((result.model_dir / "task.json").read_text(encoding="utf-8"))
    assert task["task"]["ngram_bag"] is True  # saved resolved: the model loads as it trained
    loaded = load_task_model(result.model_dir)
    table = loaded.model.head.bag.table.weight
    assert 0 < int((table.abs().sum(1) > 0).sum()) < table.shape[0]  # trained: the rows of seen features
    examples = [TextExample("房间很大好评如潮", None, 1), TextExample("酒店前台服务恶劣", None, 2)]
    first = [p.label for p in loaded.task.predict(loaded.model, loaded.inputs, examples)]
    assert first == ["1", "0"]
    r = runner.invoke(app, ["predict", str(result.model_dir), "--format", "label"],
                      input="房间很大好评如潮\n酒店前台服务恶劣\n")
    assert r.exit_code == 0, r.output
    assert r.stdout.split() == ["1", "0"]


def test_a_model_saved_before_the_bag_loads_without_it(tmp_path):
    from safetensors.torch import load_file, save_file

    result = finetune(config(tmp_path, "train.max_steps=5", "task.ngram_bag=false"))
    d = result.model_dir
    assert not any(k.startswith("head.bag") for k in load_file(d / "model.safetensors"))
    meta = json.loads((d / "task.json").read_text(encoding="utf-8"))
    del meta["task"]["ngram_bag"]  # as a task.json written before the key existed
    (d / "task.json").write_text(json.dumps(meta), encoding="utf-8")
    loaded = load_task_model(d)
    assert loaded.model.head.bag is None
    save_file(load_file(d / "model.safetensors"), str(d / "model.safetensors"))
    assert loaded.task.predict(loaded.model, loaded.inputs, [TextExample("房间", None, 1)])[0].label in ("0", "1")


def test_a_run_with_the_bag_resumes_from_its_checkpoint(tmp_path):
    cfg = config(tmp_path, "train.max_steps=8", "train.save_every=4", "train.eval_every=4")
    first = finetune(cfg)
    table = load_task_model(first.model_dir).model.head.bag.table.weight.clone()
    (first.model_dir / "model.safetensors").unlink()
    again = finetune(cfg)  # the same command: the finished run's checkpoint is re-exported, bag included
    assert again.start_step == first.step == 8
    torch.testing.assert_close(load_task_model(again.model_dir).model.head.bag.table.weight, table)


def test_the_bag_is_refused_for_tagging_tasks():
    from zencli.tasks.base import task_class

    settings = from_dict(FinetuneConfig, settings_dict(["task.name=ner", "task.ngram_bag=true"]), source="t").task
    with pytest.raises(ZenError, match="task.ngram_bag: applies to sentence classification .* not task ner"):
        task_class("ner").check_settings(settings)
