"""CRF against brute-force enumeration of every tag sequence, and scheme constraints against a chunk parser."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.func import functional_call

from zencli.errors import ZenError
from zencli.model.crf import CRF, allowed_transitions
from zencli.text.labels import detect_scheme, is_well_formed, parse_label

BIO = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
IOBES = ["O", "B-PER", "I-PER", "E-PER", "S-PER"]
BMESO = ["O", "B-LOC", "M-LOC", "E-LOC", "S-LOC"]
CWS = ["B", "M", "E", "S"]
POS = ["B-n", "M-n", "E-n", "S-n", "B-v", "E-v"]


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors (conftest.py)


def random_crf(num_tags: int, constraints=None, seed: int = 0) -> CRF:
    torch.manual_seed(seed)
    crf = CRF(num_tags, constraints).double()
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_()
    return crf


def path_score(crf: CRF, em: torch.Tensor, path: tuple[int, ...]) -> torch.Tensor:
    """Score of one path written directly from the definition (raw parameters, no constraint masks)."""
    s = crf.start_transitions[path[0]] + crf.end_transitions[path[-1]]
    for t, tag in enumerate(path):
        s = s + em[t, tag]
        if t:
            s = s + crf.transitions[path[t - 1], tag]
    return s


def brute_force(crf: CRF, em: torch.Tensor, n: int, keep=lambda path: True):
    """(log Z, {path: score}) over all T^n paths accepted by `keep`, for one row of emissions em [L, T]."""
    scores = {p: path_score(crf, em, p) for p in itertools.product(range(crf.num_tags), repeat=n) if keep(p)}
    return torch.logsumexp(torch.stack(list(scores.values())), 0), scores


def well_formed(tags: list[str], scheme: str) -> bool:
    """Independent reference: the sequence splits into O, S-X and B-X (inside-X)* [E-X] chunks."""
    inside = "M" if scheme == "BMES" else "I"
    parsed = [parse_label(t) for t in tags]
    i = 0
    while i < len(parsed):
        prefix, kind = parsed[i]
        if prefix == "O" or (prefix == "S" and scheme != "BIO"):
            i += 1
            continue
        if prefix != "B":
            return False
        j = i + 1
        while j < len(parsed) and parsed[j] == (inside, kind):
            j += 1
        if scheme == "BIO":
            i = j
        elif j < len(parsed) and parsed[j] == ("E", kind):
            i = j + 1
        else:
            return False
    return True


LENGTHS = [4, 3, 1, 2]


def batch(num_tags: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    em = torch.randn(len(LENGTHS), max(LENGTHS), num_tags, generator=g, dtype=torch.float64)
    mask = torch.arange(max(LENGTHS))[None] < torch.tensor(LENGTHS)[:, None]
    tags = torch.randint(0, num_tags, (len(LENGTHS), max(LENGTHS)), generator=g).masked_fill(~mask, -100)
    return em, mask, tags


def test_log_partition_and_nll_match_brute_force():
    crf = random_crf(3)
    em, mask, tags = batch(3)
    log_z = crf.log_partition(em, mask)
    crf.reduction = "none"
    nll = crf(em, tags, mask)
    for b, n in enumerate(LENGTHS):
        ref_z, scores = brute_force(crf, em[b], n)
        assert torch.allclose(log_z[b], ref_z, atol=1e-10)
        gold = tuple(tags[b, :n].tolist())
        assert torch.allclose(nll[b], ref_z - scores[gold], atol=1e-10)
    crf.reduction = "sum"
    assert torch.allclose(crf(em, tags, mask), nll.sum())
    crf.reduction = "mean"
    assert torch.allclose(crf(em, tags, mask), nll.mean())


def test_gradients_match_brute_force():
    crf = random_crf(3)
    em, mask, tags = batch(3)
    em.requires_grad_(True)
    params = [em, crf.transitions, crf.start_transitions, crf.end_transitions]
    crf.reduction = "sum"
    got = torch.autograd.grad(crf(em, tags, mask), params)
    ref = 0
    for b, n in enumerate(LENGTHS):
        ref_z, scores = brute_force(crf, em[b], n)
        ref = ref + ref_z - scores[tuple(tags[b, :n].tolist())]
    want = torch.autograd.grad(ref, params)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-10)
    # Gradient is zero at padded positions: they are outside every path.
    assert torch.all(got[0][~mask] == 0)


def test_gradcheck_float64():
    crf = random_crf(3)
    em, mask, tags = batch(3)
    names = ["transitions", "start_transitions", "end_transitions"]

    def nll(em, trans, start, end):
        return functional_call(crf, dict(zip(names, (trans, start, end))), (em, tags, mask))

    inputs = (em.clone().requires_grad_(True),) + tuple(
        getattr(crf, n).detach().clone().requires_grad_(True) for n in names)
    assert torch.autograd.gradcheck(nll, inputs)


def test_viterbi_is_brute_force_argmax():
    crf = random_crf(3, seed=3)
    em, mask, _ = batch(3, seed=4)
    paths, best = crf.decode(em, mask)
    assert paths.shape == mask.shape and best.shape == (len(LENGTHS),)
    for b, n in enumerate(LENGTHS):
        _, scores = brute_force(crf, em[b], n)
        argmax = max(scores, key=lambda p: scores[p].item())
        assert tuple(paths[b, :n].tolist()) == argmax
        assert torch.allclose(best[b], scores[argmax])
        assert torch.all(paths[b, n:] == -1)
    assert crf.decode_lists(em, mask) == [paths[b, :n].tolist() for b, n in enumerate(LENGTHS)]


def test_padding_content_is_ignored():
    crf = random_crf(4)
    em, mask, tags = batch(4)
    em2 = em.clone()
    em2[~mask] = 1e3
    tags2 = tags.masked_fill(~mask, 2)
    crf.reduction = "none"
    assert torch.equal(crf(em, tags, mask), crf(em2, tags2, mask))
    assert torch.equal(crf.decode(em, mask)[0], crf.decode(em2, mask)[0])
    # Same as decoding each row alone, unpadded.
    for b, n in enumerate(LENGTHS):
        alone = crf(em[b:b + 1, :n], tags[b:b + 1, :n])
        assert torch.allclose(alone[0], crf(em, tags, mask)[b])


def test_empty_rows_and_bad_masks():
    crf = random_crf(3)
    em = torch.randn(2, 3, 3, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]], dtype=torch.bool)
    tags = torch.zeros(2, 3, dtype=torch.long)
    crf.reduction = "none"
    nll = crf(em, tags, mask)
    assert nll[1] == 0 and nll[0] > 0
    crf.reduction = "mean"
    assert torch.allclose(crf(em, tags, mask), nll[0])  # mean over the non-empty rows
    paths, best = crf.decode(em, mask)
    assert paths[1].tolist() == [-1, -1, -1] and best[1] == float("-inf")
    with pytest.raises(ValueError, match="prefix"):
        crf(em, tags, torch.tensor([[1, 0, 1], [1, 1, 1]], dtype=torch.bool))
    with pytest.raises(ValueError, match="gold tags"):
        crf(em, torch.full((2, 3), 7), mask)


def test_low_precision_emissions_are_scored_in_float32():
    crf = CRF(3)
    em = torch.randn(2, 5, 3)
    tags = torch.randint(0, 3, (2, 5))
    loss = crf(em.to(torch.bfloat16), tags)
    assert loss.dtype == torch.float32
    assert torch.allclose(loss, crf(em.to(torch.bfloat16).float(), tags))


@pytest.mark.parametrize("labels,scheme", [(BIO, "BIO"), (IOBES, "IOBES"), (BMESO, "BMES"), (CWS, "BMES"),
                                           (POS, "BMES"), (["O", "B-X", "I-X"], "BIO"), (["O", "S-X"], "IOBES")])
def test_scheme_detection(labels, scheme):
    assert detect_scheme(labels) == scheme
    assert allowed_transitions(labels).scheme == scheme


@pytest.mark.parametrize("labels", [BIO, IOBES, BMESO, CWS, POS])
def test_constraint_masks_match_chunk_definition(labels):
    """Exhaustively: a path is allowed by the masks iff the chunk parser (and zencli.text.labels) accepts it."""
    c = allowed_transitions(labels)
    for n in range(1, 5):
        for path in itertools.product(range(len(labels)), repeat=n):
            seq = [labels[i] for i in path]
            assert c.allows(path) == well_formed(seq, c.scheme) == is_well_formed(seq, c.scheme), seq


def test_specific_forbidden_moves():
    c = allowed_transitions(BIO)
    ix = {label: i for i, label in enumerate(BIO)}
    assert not c.transitions[ix["O"], ix["I-PER"]]
    assert not c.transitions[ix["B-PER"], ix["I-LOC"]]
    assert c.transitions[ix["B-PER"], ix["I-PER"]] and c.transitions[ix["I-LOC"], ix["B-LOC"]]
    assert not c.start[ix["I-PER"]] and c.end[ix["B-PER"]]
    c = allowed_transitions(BMESO)
    ix = {label: i for i, label in enumerate(BMESO)}
    assert not c.transitions[ix["O"], ix["M-LOC"]] and not c.transitions[ix["B-LOC"], ix["O"]]
    assert not c.start[ix["E-LOC"]] and not c.end[ix["B-LOC"]] and not c.end[ix["M-LOC"]]
    c = allowed_transitions(POS)
    ix = {label: i for i, label in enumerate(POS)}
    assert c.transitions[ix["B-n"], ix["M-n"]] and not c.transitions[ix["B-n"], ix["E-v"]]


def test_label_errors():
    with pytest.raises(ZenError, match="mix I- and M-"):
        allowed_transitions(["B-X", "I-X", "M-X"])
    with pytest.raises(ZenError, match="'X-PER'"):
        allowed_transitions(["O", "X-PER"])
    with pytest.raises(ZenError, match="not a BIO tag"):
        allowed_transitions(IOBES, scheme="BIO")
    with pytest.raises(ZenError, match="scheme"):
        allowed_transitions(BIO, scheme="BILOU")
    with pytest.raises(ZenError, match="duplicate"):
        allowed_transitions(["O", "O"])
    assert allowed_transitions(IOBES, scheme="bioes").scheme == "IOBES"


@pytest.mark.parametrize("labels", [BIO, BMESO, CWS, POS])
def test_constrained_crf_matches_brute_force_over_allowed_paths(labels):
    c = allowed_transitions(labels)
    crf = random_crf(len(labels), c, seed=5)
    g = torch.Generator().manual_seed(6)
    em = torch.randn(2, 4, len(labels), generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.bool)
    log_z = crf.log_partition(em, mask)
    paths, best = crf.decode(em, mask)
    crf.reduction = "none"
    for b, n in enumerate([4, 3]):
        ref_z, scores = brute_force(crf, em[b], n, keep=c.allows)
        assert torch.allclose(log_z[b], ref_z, atol=1e-9)
        argmax = max(scores, key=lambda p: scores[p].item())
        assert tuple(paths[b, :n].tolist()) == argmax
        assert torch.allclose(best[b], scores[argmax])
        gold = next(iter(scores))  # any allowed path
        tags = torch.zeros(2, 4, dtype=torch.long)
        tags[b, :n] = torch.tensor(gold)
        assert torch.allclose(crf(em, tags, mask)[b], ref_z - scores[gold], atol=1e-9)


@pytest.mark.parametrize("labels", [BIO, IOBES, BMESO, CWS, POS])
def test_decoding_never_ill_formed(labels):
    """Emissions that shout for inside/end tags everywhere still decode to well-formed sequences."""
    c = allowed_transitions(labels)
    crf = CRF(len(labels), c)
    g = torch.Generator().manual_seed(7)
    em = torch.randn(64, 9, len(labels), generator=g) * 5
    bad = torch.tensor([parse_label(x)[0] in ("I", "M", "E") for x in labels])
    em[:, :, bad] += 1e6  # far beyond any finite penalty
    lengths = torch.randint(1, 10, (64,), generator=g)
    mask = torch.arange(9)[None] < lengths[:, None]
    for path in crf.decode_lists(em, mask):
        assert well_formed([labels[i] for i in path], c.scheme)
    # Unconstrained, the same emissions do produce ill-formed output: the constraint is what prevents it.
    free = CRF(len(labels))
    assert not all(well_formed([labels[i] for i in p], c.scheme) for p in free.decode_lists(em, mask))


def test_ill_formed_gold_gives_finite_loss_and_gradients():
    c = allowed_transitions(BIO)
    crf = CRF(len(BIO), c)
    em = torch.randn(1, 3, len(BIO), requires_grad=True)
    tags = torch.tensor([[0, 2, 2]])  # O I-PER I-PER
    loss = crf(em, tags)
    loss.backward()
    assert torch.isfinite(loss) and loss > 1000
    assert torch.isfinite(em.grad).all()
    assert crf.transitions.grad[0, 2] == 0  # forbidden entries are not trained


def logsumexp_partition(crf: CRF, em: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The textbook forward algorithm, logsumexp over a [B, T, T] tensor per position (float64)."""
    trans, start, end = crf.scores(torch.float64)
    em = em.double()
    alpha = start + em[:, 0]
    for t in range(1, em.shape[1]):
        nxt = torch.logsumexp(alpha.unsqueeze(2) + trans, dim=1) + em[:, t]
        alpha = torch.where(mask[:, t].unsqueeze(1), nxt, alpha)
    return torch.logsumexp(alpha + end, dim=1)


