"""zen's own model directory: round trip, tied weights stored once, one-line errors on bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from zencli.errors import ZenError
from zencli.model.checkpoint import load_zen_model, save_zen_model
from zencli.model.config import ZenConfig
from zencli.model.encoder import ZenModel
from zencli.model.pretraining import ZenForPreTraining


def tiny(encoder: str = "zen2", **kw) -> ZenConfig:
    base = dict(vocab_size=20, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24,
                max_position_embeddings=16, word_size=9, num_hidden_word_layers=1, encoder=encoder)
    return ZenConfig(**{**base, **kw})


def inputs() -> dict:
    return dict(
        input_ids=torch.tensor([[2, 5, 6, 7, 3, 0]]),
        attention_mask=torch.tensor([[1, 1, 1, 1, 1, 0]]),
        ngram_ids=torch.tensor([[4, 8]]),
        ngram_starts=torch.tensor([[1, 2]]),
        ngram_lengths=torch.tensor([[2, 2]]),
        ngram_freqs=torch.tensor([[30, 10]]),
    )


def text_files(tmp_path: Path) -> tuple[Path, Path]:
    vocab = tmp_path / "v.txt"
    vocab.write_text("".join(f"c{i}\n" for i in range(20)), encoding="utf-8")
    ngram = tmp_path / "n.txt"
    ngram.write_text("".join(f"c{i} c{i + 1},{9 - i}\n" for i in range(8)), encoding="utf-8")
    return vocab, ngram


@pytest.mark.parametrize("encoder,projection", [("zen2", False), ("zen2", True), ("zen1", False), ("bert", False)])
def test_round_trip(tmp_path: Path, encoder: str, projection: bool) -> None:
    torch.manual_seed(0)
    model = ZenForPreTraining(tiny(encoder, relative_projection=projection)).eval()
    vocab, ngram = text_files(tmp_path)
    out = save_zen_model(model, tmp_path / "m", vocab=vocab, ngram=ngram if encoder != "bert" else None)
    loaded = load_zen_model(out)
    assert isinstance(loaded, ZenForPreTraining) and loaded.config == model.config
    with torch.no_grad():
        a, b = model(**inputs()), loaded(**inputs())
    assert torch.equal(a.mlm_logits, b.mlm_logits) and torch.equal(a.encoder.pooled_output, b.encoder.pooled_output)
    assert loaded.cls.predictions.decoder.weight is loaded.bert.embeddings.char_embeddings.weight
    assert (out / "vocab.txt").read_text(encoding="utf-8") == vocab.read_text(encoding="utf-8")


def test_tied_weight_is_stored_once(tmp_path: Path) -> None:
    out = save_zen_model(ZenForPreTraining(tiny()), tmp_path / "m")
    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        keys = set(f.keys())
        meta = f.metadata()
    assert "bert.embeddings.char_embeddings.weight" in keys and "cls.predictions.decoder.weight" not in keys
    assert json.loads(meta["tied"]) == {"cls.predictions.decoder.weight": "bert.embeddings.char_embeddings.weight"}
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["encoder"] == "zen2" and cfg["architecture"] == "ZenForPreTraining" and cfg["word_size"] == 9


def test_bare_encoder_round_trip(tmp_path: Path) -> None:
    model = ZenModel(tiny("zen1")).eval()
    loaded = load_zen_model(save_zen_model(model, tmp_path / "m"))
    assert type(loaded) is ZenModel
    with torch.no_grad():
        assert torch.equal(model(**inputs()).sequence_output, loaded(**inputs()).sequence_output)


def test_truncated_weights_are_one_line_error(tmp_path: Path) -> None:
    out = save_zen_model(ZenForPreTraining(tiny()), tmp_path / "m")
    data = (out / "model.safetensors").read_bytes()
    for cut in (len(data) // 2, 5):
        (out / "model.safetensors").write_bytes(data[:cut])
        with pytest.raises(ZenError) as e:
            load_zen_model(out)
        msg = str(e.value)
        assert "model.safetensors: cannot read weights" in msg and "truncated" in msg and "\n" not in msg


def test_shape_mismatch_names_the_tensor(tmp_path: Path) -> None:
    out = save_zen_model(ZenForPreTraining(tiny()), tmp_path / "m")
    cfg = json.loads((out / "config.json").read_text())
    cfg["intermediate_size"] = 32
    (out / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ZenError, match=r"tensor 'bert.encoder.layer.0.intermediate.dense.weight' has shape "
                                       r"\[24,16\], expected \[32,16\]"):
        load_zen_model(out)


def test_config_errors(tmp_path: Path) -> None:
    out = save_zen_model(ZenModel(tiny()), tmp_path / "m")
    cfg = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**cfg, "hiden_size": 3}))
    with pytest.raises(ZenError, match=r"config.json: unknown key 'hiden_size'"):
        load_zen_model(out)
    (out / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "zen_format"}))
    with pytest.raises(ZenError, match="not a zen model config"):
        load_zen_model(out)
    (out / "config.json").write_text("{broken")
    with pytest.raises(ZenError, match=r"config.json:1: invalid JSON"):
        load_zen_model(out)


def test_lexicon_must_fit_the_table(tmp_path: Path) -> None:
    vocab, ngram = text_files(tmp_path)
    ngram.write_text("a b,1\n", encoding="utf-8")
    with pytest.raises(ZenError, match=r"n.txt: 1 n-grams, but the model's n-gram embedding has 9 rows"):
        save_zen_model(ZenModel(tiny()), tmp_path / "m", vocab=vocab, ngram=ngram)
