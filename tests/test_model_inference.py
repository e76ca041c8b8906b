"""Holding an encoder's Linear weights in bf16 for inference changes no output bit under autocast."""

from __future__ import annotations

import copy

import pytest
import torch

from zencli.model.config import ZenConfig
from zencli.model.encoder import ZenModel
from zencli.model.inference import hold_linear_weights_in


@pytest.mark.parametrize("encoder", ["zen2", "zen1", "bert"])
def test_bf16_linear_weights_give_autocast_outputs_bit_for_bit(encoder: str) -> None:
    torch.manual_seed(0)
    cfg = ZenConfig(vocab_size=50, word_size=30, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                    intermediate_size=64, num_hidden_word_layers=2, encoder=encoder)
    model = ZenModel(cfg).eval()
    for p in model.parameters():  # non-zero u, v and biases, so every term of the layers is exercised
        torch.nn.init.normal_(p, std=0.2)
    prepared = hold_linear_weights_in(copy.deepcopy(model), torch.bfloat16)
    assert prepared.encoder.layer[0].intermediate.dense.weight.dtype == torch.bfloat16
    assert prepared.embeddings.LayerNorm.weight.dtype == torch.float32
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 50, (3, 12), generator=g)
    mask = torch.ones(3, 12, dtype=torch.long)
    mask[1, 9:] = 0
    kw = dict(attention_mask=mask, ngram_ids=torch.randint(1, 30, (3, 5), generator=g),
              ngram_starts=torch.tensor([[1, 2, 4, 6, 0]] * 3), ngram_lengths=torch.tensor([[2, 3, 2, 2, 0]] * 3),
              ngram_freqs=torch.tensor([[5, 9, 2, 4, 0]] * 3),
              ngram_attention_mask=torch.tensor([[1, 1, 1, 1, 0]] * 3))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        want, got = model(ids, **kw), prepared(ids, **kw)
    assert torch.equal(want.sequence_output, got.sequence_output)
    assert torch.equal(want.pooled_output, got.pooled_output)
