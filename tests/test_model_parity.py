"""Released-checkpoint parity: zen's importer + encoder reproduce the released code's outputs (1e-5)."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import FIXTURES
from zencli.model.ngram_fusion import ngram_position_matrix
from zencli.model.released import import_released

ATOL = 1e-5



def load(name: str, **kw):
    d = FIXTURES / name
    imported = import_released(d, **kw)
    inputs = torch.load(d / "inputs.pt", weights_only=True)
    outputs = torch.load(d / "outputs.pt", weights_only=True)
    return imported, inputs, outputs


def slot_inputs(inputs: dict, path: str) -> dict:
    kw = dict(
        token_type_ids=inputs["token_type_ids"],
        attention_mask=inputs["attention_mask"],
        ngram_ids=inputs["input_ngram_ids"],
        ngram_token_type_ids=inputs["ngram_token_type_ids"],
        ngram_attention_mask=inputs["ngram_attention_mask"],
    )
    if path == "dense":
        kw["ngram_position_matrix"] = inputs["ngram_position_matrix"]
    else:
        kw.update(
            ngram_starts=inputs["ngram_starts"],
            ngram_lengths=inputs["ngram_lengths"],
            ngram_freqs=inputs["ngram_freqs"],
        )
    return kw


@pytest.mark.parametrize("name,encoder", [("zen2_ref", "zen2"), ("zen1_ref", "zen1")])
@pytest.mark.parametrize("path", ["dense", "compact"])
def test_released_outputs(name: str, encoder: str, path: str) -> None:
    imported, inputs, ref = load(name)
    model = imported.model.eval()
    assert model.config.encoder == encoder
    assert imported.has_pretraining_heads
    with torch.no_grad():
        out = model(inputs["input_ids"], output_all_layers=True, **slot_inputs(inputs, path))
    enc = out.encoder
    torch.testing.assert_close(enc.sequence_output, ref["sequence_output"], atol=ATOL, rtol=0)
    torch.testing.assert_close(enc.pooled_output, ref["pooled_output"], atol=ATOL, rtol=0)
    torch.testing.assert_close(torch.stack(enc.all_layers), ref["all_encoded_layers"], atol=ATOL, rtol=0)
    torch.testing.assert_close(out.mlm_logits, ref["mlm_logits"], atol=ATOL, rtol=0)
    torch.testing.assert_close(out.nsp_logits, ref["nsp_logits"], atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["zen2_ref", "zen1_ref"])
def test_compact_matrix_equals_released_matrix(name: str) -> None:
    imported, inputs, _ = load(name)
    P = ngram_position_matrix(
        inputs["ngram_starts"], inputs["ngram_lengths"], inputs["ngram_freqs"],
        inputs["input_ids"].shape[1], imported.model.config.ngram_weighting,
    )
    # float32 division vs the released float64 division + cast: identical here (at most 1 ulp in general).
    assert torch.equal(P, inputs["ngram_position_matrix"])


def test_zen2_finetune_quirks_reproduce_ft_mode() -> None:
    imported, inputs, ref = load("zen2_ref", released_ft_quirks=True)
    model = imported.model.bert.eval()
    with torch.no_grad():
        out = model(inputs["input_ids"], **slot_inputs(inputs, "dense"))  # types and mask given, then ignored
    torch.testing.assert_close(out.sequence_output, ref["sequence_output_ft_mode"], atol=ATOL, rtol=0)
    torch.testing.assert_close(out.pooled_output, ref["pooled_output_ft_mode"], atol=ATOL, rtol=0)
    # and the quirk matters: the normal mode differs on this input
    assert (ref["sequence_output_ft_mode"] - ref["sequence_output"]).abs().max() > 1e-3


@pytest.mark.parametrize("name", ["zen2_ref", "zen1_ref"])
def test_ft_mode_inputs_without_ngram_types_and_mask(name: str) -> None:
    imported, inputs, ref = load(name)
    kw = slot_inputs(inputs, "compact")
    del kw["ngram_token_type_ids"], kw["ngram_attention_mask"]
    with torch.no_grad():
        out = imported.model.bert.eval()(inputs["input_ids"], **kw)
    torch.testing.assert_close(out.sequence_output, ref["sequence_output_ft_mode"], atol=ATOL, rtol=0)
    torch.testing.assert_close(out.pooled_output, ref["pooled_output_ft_mode"], atol=ATOL, rtol=0)


def test_zen1_finetune_quirks_drop_char_mask_and_types_too() -> None:
    # Released ZEN 1.0 fine-tuning calls the model with input_ids, n-gram ids and P only.
    quirky, inputs, _ = load("zen1_ref", released_ft_quirks=True)
    plain, _, _ = load("zen1_ref")
    with torch.no_grad():
        got = quirky.model.bert.eval()(inputs["input_ids"], **slot_inputs(inputs, "dense"))
        want = plain.model.bert.eval()(
            inputs["input_ids"], ngram_ids=inputs["input_ngram_ids"],
            ngram_position_matrix=inputs["ngram_position_matrix"],
        )
    torch.testing.assert_close(got.sequence_output, want.sequence_output, atol=0, rtol=0)
