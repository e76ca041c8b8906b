"""Optimizer pieces: schedule, weight-decay groups, LazyAdamW vs AdamW, clipping, sparse-table marking."""

import pytest
import torch
from torch import nn

from zencli.train.optim import (
    LazyAdamW,
    build_optimizers,
    clip_grad_norm,
    mark_sparse_embeddings,
    unmark_sparse_embeddings,
)
from zencli.train.schedule import LinearWarmupDecay


def test_schedule_warmup_then_linear_decay():
    s = LinearWarmupDecay(peak_lr=1e-4, warmup_steps=4, total_steps=12)
    lrs = [s.lr(i) for i in range(12)]
    assert lrs[:4] == pytest.approx([0.25e-4, 0.5e-4, 0.75e-4, 1e-4])
    assert lrs[4] == pytest.approx(1e-4)  # the peak is held at step `warmup`, then decays linearly
    assert lrs[4:] == pytest.approx([1e-4 * (12 - i) / 8 for i in range(4, 12)])
    assert lrs[-1] == pytest.approx(1e-4 / 8) and min(lrs) > 0  # no step runs with a zero rate
    assert LinearWarmupDecay(1.0, 0, 10).factor(0) == 1.0
    assert LinearWarmupDecay(1.0, 36_000, 1_000_000).lr(35_999) == 1.0


def test_paper_schedule_values():
    s = LinearWarmupDecay(1e-4, 36_000, 1_000_000)
    assert s.lr(0) == pytest.approx(1e-4 / 36_000)
    assert s.lr(17_999) == pytest.approx(0.5e-4)
    assert s.lr(518_000) == pytest.approx(0.5e-4)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.words = nn.Embedding(2000, 8)
        self.types = nn.Embedding(2, 8)
        self.LayerNorm = nn.LayerNorm(8)
        self.dense = nn.Linear(8, 8)
        self.r_r_bias = nn.Parameter(torch.zeros(2, 4))
        self.decoder = nn.Linear(8, 2000, bias=False)


