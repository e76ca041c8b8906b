"""Task heads: shapes, that each loss can be minimised on a tiny problem, and the decoding rules."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from zencli.model.crf import allowed_transitions
from zencli.model.heads import (
    CandidateRankingHead,
    SentencePairClassificationHead,
    SequenceClassificationHead,
    SpanExtractionHead,
    TokenClassificationHead,
    left_align,
    listwise_loss,
)

H = 16


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors (conftest.py)


def fit(module: torch.nn.Module, step, steps: int = 150, lr: float = 0.05) -> tuple[float, float]:
    """Run Adam on `step() -> loss`; return (first loss, last loss)."""
    torch.manual_seed(0)
    opt = torch.optim.Adam(module.parameters(), lr=lr)
    first = last = None
    for _ in range(steps):
        loss = step()
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
        last = loss.item()
    return first, last


def test_left_align():
    mask = torch.tensor([[0, 1, 1, 0, 1, 0], [1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    order, aligned = left_align(mask)
    assert order[0, :3].tolist() == [1, 2, 4] and order[1, 0] == 0
    assert aligned.sum(1).tolist() == [3, 1, 0]
    assert torch.equal(aligned, torch.arange(6)[None] < aligned.sum(1, keepdim=True))


@pytest.mark.parametrize("decoder", ["softmax", "crf"])
def test_token_head_overfits_and_decodes_in_place(decoder):
    torch.manual_seed(0)
    B, L, C = 6, 7, 4
    hidden = torch.randn(B, L, H)
    labels = torch.randint(0, C, (B, L))
    mask = torch.rand(B, L) > 0.25  # arbitrary gaps, like [CLS]/[SEP]/continuation pieces
    mask[:, 0] = True
    head = TokenClassificationHead(H, C, dropout=0.0, decoder=decoder)
    out = head(hidden, mask)
    assert out.logits.shape == (B, L, C) and out.loss is None
    first, last = fit(head, lambda: head(hidden, mask, labels.masked_fill(~mask, -100)).loss)
    assert last < first * 0.2
    pred = head.decode(head(hidden, mask).logits, mask)
    assert pred.shape == (B, L)
    assert torch.all(pred[~mask] == -100)
    assert torch.equal(pred[mask], labels[mask])  # memorised, and put back at the right positions


def test_softmax_loss_ignores_masked_and_ignored_tokens():
    head = TokenClassificationHead(H, 3, dropout=0.0)
    hidden = torch.randn(2, 4, H)
    labels = torch.tensor([[0, 1, -100, 2], [1, 1, 1, 1]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    logits = head(hidden).logits
    keep = [(0, 0), (0, 1), (0, 3), (1, 0), (1, 1)]
    ref = sum(-logits[b, t].log_softmax(-1)[labels[b, t]] for b, t in keep) / len(keep)
    assert torch.allclose(head(hidden, mask, labels).loss, ref)
    empty = head(hidden, torch.zeros(2, 4, dtype=torch.bool), labels).loss
    assert empty.item() == 0.0


def test_crf_head_rejects_unlabelled_selected_positions():
    head = TokenClassificationHead(H, 3, decoder="crf")
    with pytest.raises(ValueError, match="needs a label"):
        head(torch.randn(1, 3, H), None, torch.tensor([[0, -100, 1]]))


def test_crf_head_loss_equals_crf_on_compacted_rows():
    torch.manual_seed(1)
    head = TokenClassificationHead(H, 3, dropout=0.0, decoder="crf")
    hidden = torch.randn(1, 5, H)
    mask = torch.tensor([[0, 1, 1, 0, 1]], dtype=torch.bool)
    labels = torch.tensor([[-100, 2, 0, -100, 1]])
    out = head(hidden, mask, labels)
    keep = mask[0]
    ref = head.crf(out.logits[:, keep], labels[:, keep])
    assert torch.allclose(out.loss, ref)


@pytest.mark.parametrize("decoder", ["softmax", "crf"])
def test_constrained_decoding_is_well_formed(decoder):
    labels = ["O", "B-PER", "M-PER", "E-PER", "S-PER"]
    c = allowed_transitions(labels)
    head = TokenClassificationHead(H, len(labels), decoder=decoder, constraints=c)
    logits = torch.randn(32, 8, len(labels))
    logits[..., 2] += 50  # M-PER everywhere, which is never well formed on its own
    mask = torch.arange(8)[None] < torch.randint(1, 9, (32, 1))
    pred = head.decode(logits, mask)
    for row, m in zip(pred, mask):
        assert c.allows(row[m].tolist())
    assert not any(c.allows(r[m].tolist()) for r, m in zip(logits.argmax(-1), mask))


def test_constrained_softmax_decoding_maximises_probability_over_allowed_paths():
    labels = ["O", "B-X", "I-X"]
    c = allowed_transitions(labels)
    head = TokenClassificationHead(H, 3, constraints=c)
    torch.manual_seed(2)
    logits = torch.randn(1, 4, 3) * 3
    logp = logits[0].log_softmax(-1)
    best = max((p for p in itertools.product(range(3), repeat=4) if c.allows(p)),
               key=lambda p: sum(logp[t, y].item() for t, y in enumerate(p)))
    assert tuple(head.decode(logits)[0].tolist()) == best


@pytest.mark.parametrize("cls", [SequenceClassificationHead, SentencePairClassificationHead])
def test_sequence_classification(cls):
    torch.manual_seed(0)
    pooled = torch.randn(12, H)
    labels = torch.randint(0, 3, (12,))
    head = cls(H, 3, dropout=0.0)
    out = head(pooled)
    assert out.logits.shape == (12, 3) and out.loss is None
    first, last = fit(head, lambda: head(pooled, labels).loss)
    assert last < first * 0.1
    assert torch.equal(head.decode(head(pooled).logits), labels)


def test_span_head_shapes_and_overfit():
    torch.manual_seed(0)
    B, L = 4, 10
    hidden = torch.randn(B, L, H)
    mask = torch.zeros(B, L, dtype=torch.bool)
    mask[:, 4:9] = True  # context tokens
    starts = torch.tensor([4, 5, 6, 8])
    ends = torch.tensor([6, 5, 8, 8])
    head = SpanExtractionHead(H)
    out = head(hidden, mask)
    assert out.start_logits.shape == (B, L) and out.end_logits.shape == (B, L) and out.loss is None
    first, last = fit(head, lambda: head(hidden, mask, starts, ends).loss, steps=200)
    assert last < first * 0.2
    out = head(hidden, mask)
    s, e, _ = head.best_spans(out.start_logits, out.end_logits, mask, max_answer_length=5)
    assert s[:, 0].tolist() == starts.tolist() and e[:, 0].tolist() == ends.tolist()


def test_span_loss_is_mean_of_start_and_end_ce_and_skips_out_of_window_rows():
    head = SpanExtractionHead(H)
    hidden = torch.randn(2, 6, H)
    out = head(hidden, None, torch.tensor([1, -100]), torch.tensor([3, -100]))
    ref = (-out.start_logits[0].log_softmax(-1)[1] - out.end_logits[0].log_softmax(-1)[3]) / 2
    assert torch.allclose(out.loss, ref)
    mask = torch.tensor([[0, 0, 1, 1, 1, 1]] * 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="masked position"):
        head(hidden, mask, torch.tensor([1, 2]), torch.tensor([3, 3]))


def test_best_span_rules():
    L = 8
    start = torch.tensor([[9.0, 0, 0, 5, 0, 0, 0, 0]])  # position 0 is best but masked
    end = torch.tensor([[0.0, 0, 4, 0, 0, 0, 0, 3]])  # end 2 is before the best start
    mask = torch.tensor([[0, 1, 1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    s, e, score = SpanExtractionHead.best_spans(start, end, mask, max_answer_length=8, top_k=3)
    assert (s[0, 0].item(), e[0, 0].item()) == (3, 7)  # start <= end, masked start excluded
    assert score[0, 0].item() == pytest.approx(8.0)
    s, e, _ = SpanExtractionHead.best_spans(start, end, mask, max_answer_length=4)
    assert e[0, 0] - s[0, 0] < 4
    assert (s[0, 0].item(), e[0, 0].item()) == (3, 3)  # 3..7 is too long now; 1..2 scores 4, 3..3 scores 5
    # Exhaustive check against the rules on random logits.
    torch.manual_seed(3)
    start, end = torch.randn(5, L), torch.randn(5, L)
    mask = torch.rand(5, L) > 0.3
    s, e, score = SpanExtractionHead.best_spans(start, end, mask, max_answer_length=3, top_k=2)
    for b in range(5):
        cands = sorted(((start[b, i] + end[b, j]).item(), i, j) for i in range(L) for j in range(L)
                       if i <= j < i + 3 and mask[b, i] and mask[b, j])[::-1]
        for k in range(2):
            if k < len(cands):
                assert score[b, k].item() == pytest.approx(cands[k][0])
                assert mask[b, s[b, k]] and mask[b, e[b, k]] and 0 <= e[b, k] - s[b, k] < 3
            else:
                assert s[b, k] == -1 and e[b, k] == -1 and score[b, k] == -math.inf


def test_best_spans_without_any_valid_position():
    s, e, score = SpanExtractionHead.best_spans(torch.randn(1, 4), torch.randn(1, 4),
                                                torch.zeros(1, 4, dtype=torch.bool))
    assert s.tolist() == [[-1]] and e.tolist() == [[-1]] and score[0, 0] == -math.inf


@pytest.mark.parametrize("loss", ["binary", "listwise"])
def test_ranking_head_overfits(loss):
    torch.manual_seed(0)
    N = 12
    pooled = torch.randn(N, H)
    groups = torch.tensor([7, 7, 7, 3, 3, 3, 3, 9, 9, 9, 1, 1])  # not contiguous, not sorted
    labels = torch.tensor([0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0])  # question 1 has no positive
    head = CandidateRankingHead(H, dropout=0.0, loss=loss)
    out = head(pooled)
    assert out.logits.shape == (N, 2) and head.scores(out.logits).shape == (N,)
    first, last = fit(head, lambda: head(pooled, labels, groups).loss)
    assert last < first * 0.1
    scores = head.scores(head(pooled).logits)
    for g in groups.unique():
        sel = groups == g
        if labels[sel].any():  # the positive ranks first within its question
            assert labels[sel][scores[sel].argmax()] == 1


def test_listwise_loss_value():
    scores = torch.tensor([1.0, 2.0, 0.5, -1.0, 3.0], requires_grad=True)
    positive = torch.tensor([0, 1, 1, 0, 0], dtype=torch.bool)
    groups = torch.tensor([5, 5, 2, 2, 8])  # group 8 has no positive: left out
    loss = listwise_loss(scores, positive, groups)
    ref = ((torch.logsumexp(scores[:2], 0) - scores[1]) + (torch.logsumexp(scores[2:4], 0) - scores[2])) / 2
    assert torch.allclose(loss, ref)
    loss.backward()
    assert scores.grad[4] == 0 and torch.isfinite(scores.grad).all()
    # A positive far below its group's best does not underflow away.
    far = listwise_loss(torch.tensor([200.0, 0.0]), torch.tensor([False, True]), torch.tensor([0, 0]))
    assert far.item() == pytest.approx(200.0)


def test_released_head_names():
    assert set(dict(TokenClassificationHead(H, 3).named_parameters())) == {"classifier.weight", "classifier.bias"}
    assert set(dict(SpanExtractionHead(H).named_parameters())) == {"qa_outputs.weight", "qa_outputs.bias"}
    assert dict(CandidateRankingHead(H).named_parameters())["classifier.weight"].shape == (2, H)
