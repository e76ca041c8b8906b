"""ZenModel behaviour beyond the released fixtures: baselines, skipped work that must not change
results, selected MLM positions, bf16 autocast."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from zencli.model.config import ZenConfig
from zencli.model.encoder import ZenModel
from zencli.model.pretraining import IGNORE_INDEX, ZenForPreTraining
from zencli.train.threads import torch_threads


def tiny(encoder: str, **kw) -> ZenConfig:
    base = dict(vocab_size=40, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=48,
                max_position_embeddings=32, word_size=25, num_hidden_word_layers=2, encoder=encoder)
    return ZenConfig(**{**base, **kw})


def batch(B: int = 2, L: int = 10, M: int = 6, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, 40, (B, L), generator=g)
    attention_mask = torch.ones(B, L, dtype=torch.long)
    attention_mask[1, L - 3:] = 0
    starts = torch.randint(1, L - 4, (B, M), generator=g)
    lengths = torch.randint(2, 4, (B, M), generator=g)
    ngram_mask = torch.ones(B, M, dtype=torch.long)
    ngram_mask[0, M - 2:] = 0  # row 0: two padding slots; row 1: all used
    lengths = lengths * ngram_mask
    starts = starts * ngram_mask
    return dict(
        input_ids=input_ids,
        token_type_ids=torch.zeros(B, L, dtype=torch.long),
        attention_mask=attention_mask,
        ngram_ids=torch.randint(1, 25, (B, M), generator=g) * ngram_mask,
        ngram_token_type_ids=torch.zeros(B, M, dtype=torch.long),
        ngram_attention_mask=ngram_mask,
        ngram_starts=starts,
        ngram_lengths=lengths,
        ngram_freqs=torch.randint(1, 1000, (B, M), generator=g) * ngram_mask,
    )


def test_zen1_without_ngrams_is_plain_bert() -> None:
    torch.manual_seed(0)
    zen1 = ZenModel(tiny("zen1")).eval()
    bert = ZenModel(tiny("bert")).eval()
    missing, unexpected = bert.load_state_dict(zen1.state_dict(), strict=False)
    assert not missing and all(k.startswith(("ngram_embeddings.", "encoder.ngram_layers.")) for k in unexpected)
    b = batch()
    no_ngrams = {k: v for k, v in b.items() if not k.startswith("ngram")}
    with torch.no_grad():
        want = bert(**no_ngrams)
        got_none = zen1(**no_ngrams)
        empty = dict(b, ngram_lengths=torch.zeros_like(b["ngram_lengths"]))
        got_empty = zen1(**empty)
        got_ngrams = zen1(**b)
    torch.testing.assert_close(got_none.sequence_output, want.sequence_output, atol=0, rtol=0)
    torch.testing.assert_close(got_empty.sequence_output, want.sequence_output, atol=0, rtol=0)
    assert (got_ngrams.sequence_output - want.sequence_output).abs().max() > 1e-3  # n-grams do matter


def test_bert_has_no_ngram_parameters_and_ignores_ngram_inputs() -> None:
    model = ZenModel(tiny("bert"))
    names = [n for n, _ in model.named_parameters()]
    assert not any("ngram" in n for n in names)
    assert "embeddings.position_embeddings.weight" in names
    assert "embeddings.position_embeddings.weight" not in [n for n, _ in ZenModel(tiny("zen2")).named_parameters()]


@pytest.mark.parametrize("encoder", ["zen2", "zen1"])
def test_trimming_padding_slots_is_exact(encoder: str) -> None:
    torch.manual_seed(1)
    model = ZenModel(tiny(encoder)).eval()
    b = batch()
    # Pad every row with 5 more empty slots: the model trims them; results must not move.
    pad = lambda t: torch.cat([t, torch.zeros(t.shape[0], 5, dtype=t.dtype)], 1)  # noqa: E731
    padded = {k: (pad(v) if k.startswith("ngram") else v) for k, v in b.items()}
    seen = []
    model.encoder.ngram_layers[0].register_forward_pre_hook(
        lambda m, args: seen.append((args[0].shape[0], args[2].batch, args[2].length)))
    with torch.no_grad():
        a = model(**b, output_all_layers=True)
        c = model(**padded, output_all_layers=True)
    real = int(b["ngram_attention_mask"].sum())
    # the n-gram tower ran on the real slots only, packed, laid out over the 6 used slots (not 11) for attention
    assert seen == [(real, 2, 6), (real, 2, 6)] and real < 2 * 6
    for x, y in zip(a.all_layers, c.all_layers):
        torch.testing.assert_close(x, y, atol=1e-6, rtol=0)


def test_ngram_layers_run_out_and_last_g_is_reused() -> None:
    # With 3 char layers and 2 n-gram layers, layer 3 must add the *second* n-gram layer's output again.
    torch.manual_seed(2)
    model = ZenModel(tiny("zen2", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).eval()
    b = batch()
    with torch.no_grad():
        out = model(**b, output_all_layers=True)
        from zencli.model.encoder import additive_mask
        from zencli.model.ngram_fusion import ngram_position_matrix

        P = ngram_position_matrix(b["ngram_starts"], b["ngram_lengths"], b["ngram_freqs"], 10)
        g = model.ngram_embeddings(b["ngram_ids"], b["ngram_token_type_ids"])
        gm = additive_mask(b["ngram_attention_mask"], g.dtype)
        for layer in model.encoder.ngram_layers:
            g = layer(g, gm)
        h = model.encoder.layer[2](out.all_layers[1], additive_mask(b["attention_mask"], g.dtype))
    torch.testing.assert_close(out.all_layers[2], h + P @ g, atol=1e-5, rtol=0)


def test_mlm_logits_at_selected_positions_equal_full_logits() -> None:
    torch.manual_seed(3)
    model = ZenForPreTraining(tiny("zen2")).eval()
    b = batch()
    labels = torch.full_like(b["input_ids"], IGNORE_INDEX)
    labels[0, 2], labels[1, 5], labels[1, 1] = 7, 9, 11
    with torch.no_grad():
        full = model(**b)
        sel = model(**b, mlm_labels=labels, nsp_labels=torch.tensor([0, 1]))
    positions = labels != IGNORE_INDEX
    assert sel.mlm_logits.shape == (3, 40)
    torch.testing.assert_close(sel.mlm_logits, full.mlm_logits[positions], atol=1e-6, rtol=0)
    want = torch.nn.functional.cross_entropy(full.mlm_logits.view(-1, 40), labels.view(-1), ignore_index=IGNORE_INDEX)
    torch.testing.assert_close(sel.mlm_loss, want, atol=1e-6, rtol=0)
    assert sel.loss is not None and torch.isclose(sel.loss, sel.mlm_loss + sel.nsp_loss)


def test_mlm_decoder_is_tied_to_char_embedding() -> None:
    model = ZenForPreTraining(tiny("zen2"))
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.char_embeddings.weight


def test_seeded_init_is_deterministic_and_dropout_only_in_train_mode() -> None:
    torch.manual_seed(5)
    a = ZenModel(tiny("zen2"))
    torch.manual_seed(5)
    b = ZenModel(tiny("zen2"))
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q), n
    x = batch()
    a.eval()
    with torch.no_grad():
        assert torch.equal(a(**x).sequence_output, a(**x).sequence_output)
        a.train()
        assert not torch.equal(a(**x).sequence_output, a(**x).sequence_output)


@pytest.mark.parametrize("encoder", ["zen2", "zen1", "bert"])
def test_bf16_autocast_training_step(encoder: str) -> None:
    torch.manual_seed(4)
    model = ZenForPreTraining(tiny(encoder)).train()
    b = batch()
    labels = torch.full_like(b["input_ids"], IGNORE_INDEX)
    labels[:, 3] = 8
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(**b, mlm_labels=labels, nsp_labels=torch.tensor([1, 0]))
    out.loss.backward()
    assert torch.isfinite(out.loss)
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    if encoder != "bert":
        assert model.bert.ngram_embeddings.table.weight.grad.abs().sum() > 0


def test_too_long_sequence_for_absolute_positions_is_a_zen_error() -> None:
    from zencli.errors import ZenError

    model = ZenModel(tiny("zen1"))
    with pytest.raises(ZenError, match="max_position_embeddings"):
        model(torch.ones(1, 40, dtype=torch.long))


def test_sparse_ngram_gradients_touch_only_the_batch_rows() -> None:
    torch.manual_seed(6)
    model = ZenForPreTraining(tiny("zen2"))
    table = model.bert.sparse_ngram_gradients()
    b = batch()
    model(**b, nsp_labels=torch.tensor([0, 1])).loss.backward()
    assert table.grad.is_sparse
    rows = set(table.grad.coalesce().indices()[0].tolist())
    assert rows == set(b["ngram_ids"][b["ngram_attention_mask"].bool()].tolist())
    assert ZenModel(tiny("bert")).sparse_ngram_gradients() is None


class HostSyncs(TorchDispatchMode):
    """Counts the ops that make the host wait for a GPU: reading a value (`bool`, `int`, `.item()`) and
    ops whose output size depends on values."""

    SYNCING = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.is_nonzero.default,
               torch.ops.aten.nonzero.default, torch.ops.aten.masked_select.default}

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in self.SYNCING:
            self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("encoder", ["zen2", "zen1"])
def test_encoder_forward_off_the_cpu_path_reads_no_value_on_the_host(encoder: str, monkeypatch) -> None:
    # What a GPU forward does (where `_host_reads_are_free` is False), run on the CPU: no host sync, and the
    # same outputs bit for bit as the CPU path with its checks, on inputs padded as collate pads them.
    # One thread: the CPU path runs the n-gram tower's linears on the real slots only (packed); with several
    # threads a product over fewer rows may split its sums differently (float rounding, ~1e-7).
    with torch_threads(1):
        torch.manual_seed(2)
        model = ZenModel(tiny(encoder)).eval()
        b = batch()
        assert b["ngram_attention_mask"][:, -1].any()  # slots padded to the longest row: nothing to trim
        # collate's batch without n-grams
        no_slots = {k: (v[:, :0] if k.startswith("ngram") else v) for k, v in b.items()}
        with torch.no_grad(), HostSyncs() as cpu_path:
            want = [model(**x, output_all_layers=True).all_layers for x in (b, no_slots)]
        assert len(cpu_path.seen) >= 2  # the CPU path checks P and trims (cheap there): the counter sees them
        monkeypatch.setattr(ZenModel, "_host_reads_are_free", staticmethod(lambda t: False))
        with torch.no_grad(), HostSyncs() as fast_path:
            got = [model(**x, output_all_layers=True).all_layers for x in (b, no_slots)]
        assert fast_path.seen == []
        for w, g in zip(want, got):
            assert all(torch.equal(x, y) for x, y in zip(w, g))
        # training too: forward and backward of the encoder
        model.train()
        with HostSyncs() as train_path:
            model(**b).sequence_output.sum().backward()
        assert train_path.seen == []
