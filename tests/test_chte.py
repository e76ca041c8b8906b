"""CHTE: config checks, CNN-head windows and lengths, padding independence, ablation switches, the gate,
and that a tiny CHTE + CRF learns a toy tagging task."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from zencli.config import from_dict
from zencli.errors import ZenError
from zencli.model.chte import (
    ChteConfig,
    ChteEncoder,
    ChteTagger,
    GatedResidual,
    WindowConvValues,
    sinusoid_positions,
)
from zencli.model.crf import allowed_transitions

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors (conftest.py)


def tiny(**overrides) -> ChteConfig:
    base = dict(n_heads=4, n_linear_heads=2, cnn_windows=(2, 3), head_dim=4, ffn_size=24,
                char_vocab_size=20, bigram_vocab_size=50, char_dim=6, bigram_dim=5,
                embed_dropout=0.0, fc_dropout=0.0)
    base.update(overrides)
    return ChteConfig(**base)


def char_inputs(batch: int, length: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"char_ids": torch.randint(1, 20, (batch, length), generator=g),
            "bigram_next_ids": torch.randint(1, 50, (batch, length), generator=g),
            "bigram_prev_ids": torch.randint(1, 50, (batch, length), generator=g)}


# --- config -------------------------------------------------------------------------------------------------

def test_paper_settings():
    weibo = ChteConfig.paper("weibo", char_vocab_size=100, bigram_vocab_size=100)
    assert (weibo.d_model, weibo.ffn_size, weibo.n_cnn_heads) == (128, 384, 6)
    assert weibo.cnn_windows == (2, 3, 4, 5, 6, 7) and weibo.input_size == 150
    assert (weibo.embed_dropout, weibo.fc_dropout) == (0.3, 0.2)
    resume = ChteConfig.paper("resume", char_vocab_size=100, bigram_vocab_size=100)
    assert (resume.d_model, resume.ffn_size) == (144, 432)
    bert = ChteConfig.paper("bert")
    assert (bert.d_model, bert.ffn_size, bert.input_mode) == (768, 2048, "features")
    for cfg in (weibo, resume, bert):
        cfg.validate()
    assert ChteEncoder(bert).embeddings.projection is None  # 768 in, 768 model: nothing to project
    assert ChteEncoder(weibo).embeddings.projection.in_features == 150


@pytest.mark.parametrize("overrides,key", [
    ({"n_linear_heads": 1}, "cnn_windows"),
    ({"n_linear_heads": 5}, "n_linear_heads"),
    ({"cnn_windows": (0, 3)}, "cnn_windows"),
    ({"fc_dropout": 1.0}, "fc_dropout"),
    ({"feature_size": 32}, "feature_size"),
    ({"char_vocab_size": None, "bigram_vocab_size": None}, "feature_size"),
    ({"bigram_vocab_size": None}, "bigram_vocab_size"),
    ({"head_dim": 0}, "head_dim"),
])
def test_config_validation_names_the_key(overrides, key):
    with pytest.raises(ZenError, match=rf"^{key}:"):
        ChteEncoder(tiny(**overrides))


def test_config_loads_from_recipe_data():
    cfg = from_dict(ChteConfig, {"feature_size": 32, "n_heads": 4, "n_linear_heads": 1, "cnn_windows": [2, 4, 6]},
                    source="r.yaml", prefix="model.")
    assert cfg.cnn_windows == (2, 4, 6)
    with pytest.raises(ZenError, match=r"r\.yaml: model\.cnn_windows:"):
        from_dict(ChteConfig, {"feature_size": 32, "cnn_windows": [2]}, source="r.yaml", prefix="model.")


# --- building blocks ----------------------------------------------------------------------------------------

def test_sinusoid_positions():
    pe = sinusoid_positions(50, 8)
    assert pe.shape == (50, 8)
    assert torch.allclose(pe[0, 0::2], torch.zeros(4)) and torch.allclose(pe[0, 1::2], torch.ones(4))
    assert torch.allclose(pe[7, 2], torch.sin(torch.tensor(7 / 10000 ** (2 / 8))))
    assert sinusoid_positions(3, 5).shape == (3, 5)


@pytest.mark.parametrize("pool", [1, 2, 3])
@pytest.mark.parametrize("length", [1, 2, 6])
def test_every_window_keeps_the_length(pool, length):
    windows = (1, 2, 3, 4, 5, 6, 7)
    conv = WindowConvValues(d_model=5, head_dim=3, windows=windows, pool_size=pool)
    out = conv(torch.randn(2, length, 5), torch.ones(2, length, dtype=torch.bool))
    assert out.shape == (2, length, 3 * len(windows))


def reference_head(conv: WindowConvValues, x: torch.Tensor, h: int, w: int, dh: int) -> torch.Tensor:
    """One head computed on its own: nn.Conv1d with window w, 'same'-style padding, max-pool stride 1."""
    pool = conv.pool_size
    total = w + pool - 2
    first = conv.pad_left - total // 2
    single = nn.Conv1d(x.shape[2], dh, w)
    with torch.no_grad():
        single.weight.copy_(conv.weight[h * dh:(h + 1) * dh, :, first:first + w])
        single.bias.copy_(conv.bias[h * dh:(h + 1) * dh])
    y = single(nn.functional.pad(x.transpose(1, 2), (total // 2, total - total // 2)))
    return nn.functional.max_pool1d(y, pool, stride=1).transpose(1, 2) if pool > 1 else y.transpose(1, 2)


@pytest.mark.parametrize("pool", [1, 2, 3])
def test_grouped_convolution_equals_separate_convolutions(pool):
    torch.manual_seed(0)
    windows, dh = (2, 3, 4, 5, 6, 7), 3
    conv = WindowConvValues(d_model=5, head_dim=dh, windows=windows, pool_size=pool)
    x = torch.randn(2, 9, 5)
    out = conv(x, torch.ones(2, 9, dtype=torch.bool))
    for h, w in enumerate(windows):
        assert torch.allclose(out[..., h * dh:(h + 1) * dh], reference_head(conv, x, h, w, dh), atol=1e-6)


def test_receptive_fields_of_the_paper_windows():
    """With pool 2 the output at j sees w + 1 characters: even windows centred, odd ones one more to the right."""
    windows, dh = (2, 3, 4, 5, 6, 7), 2
    conv = WindowConvValues(d_model=3, head_dim=dh, windows=windows, pool_size=2)
    expected = {2: (-1, 1), 3: (-1, 2), 4: (-2, 2), 5: (-2, 3), 6: (-3, 3), 7: (-3, 4)}
    L, j = 15, 7
    torch.manual_seed(0)
    x = torch.randn(1, L, 3)
    full = torch.ones(1, L, dtype=torch.bool)
    base = conv(x, full)[0, j]
    for h, w in enumerate(windows):
        seen = []
        for p in range(L):  # max-pooling passes gradient to one element only, so probe by perturbation
            for _ in range(4):
                bumped = x.clone()
                bumped[0, p] += 10 * torch.randn(3)
                if not torch.allclose(conv(bumped, full)[0, j, h * dh:(h + 1) * dh], base[h * dh:(h + 1) * dh]):
                    seen.append(p)
                    break
        lo, hi = expected[w]
        assert seen == list(range(j + lo, j + hi + 1)), w


def test_gate_mixes_input_and_sublayer_output():
    gate = GatedResidual(4)
    x, y = torch.randn(3, 5, 4), torch.randn(3, 5, 4)
    with torch.no_grad():
        gate.gate.weight.zero_()
        gate.gate.bias.fill_(50.0)
        assert torch.allclose(gate(x, y), y)  # g = 1 → sub-layer output
        gate.gate.bias.fill_(-50.0)
        assert torch.allclose(gate(x, y), x)  # g = 0 → input
        gate.gate.bias.zero_()
        assert torch.allclose(gate(x, y), (x + y) / 2)
    # The gate reads both x and y: changing only y changes g.
    gate = GatedResidual(4)
    g = lambda a, b: torch.sigmoid(gate.gate(torch.cat([a, b], -1)))  # noqa: E731
    assert not torch.allclose(g(x, y), g(x, y + 1))


# --- the encoder --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("concat", [True, False])
def test_output_shapes(concat):
    cfg = tiny(concat_embeddings=concat)
    enc = ChteEncoder(cfg)
    mask = torch.ones(3, 7, dtype=torch.bool)
    out = enc(mask, **char_inputs(3, 7), return_attentions=True)
    assert out.hidden.shape == (3, 7, enc.output_size)
    assert enc.output_size == (32 if concat else 16)
    assert len(out.attentions) == 1 and out.attentions[0].shape == (3, 4, 7, 7)
    feats = ChteEncoder(tiny(char_vocab_size=None, bigram_vocab_size=None, feature_size=10, concat_embeddings=concat))
    assert feats(mask, features=torch.randn(3, 7, 10)).hidden.shape == (3, 7, feats.output_size)


def test_concatenated_part_is_the_embedding_output():
    enc = ChteEncoder(tiny()).eval()
    inputs = char_inputs(2, 6)
    mask = torch.ones(2, 6, dtype=torch.bool)
    out = enc(mask, **inputs).hidden
    assert torch.allclose(out[..., 16:], enc.embeddings(**inputs))


@pytest.mark.parametrize("mode", ["chars", "features"])
def test_padding_does_not_affect_real_positions(mode):
    torch.manual_seed(0)
    if mode == "chars":
        cfg = tiny(n_layers=2, cnn_windows=(4, 7), pool_size=2)
        inputs = char_inputs(3, 9)
    else:
        cfg = tiny(n_layers=2, cnn_windows=(4, 7), char_vocab_size=None, bigram_vocab_size=None, feature_size=12)
        inputs = {"features": torch.randn(3, 9, 12)}
    enc = ChteEncoder(cfg).eval()
    lengths = [9, 5, 2]
    mask = torch.arange(9)[None] < torch.tensor(lengths)[:, None]
    out = enc(mask, return_attentions=True, **inputs)
    changed = {k: v.clone() for k, v in inputs.items()}
    for v in changed.values():
        v[~mask] = 7 if v.dtype == torch.long else 100.0
    out2 = enc(mask, **changed).hidden
    assert torch.allclose(out.hidden[mask], out2[mask], atol=1e-5)
    assert torch.all(out.hidden[~mask] == 0)
    for b, n in enumerate(lengths):  # and the same as each sentence alone, without padding
        alone = enc(torch.ones(1, n, dtype=torch.bool), **{k: v[b:b + 1, :n] for k, v in inputs.items()}).hidden
        assert torch.allclose(alone[0], out.hidden[b, :n], atol=1e-5)
    weights = out.attentions[0]  # [B, h, L, L]
    assert torch.allclose(weights.sum(-1), torch.ones(3, 4, 9))
    assert torch.all(weights[1, :, :, 5:] == 0)  # no attention to padding keys


def test_fused_and_explicit_attention_agree_and_empty_rows_stay_finite():
    torch.manual_seed(0)
    att = ChteEncoder(tiny()).layers[0].attention.eval()
    x = torch.randn(3, 6, 16)
    mask = torch.tensor([[1] * 6, [1, 1, 1, 0, 0, 0], [0] * 6], dtype=torch.bool)
    fused, none = att(x, mask)
    explicit, weights = att(x, mask, return_weights=True)
    assert none is None and weights.shape == (3, 4, 6, 6)
    assert torch.allclose(fused, explicit, atol=1e-5)
    enc = ChteEncoder(tiny())
    out = enc(mask, **char_inputs(3, 6)).hidden
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.all(out[2] == 0)
    assert all(torch.isfinite(p.grad).all() for p in enc.parameters() if p.grad is not None)


def names(module: nn.Module) -> set[str]:
    return {n for n, _ in module.named_parameters()}


def count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_ablation_switches_change_the_architecture():
    d = 16
    full = ChteTagger(tiny(), num_labels=3)
    assert {"encoder.layers.0.attn_gate.gate.weight", "encoder.layers.0.ffn_gate.gate.weight",
            "encoder.layers.0.attention.value.weight", "encoder.layers.0.attention.value_conv.weight"} <= names(full)

    add = ChteTagger(tiny(gated_residual=False), num_labels=3)
    assert not any("gate" in n for n in names(add))
    assert count(full) - count(add) == 2 * (2 * d * d + d)  # two gates of W [d, 2d] + b [d]

    wo_cat = ChteTagger(tiny(concat_embeddings=False), num_labels=3)
    assert wo_cat.head.classifier.in_features == d and full.head.classifier.in_features == 2 * d

    all_cnn = ChteTagger(tiny(n_linear_heads=0, cnn_windows=(2, 3, 4, 5)), num_labels=3)
    assert "encoder.layers.0.attention.value.weight" not in names(all_cnn)
    assert all_cnn.encoder.layers[0].attention.value_conv.weight.shape[0] == 4 * 4

    no_cnn = ChteTagger(tiny(n_linear_heads=4, cnn_windows=()), num_labels=3)
    assert not any("value_conv" in n for n in names(no_cnn))
    assert no_cnn.encoder.layers[0].attention.value.out_features == d
    # Without CNN heads the layer is a Transformer encoder layer: outputs depend on positions only through
    # the sinusoid, so permuting a sentence without positions permutes the outputs.
    att = no_cnn.encoder.layers[0].attention.eval()
    x, perm = torch.randn(1, 6, d), torch.randperm(6)
    mask = torch.ones(1, 6, dtype=torch.bool)
    assert torch.allclose(att(x, mask)[0][:, perm], att(x[:, perm], mask)[0], atol=1e-5)
    att = full.encoder.layers[0].attention.eval()
    assert not torch.allclose(att(x, mask)[0][:, perm], att(x[:, perm], mask)[0], atol=1e-5)


# --- learning -----------------------------------------------------------------------------------------------

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
PER, LOC = {1, 2, 3}, {4, 5, 6}  # chars 7..11 are outside any entity


def toy_batch(n: int, seed: int):
    """Runs of PER chars / LOC chars are entities (BIO); knowing a tag needs the previous character."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 11, (n,), generator=g)
    L = int(lengths.max())
    chars = torch.randint(1, 12, (n, L), generator=g)
    mask = torch.arange(L)[None] < lengths[:, None]
    chars = chars.masked_fill(~mask, 0)
    kind = lambda c: "PER" if c in PER else "LOC" if c in LOC else None  # noqa: E731
    tags = torch.full((n, L), -100)
    for b in range(n):
        prev = None
        for t in range(int(lengths[b])):
            k = kind(int(chars[b, t]))
            tags[b, t] = 0 if k is None else LABELS.index(("I-" if k == prev else "B-") + k)
            prev = k
    start, end = 12, 13  # boundary markers in the bigram vocabulary
    padded = torch.cat([torch.full((n, 1), start), chars, torch.zeros(n, 1, dtype=torch.long)], 1)
    padded[torch.arange(n), lengths + 1] = end
    bigram = lambda a, b: a * 14 + b  # noqa: E731
    nxt = bigram(padded[:, 1:-1], padded[:, 2:]).masked_fill(~mask, 0)
    prv = bigram(padded[:, :-2], padded[:, 1:-1]).masked_fill(~mask, 0)
    return {"char_ids": chars, "bigram_next_ids": nxt, "bigram_prev_ids": prv}, mask, tags