def test_weight_decay_excludes_biases_and_layernorm_like_bert():
    m = Block()
    (opt,) = build_optimizers(m, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)
    names = {id(p): n for n, p in m.named_parameters()}
    decayed = {names[id(p)] for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    plain = {names[id(p)] for g in opt.param_groups if g["weight_decay"] == 0 for p in g["params"]}
    assert decayed == {"words.weight", "types.weight", "dense.weight", "decoder.weight"}
    assert plain == {"LayerNorm.weight", "LayerNorm.bias", "dense.bias", "r_r_bias"}
    assert all(g["initial_lr"] == 1e-3 for g in opt.param_groups)


def test_sparse_marking_takes_big_untied_tables_only():
    m = Block()
    marked = mark_sparse_embeddings(m, min_rows=1000)
    assert marked == [m.words] and m.words.sparse and not m.types.sparse
    unmark_sparse_embeddings(marked)
    assert not m.words.sparse
    m.decoder.weight = m.words.weight  # tied like the MLM decoder: its gradient is dense anyway
    assert mark_sparse_embeddings(m, min_rows=1000) == []
    m2 = Block()
    opts = build_optimizers(m2, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
                            sparse_tables=mark_sparse_embeddings(m2, 1000))
    assert [type(o) for o in opts] == [torch.optim.AdamW, LazyAdamW]
    assert opts[1].param_groups[0]["params"] == [m2.words.weight]


def _step_pair(ids: torch.Tensor, wd: float, steps: int = 1, seed: int = 0):
    """The same table trained by dense AdamW (dense grads) and LazyAdamW (sparse grads)."""
    torch.manual_seed(seed)
    dense = nn.Embedding(3000, 16)
    sparse = nn.Embedding(3000, 16, sparse=True)
    sparse.weight.data.copy_(dense.weight.data)
    opt_d = torch.optim.AdamW(dense.parameters(), lr=1e-2, weight_decay=wd, eps=1e-6)
    opt_s = LazyAdamW(sparse.parameters(), lr=1e-2, weight_decay=wd, eps=1e-6)
    target = torch.randn(ids.shape[0], 16)
    for _ in range(steps):
        for table, opt in ((dense, opt_d), (sparse, opt_s)):
            opt.zero_grad()
            ((table(ids) - target) ** 2).sum().backward()
            opt.step()
    return dense, sparse, opt_s


def test_lazy_adamw_first_step_matches_dense_adamw_on_touched_rows():
    ids = torch.tensor([5, 17, 17, 2999, 1234, 5])  # repeated ids: gradients of duplicates add up
    torch.manual_seed(0)
    before = nn.Embedding(3000, 16).weight.detach().clone()  # what _step_pair starts from
    dense, sparse, _ = _step_pair(ids, wd=0.1)
    rows = ids.unique()
    assert torch.allclose(sparse.weight[rows], dense.weight[rows], atol=1e-6, rtol=0)
    assert not torch.equal(sparse.weight[rows], before[rows])  # they did move
    untouched = torch.ones(3000, dtype=torch.bool)
    untouched[rows] = False
    assert torch.equal(sparse.weight[untouched], before[untouched])  # lazy: untouched rows stay
    # dense AdamW decays every row every step — the documented semantic difference
    assert torch.allclose(dense.weight[untouched], before[untouched] * (1 - 1e-2 * 0.1))


def test_lazy_adamw_bias_correction_is_per_row():
    torch.manual_seed(1)
    table = nn.Embedding(3000, 16, sparse=True)
    opt = LazyAdamW(table.parameters(), lr=1e-2, weight_decay=0.0, eps=1e-6)
    for ids in (torch.tensor([1, 2]), torch.tensor([1, 2]), torch.tensor([2, 7])):
        opt.zero_grad()
        table(ids).sum().backward()
        w7 = table.weight[7].detach().clone()
        opt.step()
    assert opt.state[table.weight]["row_steps"][[1, 2, 7, 8]].tolist() == [2, 3, 1, 0]
    # row 7's first update is a fresh Adam step: m̂/√v̂ = g/|g| = 1 for a gradient of ones → lr per entry
    assert torch.allclose(table.weight[7], w7 - 1e-2, atol=1e-7)


def test_lazy_adamw_with_dense_gradient_equals_adamw():
    torch.manual_seed(2)
    a, b = nn.Linear(4, 6, bias=False), nn.Linear(4, 6, bias=False)
    b.weight.data.copy_(a.weight.data)
    oa = torch.optim.AdamW(a.parameters(), lr=1e-2, weight_decay=0.05, eps=1e-6)
    ob = LazyAdamW(b.parameters(), lr=1e-2, weight_decay=0.05, eps=1e-6)
    for _ in range(5):
        x = torch.randn(3, 4)
        for m, o in ((a, oa), (b, ob)):
            o.zero_grad()
            m(x).pow(2).sum().backward()
            o.step()
    assert torch.allclose(a.weight, b.weight, atol=1e-6, rtol=0)


def test_lazy_adamw_state_survives_state_dict_roundtrip():
    _, sparse, opt = _step_pair(torch.tensor([3, 4]), wd=0.0, steps=2)
    sd = opt.state_dict()
    fresh = LazyAdamW(sparse.parameters(), lr=1e-2, weight_decay=0.0, eps=1e-6)
    fresh.load_state_dict(sd)
    st = fresh.state[sparse.weight]
    assert st["row_steps"].dtype == torch.int64 and st["row_steps"][3].item() == 2


def test_clip_grad_norm_counts_sparse_and_dense_grads_and_scales_them():
    torch.manual_seed(3)
    table = nn.Embedding(3000, 4, sparse=True)
    lin = nn.Linear(4, 1)
    ids = torch.tensor([1, 1, 9])  # duplicate row 1: the norm must be taken after summing duplicates
    lin(table(ids)).sum().mul(10).backward()
    params = list(table.parameters()) + list(lin.parameters())
    dense_grads = [p.grad.to_dense() if p.grad.is_sparse else p.grad.clone() for p in params]
    expected = torch.linalg.vector_norm(torch.cat([g.flatten() for g in dense_grads]))
    norm = clip_grad_norm(params, max_norm=1.0)
    assert norm.item() == pytest.approx(expected.item(), rel=1e-6)
    after = torch.linalg.vector_norm(torch.cat([(p.grad.to_dense() if p.grad.is_sparse else p.grad).flatten()
                                                for p in params]))
    assert after.item() == pytest.approx(1.0, rel=1e-4)
    for p, g in zip(params, dense_grads):  # direction unchanged
        now = p.grad.to_dense() if p.grad.is_sparse else p.grad
        assert torch.allclose(now, g * (1.0 / (expected + 1e-6)), atol=1e-6)


def test_clip_grad_norm_leaves_small_gradients_and_zero_disables():
    lin = nn.Linear(3, 1)
    lin(torch.ones(1, 3)).sum().mul(1e-3).backward()
    before = lin.weight.grad.clone()
    clip_grad_norm(lin.parameters(), max_norm=1.0)
    assert torch.equal(lin.weight.grad, before)
    lin.weight.grad.mul_(1e6)
    big = lin.weight.grad.clone()
    norm = clip_grad_norm(lin.parameters(), max_norm=0.0)
    assert norm.item() > 1 and torch.equal(lin.weight.grad, big)
