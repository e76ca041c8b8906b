"""`train.ema_decay`: the loop keeps an exponential moving average of the weights, scores it, keeps it as
best.pt, carries it through a resume and hands it back at the end; the raw trajectory does not change."""

import pytest
import torch

from tests.helpers_train import build, collate, lm_loss, make_examples
from tests.test_train_loop import crash_at, losses, run, settings
from zencli.errors import ZenError
from zencli.train import IndexedBatches, TrainSettings, train
from zencli.train.checkpoint import load_checkpoint


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _recording_loss(seen: list[dict[str, torch.Tensor]]):
    """lm_loss that records the weights each step's forward pass sees (the weights after the step before)."""
    def loss_fn(model, batch):
        seen.append(_weights(model))
        return lm_loss(model, batch)
    return loss_fn


def test_the_average_follows_the_raw_weights_and_training_is_unchanged(tmp_path):
    decay, steps = 0.6, 6
    seen: list[dict[str, torch.Tensor]] = []
    raw, _ = run(tmp_path / "raw", loss_fn=_recording_loss(seen), max_steps=steps)
    averaged, _ = run(tmp_path / "ema", max_steps=steps, ema_decay=decay)
    assert losses(tmp_path / "raw") == losses(tmp_path / "ema")  # averaging never feeds back into training
    after = [*seen[1:], raw.state_dict()]  # weights after steps 1..6
    expected = {k: v.clone() for k, v in after[0].items()}  # the average starts as a copy of step 1
    for weights in after[1:]:
        for k in expected:
            expected[k] = decay * expected[k] + (1 - decay) * weights[k]
    got = averaged.state_dict()
    for k in expected:
        assert torch.allclose(got[k], expected[k], atol=1e-6, rtol=0), k
    assert not torch.allclose(got["hidden.weight"], raw.state_dict()["hidden.weight"])


def test_evaluation_and_best_checkpoint_use_the_average(tmp_path):
    scored = []

    def eval_fn(model):
        scored.append((model.training, _weights(model)))
        return {"score": -float(len(scored))}  # the first evaluation stays the best

    model = build()
    train(model, lm_loss, IndexedBatches(make_examples(), collate, seed=3),
          settings(tmp_path, max_steps=6, eval_every=3, best_metric="score", ema_decay=0.5),
          eval_fn=eval_fn, show_progress=False)
    assert [training for training, _ in scored] == [False, False]
    final = scored[-1][1]
    assert all(torch.equal(final[k], v) for k, v in model.state_dict().items())  # the run ends on the average
    best = load_checkpoint(tmp_path / "checkpoints" / "best.pt")
    assert best["step"] == 3 and all(torch.equal(best["model"][k], scored[0][1][k]) for k in best["model"])
    last = load_checkpoint(tmp_path / "checkpoints" / "step-00000006.pt")
    assert int(last["ema"]["n_averaged"]) == 6
    assert not torch.equal(last["model"]["hidden.weight"], last["ema"]["module.hidden.weight"])


def test_a_resumed_run_continues_the_average(tmp_path):
    full, _ = run(tmp_path / "full", max_steps=8, save_every=4, ema_decay=0.7)
    with pytest.raises(RuntimeError, match="simulated crash"):  # during step 6, after the step-4 checkpoint
        run(tmp_path / "cut", loss_fn=crash_at(6), max_steps=8, save_every=4, ema_decay=0.7)
    resumed, result = run(tmp_path / "cut", max_steps=8, save_every=4, ema_decay=0.7)
    assert result.start_step == 4
    for (name, p), q in zip(full.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(p, q), name


def test_ema_decay_is_validated_and_fingerprinted_only_when_set(tmp_path):
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ZenError, match=r"^ema_decay: expected a decay in \(0, 1\) or null"):
            TrainSettings(ema_decay=bad).validate()
    assert "ema_decay" not in TrainSettings().fingerprint_fields()
    assert TrainSettings(ema_decay=0.999).fingerprint_fields()["ema_decay"] == 0.999
    run(tmp_path, max_steps=4)
    with pytest.raises(ZenError, match="holds checkpoints of a different run"):
        run(tmp_path, max_steps=4, ema_decay=0.9)