def test_tiny_chte_crf_learns_a_toy_tagging_task():
    torch.manual_seed(0)
    cfg = tiny(char_vocab_size=12, bigram_vocab_size=14 * 14, head_dim=8, ffn_size=48, embed_dropout=0.1,
               fc_dropout=0.1)
    model = ChteTagger(cfg, len(LABELS), allowed_transitions(LABELS))
    inputs, mask, tags = toy_batch(64, seed=1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    began = time.perf_counter()
    losses = []
    for _ in range(100):
        model.train()
        loss = model(mask, tags, **inputs).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert time.perf_counter() - began < 20
    assert losses[-1] < 0.05 * losses[0]
    model.eval()
    pred = model.decode(mask, **inputs)
    assert torch.equal(pred[mask], tags[mask])
    assert torch.all(pred[~mask] == -100)
    # And on sentences it has not seen (the rule is local, so it generalises).
    inputs2, mask2, tags2 = toy_batch(64, seed=2)
    acc = (model.decode(mask2, **inputs2)[mask2] == tags2[mask2]).float().mean().item()
    assert acc > 0.95


def test_tagger_on_encoder_features_skips_special_positions():
    cfg = tiny(char_vocab_size=None, bigram_vocab_size=None, feature_size=12)
    model = ChteTagger(cfg, 3, allowed_transitions(["O", "B-X", "I-X"])).eval()
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], dtype=torch.bool)  # [CLS] a b c [SEP] pad
    label_mask = mask.clone()
    label_mask[0, [0, 4]] = False
    label_mask[1, [0, 2]] = False
    labels = torch.tensor([[-100, 1, 2, 0, -100, -100], [-100, 1, -100, -100, -100, -100]])
    out = model(mask, labels, label_mask, features=torch.randn(2, 6, 12))
    assert out.logits.shape == (2, 6, 3) and torch.isfinite(out.loss)
    pred = model.decode(mask, label_mask, features=torch.randn(2, 6, 12))
    assert torch.all(pred[~label_mask] == -100) and torch.all(pred[label_mask] >= 0)
