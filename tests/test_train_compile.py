"""`train.compile`: the training forward goes through torch.compile in the mode asked for; the module the
run saves, evaluates and averages stays the eager one; a bad value is an error naming the key."""

from __future__ import annotations

import io

import pytest
import torch
from rich.console import Console

from tests.helpers_train import build, collate, lm_loss, make_examples
from tests.test_train_loop import losses, run, settings
from zencli.config.loading import from_dict
from zencli.errors import ZenError
from zencli.train import IndexedBatches, TrainSettings, train


def test_the_training_forward_is_compiled_in_the_mode_asked_for(tmp_path, monkeypatch):
    calls = []

    def fake_compile(module, mode=None):
        calls.append((type(module).__name__, mode))
        return module

    monkeypatch.setattr(torch, "compile", fake_compile)
    for value, mode in ((True, None), ("reduce-overhead", "reduce-overhead"), ("max-autotune", "max-autotune")):
        calls.clear()
        buf = io.StringIO()
        model = build()
        train(model, lm_loss, IndexedBatches(make_examples(), collate, seed=3),
              settings(tmp_path / str(value), max_steps=2, compile=value), console=Console(file=buf, width=400),
              show_progress=True)
        assert calls == [("TinyLM", mode)]
        assert f"torch.compile ({mode or 'default'})" in buf.getvalue()
    calls.clear()
    run(tmp_path / "eager", max_steps=2)
    assert calls == []


def test_a_compiled_run_trains_and_saves_the_eager_module(tmp_path):
    eager, _ = run(tmp_path / "eager", dropout=0.0)
    compiled, result = run(tmp_path / "compiled", dropout=0.0, compile=True)
    assert result.step == 8 and type(compiled).__name__ == "TinyLM"  # the caller's module, not a wrapper
    state = torch.load(tmp_path / "compiled" / "checkpoints" / "step-00000008.pt", weights_only=True)["model"]
    assert set(state) == set(compiled.state_dict())  # no `_orig_mod.` prefixes
    # compiled kernels round differently: the same trajectory to float32 noise, not bit for bit
    for (s1, a), (s2, b) in zip(losses(tmp_path / "eager"), losses(tmp_path / "compiled")):
        assert s1 == s2 and a == pytest.approx(b, rel=1e-4)


def test_a_bad_compile_value_names_the_key():
    with pytest.raises(ZenError, match=r"train: compile: expected bool or one of 'reduce-overhead', 'max-autotune'"):
        from_dict(TrainSettings, {"compile": "fast"}, source="train", prefix="")
    assert from_dict(TrainSettings, {"compile": "reduce-overhead"}).compile == "reduce-overhead"
