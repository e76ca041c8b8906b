"""The baseline a user tries first for character tagging: a character BiLSTM-CRF, trained for a wall-clock budget.

Not part of the zen package; it gives the "no pretraining, no Transformer" row beside zen's tagging scores at the
same time budget. From a clone:

    python benchmarks/bilstm_crf.py --data DIR --minutes 15 --seed 1 [--json out.json]

DIR holds train.tsv, dev.tsv and test.tsv as `zen data fetch` writes NER sets: `char<TAB>label`, a blank line
after each sentence. The model is Huang et al. (2015)'s, on characters: embeddings (100) → one BiLSTM layer
(2 × 128) → dropout 0.5 → a linear layer to the tags → a CRF constrained to the labels' scheme (zen's CRF, so
decoded paths are well formed). Adam at 1e-3, batch 16, gradient norm clipped at 5. Dev entity F1 is scored every
`--eval-every` steps; the best dev weights are scored on test with zen's entity F1 (strict spans). Training stops
at the budget (the test scoring comes on top). One thread by default, so two runs share a 2-core machine fairly.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch
from torch import nn

from zencli.errors import ZenError
from zencli.metrics.ner import score_ner
from zencli.model.crf import CRF, allowed_transitions

PAD, UNK = 0, 1


def read_blocks(path: Path) -> list[tuple[list[str], list[str]]]:
    """(chars, labels) per sentence of a `char<TAB>label` file; a malformed line is a one-line error."""
    sentences, chars, labels = [], [], []
    for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if not line.strip():
            if chars:
                sentences.append((chars, labels))
                chars, labels = [], []
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ZenError(f"{path}:{n}: expected `char<TAB>label`, got {line[:40]!r}")
        chars.append(parts[0])
        labels.append(parts[1])
    if chars:
        sentences.append((chars, labels))
    if not sentences:
        raise ZenError(f"{path}: no sentences")
    return sentences


class BiLstmCrf(nn.Module):
    def __init__(self, n_chars: int, labels: list[str], emb: int = 100, hidden: int = 128, dropout: float = 0.5):
        super().__init__()
        self.embed = nn.Embedding(n_chars, emb, padding_idx=PAD)
        self.lstm = nn.LSTM(emb, hidden, batch_first=True, bidirectional=True)
        self.drop = nn.Dropout(dropout)
        self.proj = nn.Linear(2 * hidden, len(labels))
        self.crf = CRF(len(labels), allowed_transitions(labels))

    def emissions(self, ids: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.drop(self.embed(ids)))  # [B,L,2H]
        return self.proj(self.drop(h))  # [B,L,T]

    def loss(self, ids: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.crf(self.emissions(ids), tags, mask)

    def decode(self, ids: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
        return self.crf.decode_lists(self.emissions(ids), mask)


def batches(data: list[tuple[list[int], list[int]]], size: int) -> list[tuple[torch.Tensor, ...]]:
    out = []
    for i in range(0, len(data), size):
        chunk = data[i:i + size]
        width = max(len(c) for c, _ in chunk)
        ids = torch.zeros(len(chunk), width, dtype=torch.long)
        tags = torch.zeros(len(chunk), width, dtype=torch.long)
        mask = torch.zeros(len(chunk), width, dtype=torch.bool)
        for j, (c, t) in enumerate(chunk):
            ids[j, :len(c)] = torch.tensor(c)
            tags[j, :len(t)] = torch.tensor(t)
            mask[j, :len(c)] = True
        out.append((ids, tags, mask))
    return out


def f1(model: BiLstmCrf, data: list[tuple[list[int], list[int]]], gold: list[list[str]], labels: list[str]) -> dict:
    model.eval()
    pred: list[list[str]] = []
    with torch.no_grad():
        for ids, _, mask in batches(data, 64):
            pred += [[labels[t] for t in path] for path in model.decode(ids, mask)]
    model.train()
    r = score_ner(gold, pred)
    return {"p": r.overall.precision, "r": r.overall.recall, "f1": r.overall.f1}


def run(data_dir: Path, minutes: float, seed: int, eval_every: int, threads: int) -> dict:
    torch.set_num_threads(threads)
    random.seed(seed)
    torch.manual_seed(seed)
    train, dev, test = (read_blocks(data_dir / f"{s}.tsv") for s in ("train", "dev", "test"))
    chars = {c for s, _ in train for c in s}
    vocab = {c: i + 2 for i, c in enumerate(sorted(chars))}
    labels = sorted({t for _, ts in train for t in ts})
    index = {t: i for i, t in enumerate(labels)}

    def encode(split: list[tuple[list[str], list[str]]]) -> list[tuple[list[int], list[int]]]:
        # a dev/test label unseen in training cannot be predicted: it is scored as gold, tagged O here
        return [([vocab.get(c, UNK) for c in s], [index.get(t, index.get("O", 0)) for t in ts]) for s, ts in split]

    tr, dv, te = encode(train), encode(dev), encode(test)
    model = BiLstmCrf(len(vocab) + 2, labels)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    budget, t0, step, best, best_state = 60 * minutes, time.perf_counter(), 0, -1.0, None
    curve = []
    while time.perf_counter() - t0 < budget:
        random.shuffle(tr)
        for ids, tags, mask in batches(tr, 16):
            loss = model.loss(ids, tags, mask)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            step += 1
            if step % eval_every == 0:
                score = f1(model, dv, [ts for _, ts in dev], labels)["f1"]
                curve.append((step, round(time.perf_counter() - t0, 1), score))
                if score > best:
                    best, best_state = score, {k: v.clone() for k, v in model.state_dict().items()}
            if time.perf_counter() - t0 >= budget:
                break
    if best_state is None or (curve and curve[-1][0] != step):  # the last steps' weights get their dev score too
        score = f1(model, dv, [ts for _, ts in dev], labels)["f1"]
        curve.append((step, round(time.perf_counter() - t0, 1), score))
        if score > best:
            best, best_state = score, None
    if best_state is not None:
        model.load_state_dict(best_state)
    return {"model": "char BiLSTM-CRF", "data": str(data_dir), "minutes": minutes, "seed": seed, "steps": step,
            "best_dev_f1": best, "test": f1(model, te, [ts for _, ts in test], labels), "dev_curve": curve,
            "threads": threads, "torch": torch.__version__}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="folder with train.tsv, dev.tsv, test.tsv")
    ap.add_argument("--minutes", type=float, default=15.0, help="training budget (wall clock)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=200, help="dev F1 every N steps (the best is kept)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args()
    try:
        result = run(args.data, args.minutes, args.seed, args.eval_every, args.threads)
    except ZenError as e:
        print(f"bilstm_crf: error: {e}", file=sys.stderr)
        sys.exit(2)
    text = json.dumps(result, ensure_ascii=False, indent=2)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
