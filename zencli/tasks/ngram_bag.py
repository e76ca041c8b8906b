"""The n-gram bag of a classification head (`task.ngram_bag`): fitted alone as a TF-IDF logistic
regression before the encoder trains, then mixed with the encoder on dev.

A fine-tuning on a few CPU minutes sees a fraction of an epoch, far too little for a linear model on half a
million sparse features; fitted on its own, the bag costs no encoder pass and converges in seconds. Fitted
into the joint model, though, it decides every label (it fits the training set to 99.7 %), so the encoder
beside it gets no gradient and learns nothing. So with a dev file:

1. `fit_bag`: the bag alone, an L2-regularised logistic regression on the TF-IDF weights of its features
   (full-batch L-BFGS): what a TF-IDF + logistic regression baseline is;
2. the encoder and its linear layer train alone (`head.shares = (1, 0)`), dev picking their best step;
3. `mix_on_dev`: the two parts' dev probabilities are mixed, θ·log p_encoder + (1 − θ)·log p_bag, with the θ
   of the best dev score, and θ is folded into the head's weights: the saved model is one linear sum.

Without a dev file there is nothing to choose on: the fitted bag and the encoder train jointly.

    note = fit_bag(model.head.bag, records, pad_id=...)                      # records: feature records with labels
    model.head.shares = (1.0, 0.0)                                            # then train
    note = mix_on_dev(model, task, inputs, dev_gold, metric="accuracy")      # before saving
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from zencli.data.collate import collate
from zencli.model.heads import NgramBag
from zencli.tasks.classification import Classified

BAG_FIT = "tfidf-lr, encoder alone, mixed on dev"  # in the run fingerprint: an older run does not resume into it
# the inverse L2 strength C: what `bin/tfidf-baseline` chose on dev on both review sets (docs/results.md); a
# one-off check of C = 3 and 30 on their dev sets moved the bag's accuracy by less than the seed spread
STRENGTH = 10.0
MAX_ITER = 100  # L-BFGS iterations: in the same check, 200 gave the same dev accuracy
MIX_STEPS = 21  # θ = 0, 0.05, …, 1
_FEATURE_CHUNK = 1024  # records featurised per collate call


def _rows(bag: NgramBag, records: Sequence[dict], pad_id: int) -> list[torch.Tensor]:
    """Per record its feature rows (padding left out)."""
    rows = []
    with torch.no_grad():
        for c0 in range(0, len(records), _FEATURE_CHUNK):
            batch = collate(list(records[c0:c0 + _FEATURE_CHUNK]), pad_id=pad_id)
            r, w = bag.features(batch["input_ids"], batch["attention_mask"], batch.get("ngram_ids"),
                                batch.get("ngram_attention_mask"))  # [b, F], [b, F]
            rows += [ri[wi > 0] for ri, wi in zip(r, w)]
    return rows


def _matrix(rows: list[torch.Tensor], weights: list[torch.Tensor], column: torch.Tensor, width: int) -> torch.Tensor:
    """The [N, width] CSR matrix of the records' weights over the fitted columns (repeats add up: tf)."""
    lengths = torch.tensor([len(r) for r in rows])
    r = torch.repeat_interleave(torch.arange(len(rows)), lengths)
    c = column[torch.cat(rows)] if rows else torch.zeros(0, dtype=torch.long)
    coo = torch.sparse_coo_tensor(torch.stack([r, c]), torch.cat(weights) if rows else torch.zeros(0),
                                  (len(rows), width), check_invariants=False).coalesce()
    with warnings.catch_warnings():  # "sparse CSR support is in beta": the two products it is used for work
        warnings.simplefilter("ignore", UserWarning)
        return coo.to_sparse_csr()



