"""Fitting the n-gram bag of a classification head on its own before the encoder trains (`task.ngram_bag`).

A fine-tuning on a few CPU minutes sees a fraction of an epoch, far too little for a linear model on a
million sparse features; on its own the bag costs no encoder pass, so a few epochs of it take seconds.
Fitted first, the model starts as a linear classifier on the same n-grams a TF-IDF + logistic regression
baseline reads, and the joint fine-tuning (encoder, head and bag together) learns what that misses.

    note = fit_bag(model.head.bag, records, pad_id=..., seed=...)   # records: training feature records
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from zencli.data.collate import collate
from zencli.model.heads import NgramBag

FIT_EPOCHS = 3  # the dev accuracy of the bag alone levels off by the 2nd-3rd pass (docs/results.md)
FIT_LR = 5e-2
FIT_BATCH = 512  # large batches: a dense Adam step over the whole table costs little per example
_FEATURE_CHUNK = 1024  # records featurised per collate call


def fit_bag(bag: NgramBag, records: Sequence[dict], *, pad_id: int, seed: int, epochs: int = FIT_EPOCHS,
            lr: float = FIT_LR) -> str:
    """Train `bag` alone as a logistic regression on `records` (their `labels`); a note for the user."""
    start = time.perf_counter()
    rows, weights, labels = [], [], []
    with torch.no_grad():
        for c0 in range(0, len(records), _FEATURE_CHUNK):
            batch = collate(list(records[c0:c0 + _FEATURE_CHUNK]), pad_id=pad_id)
            r, w = bag.features(batch["input_ids"], batch["attention_mask"], batch.get("ngram_ids"),
                                batch.get("ngram_attention_mask"))  # [b, F], [b, F]
            rows += list(r)
            weights += list(w)
            labels.append(batch["labels"])
    y = torch.cat(labels)  # [N]
    width = max(len(r) for r in rows)
    rows_t = torch.stack([F.pad(r, (0, width - len(r))) for r in rows])  # [N, F]; padding: weight 0
    weights_t = torch.stack([F.pad(w, (0, width - len(w))) for w in weights])  # [N, F]
    table = bag.table
    # dense Adam on a 1M-row table, but few steps (large batches): measured faster on a CPU than a
    # row-sparse update of small ones
    optimizer = torch.optim.Adam(table.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(y), generator=generator).split(FIT_BATCH):
            logits = F.embedding(rows_t[idx], table.weight)  # [b, F, C]
            loss = F.cross_entropy((logits * weights_t[idx].unsqueeze(2)).sum(1), y[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        logits = (F.embedding(rows_t, table.weight) * weights_t.unsqueeze(2)).sum(1)  # [N, C]
        train_acc = (logits.argmax(1) == y).float().mean().item()
    seconds = time.perf_counter() - start
    return (f"n-gram bag: fitted alone first ({epochs} epochs over {len(y):,} inputs, char 1-3-grams and lexicon "
            f"n-grams, training accuracy {100 * train_acc:.2f}) in {seconds:.1f} s")
