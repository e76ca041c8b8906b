"""Tiny models and data for the training-loop tests, plus a script entry point for subprocess tests.

`python -m tests.helpers_train OUT [--max-steps N …]` trains the tiny LM into OUT; the kill -9 and
DDP tests run it as separate processes (torchrun-style environment for DDP).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 1500  # >= sparse_min_rows below: the table trains row-sparse
SEQ = 8


class TinyLM(nn.Module):
    """Embedding → dropout → LayerNorm → linear → next-token logits."""

    def __init__(self, vocab: int = VOCAB, dim: int = 16, dropout: float = 0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.drop = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(dim)
        self.hidden = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, 50)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # [B, L] → [B, L, 50]
        h = self.norm(self.drop(self.embed(ids)))
        return self.out(torch.tanh(self.hidden(h)))


def make_examples(n: int = 64, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (SEQ,), generator=g) for _ in range(n)]


def collate(items: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(items)


def lm_loss(model: nn.Module, ids: torch.Tensor):
    """Predict (token id mod 50) of the next position; a random 10% of targets is ignored, drawn from
    torch, numpy and python RNGs so that resuming must restore all three."""
    logits = model(ids[:, :-1])
    target = ids[:, 1:] % 50
    drop = torch.rand(target.shape) < 0.1
    drop |= torch.from_numpy(np.random.rand(*target.shape) < 0.05)
    if random.random() < 0.5:
        drop[0, 0] = True
    target = target.masked_fill(drop.to(target.device), -100)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1), ignore_index=-100)
    valid = target != -100
    correct = ((logits.argmax(-1) == target) & valid).sum()
    return loss, {"acc": (correct, valid.sum())}, ids.numel()


def plain_loss(model: nn.Module, ids: torch.Tensor):
    """Mean next-token loss without randomness: processes × micro-batches average to the global batch."""
    logits = model(ids[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), (ids[:, 1:] % 50).reshape(-1)), {}, ids.numel()


WRITE_EVENTS = ("os.rename", "os.remove", "os.mkdir", "os.rmdir", "shutil.copyfile", "shutil.rmtree")


def audit_writes(root: Path, log: Path) -> None:
    """Append to `log` every file this process opens for writing, renames, copies or removes under `root`
    (a `sys.addaudithook`; `log` is created now, so an empty one proves the hook ran)."""
    root_s = str(Path(root).resolve())
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("", encoding="utf-8")
    writing_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            if not (isinstance(mode, str) and set(mode) & set("wax+")) and not (mode is None and flags & writing_flags):
                return
            paths = [path]
        elif event in WRITE_EVENTS:
            paths = list(args[:2]) if event in ("os.rename", "shutil.copyfile") else [args[0]]
        else:
            return
        for path in paths:
            if isinstance(path, (str, bytes, os.PathLike)):
                text = os.fsdecode(path)
                if os.path.abspath(text).startswith(root_s):
                    with open(log, "a", encoding="utf-8") as f:  # outside root: the hook ignores it
                        f.write(f"{event} {text}\n")

    sys.addaudithook(hook)


def build(seed: int = 0, dropout: float = 0.1) -> TinyLM:
    torch.manual_seed(seed)
    return TinyLM(dropout=dropout)


def main(argv: list[str] | None = None) -> None:
    from zencli.train import IndexedBatches, TrainSettings, train

    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--save-every", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--sleep", type=float, default=0.0, help="seconds per micro-batch (to kill mid-run)")
    ap.add_argument("--sparse", type=int, default=1)
    ap.add_argument("--plain", action="store_true", help="deterministic loss (no random target masking)")
    ap.add_argument("--fail", default=None, help="RANK:N — that process raises a ZenError in its N-th micro-batch")
    ap.add_argument("--signal", default=None, help="RANK:N[:SIG] — that process sends itself SIG (default TERM) "
                    "in its N-th micro-batch")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="train.device (cuda: nccl for DDP)")
    ap.add_argument("--progress", action="store_true", help="show the loop's progress display and notes (stderr)")
    ap.add_argument("--audit", type=Path, default=None, help="log OUT's writes to AUDIT/rank-R.txt (audit_writes)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rank = int(os.environ.get("RANK", "0"))
    if args.audit is not None:
        audit_writes(args.out, args.audit / f"rank-{rank}.txt")
    fail_rank, fail_at = map(int, args.fail.split(":")) if args.fail else (-1, 0)
    calls = [0]
    signal_rank, signal_at, signal_name = (args.signal.split(":") + ["TERM"])[:3] if args.signal else (-1, 0, "")

    def loss_fn(model, batch):
        calls[0] += 1
        if rank == fail_rank and calls[0] == fail_at:
            from zencli.errors import ZenError

            raise ZenError(f"made-up failure in micro-batch {fail_at} of rank {rank}")
        if rank == int(signal_rank) and calls[0] == int(signal_at):
            import signal

            os.kill(os.getpid(), getattr(signal, f"SIG{signal_name}"))
        if args.sleep:
            time.sleep(args.sleep)
        return plain_loss(model, batch) if args.plain else lm_loss(model, batch)

    settings = TrainSettings(lr=3e-3, warmup_steps=3, max_steps=args.max_steps, batch_size=args.batch_size,
                             grad_accum=args.grad_accum, dtype="fp32", device=args.device, seed=7,
                             save_every=args.save_every, keep_last=2, log_every=1, output_dir=args.out,
                             tensorboard=False, sparse_embeddings=bool(args.sparse), weight_decay=0.01)
    model = build(dropout=args.dropout)
    from zencli.signals import Interrupted

    try:
        result = train(model, loss_fn, IndexedBatches(make_examples(), collate, seed=3), settings,
                       show_progress=args.progress)
    except Interrupted as e:  # SIGTERM/SIGINT: checkpoint saved; the CLI's way of ending (zencli.cli.app)
        if e.announce:
            print(e, file=sys.stderr)
        sys.exit(e.exit_code)
    if rank == 0:
        print(json.dumps({"start_step": result.start_step, "step": result.step}))


if __name__ == "__main__":
    main(sys.argv[1:])
