"""`zen model info|import|export` and `load_pretrained` across checkpoint kinds."""

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tests.conftest import FIXTURES
from zencli.cli.app import app
from zencli.errors import ZenError
from zencli.model.sources import checkpoint_kind, load_pretrained

runner = CliRunner()



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


def test_info_describes_a_fine_tuned_model_and_a_bare_encoder(tmp_path: Path):
    """`zen model info` refused fine-tuned models ("not a bare encoder")."""
    import json

    from tests.test_finetune_cli import finetune
    from zencli.model.checkpoint import save_zen_model
    from zencli.model.config import ZenConfig
    from zencli.model.encoder import ZenModel

    _, out = finetune(tmp_path, "ner")
    shown = runner.invoke(app, ["model", "info", str(out)])
    assert shown.exit_code == 0, shown.output
    for text in ("fine-tuned model", "ner (named entity", "BMES", "S-PER", "layers × hidden", "dev score", "f1"):
        assert text in shown.output, text
    d = json.loads(runner.invoke(app, ["model", "info", str(out / "model"), "--json"]).output)
    dev = json.loads((out / "model" / "dev_scores.json").read_text(encoding="utf-8"))
    task_json = json.loads((out / "model" / "task.json").read_text(encoding="utf-8"))
    assert d["task"]["labels"] == task_json["state"]["labels"]
    assert (d["scores"]["dev"]["metric"], d["scores"]["dev"]["value"]) == ("f1", dev["main_score"])
    assert set(d["scores"]) == {"dev", "test"} and d["files"]["ngram.txt"] == str(out / "model" / "ngram.txt")
    assert d["parameters"] > 0 and d["encoder"]["type"] == "zen2"

    bare = tmp_path / "bare"
    save_zen_model(ZenModel(ZenConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=16, num_hidden_word_layers=1, word_size=10)), bare)
    e = json.loads(runner.invoke(app, ["model", "info", str(bare), "--json"]).output)
    assert (e["kind"], e["encoder"]["vocab_rows"], e["files"]["vocab.txt"], e["scores"]) == \
        ("zen encoder", 30, None, {})
