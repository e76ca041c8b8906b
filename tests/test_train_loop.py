"""The training loop end to end on a tiny LM: determinism, accumulation, resume, eval/best/early stop,
progress output, settings validation."""

import io
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from rich.console import Console

from tests.helpers_train import build, collate, lm_loss, make_examples, plain_loss
from zencli.config.loading import from_dict
from zencli.errors import ZenError
from zencli.train import IndexedBatches, TrainSettings, train
from zencli.train.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def settings(out: Path, **kw) -> TrainSettings:
    base = dict(lr=3e-3, warmup_steps=2, max_steps=8, batch_size=8, dtype="fp32", device="cpu", seed=7,
                save_every=4, keep_last=2, log_every=1, output_dir=out, tensorboard=False)
    base.update(kw)
    return TrainSettings(**base)


def run(out: Path, loss_fn=lm_loss, dropout=0.1, data_seed=3, **kw):
    model = build(dropout=dropout)
    result = train(model, loss_fn, IndexedBatches(make_examples(), collate, seed=data_seed),
                   settings(out, **kw), show_progress=False)
    return model, result


def losses(out: Path) -> list[tuple[int, float]]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in rows if r["kind"] == "train"]


def test_same_seed_same_losses_bit_for_bit(tmp_path):
    m1, r1 = run(tmp_path / "a")
    m2, _ = run(tmp_path / "b")
    _, _ = run(tmp_path / "c", seed=8)
    assert losses(tmp_path / "a") == losses(tmp_path / "b") and len(losses(tmp_path / "a")) == 8
    assert losses(tmp_path / "a") != losses(tmp_path / "c")
    for p, q in zip(m1.parameters(), m2.parameters()):
        assert torch.equal(p, q)
    assert r1.step == 8 and r1.dtype == "fp32" and r1.tokens == 8 * 8 * 8
    assert not m1.embed.sparse  # the loop restores the table's flag


def test_metrics_jsonl_records_and_checkpoint_contents(tmp_path):
    _, result = run(tmp_path)
    record = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
    assert set(record) >= {"kind", "step", "loss", "acc", "lr", "grad_norm", "tokens_per_s", "elapsed_s"}
    assert 0 <= record["acc"] <= 1 and record["lr"] == pytest.approx(3e-3 / 6)
    assert result.checkpoint.name == "step-00000008.pt"
    state = load_checkpoint(result.checkpoint)
    assert state["step"] == 8 and state["data"] == [{"epoch": 1, "index": 0, "size": 64, "seed": 3}]
    assert len(state["optimizers"]) == 2  # AdamW + LazyAdamW for the 1500-row table
    assert {"python", "numpy", "torch"} <= set(state["rng"][0])
    run_json = json.loads((tmp_path / "run.json").read_text())
    assert run_json["fingerprint"] == state["fingerprint"] and run_json["settings"]["lr"] == 3e-3


@pytest.mark.parametrize("sparse", [True, False])
def test_grad_accumulation_equals_the_larger_batch(tmp_path, sparse):
    big, _ = run(tmp_path / "big", loss_fn=plain_loss, dropout=0.0, batch_size=8, grad_accum=1,
                 sparse_embeddings=sparse)
    acc, _ = run(tmp_path / "acc", loss_fn=plain_loss, dropout=0.0, batch_size=8, grad_accum=2,
                 sparse_embeddings=sparse)
    for (name, p), q in zip(big.named_parameters(), acc.parameters()):
        assert torch.allclose(p, q, atol=1e-6, rtol=0), name
    la, lb = losses(tmp_path / "big"), losses(tmp_path / "acc")
    assert [s for s, _ in la] == [s for s, _ in lb]
    assert all(abs(x - y) < 1e-5 for (_, x), (_, y) in zip(la, lb))


