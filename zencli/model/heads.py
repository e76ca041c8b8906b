"""Task heads: small modules that turn encoder outputs into task scores, losses and decisions.

They take tensors only (hidden states [B, L, H] or pooled vectors [B, H]), so any encoder — ZEN 2.0,
ZEN 1.0, BERT or CHTE — can sit underneath. Linear layers keep the names of the released fine-tuned
checkpoints (`classifier`, `qa_outputs`) so those weights load by name.

- TokenClassificationHead: CWS / POS / NER tagging with a softmax or CRF decoder.
- SequenceClassificationHead / SentencePairClassificationHead: DC, SA, SPM, NLI.
- SpanExtractionHead: extractive MRC (CMRC 2018).
- CandidateRankingHead: answer selection (NLPCC-DBQA), scored per question/candidate pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from zencli.model.crf import CRF, TransitionConstraints, viterbi_decode

IGNORE_INDEX = -100


@dataclass
class HeadOutput:
    """Scores of a head and, when targets were given, its training loss (a scalar)."""

    logits: Tensor
    loss: Tensor | None = None


@dataclass
class SpanOutput:
    start_logits: Tensor  # [B, L]
    end_logits: Tensor  # [B, L]
    loss: Tensor | None = None


def left_align(mask: Tensor) -> tuple[Tensor, Tensor]:
    """Order that moves the selected positions of each row to the front, keeping their order.

    mask [B, L] bool → (order [B, L] long: gather index, aligned [B, L] bool: prefix mask of the same
    row counts). Lets a linear-chain CRF run over e.g. first word pieces only, skipping [CLS]/[SEP].
    """
    order = torch.sort((~mask).to(torch.int8), dim=1, stable=True).indices  # selected (0) before others (1)
    counts = mask.sum(1, keepdim=True)  # [B, 1]
    aligned = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0) < counts
    return order, aligned


class TokenClassificationHead(nn.Module):
    """Dropout + linear → per-token logits [B, L, C], decoded by softmax or by a CRF.

    `mask` [B, L] says which positions carry a label (e.g. characters, not [CLS]/[SEP]/padding); it need
    not be a prefix: for the CRF the selected positions are gathered into one chain per row.

    softmax: cross-entropy averaged over the selected tokens whose label is not `ignore_index`. Decoding is
        per-token argmax, or — when `constraints` are given — the best well-formed sequence under the
        token probabilities (Viterbi over log-softmax with only allowed moves), so the tagger never emits
        ill-formed tags such as `M-PER` after `O` that strict scoring would count as errors anyway.
    crf: CRF negative log-likelihood, mean over sequences; labels at selected positions must be real
        labels (a chain cannot skip a position); `constraints` forbid ill-formed moves in training and
        decoding.
    """

    def __init__(self, hidden_size: int, num_labels: int, dropout: float = 0.1,
                 decoder: Literal["softmax", "crf"] = "softmax", constraints: TransitionConstraints | None = None,
                 ignore_index: int = IGNORE_INDEX):
        super().__init__()
        if decoder not in ("softmax", "crf"):
            raise ValueError(f"decoder must be 'softmax' or 'crf', got {decoder!r}")
        if constraints is not None and len(constraints.labels) != num_labels:
            raise ValueError(f"constraints cover {len(constraints.labels)} labels, head has {num_labels}")
        self.decoder = decoder
        self.num_labels = num_labels
        self.ignore_index = ignore_index
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden_size, num_labels)
        self.crf = CRF(num_labels, constraints) if decoder == "crf" else None
        self.constraints = constraints

    def forward(self, hidden: Tensor, mask: Tensor | None = None, labels: Tensor | None = None) -> HeadOutput:
        """hidden [B, L, H], mask [B, L], labels [B, L] → logits [B, L, C] (+ loss if labels)."""
        logits = self.classifier(self.dropout(hidden))  # [B, L, C]
        if labels is None:
            return HeadOutput(logits)
        mask = self._mask(mask, logits)
        if self.crf is None:
            keep = mask & (labels != self.ignore_index)
            # Sum / count rather than CE's own mean: a batch with no labelled token gives 0, not NaN.
            ce = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten().masked_fill(~keep.flatten(), 0),
                                 reduction="none")
            loss = (ce * keep.flatten()).sum() / keep.sum().clamp(min=1)
            return HeadOutput(logits, loss)
        if bool((mask & (labels == self.ignore_index)).any()):
            raise ValueError("CRF decoder: every selected position needs a label; drop ignored positions from mask")
        order, aligned = left_align(mask)
        em = logits.gather(1, order.unsqueeze(2).expand_as(logits))  # [B, L, C]
        tags = labels.gather(1, order)
        return HeadOutput(logits, self.crf(em, tags, aligned))

    @torch.no_grad()
    def decode(self, logits: Tensor, mask: Tensor | None = None, pad_value: int | None = None) -> Tensor:
        """Label ids [B, L] for logits [B, L, C]; positions outside `mask` get `pad_value` (default ignore_index)."""
        pad = self.ignore_index if pad_value is None else pad_value
        mask = self._mask(mask, logits)
        if self.crf is None and self.constraints is None:
            return logits.argmax(-1).masked_fill(~mask, pad)
        order, aligned = left_align(mask)
        em = logits.gather(1, order.unsqueeze(2).expand_as(logits)).float()
        if self.crf is not None:
            paths, _ = self.crf.decode(em, aligned, pad_value=pad)
        else:
            c = self.constraints
            zero = em.new_zeros(())
            neg = em.new_full((), float("-inf"))
            trans = torch.where(c.transitions.to(em.device), zero, neg)
            start = torch.where(c.start.to(em.device), zero, neg)
            end = torch.where(c.end.to(em.device), zero, neg)
            paths, _ = viterbi_decode(em.log_softmax(-1), aligned, trans, start, end, pad_value=pad)
        out = torch.full_like(paths, pad)
        return out.scatter(1, order, paths).masked_fill(~mask, pad)  # back to the original positions

    @staticmethod
    def _mask(mask: Tensor | None, logits: Tensor) -> Tensor:
        if mask is None:
            return torch.ones(logits.shape[:2], dtype=torch.bool, device=logits.device)
        return mask.bool()


NGRAM_BAG_BUCKETS = 2**20  # hashed feature rows of NgramBag: few collisions among the ~600k n-grams of 12k reviews
_PRIME = 1_000_003  # hash multiplier: token ids stay far below it, so (a, b, c) → a·P² + b·P + c is unique
_LEXICON_SALT = 7  # keeps a lexicon id's feature apart from a character with the same id


class NgramBag(nn.Module):
    """A linear model on the bag of a text's n-grams beside the encoder: what a TF-IDF + logistic
    regression classifier sees, so the classifier never has less to go on than a linear model on the same
    n-grams. A small pretrained encoder carries what it learned on other text; the bag carries the words
    of this task's domain directly.

    Features of one window: its character 1-, 2- and 3-grams (from input_ids, inside [CLS] … [SEP]) and
    the lexicon n-grams the matcher found (ngram_ids), hashed into `buckets` rows of a [buckets, C]
    table (fastText's trick: no vocabulary to build or save, and a lexicon that grows keeps its features).
    A feature weighs its inverse document frequency `idf[row]` (0 for rows no training text has, which a
    TF-IDF vectoriser would not know), and the window's weights are L2-normalised, so a long text does
    not shout louder than a short one:

        v_f = idf[row_f];   logits = Σ_f table[row_f] · v_f / ‖v‖ + bias        (counts add up: tf · idf)

    A bag saved before it had idf and bias weighs every feature 1 (`bag_state_defaults`).
    """

    def __init__(self, num_labels: int, buckets: int = NGRAM_BAG_BUCKETS):
        super().__init__()
        self.buckets = buckets
        # an embedding table, so the training loop gives it row-sparse gradients and a lazy update (a batch
        # touches a few thousand of its rows); a linear model starts at zero
        self.table = nn.Embedding(buckets, num_labels)
        nn.init.zeros_(self.table.weight)
        self.bias = nn.Parameter(torch.zeros(num_labels))
        self.register_buffer("idf", torch.ones(buckets))  # set by zencli.tasks.ngram_bag.fit_bag

    def features(self, input_ids: Tensor, attention_mask: Tensor, ngram_ids: Tensor | None = None,
                 ngram_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """(feature rows [B, F], weights [B, F]) of a batch; padding and unseen features have weight 0."""
        ids = input_ids.long()  # [B, L]
        inside = attention_mask.bool().clone()  # [B, L]: the text, not [CLS] / [SEP] / padding
        inside[:, 0] = False
        last = attention_mask.long().sum(1) - 1
        inside[torch.arange(ids.shape[0], device=ids.device), last.clamp(min=0)] = False
        uni = ids  # [B, L]
        bi = ids[:, :-1] * _PRIME + ids[:, 1:]  # [B, L-1]
        tri = bi[:, :-1] * _PRIME + ids[:, 2:]  # [B, L-2]
        feats = [uni, bi * 3 + 1, tri * 3 + 2]  # × 3 + n − 1: a bigram never shares a row with a trigram
        masks = [inside, inside[:, :-1] & inside[:, 1:], inside[:, :-2] & inside[:, 1:-1] & inside[:, 2:]]
        if ngram_ids is not None and ngram_ids.numel():
            feats.append(ngram_ids.long() * _PRIME + _LEXICON_SALT)  # [B, M]
            masks.append(ngram_ids > 0 if ngram_mask is None else ngram_mask.bool() & (ngram_ids > 0))
        rows = torch.cat(feats, 1) % self.buckets  # [B, F]
        return rows, self.normalised(torch.cat(masks, 1).float() * self.idf[rows])  # [B, F] each

    @staticmethod
    def normalised(v: Tensor) -> Tensor:
        """Feature weights [..., F] divided by their L2 norm over the last axis."""
        # ‖v‖² is 0 (nothing known) or at least 1 (idf ≥ 1): the clamp only guards the empty text
        return v / (v * v).sum(-1, keepdim=True).clamp(min=1).sqrt()

    def forward(self, input_ids: Tensor, attention_mask: Tensor, ngram_ids: Tensor | None = None,
                ngram_mask: Tensor | None = None) -> Tensor:
        """→ logits [B, C]."""
        rows, weights = self.features(input_ids, attention_mask, ngram_ids, ngram_mask)
        return (self.table(rows) * weights.unsqueeze(2)).sum(1) + self.bias  # [B, F, C] → [B, C]


def bag_state_defaults(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """`state` with the idf (ones) and bias (zeros) of any n-gram bag saved before it had them: the same
    logits as when it was saved (every feature weighed 1, no bias)."""
    out = dict(state)
    for key, table in state.items():
        if key.endswith("bag.table.weight"):
            prefix = key[: -len("table.weight")]
            out.setdefault(prefix + "idf", torch.ones(table.shape[0], dtype=table.dtype))
            out.setdefault(prefix + "bias", torch.zeros(table.shape[1], dtype=table.dtype))
    return out


class SequenceClassificationHead(nn.Module):
    """Pooled vector [B, H] → dropout → linear → logits [B, C]; loss: softmax cross-entropy (mean).

    With `ngram_bag`, the logits of an NgramBag on the batch's tokens and matched n-grams are added
    (`forward(..., batch=batch)`); a head saved without it has no `bag.*` weights and loads without it.
    `shares` scales the two parts (encoder, bag) while a fine-tuning trains the encoder alone beside a
    fitted bag (1, 0) or scores each part on its own; a saved model has its mix folded into the weights,
    so it loads with (1, 1)."""

    def __init__(self, hidden_size: int, num_labels: int, dropout: float = 0.1, ngram_bag: bool = False):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden_size, num_labels)
        self.bag = NgramBag(num_labels) if ngram_bag else None
        self.shares = (1.0, 1.0)

    def forward(self, pooled: Tensor, labels: Tensor | None = None, batch: dict[str, Tensor] | None = None
                ) -> HeadOutput:
        encoder_share, bag_share = self.shares
        logits = self.classifier(self.dropout(pooled))  # [B, C]
        if encoder_share != 1.0:
            logits = logits * encoder_share
        if self.bag is not None and bag_share != 0.0:
            if batch is None:
                raise ValueError("a head with an n-gram bag needs the batch (its input_ids and ngram_ids)")
            bag = self.bag(batch["input_ids"], batch["attention_mask"], batch.get("ngram_ids"),
                           batch.get("ngram_attention_mask"))
            logits = logits + (bag if bag_share == 1.0 else bag_share * bag)
        loss = F.cross_entropy(logits.float(), labels) if labels is not None else None
        return HeadOutput(logits, loss)

    @torch.no_grad()
    def decode(self, logits: Tensor) -> Tensor:
        """Predicted class per example [B]."""
        return logits.argmax(-1)


class SentencePairClassificationHead(SequenceClassificationHead):
    """Classification of a text pair (SPM, NLI): the same head as single texts.

    The pair is one input, `[CLS] A [SEP] B [SEP]` with token types 0 for `[CLS] A [SEP]` and 1 for
    `B [SEP]`; the encoder's self-attention relates A and B, and the pooled [CLS] vector feeds this head.
    """


class SpanExtractionHead(nn.Module):
    """Start/end logits [B, L] from one linear map H → 2 (`qa_outputs`, as in BERT/ZEN MRC).

    `mask` [B, L] marks positions an answer may start or end at: the context tokens, plus position 0 if
    the task uses [CLS] as the target of windows that do not contain the answer. Other positions get a
    -inf-like logit in both the loss and decoding, so training never spends probability on the question
    or padding and decoding can never pick them.
    Loss: mean of the start and end cross-entropies; rows whose target lies outside [0, L) (e.g. -100,
    or an answer outside this window without a [CLS] target) are left out.
    """

    def __init__(self, hidden_size: int):
        super().__init__()
        self.qa_outputs = nn.Linear(hidden_size, 2)

    def forward(self, hidden: Tensor, mask: Tensor | None = None, start_positions: Tensor | None = None,
                end_positions: Tensor | None = None) -> SpanOutput:
        logits = self.qa_outputs(hidden).float()  # [B, L, 2]
        masked = self.masked(*logits.unbind(-1), mask)
        start, end = masked.start_logits, masked.end_logits  # [B, L] each
        if start_positions is None or end_positions is None:
            return SpanOutput(start, end)
        length = start.shape[1]
        valid = (start_positions >= 0) & (start_positions < length) & (end_positions >= 0) & (end_positions < length)
        s_pos = start_positions.masked_fill(~valid, 0)
        e_pos = end_positions.masked_fill(~valid, 0)
        if mask is not None:
            m = mask.bool()
            on_mask = m.gather(1, s_pos.unsqueeze(1)).squeeze(1) & m.gather(1, e_pos.unsqueeze(1)).squeeze(1)
            if bool((valid & ~on_mask).any()):
                raise ValueError("span target at a masked position; include it in mask or set it to -100")
        ce = F.cross_entropy(start, s_pos, reduction="none") + F.cross_entropy(end, e_pos, reduction="none")
        loss = (ce * valid).sum() / (2 * valid.sum().clamp(min=1))
        return SpanOutput(start, end, loss)

    @staticmethod
    def masked(start: Tensor, end: Tensor, mask: Tensor | None) -> SpanOutput:
        """Start/end logits [B, L] with the positions outside `mask` at the lowest float (no loss)."""
        if mask is not None:
            low = torch.finfo(start.dtype).min
            start = start.masked_fill(~mask.bool(), low)
            end = end.masked_fill(~mask.bool(), low)
        return SpanOutput(start, end)

    @staticmethod
    @torch.no_grad()
    def best_spans(start_logits: Tensor, end_logits: Tensor, mask: Tensor | None = None,
                   max_answer_length: int = 30, top_k: int = 1) -> tuple[Tensor, Tensor, Tensor]:
        """Top-k spans per row maximising start_logit[i] + end_logit[j] with i ≤ j < i + max_answer_length,
        both in `mask`.

        Returns (starts [B, k], ends [B, k], scores [B, k]); where fewer than k valid spans exist the rest
        are -1/-1/-inf. The score is comparable across windows of one document, which is how the caller
        picks the best window.
        """
        if max_answer_length < 1:
            raise ValueError(f"max_answer_length must be >= 1, got {max_answer_length}")
        batch, length = start_logits.shape
        pair = start_logits.float().unsqueeze(2) + end_logits.float().unsqueeze(1)  # [B, L(start), L(end)]
        i = torch.arange(length, device=pair.device)
        offset = i.unsqueeze(0) - i.unsqueeze(1)  # [L, L]: end − start
        ok = ((offset >= 0) & (offset < max_answer_length)).unsqueeze(0)  # [1, L, L]
        if mask is not None:
            m = mask.bool()
            ok = ok & m.unsqueeze(2) & m.unsqueeze(1)
        pair = pair.masked_fill(~ok, float("-inf"))
        k = min(top_k, length * length)
        scores, flat = pair.flatten(1).topk(k, dim=1)  # [B, k]
        starts, ends = flat // length, flat % length
        none = torch.isinf(scores)
        if top_k > k:  # pad to the requested width
            pad = top_k - k
            scores = torch.cat([scores, scores.new_full((batch, pad), float("-inf"))], 1)
            starts = torch.cat([starts, starts.new_full((batch, pad), -1)], 1)
            ends = torch.cat([ends, ends.new_full((batch, pad), -1)], 1)
            none = torch.cat([none, none.new_ones((batch, pad))], 1)
        return starts.masked_fill(none, -1), ends.masked_fill(none, -1), scores


class CandidateRankingHead(nn.Module):
    """Answer selection: one score per (question, candidate) pair from its pooled [CLS] vector.

    The linear map has two outputs (negative, positive), as the released DBQA fine-tuning treats the task
    as pair classification; its weights load as `classifier`. The ranking score is the positive-class
    log-odds `logit_pos − logit_neg`, a monotone function of P(positive), which is what the QA metric
    ranks candidates by.

    loss="binary": cross-entropy of each candidate's own label (= binary CE on the log-odds), mean over
        candidates; needs no grouping.
    loss="listwise": softmax of the scores over each question's candidates in the batch (grouped by
        `group_ids`), loss −log Σ_{positive} p, mean over questions with a positive candidate. Only useful
        when the batch sampler keeps a question's candidates together.
    """

    def __init__(self, hidden_size: int, dropout: float = 0.1, loss: Literal["binary", "listwise"] = "binary"):
        super().__init__()
        if loss not in ("binary", "listwise"):
            raise ValueError(f"loss must be 'binary' or 'listwise', got {loss!r}")
        self.loss_type = loss
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden_size, 2)

    @staticmethod
    def scores(logits: Tensor) -> Tensor:
        """Positive-class log-odds [N] from logits [N, 2]: the value to rank candidates by."""
        return logits[:, 1] - logits[:, 0]

    def forward(self, pooled: Tensor, labels: Tensor | None = None, group_ids: Tensor | None = None) -> HeadOutput:
        """pooled [N, H]; labels [N] in {0, 1}; group_ids [N] (question ids, any integers, any order)."""
        logits = self.classifier(self.dropout(pooled)).float()  # [N, 2]
        if labels is None:
            return HeadOutput(logits)
        if self.loss_type == "binary":
            return HeadOutput(logits, F.cross_entropy(logits, labels))
        if group_ids is None:
            raise ValueError("listwise ranking loss needs group_ids")
        return HeadOutput(logits, listwise_loss(self.scores(logits), labels.bool(), group_ids))


def listwise_loss(scores: Tensor, positive: Tensor, group_ids: Tensor) -> Tensor:
    """Mean over groups with ≥ 1 positive of −log(Σ_pos exp s / Σ_all exp s), groups from `group_ids` [N]."""
    _, gid = torch.unique(group_ids, return_inverse=True)  # [N] → 0..G-1
    groups = int(gid.max()) + 1 if gid.numel() else 0
    has_pos = scores.new_zeros(groups).index_add(0, gid, positive.to(scores.dtype)) > 0  # [G]
    log_all = _group_logsumexp(scores, gid, groups, torch.ones_like(has_pos))
    log_pos = _group_logsumexp(scores.masked_fill(~positive, float("-inf")), gid, groups, has_pos)
    return ((log_all - log_pos) * has_pos).sum() / has_pos.sum().clamp(min=1)


def _group_logsumexp(values: Tensor, gid: Tensor, groups: int, nonempty: Tensor) -> Tensor:
    """log Σ exp(values) per group [G]; groups flagged empty in `nonempty` get 0 (and zero gradient)."""
    # Per-group max shift for stability; a constant, so no gradient through it.
    gmax = values.new_full((groups,), float("-inf")).scatter_reduce(0, gid, values.detach(), "amax")
    gmax = torch.where(nonempty, gmax, torch.zeros_like(gmax))
    sums = values.new_zeros(groups).index_add(0, gid, (values - gmax[gid]).exp())
    # log(1) for empty groups: avoids log(0) = -inf, whose gradient would turn into NaN when masked.
    return torch.where(nonempty, sums, torch.ones_like(sums)).log() + gmax
