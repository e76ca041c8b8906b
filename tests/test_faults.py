"""The machine's faults: a full disk (and other OSErrors) while writing, SIGTERM/SIGINT (preemption, Ctrl-C)
during training and prediction, a damaged checkpoint or model file. Each ends in one line, nothing is left
half-written, and a run stopped by a signal resumes bit for bit."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.conftest import REF
from tests.helpers_train import build, collate, lm_loss, make_examples
from zencli import signals
from zencli.atomic_write import atomic_write, atomic_write_text
from zencli.errors import WriteError, ZenError
from zencli.signals import Interrupted, Terminated
from zencli.train import IndexedBatches, TrainSettings, train
from zencli.train.checkpoint import load_checkpoint
from zencli.train.distributed import launch_local

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = [sys.executable, "-m", "tests.helpers_train"]
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def run(out: Path, loss_fn=lm_loss, **kw):
    settings = dict(lr=3e-3, warmup_steps=3, max_steps=10, batch_size=8, dtype="fp32", device="cpu", seed=7,
                    save_every=5, keep_last=2, log_every=1, output_dir=out, tensorboard=False, num_threads=1)
    settings.update(kw)
    torch.manual_seed(0)
    model = build()
    return train(model, loss_fn, IndexedBatches(make_examples(), collate, seed=3), TrainSettings(**settings),
                 show_progress=False)


def losses(out: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
            if r["kind"] == "train"]


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- a full disk ---------------------------------------------------------------------------------------

def test_atomic_write_turns_os_errors_into_one_line_and_leaves_the_old_file(tmp_path):
    target = tmp_path / "out" / "lexicon.txt"
    atomic_write_text(target, "old\n")

    def full(f):
        f.write(b"half")
        raise ENOSPC

    with pytest.raises(WriteError) as e:
        atomic_write(target, full)
    assert str(e.value) == f"{target}: cannot write: No space left on device" and e.value.errno == errno.ENOSPC

    def torch_like(f):  # torch.save: a RuntimeError raised while handling the OSError of its write
        try:
            raise ENOSPC
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] unexpected pos 64") from None

    with pytest.raises(WriteError, match="lexicon.txt: cannot write: No space left on device$"):
        atomic_write(target, torch_like)
    with pytest.raises(RuntimeError, match="a bug"):  # not an OSError: stays what it is
        atomic_write(target, lambda f: (_ for _ in ()).throw(RuntimeError("a bug")))
    assert target.read_text() == "old\n" and files(target.parent) == ["lexicon.txt"]


def test_disk_full_at_a_checkpoint_keeps_the_earlier_ones_and_says_the_size(tmp_path, monkeypatch):
    real_save = torch.save
    saves = []

    def save(obj, f, *a, **k):
        saves.append(1)
        if len(saves) == 2:  # the step-10 checkpoint
            f.write(b"PK\x03\x04 torn")
            try:
                raise ENOSPC
            except OSError:
                raise RuntimeError("[enforce fail at inline_container.cc:672] unexpected pos") from None
        real_save(obj, f, *a, **k)

    monkeypatch.setattr(torch, "save", save)
    with pytest.raises(WriteError) as e:
        run(tmp_path, max_steps=10, save_every=5)
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'checkpoints' / 'step-00000010.pt'}: cannot write: No space left on device; "
                          "the checkpoint needs about ") and " MB free there" in msg and "\n" not in msg
    assert files(tmp_path / "checkpoints") == ["step-00000005.pt"]  # intact, not pruned; no temp file
    assert load_checkpoint(tmp_path / "checkpoints" / "step-00000005.pt")["step"] == 5


def test_disk_full_on_a_real_small_file_system(tmp_path):
    """A 1 MB tmpfs (root only; skipped where mounting is not allowed): torch.save's real error chain."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        out = mnt / "run"
        (mnt / "filler").write_bytes(b"\0" * (1024 * 1024 - 48 * 1024))  # ~48 KB left: a checkpoint needs more
        with pytest.raises(WriteError, match=r"step-00000002\.pt: cannot write: No space left on device; the "
                                             r"checkpoint needs about 0\.3 MB; [\d.]+ MB free there"):
            run(out, max_steps=4, save_every=2)
        assert files(out / "checkpoints") == []
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_zen_main_reports_machine_faults_and_signals_in_one_line(monkeypatch, capsys):
    from zencli.cli import app as app_module

    real_app = app_module.app

    def fails_with(exc):
        def app(*_, **__):
            raise exc
        return app

    def chained():
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/out/shard-00003/input_ids.npy")
        except OSError:
            raise RuntimeError("unexpected pos") from None

    try:
        chained()
    except RuntimeError as e:
        runtime = e
    cases = [
        (runtime, 2, "zen: error: /data/out/shard-00003/input_ids.npy: No space left on device"),
        (OSError(errno.EROFS, os.strerror(errno.EROFS)), 2, "zen: error: Read-only file system"),
        (WriteError("m/model.safetensors", ENOSPC), 2, "zen: error: m/model.safetensors: cannot write: "
                                                       "No space left on device"),
        (Terminated(), 143, "zen: terminated"),
        (KeyboardInterrupt(), 130, "zen: interrupted"),
        (Interrupted("interrupted at step 7: checkpoint saved; run the same command to resume", signal.SIGTERM),
         143, "interrupted at step 7: checkpoint saved; run the same command to resume"),
        (Interrupted("interrupted at step 7: …", signal.SIGINT, announce=False), 130, ""),
    ]
    handlers = {s: signal.getsignal(s) for s in signals.SIGNALS}
    for exc, code, line in cases:
        monkeypatch.setattr(app_module, "app", fails_with(exc))
        with pytest.raises(SystemExit) as e:
            app_module.main()
        assert e.value.code == code
        assert capsys.readouterr().err == (line + "\n" if line else "")
        for s, h in handlers.items():  # main ignores late signals once it is ending: give them back
            signal.signal(s, h)
    import zencli.config

    monkeypatch.setattr(app_module, "app", real_app)
    for exc, code, line in ((Terminated(), 143, "zen: terminated"), (KeyboardInterrupt(), 130, "zen: interrupted")):
        # through Typer, which turns a KeyboardInterrupt into a silent Exit(130)
        monkeypatch.setattr(zencli.config, "list_recipes", fails_with(exc))
        monkeypatch.setattr(sys, "argv", ["zen", "recipe", "list"])
        with pytest.raises(SystemExit) as e:
            app_module.main()
        assert e.value.code == code and capsys.readouterr().err == line + "\n"
        for s, h in handlers.items():
            signal.signal(s, h)
    monkeypatch.setattr(app_module, "app", fails_with(ValueError("a bug")))
    with pytest.raises(ValueError):  # anything else keeps its traceback
        app_module.main()


