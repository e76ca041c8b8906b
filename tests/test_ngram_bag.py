"""The n-gram bag of sentence classification heads (`task.ngram_bag`, zencli.model.heads.NgramBag): which
features a window gives and how they weigh (idf, L2), the bag fitted alone as a TF-IDF logistic regression
(zencli.tasks.ngram_bag), the encoder trained alone beside it and the two mixed on dev, on by default for
dc/sa, saved and loaded with the model, `zen predict`, and models saved before the bag, or before its idf
and bias, still loading as they were. Made-up data, no real corpus."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
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
from zencli.tasks.ngram_bag import STRENGTH, fit_bag

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


def test_features_weigh_their_idf_l2_normalised_and_unseen_ones_nothing():
    bag = NgramBag(2, buckets=1 << 20)
    ids = torch.tensor([[2, 10, 11, 3]])  # [CLS] a b [SEP]: chars 10, 11 and their bigram
    mask = torch.ones_like(ids)
    rows, _ = bag.features(ids, mask)
    a, b, ab = rows[0][1].item(), rows[0][2].item(), rows[0][5].item()
    bag.idf.zero_()
    bag.idf[a], bag.idf[b] = 1.0, 3.0  # the bigram: never seen in training
    rows, weights = bag.features(ids, mask)
    w = dict(zip(rows[0].tolist(), weights[0].tolist()))
    assert w[a] == pytest.approx(1 / math.sqrt(10)) and w[b] == pytest.approx(3 / math.sqrt(10)) and w[ab] == 0


def records_of(texts: list[list[int]], labels: list[int]) -> list[dict]:
    return [{"input_ids": np.array([2, *t, 3]), "labels": np.asarray(y, np.int64)} for t, y in zip(texts, labels)]


def made_up_set(n: int, seed: int) -> list[dict]:
    """Texts of chars 10..40; label 1 iff char 10 is in the text, with 10 % of the labels flipped."""
    rng = np.random.default_rng(seed)
    texts = [rng.integers(10, 41, size=rng.integers(3, 9)).tolist() for _ in range(n)]
    labels = [int((10 in t) != (rng.random() < 0.1)) for t in texts]
    return records_of(texts, labels)


def test_the_bag_is_fitted_to_the_optimum_of_an_l2_logistic_regression_on_tf_idf():
    bag = NgramBag(2, buckets=1 << 16)
    records = made_up_set(200, 1)
    note = fit_bag(bag, records, pad_id=0)
    assert f"C={STRENGTH:g}" in note
    # idf: sklearn's smoothed formula over the training texts; 0 for rows none of them has
    rows, _ = bag.features(torch.tensor([[2, 10, 3]]), torch.ones(1, 3, dtype=torch.long))
    df = sum(10 in r["input_ids"][1:-1] for r in records)
    assert bag.idf[rows[0][1]].item() == pytest.approx(math.log(201 / (1 + df)) + 1)
    seen = (bag.idf > 0).sum().item()
    assert 31 < seen < 31 + 31 ** 2 + 31 ** 3  # chars, some of their bigrams and trigrams
    # optimality: the gradient of mean cross-entropy + |W|^2 / (2 C N) vanishes at the fitted weights
    table = bag.table.weight.detach().clone().requires_grad_(True)
    bias = bag.bias.detach().clone().requires_grad_(True)
    from zencli.data.collate import collate

    batch = collate(records, pad_id=0)
    r, w = bag.features(batch["input_ids"], batch["attention_mask"])
    logits = (F.embedding(r, table) * w.unsqueeze(2)).sum(1) + bias
    loss = F.cross_entropy(logits, batch["labels"]) + (table * table).sum() / (2 * STRENGTH * len(records))
    loss.backward()
    assert table.grad.abs().max().item() < 1e-4 and bias.grad.abs().max().item() < 1e-4
    assert ((logits.argmax(1) == batch["labels"]).float().mean().item()) > 0.85
    assert table.detach()[bag.idf == 0].abs().sum().item() == 0  # unseen rows stay 0


def test_the_fit_is_deterministic():
    records = made_up_set(200, 1)
    first, second = NgramBag(2, buckets=1 << 16), NgramBag(2, buckets=1 << 16)
    fit_bag(first, records, pad_id=0)
    fit_bag(second, records, pad_id=0)
    assert torch.equal(first.table.weight, second.table.weight) and torch.equal(first.bias, second.bias)


def config(tmp: Path, *extra: str) -> FinetuneConfig:
    model = pretrained_model(tmp)
    train, dev = review_files(tmp, n_train=300)
    sets = [*TINY_SETS, "task.name=sa", f"data.train={train}", f"data.dev={dev}", f"train.output_dir={tmp / 'run'}",
            f"model.pretrained={model}", *extra]
    return from_dict(FinetuneConfig, settings_dict(sets), source="test")


def finetune(cfg: FinetuneConfig):
    return run_finetune(cfg, console=Console(file=io.StringIO()), show_progress=False)


def test_sa_learns_with_the_bag_by_default_and_the_model_predicts_the_same_after_loading(tmp_path):
    result = finetune(config(tmp_path, "train.max_steps=60", "train.eval_every=20", "train.eval_dtype=fp32"))
    assert result.dev.main_score >= 0.95  # the positive/negative words are bag features (chance: about 0.5)
    task = json.loads((result.model_dir / "task.json").read_text(encoding="utf-8"))
    assert task["task"]["ngram_bag"] is True  # saved resolved: the model loads as it trained
    loaded = load_task_model(result.model_dir)
    table = loaded.model.head.bag.table.weight
    assert 0 < int((table.abs().sum(1) > 0).sum()) < table.shape[0]  # fitted: the rows of seen features
    assert loaded.model.head.shares == (1.0, 1.0)  # the mix is in the weights
    mixed = [n for n in result.notes if n.startswith("n-gram bag and encoder mixed on dev")]
    assert len(mixed) == 1
    # the saved model scores on dev what the mix chose it for
    assert f"dev accuracy {100 * result.dev.main_score:.2f}" in mixed[0]
    examples = [TextExample("房间很大好评如潮", None, 1), TextExample("酒店前台服务恶劣", None, 2)]
    first = [p.label for p in loaded.task.predict(loaded.model, loaded.inputs, examples)]
    assert first == ["1", "0"]
    r = runner.invoke(app, ["predict", str(result.model_dir), "--format", "label"],
                      input="房间很大好评如潮\n酒店前台服务恶劣\n")
    assert r.exit_code == 0, r.output
    assert r.stdout.split() == ["1", "0"]


def test_with_dev_the_encoder_trains_alone_beside_the_fitted_bag(tmp_path):
    from zencli.train.checkpoint import load_checkpoint

    result = finetune(config(tmp_path, "train.max_steps=6", "train.save_every=3", "train.eval_every=3",
                             "train.keep_last=2"))
    assert sum(n.startswith("n-gram bag: fitted alone first") for n in result.notes) == 1
    states = [load_checkpoint(p)["model"] for p in sorted((tmp_path / "run" / "checkpoints").glob("step-*.pt"))]
    assert len(states) == 2
    for key in ("head.bag.table.weight", "head.bag.bias"):
        assert torch.equal(states[0][key], states[1][key])  # the bag got no update
    assert not torch.equal(states[0]["head.classifier.weight"], states[1]["head.classifier.weight"])


def test_without_dev_the_fitted_bag_trains_jointly(tmp_path):
    cfg = config(tmp_path, "train.max_steps=4", "data.dev=null")
    result = finetune(cfg)
    assert not any(n.startswith("n-gram bag and encoder mixed") for n in result.notes)
    assert any(n.startswith("n-gram bag: fitted alone first") for n in result.notes)


def test_a_bag_saved_before_idf_and_bias_loads_with_the_logits_it_had(tmp_path):
    from safetensors.torch import load_file, save_file

    result = finetune(config(tmp_path, "train.max_steps=3"))
    path = result.model_dir / "model.safetensors"
    state = load_file(path)
    state["head.bag.idf"] = torch.ones_like(state["head.bag.idf"])  # what a bag without them computed
    state["head.bag.bias"] = torch.zeros_like(state["head.bag.bias"])
    save_file(state, str(path))
    examples = [TextExample("房间很大好评如潮", None, 1), TextExample("酒店前台", None, 2)]
    loaded = load_task_model(result.model_dir)
    before = np.stack([p.probabilities for p in loaded.task.predict(loaded.model, loaded.inputs, examples)])
    save_file({k: v for k, v in state.items() if k not in ("head.bag.idf", "head.bag.bias")}, str(path))
    loaded = load_task_model(result.model_dir)
    after = np.stack([p.probabilities for p in loaded.task.predict(loaded.model, loaded.inputs, examples)])
    np.testing.assert_array_equal(after, before)


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
