"""Checkpoint files: atomic writes, keep-last-k, stale temp files, RNG capture, fingerprints."""

import random

import numpy as np
import pytest
import torch

from zencli.errors import WriteError, ZenError
from zencli.train.checkpoint import (
    FORMAT,
    CheckpointDir,
    atomic_save,
    fingerprint,
    fingerprint_diff,
    load_checkpoint,
    rng_state,
    set_rng_state,
)


def _state(step):
    return {"format": FORMAT, "step": step, "model": {"w": torch.full((3,), float(step))}}


def test_crash_mid_write_leaves_previous_checkpoint_intact(tmp_path, monkeypatch):
    ck = CheckpointDir(tmp_path / "checkpoints")
    ck.save(_state(2), 2, keep_last=3)
    real_save = torch.save

    def torn_save(obj, f, *a, **k):
        f.write(b"PK\x03\x04 half a checkpoint")  # bytes reach the temp file, then the writer dies
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", torn_save)
    with pytest.raises(WriteError, match=r"step-00000004\.pt: cannot write: disk full; the checkpoint needs about "
                       r"0\.0 MB; [\d,.]+ MB free there"):
        ck.save(_state(4), 4, keep_last=1)
    monkeypatch.setattr(torch, "save", real_save)
    assert [s for s, _ in ck.steps()] == [2]  # the new one never appeared, the old one was not pruned
    assert load_checkpoint(ck.latest())["model"]["w"].tolist() == [2.0, 2.0, 2.0]
    assert sorted(p.name for p in ck.path.iterdir()) == ["step-00000002.pt"]  # temp file cleaned up


def test_temp_file_of_a_killed_writer_is_ignored_then_removed(tmp_path):
    ck = CheckpointDir(tmp_path)
    ck.save(_state(5), 5, keep_last=3)
    stale = tmp_path / ".step-00000010.pt.tmp-4242"
    stale.write_bytes(b"torn")
    assert ck.latest().name == "step-00000005.pt"
    assert ck.remove_stale_temp_files() == [stale] and not stale.exists()


def test_keep_last_k_and_best_is_never_pruned(tmp_path):
    ck = CheckpointDir(tmp_path)
    ck.save_best(_state(1))
    for step in range(1, 6):
        ck.save(_state(step), step, keep_last=2)
    assert [s for s, _ in ck.steps()] == [4, 5]
    assert ck.best_path.exists()
    (tmp_path / "notes.txt").write_text("mine")
    ck.clear()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # clear() deletes only its own files


def test_load_checkpoint_errors_name_the_file(tmp_path):
    junk = tmp_path / "step-00000001.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ZenError, match="step-00000001.pt: not a readable zen training checkpoint"):
        load_checkpoint(junk)
    other = tmp_path / "other.pt"
    atomic_save({"model": {}}, other)
    with pytest.raises(ZenError, match="other.pt: not a zen training checkpoint"):
        load_checkpoint(other)
    with pytest.raises(ZenError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def test_rng_state_roundtrips_through_a_checkpoint(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.randn()  # leaves a cached gaussian in numpy's state
    state = rng_state()
    first = (random.random(), np.random.randn(), np.random.rand(), torch.rand(3).tolist())
    atomic_save({"format": FORMAT, "rng": state}, tmp_path / "r.pt")
    set_rng_state(load_checkpoint(tmp_path / "r.pt")["rng"])
    assert (random.random(), np.random.randn(), np.random.rand(), torch.rand(3).tolist()) == first


def test_fingerprint_is_stable_and_diff_names_the_changed_keys():
    a = {"lr": 0.001, "seed": 1, "parameters": {"w": [2, 3]}}
    assert fingerprint(a) == fingerprint(dict(reversed(list(a.items()))))
    b = {"lr": 0.002, "seed": 1, "parameters": {"w": [2, 4]}}
    assert fingerprint(a) != fingerprint(b)
    assert fingerprint_diff(a, b) == "lr 0.001 → 0.002, parameters differs"
