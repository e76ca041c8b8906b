"""ZEN 2.0 relative attention against an explicit-loop reference of the spec's formula."""

from __future__ import annotations

import math

import pytest
import torch

from tests.conftest import FIXTURES
from zencli.model.config import ZenConfig
from zencli.model.relative_attention import RelativeSelfAttention, relative_sinusoid, skew


def sinusoid(p: int, dim: int) -> list[float]:
    """R_p written out: [sin(p·ω_0) … sin(p·ω_{d/2−1}) | cos(p·ω_0) … ], ω_j = 10000^(−j/(d/2−1))."""
    half = dim // 2
    omegas = [10000.0 ** (-j / (half - 1)) for j in range(half)]
    return [math.sin(p * w) for w in omegas] + [math.cos(p * w) for w in omegas]


def naive(attn: RelativeSelfAttention, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """score[q,k] = ((Q_q+u)·K_k + (Q_q+v)·R_{k−q})/√d + (1−keep_k)·(−10000); softmax; ·V.

    Written as float64 loops over batch, head, query and key."""
    B, L, H = x.shape
    A, d = attn.num_heads, attn.head_size
    x = x.double()
    Q = torch.nn.functional.linear(x, attn.query.weight.double(), attn.query.bias.double()).view(B, L, A, d)
    K = torch.nn.functional.linear(x, attn.key.weight.double(), attn.key.bias.double()).view(B, L, A, d)
    V = torch.nn.functional.linear(x, attn.value.weight.double(), attn.value.bias.double()).view(B, L, A, d)
    u, v = attn.r_r_bias.double(), attn.r_w_bias.double()
    out = torch.zeros(B, L, A, d, dtype=torch.float64)
    for b in range(B):
        for a in range(A):
            for q in range(L):
                scores = []
                for k in range(L):
                    if attn.r_proj is None:
                        R = torch.tensor(sinusoid(k - q, d), dtype=torch.float64)
                    else:
                        full = attn.r_proj.weight.double() @ torch.tensor(sinusoid(k - q, H), dtype=torch.float64)
                        R = full.view(A, d)[a]
                    s = (Q[b, q, a] + u[a]) @ K[b, k, a] + (Q[b, q, a] + v[a]) @ R
                    scores.append(s / math.sqrt(d) + (1.0 - float(keep[b, k])) * -10000.0)
                probs = torch.softmax(torch.stack(scores), dim=0)
                out[b, q, a] = (probs[:, None] * V[b, :, a]).sum(0)
    return out.reshape(B, L, H)


def make(projection: bool) -> RelativeSelfAttention:
    torch.manual_seed(0)
    cfg = ZenConfig(hidden_size=16, num_attention_heads=2, encoder="zen2", relative_projection=projection,
                    attention_probs_dropout_prob=0.0, num_hidden_layers=1, num_hidden_word_layers=1)
    attn = RelativeSelfAttention(cfg)
    with torch.no_grad():  # non-zero biases and projection so that no term can hide
        for p in attn.parameters():
            p.normal_(0.0, 0.5)
    return attn.eval()


@pytest.mark.parametrize("projection", [False, True])
def test_matches_explicit_loops(projection: bool) -> None:
    attn = make(projection)
    x = torch.randn(2, 7, 16)
    keep = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]])
    mask = (1.0 - keep[:, None, None, :].float()) * -10000.0
    got = attn(x, mask)
    want = naive(attn, x, keep)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("projection", [False, True])
def test_gradients_match_explicit_loops(projection: bool) -> None:
    attn = make(projection)
    x = torch.randn(1, 5, 16)
    keep = torch.tensor([[1, 1, 1, 1, 0]])
    mask = (1.0 - keep[:, None, None, :].float()) * -10000.0
    weights = torch.randn(1, 5, 16)
    (attn(x, mask) * weights).sum().backward()
    fast = {n: p.grad.clone() for n, p in attn.named_parameters()}
    attn.zero_grad()
    (naive(attn, x, keep) * weights.double()).sum().backward()
    for n, p in attn.named_parameters():
        torch.testing.assert_close(fast[n].double(), p.grad.double(), atol=1e-4, rtol=1e-4, msg=n)
    assert fast["r_w_bias"].abs().sum() > 0 and fast["r_r_bias"].abs().sum() > 0