# --- preemption: SIGTERM and SIGINT ---------------------------------------------------------------------

def signal_at(call: int, signum: int, times: int = 1):
    """lm_loss that sends this process `signum` (`times` times) during its `call`-th call."""
    calls = {"n": 0}

    def loss(model, batch):
        calls["n"] += 1
        if calls["n"] == call:
            for _ in range(times):
                os.kill(os.getpid(), signum)
        return lm_loss(model, batch)
    return loss


def test_sigint_finishes_the_step_saves_and_resumes_bit_for_bit(tmp_path):
    before = {s: signal.getsignal(s) for s in signals.SIGNALS}
    run(tmp_path / "full", max_steps=10)
    with pytest.raises(Interrupted) as e:  # Ctrl-C twice at once (the terminal and a launcher): one request
        run(tmp_path / "cut", loss_fn=signal_at(7, signal.SIGINT, times=2), max_steps=10)
    assert str(e.value) == "interrupted at step 7: checkpoint saved; run the same command to resume"
    assert e.value.exit_code == 130 and e.value.announce
    assert {s: signal.getsignal(s) for s in signals.SIGNALS} == before  # the run's handlers are gone
    assert files(tmp_path / "cut" / "checkpoints") == ["step-00000005.pt", "step-00000007.pt"]
    assert [s for s, _ in losses(tmp_path / "cut")] == list(range(1, 8))
    resumed = run(tmp_path / "cut", max_steps=10)
    assert resumed.start_step == 7 and losses(tmp_path / "cut") == losses(tmp_path / "full")
    a = load_checkpoint(tmp_path / "full" / "checkpoints" / "step-00000010.pt")
    b = load_checkpoint(tmp_path / "cut" / "checkpoints" / "step-00000010.pt")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    for i, (x, y) in enumerate(zip(a["optimizers"], b["optimizers"])):
        assert all(torch.equal(u, v) for u, v in zip(x["state"][0].values(), y["state"][0].values())), i


def test_a_second_signal_stops_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(signals, "DUPLICATE_S", -1.0)  # every repeat counts as a second signal
    with pytest.raises(Terminated) as e:
        run(tmp_path, loss_fn=signal_at(3, signal.SIGTERM, times=2), max_steps=10)
    assert e.value.signum == signal.SIGTERM
    assert not (tmp_path / "checkpoints").exists() or files(tmp_path / "checkpoints") == []


