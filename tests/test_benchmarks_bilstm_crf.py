"""benchmarks/bilstm_crf.py, the tagging baseline: it trains within its budget on made-up data, keeps the best dev
weights, scores test with zen's entity F1, and reads a malformed line as a one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.bilstm_crf import read_blocks, run
from tests.conftest import write
from zencli.errors import ZenError

BLOCK = "北\tB-LOC\n京\tE-LOC\n很\tO\n好\tO\n\n我\tO\n在\tO\n上\tB-LOC\n海\tE-LOC\n\n"


def test_a_short_run_learns_the_made_up_entities(tmp_path: Path):
    for split in ("train", "dev", "test"):
        write(tmp_path / f"{split}.tsv", BLOCK * 8)
    result = run(tmp_path, minutes=0.05, seed=1, eval_every=5, threads=1)
    assert result["steps"] >= 5 and result["dev_curve"][0][0] == 5
    assert result["best_dev_f1"] == max(f for _, _, f in result["dev_curve"])
    assert result["test"]["f1"] == pytest.approx(result["best_dev_f1"])  # test is dev here: the kept weights
    assert result["best_dev_f1"] > 0.5  # two entity types of one word each: learnt within seconds


def test_a_malformed_line_names_the_file_and_line(tmp_path: Path):
    bad = write(tmp_path / "train.tsv", "北\tB-LOC\n京 E-LOC\n")
    with pytest.raises(ZenError, match=r"train.tsv:2: expected `char<TAB>label`"):
        read_blocks(bad)