def _first_step_grad_norm_seen_by_adam(out: Path) -> float:
    """After one step Adam's first moment is (1 - beta1) × the gradient it was given."""
    state = load_checkpoint(out / "checkpoints" / "step-00000001.pt")
    moments = [s["exp_avg"] for opt in state["optimizers"] for s in opt["state"].values()]
    return (torch.sqrt(sum((m.double() ** 2).sum() for m in moments)) / 0.1).item()


def test_clipping_scales_the_gradient_adam_sees(tmp_path):
    run(tmp_path / "clip", clip_norm=0.05, max_steps=1, save_every=1, warmup_steps=0)
    run(tmp_path / "free", clip_norm=0.0, max_steps=1, save_every=1, warmup_steps=0)
    logged = [json.loads((tmp_path / d / "metrics.jsonl").read_text())["grad_norm"] for d in ("clip", "free")]
    assert logged[0] == logged[1] > 0.05  # the logged norm is the one before clipping
    assert _first_step_grad_norm_seen_by_adam(tmp_path / "clip") == pytest.approx(0.05, rel=1e-4)
    assert _first_step_grad_norm_seen_by_adam(tmp_path / "free") == pytest.approx(logged[1], rel=1e-4)


def crash_at(call: int):
    """lm_loss that raises on its `call`-th call (a crash during that step, one micro-batch per step)."""
    calls = {"n": 0}

    def crashing(model, batch):
        calls["n"] += 1
        if calls["n"] == call:
            raise RuntimeError("simulated crash")
        return lm_loss(model, batch)
    return crashing


def test_in_process_crash_then_resume_matches_uninterrupted(tmp_path):
    run(tmp_path / "full", max_steps=10, save_every=3, keep_last=5)
    with pytest.raises(RuntimeError, match="simulated crash"):  # during step 8, after the step-6 checkpoint
        run(tmp_path / "cut", loss_fn=crash_at(8), max_steps=10, save_every=3, keep_last=5)
    assert [s for s, _ in losses(tmp_path / "cut")] == list(range(1, 8))
    _, result = run(tmp_path / "cut", max_steps=10, save_every=3, keep_last=5)
    assert result.start_step == 6 and result.step == 10
    assert losses(tmp_path / "cut") == losses(tmp_path / "full")
    full = load_checkpoint(tmp_path / "full" / "checkpoints" / "step-00000010.pt")["model"]
    cut = load_checkpoint(tmp_path / "cut" / "checkpoints" / "step-00000010.pt")["model"]
    assert all(torch.equal(full[k], cut[k]) for k in full)
    _, again = run(tmp_path / "cut", max_steps=10, save_every=3, keep_last=5)  # already complete
    assert again.start_step == 10 and len(losses(tmp_path / "cut")) == 10


