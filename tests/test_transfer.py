"""Moving a pretrained encoder to a task (zencli.tasks.transfer): the learning-rate rule of `train.lr: auto`,
layer-wise rates and a faster head (`train.layer_lr_decay`, `train.head_lr_scale`) as optimizer groups, and
`model.reinit_top_layers`; each reaches the run (plan line, weights) or is a one-line error."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import REF
from tests.test_finetune_cli import error, finetune
from tests.test_tasks_tagging import write_task_data
from zencli.config.finetune import FinetuneConfig, ModelSection
from zencli.tasks.network_build import build_task_model
from zencli.tasks.transfer import SCRATCH_LR, auto_lr, lr_scales, one_digit
from zencli.train.optim import build_optimizers


@pytest.mark.parametrize(("width", "lr"), [(128, 1e-3), (256, 3e-4), (512, 1e-4), (768, 5e-5), (1024, 3e-5),
                                          (64, 1e-3)])
def test_the_rule_falls_with_the_width_of_a_pretrained_encoder(width, lr):
    rule = auto_lr(pretrained=True, hidden_size=width)
    assert rule.value == lr and str(width) in rule.why
    assert auto_lr(pretrained=False, hidden_size=width).value == SCRATCH_LR == 1e-3
    assert one_digit(3.125e-4) == pytest.approx(3e-4) and one_digit(0.00096) == pytest.approx(1e-3)


def test_layer_decay_and_head_scale_become_optimizer_groups(tmp_path):
    from zencli.tasks.finetune import _read_splits

    data = write_task_data(tmp_path, "ner")
    cfg = FinetuneConfig(model=ModelSection(pretrained=REF))
    cfg.task.name, cfg.data.train = "ner", data
    splits = _read_splits(cfg)
    model, _, _ = build_task_model(cfg, splits.task, splits.train.examples)
    assert lr_scales(model, layer_decay=1.0, head_scale=1.0) == {}
    plain = build_optimizers(model, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)
    assert [len(g["params"]) for o in plain for g in o.param_groups][:2] and all(
        g["initial_lr"] == 1e-3 for o in plain for g in o.param_groups)
    assert sum(len(o.param_groups) for o in plain) == 2  # decay / no decay, as before the setting existed

    scales = lr_scales(model, layer_decay=0.5, head_scale=10.0)
    assert scales["encoder.encoder.layer.0.attention.self.query.weight"] == 0.25  # two layers below the top
    assert scales["encoder.encoder.layer.1.output.dense.weight"] == 0.5
    assert "encoder.encoder.layer.2.output.dense.weight" not in scales  # the top layer: 1
    assert scales["encoder.encoder.ngram_layers.0.output.dense.weight"] == 0.25  # beside char layer 0
    assert scales["encoder.embeddings.char_embeddings.weight"] == 0.125  # 0.5 ** 3 layers
    assert scales["encoder.ngram_embeddings.table.weight"] == 0.125
    assert all(v == 10.0 for k, v in scales.items() if k.startswith("head."))
    assert any(k.startswith("head.") for k in scales)

    optimizers = build_optimizers(model, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
                                  lr_scales=scales)
    names = {id(p): n for n, p in model.named_parameters()}
    seen = []
    for opt in optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                seen.append(names[id(p)])
                assert group["initial_lr"] == pytest.approx(1e-3 * scales.get(names[id(p)], 1.0))
                assert group["lr"] == group["initial_lr"]
    assert sorted(seen) == sorted(names.values())  # every parameter once


def test_reinit_top_layers_renews_only_the_top(tmp_path):
    from zencli.tasks.finetune import _read_splits

    data = write_task_data(tmp_path, "ner")
    kept = {}
    for k in (0, 1):
        cfg = FinetuneConfig(model=ModelSection(pretrained=REF, reinit_top_layers=k))
        cfg.task.name, cfg.data.train = "ner", data
        splits = _read_splits(cfg)
        torch.manual_seed(0)
        model, _, spec = build_task_model(cfg, splits.task, splits.train.examples)
        kept[k] = {n: p.detach().clone() for n, p in model.named_parameters() if n.startswith("encoder.")}
        if k:
            assert any("re-initialised the top 1 of the encoder's 3 char layers" in n for n in spec.notes)
    for name, before in kept[0].items():
        changed = not torch.equal(before, kept[1][name])
        if not name.startswith("encoder.encoder.layer.2."):
            assert not changed, name  # below the top (and the n-gram layers feeding layers 0, 1): pretrained
        elif name.endswith(".weight") and "LayerNorm" not in name:
            assert changed, name  # drawn afresh


def test_the_plan_line_says_how_the_rate_was_chosen(tmp_path):
    auto = ("--set", "train.lr=auto")  # the tests' tiny settings give a rate
    r, _ = finetune(tmp_path, "ner", "--model", str(REF), *auto, "--set", "train.layer_lr_decay=0.8", "--set",
                    "train.head_lr_scale=5", "--set", "model.reinit_top_layers=1", steps=2, scratch=False)
    flat = " ".join(r.output.split())
    assert "lr 1e-3 (auto: pretrained, width 64" in flat  # the fixture is 64 wide: capped at the scratch rate
    assert "× 0.8 per layer down" in flat and "head × 5" in flat
    r, _ = finetune(tmp_path, "ner", *auto, out="scratch", steps=2)
    assert "lr 1e-3 (auto: from scratch" in " ".join(r.output.split())
    r, _ = finetune(tmp_path, "ner", "--lr", "2e-4", out="given", steps=2)
    flat = " ".join(r.output.split())
    assert "lr 2e-4 (" in flat and "auto:" not in flat


def test_transfer_settings_errors_name_the_key(tmp_path):
    data = str(write_task_data(tmp_path, "ner"))
    base = ["--task", "ner", "--train", data, "-o", str(tmp_path / "r")]
    msg = error(*base, "--model", str(REF), "--set", "model.reinit_top_layers=4")
    assert msg.startswith("model.reinit_top_layers: 4") and "3 char layers" in msg
    msg = error(*base, "--set", "model.vocab=x", "--set", "model.reinit_top_layers=1")
    assert "reinit_top_layers" in msg and "from scratch" in msg
    assert "layer_lr_decay" in error(*base, "--model", str(REF), "--set", "train.layer_lr_decay=0")
    assert "layer_lr_decay" in error(*base, "--model", str(REF), "--set", "train.layer_lr_decay=1.5")
    assert "head_lr_scale" in error(*base, "--model", str(REF), "--set", "train.head_lr_scale=-1")


def test_auto_epochs_give_small_sets_more_passes():
    from zencli.config.finetune import AUTO_EPOCHS, AUTO_MIN_STEPS, auto_epochs

    assert (AUTO_MIN_STEPS, AUTO_EPOCHS) == (600, (3, 20))
    assert auto_epochs(658, 32) == 20  # 21 steps an epoch: capped at 20 epochs
    assert auto_epochs(2600, 32) == 8  # 82 steps an epoch: 8 epochs give >= 600 updates
    assert auto_epochs(20000, 32) == 3  # large sets: 3 epochs
    cfg = FinetuneConfig(epochs="auto")
    assert cfg.step_counts(658)[0] == 412  # ceil(20 × 658 / 32)


def test_epochs_auto_says_what_it_chose(tmp_path):
    from tests.test_finetune_cli import runner
    from tests.test_tasks_tagging import NGRAM, TINY, VOCAB
    from zencli.cli.app import app

    data = str(write_task_data(tmp_path, "ner"))
    sets = [x for s in [*TINY, "epochs=auto", "train.max_steps=null"] for x in ("--set", s)]
    r = runner.invoke(app, ["finetune", "--task", "ner", "--train", data, "--vocab", str(VOCAB), "--ngram",
                            str(NGRAM), "-o", str(tmp_path / "r"), "--quiet", *sets], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "epochs auto: 20 epochs of 6 inputs" in flat and "30 steps" in flat  # ceil(20 × 6 / 4)
    assert "epochs" in error("--task", "ner", "--train", data, "-o", str(tmp_path / "e"), "--set", "epochs=-1")
