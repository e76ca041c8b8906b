"""bin/transfer-grid: the subsets it cuts (the first N sentences, dev's first 300, the whole test split), the
runs it plans (the rule's rate counted once), and the table it writes from finished runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

GRID = ROOT / "bin" / "transfer-grid"


def _data(root: Path) -> None:
    for task, tag in (("ner", "O"), ("pos", "S-n")):
        d = root / "pd98" / task
        d.mkdir(parents=True)
        for split, n in (("train", 2100), ("dev", 320), ("test", 5)):
            (d / f"{split}.tsv").write_text("".join(f"{chr(0x4e00 + i % 50)}\t{tag}\n\n" for i in range(n)),
                                            encoding="utf-8")


def _grid(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ZEN_DATA": str(tmp / "data")}
    return subprocess.run([sys.executable, str(GRID), str(tmp / "out"), *args], capture_output=True, text=True,
                          env=env, check=False)


def _model(tmp: Path, width: int) -> Path:
    m = tmp / "model"
    m.mkdir(exist_ok=True)
    (m / "config.json").write_text(json.dumps({"hidden_size": width}), encoding="utf-8")
    return m


def _finish(out: Path, name: str, test: float, dev: list[float], lr: float = 3e-4) -> None:
    d = out / "runs" / name
    (d / "model").mkdir(parents=True)
    (d / "model" / "test_scores.json").write_text(json.dumps({"main": "f1", "main_score": test}), encoding="utf-8")
    (d / "metrics.jsonl").write_text("".join(json.dumps({"kind": "eval", "step": 40 * (i + 1), "f1": f}) + "\n"
                                             for i, f in enumerate(dev)), encoding="utf-8")
    (d / "run.json").write_text(json.dumps({"settings": {"lr": lr}}), encoding="utf-8")


def test_subsets_and_the_table(tmp_path):
    _data(tmp_path / "data")
    model = _model(tmp_path, 256)  # the rule: 3e-4 at width 256, one of the rates: no separate auto run
    r = _grid(tmp_path, "--model", str(model), "--cells", "ner-500,ner-2000", "--seeds", "1,2", "--report")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    train = (out / "data" / "ner-500" / "train.tsv").read_text(encoding="utf-8").split("\n\n")
    assert len([b for b in train if b.strip()]) == 500 and train[0] == "一\tO"  # the first 500, in order
    assert (out / "data" / "ner-2000" / "dev.tsv").read_text(encoding="utf-8").count("\n\n") == 300
    for seed, (s, a, b, c) in ((1, (0.50, 0.55, 0.60, 0.40)), (2, (0.52, 0.57, 0.64, 0.44))):
        _finish(out, f"ner-500.scratch.lrauto.s{seed}", s, [s], lr=1e-3)
        _finish(out, f"ner-500.pretrained.lr1e-4.s{seed}", a, [a])
        _finish(out, f"ner-500.pretrained.lr3e-4.s{seed}", b, [b - 0.01, b])
        _finish(out, f"ner-500.pretrained.lr1e-3.s{seed}", c, [c])
    r = _grid(tmp_path, "--model", str(model), "--cells", "ner-500,ner-2000", "--seeds", "1,2", "--report")
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("| ner-500"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:2] == ["ner-500", "f1"]
    assert cells[2] == "51.00 ± 1.41"  # scratch, mean ± sd over the two seeds
    assert cells[4] == "62.00 ± 2.83" and cells[6].startswith("62.00 ± 2.83 (3e-4)")  # auto = the 3e-4 runs
    assert cells[7:] == ["3e-4", "+0.00", "+11.00"]  # best rate, auto − best, auto − scratch
    assert "ner-2000" not in r.stdout.split("---")[-1]  # nothing finished there: no row
    rows = json.loads((out / "grid.json").read_text(encoding="utf-8"))
    best = next(x for x in rows if x["name"] == "ner-500.pretrained.lr3e-4.s1")
    assert best["best_step"] == 80 and abs(best["best_dev"] - 60.0) < 1e-9


def test_a_rule_outside_the_rates_gets_its_own_runs(tmp_path):
    _data(tmp_path / "data")
    model = _model(tmp_path, 384)  # 2e-4: not among the default rates
    r = _grid(tmp_path, "--model", str(model), "--cells", "pos-500", "--seeds", "1", "--report")
    assert r.returncode == 0, r.stderr
    _finish(tmp_path / "out", "pos-500.pretrained.lrauto.s1", 0.7, [0.7], lr=2e-4)
    r = _grid(tmp_path, "--model", str(model), "--cells", "pos-500", "--seeds", "1", "--report")
    row = next(line for line in r.stdout.splitlines() if line.startswith("| pos-500"))
    assert "70.00 (2e-4)" in row
    r = _grid(tmp_path, "--model", str(model), "--cells", "pos-9")
    assert r.returncode != 0 and "unknown cell 'pos-9'" in r.stderr