@pytest.mark.parametrize("scale", [1.0, 30.0, 300.0])
def test_log_partition_survives_scores_far_apart(scale):
    """Confident emissions put most tags hundreds of nats below the best one, where exp underflows (the forward
    algorithm multiplies in exp space): log Z and its gradients must stay exact and finite."""
    labels = [f"{p}-{t}" for t in ("n", "v", "nr") for p in "BMES"]
    crf = CRF(len(labels), allowed_transitions(labels))
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        crf.transitions.normal_(generator=g)
    lengths = torch.tensor([40, 17, 1, 33])
    mask = torch.arange(40)[None] < lengths[:, None]
    em = (scale * torch.randn(4, 40, len(labels), generator=g)).requires_grad_()
    log_z = crf.log_partition(em, mask)
    assert log_z.dtype == torch.float32
    ref = logsumexp_partition(crf, em, mask)
    assert torch.allclose(log_z.double(), ref, rtol=1e-6, atol=1e-3)
    (grad,) = torch.autograd.grad(log_z.sum(), em)
    (ref_grad,) = torch.autograd.grad(ref.sum(), em)
    assert torch.isfinite(grad).all()
    assert torch.allclose(grad.double(), ref_grad.double(), atol=1e-4)  # the tag marginals


def test_a_confident_model_keeps_the_matrix_product_path(monkeypatch):
    """Paths into most tags 60+ nats below the best (a trained tagger) must not send every step to the
    [B, T, T] logsumexp: with 128 joint POS labels that fallback made training 30× slower in float32."""
    labels = [f"{p}-t{i}" for i in range(32) for p in "BMES"]
    crf = CRF(len(labels), allowed_transitions(labels))
    g = torch.Generator().manual_seed(0)
    gold = torch.randint(0, len(labels), (4, 30), generator=g)
    em = 3 * torch.randn(4, 30, len(labels), generator=g) + 60 * torch.nn.functional.one_hot(gold, len(labels))
    calls = []
    real = torch.logsumexp
    monkeypatch.setattr(torch, "logsumexp", lambda *a, **k: calls.append(1) or real(*a, **k))
    log_z = crf.log_partition(em)
    assert len(calls) == 1  # only the final sum over the last tag
    monkeypatch.undo()
    assert torch.allclose(log_z.double(), logsumexp_partition(crf, em, torch.ones(4, 30, dtype=torch.bool)))
