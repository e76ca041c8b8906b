"""`zen bench peers` without peers installed: zen's own encoders, the ratios, and the one-line errors."""

from __future__ import annotations

import pytest

from zencli.bench.model import parse_size
from zencli.bench.peers import load_released, run
from zencli.errors import ZenError


def test_run_times_zen_encoders_and_reports_ratios() -> None:
    report = run(sizes=[parse_size("1x64x1")], released=None, hf=False, modes=["infer", "train"], steps=1, warmup=0,
                 batch=2, seq_len=16, slots=8, ngram_rows=200, vocab_size=300, threads=1, seed=0)
    row = report["results"][0]
    for mode in ("infer", "train"):
        assert set(row[mode]) == {"zen zen2", "zen bert"}
        assert all(m["tokens_per_s"] > 0 for m in row[mode].values())
        assert set(row[mode + "_ratios"]) == {"zen2 vs zen bert"}
    assert report["settings"]["clock"] == "cpu"


def test_released_folder_without_the_released_code_is_a_one_line_error(tmp_path) -> None:
    with pytest.raises(ZenError, match="ZEN2/modeling.py"):
        load_released(tmp_path)


def test_cli_rejects_unknown_mode() -> None:
    from typer.testing import CliRunner

    from zencli.cli.app import app

    result = CliRunner().invoke(app, ["bench", "peers", "--modes", "fly", "--sizes", "1x64x1"])
    assert isinstance(result.exception, ZenError)  # main() prints it as one line, exit 2
    assert "--modes" in str(result.exception)


def test_bf16_autocast_and_bad_precision() -> None:
    report = run(sizes=[parse_size("1x64x1")], released=None, hf=False, modes=["infer"], steps=1, warmup=0,
                 batch=2, seq_len=16, slots=8, ngram_rows=200, vocab_size=300, threads=1, seed=0, precision="bf16")
    assert report["settings"]["precision"] == "bf16" and report["results"][0]["infer"]["zen zen2"]["tokens_per_s"] > 0
    with pytest.raises(ZenError, match="--precision"):
        run(sizes=[parse_size("1x64x1")], released=None, hf=False, modes=["infer"], steps=1, warmup=0, batch=2,
            seq_len=16, slots=8, ngram_rows=200, vocab_size=300, threads=1, seed=0, precision="fp8")
