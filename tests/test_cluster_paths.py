"""The cluster paths at tiny size, as a user starts them: torchrun across two "nodes" (two torchrun commands on
one machine, gloo, one shared output folder) trains exactly what one torchrun with two processes trains, in
pretraining and in fine-tuning; and a global batch that a new process count does not divide is a one-line
error naming the choices."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.conftest import REF, ROOT
from tests.test_finetune_cli import write_task_data
from tests.test_pretrain_cli import micro_recipe
from zencli.train.distributed import free_port

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def _one_node(args: list[str]) -> None:
    r = subprocess.run([*TORCHRUN, "--standalone", "--nproc-per-node", "2", "-m", "zencli", *args], cwd=ROOT,
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


def _two_nodes(args: list[str]) -> None:
    port = str(free_port())
    procs = [subprocess.Popen([*TORCHRUN, "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(rank),
                               "--master-addr", "127.0.0.1", "--master-port", port, "-m", "zencli", *args],
                              cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in (0, 1)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]


def _same_weights(a: Path, b: Path) -> None:
    wa, wb = load_file(a / "model" / "model.safetensors"), load_file(b / "model" / "model.safetensors")
    assert wa.keys() == wb.keys()
    for name in wa:
        assert torch.equal(wa[name], wb[name]), name  # bit for bit: the same ranks compute the same sums


def test_pretraining_on_two_nodes_equals_two_processes_on_one(tmp_path: Path):
    recipe = micro_recipe(tmp_path, model=NO_DROPOUT, train={"max_steps": 4, "save_every": 2, "eval_every": 0})
    one, two = tmp_path / "one-node", tmp_path / "two-nodes"
    _one_node(["pretrain", "-r", str(recipe), "-o", str(one), "--quiet"])
    _two_nodes(["pretrain", "-r", str(recipe), "-o", str(two), "--quiet"])
    _same_weights(one, two)


def _reviews(tmp: Path) -> str:
    path = tmp / "sa.tsv"
    lines = (f"{i % 2}\t{'好评如潮' if i % 2 else '服务恶劣'}{'北京上海天津'[i % 6:]}\n" for i in range(16))
    path.write_text("".join(lines), encoding="utf-8")
    return str(path)


# sa: the n-gram bag is fitted first and left out of the training (and of DDP's gradient reduction); few of its
# batches match an n-gram of the fixture's lexicon, so the n-gram tower goes unused in some steps
@pytest.mark.parametrize("task", ["ner", "sa"])
def test_finetuning_on_two_nodes_equals_two_processes_on_one(tmp_path: Path, task: str):
    data = str(write_task_data(tmp_path, "ner")) if task == "ner" else _reviews(tmp_path)
    args = ["finetune", "--task", task, "--model", str(REF), "--train", data, "--dev", data, "--max-steps", "4",
            "--quiet", "--set", "model.hidden_dropout_prob=0", "--set", "model.attention_probs_dropout_prob=0",
            "--set", "train.batch_size=4"]
    one, two = tmp_path / "one-node", tmp_path / "two-nodes"
    _one_node([*args, "-o", str(one)])
    _two_nodes([*args, "-o", str(two)])
    _same_weights(one, two)


def test_a_batch_the_process_count_does_not_divide_is_a_one_line_error(tmp_path: Path):
    recipe = micro_recipe(tmp_path, train={"max_steps": 2, "batch_size": 8})
    r = subprocess.run([sys.executable, "-m", "zencli", "pretrain", "-r", str(recipe), "--nproc", "3", "--quiet"],
                       cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert lines == ["zen: error: batch_size: the global batch of 8 does not split over 3 processes × grad_accum 1; "
                     "1, 2, 4, 8 processes keep it, or set a batch_size that is a multiple of 3"], r.stderr


pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed missing")
