"""ZenConfig: released config.json reading, zen's JSON round trip, validation naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from zencli.errors import ZenError
from zencli.model.config import ZenConfig, infer_encoder

RELEASED = {
    "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
    "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
    "num_attention_heads": 12, "num_hidden_layers": 12, "num_hidden_word_layers": 6, "type_vocab_size": 2,
    "vocab_size": 21128, "word_size": 104089,
}


def test_released_dict_ignores_unknown_keys_and_derives_weighting() -> None:
    cfg = ZenConfig.from_released_dict({**RELEASED, "directionality": "bidi", "pooler_type": "first"}, encoder="zen2")
    assert cfg.encoder == "zen2" and cfg.ngram_weighting == "frequency" and not cfg.relative_projection
    assert cfg.to_released_dict() == RELEASED
    assert ZenConfig.from_released_dict(RELEASED, encoder="zen1").ngram_weighting == "binary"


def test_released_dict_requires_the_ngram_keys_for_zen() -> None:
    d = {k: v for k, v in RELEASED.items() if k != "word_size"}
    with pytest.raises(ZenError, match=r"c.json: missing key 'word_size'"):
        ZenConfig.from_released_dict(d, encoder="zen2", source="c.json")
    assert ZenConfig.from_released_dict(d, encoder="bert").encoder == "bert"


def test_infer_encoder_from_tensor_names() -> None:
    zen2 = ["bert.encoder.layer.0.attention.self.r_r_bias", "bert.word_embeddings.word_embeddings.weight"]
    zen1 = ["bert.embeddings.position_embeddings.weight", "bert.word_embeddings.word_embeddings.weight"]
    assert infer_encoder(zen2) == "zen2"
    assert infer_encoder(zen1) == "zen1"
    assert infer_encoder(["bert.embeddings.position_embeddings.weight"]) == "bert"


def test_json_round_trip(tmp_path: Path) -> None:
    cfg = ZenConfig(hidden_size=64, num_attention_heads=4, encoder="zen1", relative_projection=False,
                    ngram_weighting="frequency", released_ft_quirks=True)
    cfg.to_json(tmp_path / "c.json")
    assert ZenConfig.from_json(tmp_path / "c.json") == cfg


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"hidden_size": "64"}, "key 'hidden_size' must be int, got '64'"),
        ({"encoder": "zen3"}, "key 'encoder' must be one of zen2, zen1, bert"),
        ({"hidden_act": "tanh"}, "key 'hidden_act' must be one of gelu"),
        ({"hidden_size": 30, "num_attention_heads": 4}, "must be a multiple of num_attention_heads"),
        ({"hidden_size": 12, "num_attention_heads": 6}, "even head size >= 4"),
        ({"num_hidden_layers": 2, "num_hidden_word_layers": 3}, "must not exceed num_hidden_layers"),
        ({"ngram_weighting": "tf-idf"}, "key 'ngram_weighting' must be one of"),
        ({"hidden_dropout_prob": 1.5}, "key 'hidden_dropout_prob' must be in [0, 1)"),
    ],
)
def test_validation_names_the_key(kw: dict, message: str) -> None:
    with pytest.raises(ZenError) as e:
        ZenConfig.from_dict(kw, source="model/config.json")
    assert str(e.value).startswith("model/config.json: ") and message in str(e.value)


def test_floats_given_as_json_integers_are_accepted() -> None:
    assert ZenConfig.from_dict({"hidden_dropout_prob": 0}).hidden_dropout_prob == 0.0