def test_a_signal_during_the_last_step_still_reports_the_stop(tmp_path):
    with pytest.raises(Interrupted, match="interrupted at step 4: checkpoint saved"):
        run(tmp_path, loss_fn=signal_at(4, signal.SIGTERM), max_steps=4)
    assert run(tmp_path, max_steps=4).start_step == 4  # complete: the re-run trains nothing more


def test_sigterm_at_a_random_step_then_resume_gives_identical_losses(tmp_path):
    """As the kill -9 test (test_train_loop), with SIGTERM from outside at a random step."""
    stop_after = random.randint(2, 14)
    full = subprocess.Popen(SCRIPT + ["--max-steps", "20", str(tmp_path / "full")], cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = subprocess.Popen(SCRIPT + ["--max-steps", "20", "--sleep", "0.05", str(tmp_path / "cut")], cwd=ROOT,
                              env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "cut" / "metrics.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and victim.poll() is None:
        if metrics.exists() and any(json.loads(line)["step"] >= stop_after
                                    for line in metrics.read_text().splitlines() if line.endswith("}")):
            break
        time.sleep(0.01)
    victim.send_signal(signal.SIGTERM)
    _, err = victim.communicate(timeout=60)
    assert victim.returncode == 143, (stop_after, err)
    step = losses(tmp_path / "cut")[-1][0]
    assert err == f"interrupted at step {step}: checkpoint saved; run the same command to resume\n", stop_after
    assert stop_after <= step < 20 and (tmp_path / "cut" / "checkpoints" / f"step-{step:08d}.pt").is_file()
    assert not [p for p in (tmp_path / "cut" / "checkpoints").iterdir() if ".tmp-" in p.name]
    _, err = full.communicate(timeout=120)
    assert full.returncode == 0, err
    resumed = subprocess.run(SCRIPT + ["--max-steps", "20", str(tmp_path / "cut")], cwd=ROOT, env=_env(),
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["start_step"] == step  # no optimizer step lost
    assert losses(tmp_path / "cut") == losses(tmp_path / "full")
    a = load_checkpoint(tmp_path / "full" / "checkpoints" / "step-00000020.pt")
    b = load_checkpoint(tmp_path / "cut" / "checkpoints" / "step-00000020.pt")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_ddp_a_signal_to_one_process_stops_every_process_at_the_same_step(tmp_path, capfd):
    """Rank 1 alone gets SIGTERM in its 4th step: both ranks stop after step 5 (the vote is one step behind),
    rank 0 writes the checkpoint and prints the one line, the launcher returns 143. (The checkpoint is the
usual one, resumed as in test_train_ddp; bit for bit: the single-process tests above.)"""
    args = ["--max-steps", "8", "--save-every", "0", "--plain"]
    code = launch_local(2, SCRIPT + args + ["--signal", "1:4", str(tmp_path / "cut")], env=_env())
    err = capfd.readouterr().err
    assert code == 143, err
    assert err.count("interrupted at step") == 1 and \
        "interrupted at step 5: checkpoint saved; run the same command to resume\n" in err
    assert files(tmp_path / "cut" / "checkpoints") == ["step-00000005.pt"]
    state = load_checkpoint(tmp_path / "cut" / "checkpoints" / "step-00000005.pt")
    assert state["step"] == 5 and len(state["rng"]) == len(state["data"]) == 2  # every rank's, as save_every's


# --- a damaged checkpoint or model file -----------------------------------------------------------------

def test_an_unreadable_newest_checkpoint_is_named_and_the_older_one_used(tmp_path):
    run(tmp_path / "full", max_steps=15, save_every=5, keep_last=2)
    with pytest.raises(Interrupted):
        run(tmp_path / "cut", loss_fn=signal_at(12, signal.SIGTERM), max_steps=15, save_every=5, keep_last=2)
    newest = tmp_path / "cut" / "checkpoints" / "step-00000012.pt"
    newest.write_bytes(newest.read_bytes()[:1000])  # truncated: a full disk during a copy, a bad block
    from rich.console import Console

    console = Console(record=True, width=400)
    torch.manual_seed(0)
    result = train(build(), lm_loss, IndexedBatches(make_examples(), collate, seed=3),
                   TrainSettings(lr=3e-3, warmup_steps=3, max_steps=15, batch_size=8, dtype="fp32", device="cpu",
                                 seed=7, save_every=5, keep_last=2, log_every=1, output_dir=tmp_path / "cut",
                                 tensorboard=False, num_threads=1), console=console)
    shown = " ".join(console.export_text().split())
    assert f"note: {newest}: not a readable zen training checkpoint" in shown
    assert "resuming from the next older checkpoint, step-00000010.pt" in shown
    assert result.start_step == 10 and losses(tmp_path / "cut") == losses(tmp_path / "full")
    assert files(tmp_path / "cut" / "checkpoints") == ["step-00000010.pt", "step-00000012.pt.damaged",
                                                       "step-00000015.pt"]


def test_no_readable_checkpoint_is_still_an_error(tmp_path):
    run(tmp_path, max_steps=10, save_every=5, keep_last=2)
    for p in (tmp_path / "checkpoints").iterdir():
        p.write_bytes(b"PK\x03\x04 torn")
    with pytest.raises(ZenError, match=r"step-00000010\.pt: not a readable zen training checkpoint"):
        run(tmp_path, max_steps=10, save_every=5, keep_last=2)


def test_model_info_on_a_truncated_model_file_is_one_line(tmp_path):
    from typer.testing import CliRunner

    from zencli.cli.app import app

    runner = CliRunner()
    assert runner.invoke(app, ["model", "import", str(REF), "-o", str(tmp_path / "m")]).exit_code == 0
    weights = tmp_path / "m" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    r = runner.invoke(app, ["model", "info", str(tmp_path / "m")])
    assert isinstance(r.exception, ZenError)  # which main() prints as one line, exit status 2
    assert str(r.exception).startswith(f"{weights}: cannot read weights (") and "truncated" in str(r.exception)


# --- prediction into a file -----------------------------------------------------------------------------

@pytest.mark.parametrize("fault", [Terminated(), ENOSPC])
def test_predict_output_appears_complete_or_not_at_all(tmp_path, monkeypatch, fault):
    from zencli.tasks import predict as P

    def stream(loaded, lines, out, **kw):
        out.write("first record\n")
        out.flush()
        raise fault  # SIGTERM (as zen's main turns it into Terminated) or a full disk, mid-stream

    monkeypatch.setattr(P, "predict_stream", stream)
    output = tmp_path / "pred" / "out.txt"
    with pytest.raises(Terminated if isinstance(fault, Terminated) else WriteError) as e:
        P.predict_to_file(None, [], output)
    if isinstance(fault, OSError):
        assert str(e.value) == f"{output}: cannot write: No space left on device"
    assert files(output.parent) == []  # no partial output, no temp file


def test_disk_full_on_metrics_and_lexicon_counts_names_the_file(tmp_path, monkeypatch):
    from zencli.lexicon.extract import _temp_folder
    from zencli.lexicon.settings import LexiconConfig
    from zencli.train.progress import MetricsLog

    log = MetricsLog(tmp_path, tensorboard=False)
    log.write({"kind": "train", "step": 1, "loss": 1.0})

    class Full:
        def write(self, _):
            raise ENOSPC

        def flush(self):
            pass

        def close(self):
            pass

    log._file = Full()
    with pytest.raises(WriteError, match=r"metrics\.jsonl: cannot write: No space left on device$"):
        log.write({"kind": "train", "step": 2, "loss": 1.0})
    log.close()
    cfg = LexiconConfig(corpus=[tmp_path / "c.txt"], output=tmp_path / "ngram.txt")
    with pytest.raises(WriteError, match=r"cannot write: No space left on device; the n-gram counts are written there"):
        with _temp_folder(cfg, tmp_path / "lex") as folder:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as a counting worker's error arrives
    assert not folder.exists()


def test_disk_full_in_the_lexicon_merge_is_one_line_naming_its_folder(tmp_path, monkeypatch):
    """The merge's sorted runs are numpy files; numpy writes a real file with ndarray.tofile, whose short write
    is an OSError without errno (a traceback at 1G characters). Through save_npy every write goes through the
    file's `write`, so a full disk arrives as ENOSPC and ends in the lexicon's one-line error."""
    import zencli.atomic_write as atomic
    from zencli.lexicon.extract import build
    from zencli.lexicon.settings import LexiconConfig

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(["中国人民银行在北京", "北京大学的学生在中国"] * 30) + "\n", encoding="utf-8")
    writes = []

    class FullStream:
        def __init__(self, f):
            def write(data):
                writes.append(len(data))
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.write = write

    monkeypatch.setattr(atomic, "_Stream", FullStream)
    cfg = LexiconConfig(corpus=[corpus], output=tmp_path / "ngram.txt", min_freq=2, min_entropy=0.5, workers=1)
    with pytest.raises(WriteError, match=r"cannot write: No space left on device; the n-gram counts are written"):
        build(cfg)
    assert writes  # the merge wrote through the stream
    assert not list(tmp_path.glob(".zen-lexicon-*"))  # its temp folder removed
