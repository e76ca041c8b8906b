"""Import/export of released ZEN directories and BERT checkpoints: strictness and round trips."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from tests.conftest import FIXTURES
from zencli.errors import ZenError
from zencli.model.config import ZenConfig
from zencli.model.names import released_state
from zencli.model.pretraining import ZenForPreTraining
from zencli.model.released import export_released, import_bert, import_released


def fixture_inputs(name: str) -> dict:
    i = torch.load(FIXTURES / name / "inputs.pt", weights_only=True)
    return dict(
        input_ids=i["input_ids"], token_type_ids=i["token_type_ids"], attention_mask=i["attention_mask"],
        ngram_ids=i["input_ngram_ids"], ngram_token_type_ids=i["ngram_token_type_ids"],
        ngram_attention_mask=i["ngram_attention_mask"], ngram_position_matrix=i["ngram_position_matrix"],
    )


def copy_fixture(name: str, tmp_path: Path, edit=None) -> Path:
    """A writable copy of a fixture directory, with its state dict passed through `edit`."""
    d = tmp_path / name
    d.mkdir()
    for f in ("config.json", "vocab.txt", "ngram.txt"):
        shutil.copyfile(FIXTURES / name / f, d / f)
    state = torch.load(FIXTURES / name / "pytorch_model.bin", weights_only=True)
    if edit is not None:
        state = edit(state)
    torch.save(state, d / "pytorch_model.bin")
    return d


def run(model: ZenForPreTraining, inputs: dict):
    with torch.no_grad():
        return model.eval()(**inputs, output_all_layers=True)


# -- released ZEN ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["zen2_ref", "zen1_ref"])
def test_export_import_round_trip(name: str, tmp_path: Path) -> None:
    first = import_released(FIXTURES / name)
    out = export_released(first.model, tmp_path / "out", vocab=first.vocab_path, ngram=first.ngram_path)
    again = import_released(out)
    a, b = run(first.model, fixture_inputs(name)), run(again.model, fixture_inputs(name))
    torch.testing.assert_close(a.encoder.sequence_output, b.encoder.sequence_output, atol=0, rtol=0)
    torch.testing.assert_close(a.mlm_logits, b.mlm_logits, atol=0, rtol=0)
    # The exported file has the released layout: same keys and shapes as the file the released code wrote.
    ref = torch.load(FIXTURES / name / "pytorch_model.bin", weights_only=True)
    exported = torch.load(out / "pytorch_model.bin", weights_only=True)
    assert {k: tuple(v.shape) for k, v in exported.items()} == {k: tuple(v.shape) for k, v in ref.items()}
    for k, v in ref.items():
        if not k.endswith("_float_tensor"):  # released scratch buffer: uninitialised memory
            assert torch.equal(exported[k], v), k
    assert json.loads((out / "config.json").read_text()) == json.loads((FIXTURES / name / "config.json").read_text())
    assert (out / "ngram.txt").read_bytes() == (FIXTURES / name / "ngram.txt").read_bytes()


def test_unprefixed_gamma_beta_finetuned_checkpoint(tmp_path: Path) -> None:
    def edit(state):
        out = {}
        for k, v in state.items():
            if k.startswith("cls."):
                continue  # fine-tuned checkpoints have no pretraining heads
            k = k.removeprefix("bert.")
            k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
            out[k] = v
        out["classifier.weight"] = torch.randn(3, 64)
        out["classifier.bias"] = torch.randn(3)
        return out

    d = copy_fixture("zen2_ref", tmp_path, edit)
    imported = import_released(d)
    assert not imported.has_pretraining_heads and "cls.seq_relationship.weight" in imported.initialised
    assert set(imported.task_heads) == {"classifier.weight", "classifier.bias"}
    ref = torch.load(FIXTURES / "zen2_ref" / "outputs.pt", weights_only=True)
    with torch.no_grad():
        out = imported.model.bert.eval()(**fixture_inputs("zen2_ref"))
    torch.testing.assert_close(out.sequence_output, ref["sequence_output"], atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda s: {k: v for k, v in s.items() if k != "bert.encoder.layer.1.output.dense.bias"},
         "missing tensor 'bert.encoder.layer.1.output.dense.bias' (expected shape [64])"),
        (lambda s: {**s, "bert.encoder.extra.weight": torch.zeros(2)},
         "unexpected tensor 'bert.encoder.extra.weight' [2]"),
        (lambda s: {**s, "bert.encoder.layer.0.intermediate.dense.weight": torch.zeros(100, 64)},
         "tensor 'bert.encoder.layer.0.intermediate.dense.weight' has shape [100,64], expected [128,64]"),
        (lambda s: {**s, "cls.predictions.decoder.weight": torch.zeros(200, 64)},
         "'cls.predictions.decoder.weight' differs from 'bert.embeddings.word_embeddings.weight'"),
        (lambda s: {k: v for k, v in s.items() if k != "bert.word_embeddings.word_embeddings.weight"},
         "missing tensor 'bert.word_embeddings.word_embeddings.weight' (expected shape [100,64])"),
    ],
)
def test_strict_state_dict_errors(tmp_path: Path, edit, message: str) -> None:
    d = copy_fixture("zen2_ref", tmp_path, edit)
    with pytest.raises(ZenError) as e:
        import_released(d)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert str(d / "pytorch_model.bin") in str(e.value)


def test_vocab_and_ngram_files_must_fit_the_tables(tmp_path: Path) -> None:
    d = copy_fixture("zen1_ref", tmp_path)
    lines = (d / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (d / "vocab.txt").write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    with pytest.raises(ZenError, match=r"vocab.txt: 199 lines, but the model's char embedding has 200 rows"):
        import_released(d)
    shutil.copyfile(FIXTURES / "zen1_ref" / "vocab.txt", d / "vocab.txt")
    with open(d / "ngram.txt", "a", encoding="utf-8") as f:
        f.write("多余,5\n")
    with pytest.raises(ZenError, match=r"ngram.txt: 100 n-grams, but the model's n-gram embedding has 100 rows"):
        import_released(d)


def test_unreadable_weights_and_config(tmp_path: Path) -> None:
    d = copy_fixture("zen1_ref", tmp_path)
    data = (d / "pytorch_model.bin").read_bytes()
    (d / "pytorch_model.bin").write_bytes(data[: len(data) // 3])
    with pytest.raises(ZenError, match="cannot read weights"):
        import_released(d)
    (tmp_path / "second").mkdir()
    d2 = copy_fixture("zen2_ref", tmp_path / "second")
    cfg = json.loads((d2 / "config.json").read_text())
    cfg["num_attention_heads"] = "4"
    cfg["some_google_key"] = 1  # unknown keys are fine ...
    (d2 / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ZenError, match=r"config.json: key 'num_attention_heads' must be int, got '4'"):
        import_released(d2)  # ... a wrong type is not


def test_finetune_quirks_option_is_carried_to_the_config() -> None:
    imported = import_released(FIXTURES / "zen2_ref", released_ft_quirks=True, ngram_weighting="int_cast")
    assert imported.model.config.released_ft_quirks and imported.model.config.ngram_weighting == "int_cast"


# -- BERT checkpoints --------------------------------------------------------------------------
BERT_CONFIG = dict(
    architectures=["BertForMaskedLM"], model_type="bert", vocab_size=30, hidden_size=32, num_hidden_layers=2,
    num_attention_heads=4, intermediate_size=48, hidden_act="gelu", hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1, max_position_embeddings=24, type_vocab_size=2, initializer_range=0.02,
    layer_norm_eps=1e-12, pad_token_id=0, position_embedding_type="absolute", directionality="bidi",
)


def make_bert(tmp_path: Path, fmt: str) -> tuple[Path, ZenForPreTraining]:
    """A small BERT written the way HF (bin / safetensors) or a Google conversion (gamma/beta) writes it."""
    torch.manual_seed(7)
    cfg = {k: v for k, v in BERT_CONFIG.items() if k in ZenConfig.__dataclass_fields__}
    bert = ZenForPreTraining(ZenConfig(**cfg, encoder="bert"))
    with torch.no_grad():
        for p in bert.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    state = {k: v.clone() for k, v in released_state(bert.state_dict()).items()}  # a BERT file's names
    state["bert.embeddings.position_ids"] = torch.arange(24)[None]
    state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"].clone()
    d = tmp_path / f"bert-{fmt}"
    d.mkdir()
    (d / "vocab.txt").write_text("".join(f"t{i}\n" for i in range(30)), encoding="utf-8")
    if fmt == "safetensors":
        from safetensors.torch import save_file

        del state["cls.predictions.decoder.weight"]  # HF stores a tied tensor once
        save_file(state, str(d / "model.safetensors"))
        (d / "config.json").write_text(json.dumps(BERT_CONFIG))
    elif fmt == "google":
        state = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
                 for k, v in state.items() if not k.startswith("cls.seq_relationship")}
        torch.save(state, d / "pytorch_model.bin")
        (d / "bert_config.json").write_text(json.dumps(BERT_CONFIG))
    else:
        torch.save(state, d / "pytorch_model.bin")
        (d / "config.json").write_text(json.dumps(BERT_CONFIG))
    return d, bert.eval()


def ngram_file(tmp_path: Path, n: int = 12) -> Path:
    p = tmp_path / "ngram.txt"
    p.write_text("".join(f"t{i} t{i + 1},{100 - i}\n" for i in range(n)), encoding="utf-8")
    return p


@pytest.mark.parametrize("fmt", ["bin", "safetensors", "google"])
def test_bert_into_zen1_keeps_bert_math(tmp_path: Path, fmt: str) -> None:
    d, bert = make_bert(tmp_path, fmt)
    imported = import_bert(d, encoder="zen1", ngram=ngram_file(tmp_path), num_hidden_word_layers=1)
    model = imported.model.eval()
    assert model.config.word_size == 13 and model.config.encoder == "zen1"
    assert "bert.word_embeddings.word_embeddings.weight" in imported.initialised
    assert ("cls.seq_relationship.weight" in imported.initialised) == (fmt == "google")
    ids = torch.randint(1, 30, (2, 9))
    with torch.no_grad():
        want = bert(ids)
        got = model(ids)  # no n-grams: the char tower alone must be the BERT it came from
    torch.testing.assert_close(got.encoder.sequence_output, want.encoder.sequence_output, atol=1e-6, rtol=0)
    torch.testing.assert_close(got.mlm_logits, want.mlm_logits, atol=1e-5, rtol=0)
    if fmt != "google":
        torch.testing.assert_close(got.nsp_logits, want.nsp_logits, atol=1e-6, rtol=0)


def test_bert_into_zen2_drops_absolute_positions(tmp_path: Path) -> None:
    d, bert = make_bert(tmp_path, "bin")
    torch.manual_seed(0)
    imported = import_bert(d, encoder="zen2", word_size=13, num_hidden_word_layers=2)
    model = imported.model
    assert "bert.embeddings.position_embeddings.weight" in imported.dropped
    assert "bert.encoder.layer.0.attention.self.r_r_bias" in imported.initialised
    src, dst = bert.state_dict(), model.state_dict()
    for k in ("bert.encoder.layer.1.attention.self.query.weight", "bert.embeddings.char_embeddings.weight",
              "cls.predictions.transform.dense.weight", "bert.pooler.dense.bias"):
        assert torch.equal(src[k], dst[k]), k
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.char_embeddings.weight


def test_bert_import_errors(tmp_path: Path) -> None:
    d, _ = make_bert(tmp_path, "bin")
    with pytest.raises(ZenError, match="needs the n-gram lexicon"):
        import_bert(d, encoder="zen2")
    with pytest.raises(ZenError, match="so word_size must be 13, got 20"):
        import_bert(d, encoder="zen2", ngram=ngram_file(tmp_path), word_size=20)
    state = torch.load(d / "pytorch_model.bin", weights_only=True)
    del state["cls.predictions.transform.dense.bias"]
    torch.save(state, d / "pytorch_model.bin")
    with pytest.raises(ZenError, match="missing tensor 'cls.predictions.transform.dense.bias'"):
        import_bert(d, encoder="zen1", word_size=13, num_hidden_word_layers=1)
    with pytest.raises(ZenError, match="this is a ZEN checkpoint, not BERT"):
        import_bert(FIXTURES / "zen1_ref", encoder="zen1", word_size=100, num_hidden_word_layers=1)
    with pytest.raises(ZenError, match="not a ZEN checkpoint"):
        import_released(d)


def test_plain_bert_export_import_round_trip(tmp_path: Path) -> None:
    d, bert = make_bert(tmp_path, "bin")
    imported = import_bert(d, encoder="bert")
    out = export_released(imported.model, tmp_path / "exported", vocab=imported.vocab_path)
    assert "word_size" not in json.loads((out / "config.json").read_text())
    again = import_bert(out, encoder="bert")
    ids = torch.randint(1, 30, (2, 7))
    with torch.no_grad():
        want, got = bert(ids), again.model.eval()(ids)
    torch.testing.assert_close(got.mlm_logits, want.mlm_logits, atol=0, rtol=0)
    torch.testing.assert_close(got.nsp_logits, want.nsp_logits, atol=0, rtol=0)