def test_skew_puts_offset_k_minus_q_at_key_k() -> None:
    L = 5
    by_offset = torch.arange(2 * L - 1).float().expand(2, 3, L, 2 * L - 1)  # value = column index
    out = skew(by_offset)
    q = torch.arange(L)[:, None]
    k = torch.arange(L)[None, :]
    assert torch.equal(out[1, 2], (k - q + L - 1).float())


def test_sinusoid_equals_released_buffer() -> None:
    path = FIXTURES / "zen2_ref" / "pytorch_model.bin"
    buf = torch.load(path, weights_only=True)["bert.encoder.layer.0.attention.self.position_embedding.weights"]
    L = 40
    ours = relative_sinusoid(L, buf.shape[1])  # rows p = −(L−1) … L−1
    released = buf[601 - (L - 1): 601 + L]  # the released table holds position p at row p + 601
    assert torch.equal(ours, released)


def test_bf16_autocast_forward_backward() -> None:
    attn = make(False).train()
    x = torch.randn(2, 9, 16, requires_grad=True)
    mask = torch.zeros(2, 1, 1, 9)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = attn(x, mask)
    y.float().sum().backward()
    assert y.dtype == torch.bfloat16
    assert torch.isfinite(x.grad).all() and attn.r_w_bias.grad.abs().sum() > 0


def test_rotated_query_times_key_sinusoid_is_the_offset_term_at_512_positions() -> None:
    """Q'_q·K'_k = (Q_q+v)·R_{k−q} (the angle-difference identities), checked against float64 sinusoids of
    the exact offsets at the longest released length; the released float32 table is within 1e-3 of it."""
    from zencli.model.relative_attention import rotate, rotation_tables

    L, d = 512, 64
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, L, d, generator=g)  # Q + v
    C, S, key = rotation_tables(L, d)
    ours = rotate(x, C, S) @ key.T  # [2,3,L,L]
    half = d // 2
    omega = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000.0) / (half - 1))).double()
    offsets = (torch.arange(L)[None, :] - torch.arange(L)[:, None]).double()  # k − q
    angles = offsets[:, :, None] * omega  # [L,L,d/2]
    exact = torch.einsum("baqj,qkj->baqk", x[..., :half].double(), angles.sin()) + \
        torch.einsum("baqj,qkj->baqk", x[..., half:].double(), angles.cos())
    torch.testing.assert_close(ours.double(), exact, atol=1e-4, rtol=1e-5)
    released = skew(x @ relative_sinusoid(L, d).T)  # the released table's float32 angles
    torch.testing.assert_close(released.double(), exact, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("with_position", [False, True])
def test_fused_attention_path_equals_the_cpu_path(with_position: bool) -> None:
    """The GPU path (one SDPA call over [Q|Q']·[K|K']ᵀ) computes what the CPU path does, values and grads."""
    from zencli.model.attention import _attend_fused, _attend_unfused

    g = torch.Generator().manual_seed(2)
    B, A, L, d = 2, 3, 6, 4
    q, k, v = (torch.randn(B, A, L, d, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    rel_q = torch.randn(B, A, L, d, generator=g, dtype=torch.float64, requires_grad=True) if with_position else None
    rel_k = torch.randn(L, d, generator=g, dtype=torch.float64) if with_position else None
    bias = torch.zeros(B, 1, 1, L, dtype=torch.float64)
    bias[1, ..., -2:] = -10000.0
    inputs = [q, k, v] + ([rel_q] if with_position else [])
    outs = []
    for fn in (_attend_unfused, _attend_fused):
        out = fn(q, k, v, bias, 0.0, rel_q, rel_k)
        outs.append((out, torch.autograd.grad((out * torch.arange(d)).sum(), inputs)))
    torch.testing.assert_close(outs[0][0], outs[1][0], atol=1e-12, rtol=1e-12)
    for a, b in zip(outs[0][1], outs[1][1]):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


def test_tables_cached_during_inference_serve_training() -> None:
    """The rotation tables are cached per length: the first call may come from torch.inference_mode()
    (prediction) and a later one from training, which must not see inference tensors."""
    from zencli.model.relative_attention import rotation_tables

    rotation_tables.cache_clear()
    attn = make(False).train()
    x = torch.randn(1, 11, 16)
    with torch.inference_mode():
        attn(x, torch.zeros(1, 1, 1, 11))
    attn(x.requires_grad_(), torch.zeros(1, 1, 1, 11)).sum().backward()
    assert x.grad is not None
