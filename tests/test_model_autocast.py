"""Under bf16 autocast no ZEN op builds a float32/float64 tensor as large as the attention scores.

The residual stream and LayerNorm stay float32 by autocast's own policy ([B,L,H]); what must not happen is
an explicit up-cast or a float32 temporary of score size ([B,A,L,L]), which would double the memory traffic
of the largest tensors of a step (the GPU issue's audit, run here on CPU).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from zencli.bench.encoder_batches import encoder_inputs, make_batches, synthetic_chars
from zencli.bench.model import model_config, parse_size
from zencli.model.pretraining import ZenForPreTraining

B, L, SLOTS, VOCAB, ROWS = 4, 128, 32, 500, 1000


class LargeFloatTensors(TorchDispatchMode):
    """Records every op output in float32/float64 with at least `limit` elements."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit
        self.seen: list[tuple[str, torch.dtype, tuple[int, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for o in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(o, torch.Tensor) and o.dtype in (torch.float32, torch.float64) and o.numel() >= self.limit:
                self.seen.append((str(func), o.dtype, tuple(o.shape)))
        return out


@pytest.mark.parametrize("encoder", ["zen2", "zen1", "bert"])
@pytest.mark.parametrize("training", [True, False])
def test_no_float32_tensor_of_attention_score_size_under_bf16(encoder: str, training: bool) -> None:
    size = parse_size("2x128x1")  # 2 heads of 64
    batch = make_batches(1, batch=B, seq_len=L, slots=SLOTS, ngram_rows=ROWS, vocab_size=VOCAB,
                         chars=synthetic_chars(B * L * 4, VOCAB, np.random.default_rng(0)), matcher=None,
                         ngram_rate=0.4, seed=0)[0]
    torch.manual_seed(0)
    model = ZenForPreTraining(model_config(size, encoder, vocab_size=VOCAB, ngram_rows=ROWS)).train(training)
    scores = B * size.heads * L * L  # larger than any [B,L,H] (H = 128 < heads·L) or [B,L,M] tensor
    audit = LargeFloatTensors(scores)
    with audit, torch.set_grad_enabled(training):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(batch["input_ids"], mlm_labels=batch["mlm_labels"], nsp_labels=batch["nsp_labels"],
                        **encoder_inputs(batch, model.config.has_ngrams))
        if training:
            out.loss.backward()
    big = [row for row in audit.seen if "embedding" not in row[0] and row[2] not in ((ROWS, 128), (VOCAB, 128))]
    assert big == [], big  # (parameter-sized float32 tensors — weights, their grads — are not activations)
