"""`zen model info|import|export` and `load_pretrained` across checkpoint kinds."""

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tests.conftest import FIXTURES, needs_shared
from zencli.cli.app import app
from zencli.errors import ZenError
from zencli.model.sources import checkpoint_kind, load_pretrained

runner = CliRunner()

pytestmark = needs_shared(FIXTURES / "zen2_ref")


def _outputs(model, name: str):
    inputs = torch.load(FIXTURES / name / "inputs.pt", weights_only=True)
    model.eval()
    with torch.no_grad():
        out = model.bert(
            inputs["input_ids"],
            token_type_ids=inputs["token_type_ids"],
            attention_mask=inputs["attention_mask"],
            ngram_ids=inputs["input_ngram_ids"],
            ngram_token_type_ids=inputs["ngram_token_type_ids"],
            ngram_attention_mask=inputs["ngram_attention_mask"],
            ngram_position_matrix=inputs["ngram_position_matrix"],
        )
    return out.sequence_output


@pytest.mark.parametrize("name", ["zen2_ref", "zen1_ref"])
def test_import_export_round_trip_keeps_reference_outputs(tmp_path: Path, name: str):
    expected = torch.load(FIXTURES / name / "outputs.pt", weights_only=True)["sequence_output"]
    zen_dir, released_dir = tmp_path / "zen", tmp_path / "released"
    r = runner.invoke(app, ["model", "import", str(FIXTURES / name), "-o", str(zen_dir)])
    assert r.exit_code == 0, r.output
    assert checkpoint_kind(zen_dir) == "zen" and checkpoint_kind(FIXTURES / name) == "released"
    r = runner.invoke(app, ["model", "export", str(zen_dir), "-o", str(released_dir)])
    assert r.exit_code == 0, r.output
    assert checkpoint_kind(released_dir) == "released"
    for d in (zen_dir, released_dir):
        got = _outputs(load_pretrained(d).model, name)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    assert (released_dir / "ngram.txt").read_bytes() == (FIXTURES / name / "ngram.txt").read_bytes()
    r = runner.invoke(app, ["model", "info", str(zen_dir)])
    assert r.exit_code == 0 and "zen" in r.output


def test_not_a_model_directory_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ZenError, match="no config.json"):
        checkpoint_kind(tmp_path)
    with pytest.raises(ZenError, match="no such model directory"):
        checkpoint_kind(tmp_path / "missing")