def test_kill_9_at_an_arbitrary_step_then_resume_gives_identical_losses(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    script = [sys.executable, "-m", "tests.helpers_train", "--max-steps", "20"]
    # the uninterrupted reference run and the victim start together (saves one interpreter start-up)
    full = subprocess.Popen(script + [str(tmp_path / "full")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    victim = subprocess.Popen(script + [str(tmp_path / "cut"), "--sleep", "0.05"], cwd=ROOT, env=env,
                              stderr=subprocess.PIPE)
    metrics = tmp_path / "cut" / "metrics.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and victim.poll() is None:  # kill at step >= 8: past the step-5 checkpoint
        if metrics.exists() and any(json.loads(line)["step"] >= 8 for line in metrics.read_text().splitlines()
                                    if line.endswith("}")):
            break
        time.sleep(0.02)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert victim.returncode == -signal.SIGKILL
    logged = [s for s, _ in losses_lenient(metrics)]
    assert 8 <= logged[-1] < 20  # it really died mid-run
    _, err = full.communicate(timeout=120)
    assert full.returncode == 0, err
    resumed = subprocess.run(script + [str(tmp_path / "cut")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    start = json.loads(resumed.stdout)["start_step"]
    assert start in (5, 10) and start <= logged[-1]  # continued from a checkpoint, did not start over
    assert losses(tmp_path / "cut") == losses(tmp_path / "full")
    assert [s for s, _ in losses(tmp_path / "full")] == list(range(1, 21))
    a = load_checkpoint(tmp_path / "full" / "checkpoints" / "step-00000020.pt")
    b = load_checkpoint(tmp_path / "cut" / "checkpoints" / "step-00000020.pt")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def losses_lenient(path: Path):
    out = []
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        out.append((r["step"], r["loss"]))
    return out


def test_keep_last_k_during_training(tmp_path):
    run(tmp_path, max_steps=10, save_every=2, keep_last=2)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-00000008.pt", "step-00000010.pt"]


def test_output_dir_of_another_run_is_refused_unless_overwrite(tmp_path):
    run(tmp_path, lr=1e-3, max_steps=4)
    with pytest.raises(ZenError) as e:
        run(tmp_path, lr=2e-3, max_steps=4)
    msg = str(e.value)
    assert "\n" not in msg and "different run" in msg and "lr 0.001 → 0.002" in msg and "--overwrite" in msg
    with pytest.raises(ZenError, match="holds checkpoints of an earlier run"):
        run(tmp_path, lr=1e-3, max_steps=4, resume="never")
    _, result = run(tmp_path, lr=2e-3, max_steps=4, overwrite=True)
    assert result.start_step == 0 and len(losses(tmp_path)) == 4
    assert load_checkpoint(result.checkpoint)["fingerprint_values"]["lr"] == 2e-3


def test_run_json_guards_a_directory_without_checkpoints_yet(tmp_path):
    run(tmp_path, max_steps=2, save_every=0)
    for p in (tmp_path / "checkpoints").iterdir():
        p.unlink()
    with pytest.raises(ZenError, match="holds another run.*seed 7 → 9"):
        run(tmp_path, max_steps=2, seed=9)


def test_eval_keeps_best_checkpoint_and_stops_early(tmp_path):
    scores = iter([0.5, 0.7, 0.6, 0.65, 0.9])
    seen = []

    def eval_fn(model):
        assert not model.training
        torch.rand(5)  # eval must not shift the training random streams
        return {"f1": next(scores), "loss": 1.0}

    model = build()
    s = settings(tmp_path / "ev", max_steps=20, eval_every=2, save_every=2, keep_last=10, best_metric="f1",
                 patience=0.2)  # 4 of the 20 steps without a better f1
    result = train(model, lm_loss, IndexedBatches(make_examples(), collate, seed=3), s, eval_fn=eval_fn,
                   on_eval=lambda step, m, improved: seen.append((step, m["f1"], improved)), show_progress=False)
    assert seen == [(2, 0.5, True), (4, 0.7, True), (6, 0.6, False), (8, 0.65, False)]
    assert result.stopped_early and result.step == 8 and result.best_step == 4 and result.best_value == 0.7
    best = load_checkpoint(tmp_path / "ev" / "checkpoints" / "best.pt")
    at4 = load_checkpoint(tmp_path / "ev" / "checkpoints" / "step-00000004.pt")
    assert best["step"] == 4 and all(torch.equal(best["model"][k], at4["model"][k]) for k in at4["model"])
    run(tmp_path / "noeval", max_steps=20, save_every=0)
    assert losses(tmp_path / "ev") == losses(tmp_path / "noeval")[:8]
    evals = [json.loads(line) for line in (tmp_path / "ev" / "metrics.jsonl").read_text().splitlines()]
    assert [r["f1"] for r in evals if r["kind"] == "eval"] == [0.5, 0.7, 0.6, 0.65]
    # resuming an early-stopped run does not train further
    again = train(build(), lm_loss, IndexedBatches(make_examples(), collate, seed=3), s, eval_fn=eval_fn,
                  show_progress=False)
    assert again.stopped_early and again.step == 8


@pytest.mark.parametrize("warmup,patience,first_stop", [(10, 0.05, 10), (0, 0.05, 10), (0, 0.3, 14)])
def test_early_stopping_waits_for_the_warmup_and_a_quarter_of_the_run(tmp_path, warmup, patience, first_stop):
    """Dev gets worse after step 2 at every evaluation: the run stops once `patience` of the 40 planned steps
    have passed since step 2, but never inside the warm-up nor before step 10 (a quarter of the run)."""
    scores = iter(1.0 - 0.01 * k for k in range(100))
    s = settings(tmp_path, max_steps=40, eval_every=2, save_every=0, best_metric="f1", patience=patience,
                 warmup_steps=warmup)
    result = train(build(), lm_loss, IndexedBatches(make_examples(), collate, seed=3), s,
                   eval_fn=lambda m: {"f1": next(scores)}, show_progress=False)
    assert result.stopped_early and result.best_step == 2 and result.step == first_stop


def test_unknown_best_metric_names_the_key(tmp_path):
    with pytest.raises(ZenError, match="best_metric: expected one of the evaluation metrics \\(acc\\), got 'f1'"):
        train(build(), lm_loss, IndexedBatches(make_examples(), collate), settings(tmp_path, best_metric="f1"),
              eval_fn=lambda m: {"acc": 1.0}, show_progress=False)


def test_progress_prints_plain_lines_when_not_a_terminal(tmp_path):
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=200)
    train(build(), lm_loss, IndexedBatches(make_examples(), collate, seed=3),
          settings(tmp_path, max_steps=6, log_every=2), console=console)
    lines = buf.getvalue().splitlines()
    step_lines = [s for s in lines if s.startswith("step ")]
    assert [s.split()[1] for s in step_lines] == ["2/6", "4/6", "6/6"]
    assert all("loss" in s and "acc" in s and "tok/s" in s and "lr" in s and "ETA" in s for s in step_lines)
    assert len(lines) == 4 and lines[0].startswith("train: starting")  # banner + one line per window
    assert "\x1b[" not in buf.getvalue()


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_reduced_dtype_trains_on_cpu(tmp_path, dtype):
    _, result = run(tmp_path, dtype=dtype, max_steps=4)
    assert result.dtype == dtype
    values = [loss for _, loss in losses(tmp_path)]
    assert len(values) == 4 and all(torch.isfinite(torch.tensor(values)))
    scaler_state = load_checkpoint(result.checkpoint)["scaler"]
    assert (scaler_state != {}) == (dtype == "fp16")  # only fp16 scales the loss


def test_divergence_is_a_clear_error(tmp_path):
    def exploding(model, batch):
        loss, m, n = lm_loss(model, batch)
        return loss * float("nan"), m, n

    with pytest.raises(ZenError, match="step 1: the gradient norm is nan — training diverged"):
        run(tmp_path, loss_fn=exploding)


def test_settings_validation_names_the_key(tmp_path):
    with pytest.raises(ZenError, match="r.yaml: train.batch_size: expected a multiple of grad_accum"):
        from_dict(TrainSettings, {"batch_size": 10, "grad_accum": 4}, source="r.yaml", prefix="train.")
    with pytest.raises(ZenError, match="r.yaml: lr: expected a learning rate > 0, got -1.0"):
        from_dict(TrainSettings, {"lr": -1}, source="r.yaml")
    with pytest.raises(ZenError, match="patience: expected 0 unless best_metric is set"):
        TrainSettings(patience=0.3).validate()
    # the old meaning (a count of evaluations) is refused, naming the key, never read as a share
    with pytest.raises(ZenError, match=r"r.yaml: train.patience: expected a share of the planned steps in \[0, 1\) "
                                       r".*got 5, a count of evaluations"):
        from_dict(TrainSettings, {"patience": 5, "best_metric": "f1"}, source="r.yaml", prefix="train.")
    with pytest.raises(ZenError, match="dtype"):
        from_dict(TrainSettings, {"dtype": "fp8"}, source="r.yaml")
    with pytest.raises(ZenError, match=r"batch_size: the global batch of 8 does not split over 3 processes × "
                                       r"grad_accum 1; 1, 2, 4, 8 processes keep it, or set a batch_size that is "
                                       r"a multiple of 3"):
        TrainSettings(batch_size=8).micro_batch_size(3)
    with pytest.raises(ZenError, match=r"over 1 processes × grad_accum 3; set a batch_size that is a multiple of 3$"):
        TrainSettings(batch_size=8, grad_accum=3).micro_batch_size(1)
    ok = from_dict(TrainSettings, {"lr": "1e-4", "warmup_steps": 36000, "max_steps": 1000000}, source="r.yaml")
    assert ok.lr == 1e-4 and replace(ok, batch_size=64).micro_batch_size(2) == 32


def test_resume_from_an_explicit_checkpoint_file(tmp_path):
    run(tmp_path / "a", max_steps=6, save_every=2, keep_last=5)
    ckpt = tmp_path / "a" / "checkpoints" / "step-00000002.pt"
    _, result = run(tmp_path / "b", max_steps=6, save_every=2, resume=str(ckpt))
    assert result.start_step == 2
    assert losses(tmp_path / "b") == losses(tmp_path / "a")[2:]
    with pytest.raises(ZenError, match="step-00000002.pt: resume: this checkpoint belongs to a run with other "
                                       "settings \\(max_steps 6 → 7\\)"):
        run(tmp_path / "c", max_steps=7, save_every=2, resume=str(ckpt))


def test_a_second_run_on_a_busy_output_dir_is_refused_with_the_holders_pid(tmp_path):
    """Two runs writing one directory at once would interleave checkpoints: the second is refused."""
    import os
    import subprocess
    import sys

    from zencli.errors import ZenError
    from zencli.train.lock import LOCK_NAME, RunLock

    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from zencli.train.lock import RunLock\n"
                               f"with RunLock(Path({str(tmp_path)!r})):\n print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ZenError, match=rf"another zen run \(pid {holder.pid}\) is training in this directory"):
            run(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    _, result = run(tmp_path)  # the holder died without cleaning up: its lock went with it
    assert result.step == 8 and not (tmp_path / LOCK_NAME).exists()  # removed when the run ended
    with RunLock(tmp_path):  # and the same process cannot start a second run there either
        with pytest.raises(ZenError, match=rf"pid {os.getpid()}"):
            run(tmp_path, overwrite=True)


def test_eval_every_auto_keeps_between_5_and_50_evaluations():
    from zencli.train.schedule import MAX_EVALS, MIN_EVALS, eval_interval

    assert eval_interval("auto", 400, epoch_steps=2) == 8  # an epoch of 2 steps: 50 evaluations, not 200
    assert eval_interval("auto", 400, epoch_steps=40) == 40  # once per epoch where that is within the range
    assert eval_interval("auto", 400, epoch_steps=400) == 80  # one epoch: still 5 evaluations
    assert eval_interval("auto", 400) == 40 and eval_interval("auto", 3) == 1  # no epoch: 10; a tiny run: each step
    assert eval_interval(7, 400, epoch_steps=2) == 7 and eval_interval(0, 400) == 0  # a number is taken as given
    for planned in (5, 37, 400, 12_345):
        for epoch in (1, 3, 50, 10_000):
            n = planned // eval_interval("auto", planned, epoch)
            assert MIN_EVALS <= n <= MAX_EVALS


def test_the_step_an_early_stop_ends_on_is_logged_off_the_log_cadence(tmp_path):
    scores = iter([0.5, 0.7, 0.6, 0.65, 0.66, 0.67])
    s = settings(tmp_path / "ev", max_steps=20, eval_every=2, save_every=0, best_metric="f1", patience=0.2,
                 log_every=5)
    result = train(build(), lm_loss, IndexedBatches(make_examples(), collate, seed=3), s,
                   eval_fn=lambda model: {"f1": next(scores)}, show_progress=False)
    assert result.stopped_early and result.step == 8
    logged = [json.loads(line) for line in (tmp_path / "ev" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged if r["kind"] == "train"] == [5, 8]  # the last step too, off the cadence
