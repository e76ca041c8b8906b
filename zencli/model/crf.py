"""Linear-chain conditional random field (CRF) with label-scheme constraints.

For emissions `e` [L, T] (one score per position and tag) and a tag sequence `y` of length n, the CRF
scores the whole sequence

    s(y) = start[y_0] + Σ_t e[t, y_t] + Σ_{t≥1} trans[y_{t-1}, y_t] + end[y_{n-1}]

and normalises over all T^n sequences: p(y) = exp(s(y)) / Z, with log Z from the forward algorithm
(vectorised over batch and tags, one loop step per position: a [B, T] × [T, T] product in shifted exp
space). Viterbi decoding uses the
same scores with max instead of logsumexp.

Constraints: tagging schemes make some sequences meaningless (`O I-PER` in BIO, `M-X` after `O` in
BMES, `B-n M-v` in joint POS). `allowed_transitions(labels)` turns a label list into masks of allowed
transitions/starts/ends; a constrained CRF gives every forbidden move a score that removes it from both
the partition function (training) and the search (decoding), so decoded paths are always well formed.

Batches are batch-first: emissions [B, L, T], mask [B, L] with each row a prefix of ones (padding at the
end). `TokenClassificationHead` (heads.py) handles arbitrary masks by left-aligning first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import torch
from torch import Tensor, nn

from zencli.errors import ZenError
from zencli.text.labels import (
    SCHEME_PREFIXES,
    Scheme,
    detect_scheme,
    parse_label,
    scheme_name,
)

Reduction = Literal["mean", "sum", "none"]

# Forbidden moves get this score in the forward algorithm rather than -inf: exp(-1e4) is exactly 0 in
# float32/float64 so Z is unchanged, yet a gold path that breaks the scheme (bad data) yields a large
# finite loss with finite gradients instead of inf/NaN. Decoding uses a true -inf (see `viterbi_decode`).
FORBIDDEN_SCORE = -10000.0


@dataclass(frozen=True, eq=False)  # holds tensors: compare by identity
class TransitionConstraints:
    """Which label may follow which, and which may start/end a sequence (True = allowed)."""

    labels: tuple[str, ...]
    scheme: Scheme
    transitions: Tensor  # [T, T] bool: transitions[i, j] — label j may directly follow label i
    start: Tensor  # [T] bool
    end: Tensor  # [T] bool

    def allows(self, path: Sequence[int]) -> bool:
        """True if the tag-id sequence is well formed under these constraints (empty paths are)."""
        if len(path) == 0:
            return True
        if not (bool(self.start[path[0]]) and bool(self.end[path[-1]])):
            return False
        return all(bool(self.transitions[a, b]) for a, b in zip(path[:-1], path[1:]))


def allowed_transitions(labels: Sequence[str], scheme: str | None = None) -> TransitionConstraints:
    """Build the allowed-move masks for `labels` (ids = list positions) under `scheme` (None: detect).

    BIO:        I-X only after B-X or I-X; never first.
    IOBES/BMES: inside (I-X / M-X) and E-X only after B-X or the same-type inside tag; after O, E-*, S-*
                only O, B-*, S-*; start with O/B/S, end with O/E/S.
    Typeless labels (CWS `B M E S`) follow the same rules with one implicit type, and typed labels
    without O (joint POS `B-n M-n E-n S-v`) keep the type fixed inside a word.
    """
    if len(set(labels)) != len(labels):
        raise ZenError("labels: duplicate labels in the label list")
    try:
        parsed = [parse_label(label) for label in labels]
        resolved = detect_scheme(labels) if scheme is None else scheme_name(scheme)
    except ValueError as e:
        raise ZenError(str(e)) from None
    inside = "M" if resolved == "BMES" else "I"
    for label, (prefix, _) in zip(labels, parsed):
        if prefix not in SCHEME_PREFIXES[resolved]:
            raise ZenError(f"label {label!r}: not a {resolved} tag (expected one of "
                           f"{', '.join(sorted(SCHEME_PREFIXES[resolved]))} with an optional -TYPE)")

    n = len(labels)
    trans = torch.zeros(n, n, dtype=torch.bool)
    start = torch.zeros(n, dtype=torch.bool)
    end = torch.zeros(n, dtype=torch.bool)
    for j, (pj, tj) in enumerate(parsed):
        if resolved == "BIO":
            start[j] = pj != "I"
            end[j] = True
        else:
            start[j] = pj in ("O", "B", "S")
            end[j] = pj in ("O", "E", "S")
        for i, (pi, ti) in enumerate(parsed):
            if resolved == "BIO":
                ok = pj != "I" or (pi in ("B", "I") and ti == tj)
            else:
                chunk_open = pi in ("B", inside)  # inside a multi-token chunk: must continue it
                if chunk_open:
                    ok = pj in (inside, "E") and ti == tj
                else:
                    ok = pj in ("O", "B", "S")
            trans[i, j] = ok
    return TransitionConstraints(tuple(labels), resolved, trans, start, end)


def _check_mask(mask: Tensor | None, batch: int, length: int, device: torch.device) -> Tensor:
    """Validate (or create) a [B, L] prefix mask and return it as bool."""
    if mask is None:
        return torch.ones(batch, length, dtype=torch.bool, device=device)
    if mask.shape != (batch, length):
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match emissions [B, L] = [{batch}, {length}]")
    mask = mask.bool()
    # A 1 after a 0 would make the chain skip positions: the recursion below assumes padding at the end.
    if length > 1 and bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        raise ValueError("CRF mask rows must be a prefix of ones (padding at the end only)")
    return mask


def viterbi_decode(
    emissions: Tensor,
    mask: Tensor,
    transitions: Tensor,
    start: Tensor,
    end: Tensor,
    pad_value: int = -1,
) -> tuple[Tensor, Tensor]:
    """Best tag path per row by dynamic programming (loop over positions only).

    emissions [B, L, T]; mask [B, L] bool prefix; transitions [T, T]; start/end [T] (forbidden entries may
    be -inf). Returns paths [B, L] long (`pad_value` at masked positions and in rows of length 0) and the
    best path scores [B] (-inf for empty rows or rows with no allowed path).
    """
    batch, length, num_tags = emissions.shape
    if length == 0:
        return emissions.new_full((batch, 0), pad_value, dtype=torch.long), emissions.new_full((batch,), float("-inf"))
    score = start + emissions[:, 0]  # [B, T]: best score of a path ending in each tag
    identity = torch.arange(num_tags, device=emissions.device).expand(batch, num_tags)
    backpointers = []
    for t in range(1, length):
        # cand[b, i, j] = best path ending in i at t-1, then i → j
        cand = score.unsqueeze(2) + transitions  # [B, T, T]
        best, argbest = cand.max(dim=1)  # [B, T]
        step = mask[:, t].unsqueeze(1)  # [B, 1]
        score = torch.where(step, best + emissions[:, t], score)
        # Past a row's end the backpointer is the identity, so backtracking from the last column carries
        # the row's final tag back unchanged to its true last position.
        backpointers.append(torch.where(step, argbest, identity))
    score = score + end
    best_score, last = score.max(dim=1)  # [B]
    path = [last]
    for bp in reversed(backpointers):
        last = bp.gather(1, last.unsqueeze(1)).squeeze(1)
        path.append(last)
    paths = torch.stack(path[::-1], dim=1)  # [B, L]
    paths = paths.masked_fill(~mask, pad_value)
    empty = ~mask[:, 0]
    best_score = best_score.masked_fill(empty, float("-inf"))
    return paths, best_score


class CRF(nn.Module):
    """Linear-chain CRF over `num_tags` tags with learned transition, start and end scores.

    `forward` returns the negative log-likelihood of gold tags. With `reduction="mean"` it is the mean
    over the non-empty sequences of the batch (per-sequence NLL, not per token, so long sentences weigh
    more — the usual CRF objective, and what the CHTE paper maximises); `"sum"` sums, `"none"` gives [B].
    Scores are computed in at least float32: the forward algorithm sums over many positions in log space,
    where bf16/fp16 lose too much precision.
    """

    def __init__(self, num_tags: int, constraints: TransitionConstraints | None = None,
                 reduction: Reduction = "mean"):
        super().__init__()
        if num_tags < 1:
            raise ValueError(f"num_tags must be >= 1, got {num_tags}")
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be mean, sum or none, got {reduction!r}")
        self.num_tags = num_tags
        self.reduction = reduction
        # Zero init: no prior preference between moves; the data (and the constraints) shape them.
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))  # [from, to]
        self.start_transitions = nn.Parameter(torch.zeros(num_tags))
        self.end_transitions = nn.Parameter(torch.zeros(num_tags))
        if constraints is not None and len(constraints.labels) != num_tags:
            raise ValueError(f"constraints cover {len(constraints.labels)} labels, CRF has {num_tags} tags")
        self.constrained = constraints is not None
        # Derived from the label list (saved with the task), so kept out of the state dict.
        c = constraints
        self.register_buffer("allowed_transitions", c.transitions.clone() if c else
                             torch.ones(num_tags, num_tags, dtype=torch.bool), persistent=False)
        self.register_buffer("allowed_start", c.start.clone() if c else
                             torch.ones(num_tags, dtype=torch.bool), persistent=False)
        self.register_buffer("allowed_end", c.end.clone() if c else
                             torch.ones(num_tags, dtype=torch.bool), persistent=False)

    def scores(self, dtype: torch.dtype, forbidden: float = FORBIDDEN_SCORE) -> tuple[Tensor, Tensor, Tensor]:
        """(transitions [T, T], start [T], end [T]) in `dtype` with forbidden moves set to `forbidden`."""
        trans = self.transitions.to(dtype)
        start = self.start_transitions.to(dtype)
        end = self.end_transitions.to(dtype)
        if self.constrained:
            trans = trans.masked_fill(~self.allowed_transitions, forbidden)
            start = start.masked_fill(~self.allowed_start, forbidden)
            end = end.masked_fill(~self.allowed_end, forbidden)
        return trans, start, end

    @staticmethod
    def _compute_dtype(emissions: Tensor) -> torch.dtype:
        return torch.float64 if emissions.dtype == torch.float64 else torch.float32

    def log_partition(self, emissions: Tensor, mask: Tensor | None = None) -> Tensor:
        """log Z per row [B] by the forward algorithm; emissions [B, L, T], mask [B, L] prefix."""
        batch, length, _ = emissions.shape
        mask = _check_mask(mask, batch, length, emissions.device)
        out_dtype = self._compute_dtype(emissions)
        # log Σ_i exp(alpha[b, i] + trans[i, j]) as a matrix product in exp space, shifted by the row max of
        # alpha and the column max of trans so that every exp is ≤ 1: exp(alpha - m) @ exp(trans - c). A
        # [B, T, T] logsumexp per position costs (and autograd keeps) T times more (measured: docs/design.md,
        # "Linear-chain CRF"). It runs in float64, whose exp underflows only 708
        # nats below the best path (float32: 87, which a confident model's paths into a tag reach at once).
        # Where a sum still comes out so small that terms may have underflowed, that step takes the exact
        # logsumexp.
        emissions = emissions.to(torch.float64)
        trans, start, end = self.scores(torch.float64)
        col = trans.max(dim=0).values  # [T]
        exp_trans = (trans - col).exp()  # [T, T]; forbidden moves are exactly 0
        floor = torch.finfo(torch.float64).tiny * 2.0**30  # terms lost below tiny are < 1e-9 of the sum
        alpha = start + emissions[:, 0]  # [B, T]: log-sum of all paths ending in each tag
        for t in range(1, length):
            m = alpha.max(dim=1, keepdim=True).values.detach()  # [B, 1]; the shift cancels, no gradient needed
            total = (alpha - m).exp() @ exp_trans  # [B, T]
            low = total < floor
            into = m + total.clamp_min(floor).log() + col  # [B, T]
            if bool(low.any()):
                into = torch.where(low, torch.logsumexp(alpha.unsqueeze(2) + trans, dim=1), into)
            alpha = torch.where(mask[:, t].unsqueeze(1), into + emissions[:, t], alpha)
        log_z = torch.logsumexp(alpha + end, dim=1).to(out_dtype)  # [B]
        return log_z.masked_fill(~mask[:, 0], 0.0)  # an empty row has one (empty) path of score 0

    def sequence_score(self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None) -> Tensor:
        """s(y) per row [B] for gold tags [B, L] (values at masked positions are ignored)."""
        batch, length, _ = emissions.shape
        mask = _check_mask(mask, batch, length, emissions.device)
        if tags.shape != (batch, length):
            raise ValueError(f"tags shape {tuple(tags.shape)} does not match emissions [B, L] = [{batch}, {length}]")
        emissions = emissions.to(self._compute_dtype(emissions))
        trans, start, end = self.scores(emissions.dtype)
        tags = tags.long().masked_fill(~mask, 0)  # padding may hold an ignore index such as -100
        if bool(((tags < 0) | (tags >= self.num_tags)).any()):
            raise ValueError(f"gold tags must be in [0, {self.num_tags}) at unmasked positions")
        fmask = mask.to(emissions.dtype)
        emit = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)  # [B, L]
        score = (emit * fmask).sum(1)
        if length > 1:
            moves = trans[tags[:, :-1], tags[:, 1:]]  # [B, L-1]
            score = score + (moves * fmask[:, 1:]).sum(1)
        lengths = mask.sum(1)  # [B]
        last = tags.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)  # [B]
        score = score + start[tags[:, 0]] + end[last]
        return score.masked_fill(lengths == 0, 0.0)

    def forward(self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None) -> Tensor:
        """Negative log-likelihood of `tags` [B, L] given emissions [B, L, T], reduced per `reduction`."""
        batch, length, _ = emissions.shape
        mask = _check_mask(mask, batch, length, emissions.device)
        nll = self.log_partition(emissions, mask) - self.sequence_score(emissions, tags, mask)  # [B]
        if self.reduction == "none":
            return nll
        if self.reduction == "sum":
            return nll.sum()
        nonempty = mask[:, 0].sum().clamp(min=1) if length > 0 else nll.new_tensor(1.0)
        return nll.sum() / nonempty

    @torch.no_grad()
    def decode(self, emissions: Tensor, mask: Tensor | None = None, pad_value: int = -1) -> tuple[Tensor, Tensor]:
        """Viterbi: (best paths [B, L] with `pad_value` past each row's end, their scores [B]).

        Forbidden moves are -inf here (not the finite training penalty), so no well-formed alternative can
        ever lose to an ill-formed path however large the emissions are.
        """
        batch, length, _ = emissions.shape
        mask = _check_mask(mask, batch, length, emissions.device)
        emissions = emissions.to(self._compute_dtype(emissions))
        trans, start, end = self.scores(emissions.dtype, forbidden=float("-inf"))
        return viterbi_decode(emissions, mask, trans, start, end, pad_value)

    def decode_lists(self, emissions: Tensor, mask: Tensor | None = None) -> list[list[int]]:
        """Best paths as Python lists, each as long as its row's mask."""
        paths, _ = self.decode(emissions, mask)
        batch, length, _ = emissions.shape
        lengths = _check_mask(mask, batch, length, emissions.device).sum(1).tolist()
        return [row[:n] for row, n in zip(paths.tolist(), lengths)]