def _transpose(x: torch.Tensor) -> torch.Tensor:
    """xᵀ of a CSR matrix, as CSR: the gradient's product runs row by row too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return x.to_sparse_coo().t().coalesce().to_sparse_csr()


def _lbfgs(x: torch.Tensor, xt: torch.Tensor, y: torch.Tensor, w: torch.Tensor, b: torch.Tensor, strength: float,
           max_iter: int) -> None:
    """Minimise mean cross-entropy + ‖w‖² / (2·C·N) over (w [U, C], b [C]) in place, from their current values
    (sklearn's LogisticRegression objective, divided by C·N). Gradients by hand: one sparse product each way."""
    n = x.shape[0]
    lam = 1.0 / (strength * n)
    target = F.one_hot(y, w.shape[1]).float()  # [N, C]
    optimizer = torch.optim.LBFGS([w, b], lr=1, max_iter=max_iter, history_size=10, line_search_fn="strong_wolfe",
                                  tolerance_grad=1e-6, tolerance_change=1e-10)

    def closure() -> torch.Tensor:
        with torch.no_grad():
            logp = (torch.sparse.mm(x, w) + b).log_softmax(1)  # [N, C]
            loss = -(logp * target).sum() / n + 0.5 * lam * (w * w).sum()
            g = (logp.exp() - target) / n  # [N, C]
            w.grad = torch.sparse.mm(xt, g) + lam * w  # [U, C]
            b.grad = g.sum(0)
        return loss

    optimizer.step(closure)


def fit_bag(bag: NgramBag, records: Sequence[dict], *, pad_id: int, strength: float = STRENGTH,
            max_iter: int = MAX_ITER) -> str:
    """Fit `bag` alone as a TF-IDF logistic regression on `records` (their `labels`): its idf, table and bias.
    A note for the user."""
    start = time.perf_counter()
    bag.idf.fill_(1.0)  # every feature counts while finding them
    rows = _rows(bag, records, pad_id)
    y = torch.as_tensor(np.stack([np.asarray(r["labels"]) for r in records])).long()  # [N]
    columns = torch.unique(torch.cat(rows))  # the rows the training texts have, sorted
    column = torch.full((bag.buckets,), -1, dtype=torch.long)
    column[columns] = torch.arange(len(columns))
    df = torch.zeros(len(columns))
    for r in rows:
        df[column[torch.unique(r)]] += 1
    n = len(rows)
    with torch.no_grad():
        bag.idf.zero_()  # an n-gram no training text has weighs nothing (nor counts in the norm)
        bag.idf[columns] = torch.log((1 + n) / (1 + df)) + 1  # sklearn's smoothed idf
    x = _matrix(rows, [bag.normalised(bag.idf[r]) for r in rows], column, len(columns))
    w = torch.zeros(len(columns), bag.table.weight.shape[1])
    b = torch.zeros(w.shape[1])
    _lbfgs(x, _transpose(x), y, w, b, strength, max_iter)
    with torch.no_grad():
        bag.table.weight.zero_()
        bag.table.weight[columns] = w
        bag.bias.copy_(b)
        train_acc = ((torch.sparse.mm(x, w) + b).argmax(1) == y).float().mean().item()
    return (f"n-gram bag: fitted alone first, a TF-IDF logistic regression (C={strength:g}) on {len(columns):,} "
            f"char 1-3-gram and lexicon n-gram features of {n:,} inputs (training accuracy {100 * train_acc:.2f}) "
            f"in {time.perf_counter() - start:.1f} s")


def mix_on_dev(model: Any, task: Any, inputs: Any, dev: Any, metric: str) -> str:
    """Mix the head's encoder and bag parts by the θ with the best dev `metric` and fold it into the weights
    (the larger share becomes 1, so that part keeps its scale); ties go to the θ nearest an even mix."""
    head = model.head
    parts = []
    for shares in ((1.0, 0.0), (0.0, 1.0)):
        head.shares = shares
        probs = task.predict(model, inputs, dev.examples)
        parts.append(np.stack([p.probabilities if p.probabilities is not None else np.full(task.n_classes(), np.nan)
                               for p in probs]))
    head.shares = (1.0, 1.0)
    log_encoder, log_bag = (np.log(np.clip(p, 1e-12, None)) for p in parts)
    empty = np.isnan(parts[0]).any(1)
    scores = {}
    for theta in np.linspace(0.0, 1.0, MIX_STEPS):
        picked = (theta * log_encoder + (1 - theta) * log_bag).argmax(1)
        predictions = [Classified(None if e else task.labels.labels[k], None, None) for k, e in zip(picked, empty)]
        scores[round(float(theta), 4)] = task.scores(task.evaluate(dev, predictions, name="dev"))[metric]
    theta = max(scores, key=lambda t: (scores[t], -abs(t - 0.5)))
    encoder_share, bag_share = theta / max(theta, 1 - theta), (1 - theta) / max(theta, 1 - theta)
    with torch.no_grad():
        head.classifier.weight.mul_(encoder_share)
        head.classifier.bias.mul_(encoder_share)
        head.bag.table.weight.mul_(bag_share)
        head.bag.bias.mul_(bag_share)
    return (f"n-gram bag and encoder mixed on dev: θ = {theta:.2f} (encoder share) gives dev {metric} "
            f"{100 * scores[theta]:.2f}; the encoder alone {100 * scores[1.0]:.2f}, "
            f"the bag alone {100 * scores[0.0]:.2f}")
