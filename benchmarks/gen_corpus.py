"""A synthetic raw-text corpus of any size, for measuring the pretraining pipeline at scale.

Not part of the zen package (nothing is shipped from a corpus); from a clone:

    python benchmarks/gen_corpus.py --chars 100M -o corpus-100M.txt [--train FILE] [--seed 0]

Text is sampled from a character n-gram model trained at run time on `--train` (default: PD98 raw train,
`${data}/pd98/raw/train.txt`, from `zen data fetch pd98`), so that the number of distinct n-grams keeps
growing with the size of the output, as it does in real text, instead of repeating one file.

The model: an order-(k+1) character model (maximum likelihood, k = `--order` characters of context) that
backs off to shorter contexts seen fewer than `--min-count` times, sampled a span at a time. Picking a
uniformly random training position whose preceding k characters equal the last k generated ones and
emitting the character there is exactly a draw from the model's next-character distribution; the
generator then keeps copying from that position for a geometric number of characters (mean `--span`), which
is a draw from a longer context. Each step is a few integer operations in Python (pre-drawn random numbers),
and the characters of a block of spans are gathered with numpy, so 1 G characters take minutes, not hours;
memory stays constant (blocks are written as they are made).

Layout: one paragraph per line, like PD98 raw (`\\n` is a character of the model: lines end where training
lines end, and no line is empty), UTF-8, the file ending with `\\n`. `--chars` counts the characters of the
lines without their newlines; generation stops at the first line end at or after it. The same `--train`,
`--chars`, `--seed` and settings give the same bytes.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STEPS_PER_BLOCK = 1 << 18  # spans per block: ~2 M characters, a few MB of arrays


def parse_size(text: str) -> int:
    """'100M', '1G', '2.5k', '12345' → an integer (decimal multipliers)."""
    text = text.strip().replace("_", "").replace(",", "")
    mult = {"k": 10**3, "m": 10**6, "g": 10**9}.get(text[-1:].lower(), 1)
    number = text[:-1] if mult > 1 else text
    return int(round(float(number) * mult))


class CharModel:
    """The training text as code points and, per context order 1..k, the training positions grouped by the
    characters before them."""

    def __init__(self, text: str, order: int = 2, min_count: int = 2):
        if order < 1:
            raise ValueError("order: expected >= 1")
        lines = [line.strip() for line in text.split("\n")]
        lines = [line for line in lines if line]
        if len(lines) < 2:
            raise ValueError("training text: expected at least two non-empty lines")
        # A newline before every line: position p's context is the k characters before it, and every line
        # start has the context "...\n".
        joined = "\n" + "\n".join(lines) + "\n"
        self.codes = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).copy()
        self.order = order
        self.min_count = min_count
        n = len(self.codes)
        _, dense = np.unique(self.codes, return_inverse=True)
        dense = dense.astype(np.int64)
        alphabet = int(dense.max()) + 1
        # Candidate positions: those with k characters of context before them and a character at them.
        positions = np.arange(order, n, dtype=np.int64)
        # ctx[j][p]: an id of the j characters before position p (j = 1..k), for p in `positions`.
        self.groups = []  # per order j: (position -> group id array over all n, group starts, sorted positions)
        key = np.zeros(len(positions), dtype=np.int64)
        for j in range(1, order + 1):
            key = key * alphabet + dense[positions - j]
            ids, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
            by_pos = np.full(n + 1, -1, dtype=np.int64)
            by_pos[positions] = inverse
            order_idx = np.argsort(inverse, kind="stable")
            starts = np.concatenate([[0], np.cumsum(counts)])
            self.groups.append((by_pos, starts, positions[order_idx], counts))
            key = inverse.astype(np.int64)  # dense ids: the next level's key stays below n · alphabet
        # The jump table per position: the (group start, group size) of the longest context seen at least
        # min_count times (order 1 always: a newline or a character seen once is still a group of >= 1).
        start = np.zeros(n + 1, dtype=np.int64)
        size = np.zeros(n + 1, dtype=np.int64)
        level = np.full(n + 1, -1, dtype=np.int64)
        for j in range(order, 0, -1):
            by_pos, starts, _, counts = self.groups[j - 1]
            ok = (by_pos >= 0) & (level < 0)
            g = by_pos[ok]
            good = counts[g] >= min_count if j > 1 else np.ones(len(g), dtype=bool)
            idx = np.flatnonzero(ok)[good]
            level[idx] = j
            start[idx] = starts[g[good]]
            size[idx] = counts[g[good]]
        # Concatenated sorted positions of every order, so one offset per level indexes them all.
        offsets = np.cumsum([0] + [len(g[2]) for g in self.groups])
        table = np.concatenate([g[2] for g in self.groups])
        has = level > 0
        start[has] += offsets[level[has] - 1]
        self.n = n
        self.jump_start = start.tolist()
        self.jump_size = size.tolist()
        self.table = table
        self.table_list = table.tolist()

    def distinct_contexts(self) -> int:
        return len(self.groups[-1][3])


def generate(model: CharModel, chars: int, out: io.RawIOBase, *, seed: int = 0, span: float = 4.0,
             progress: bool = False) -> tuple[int, int]:
    """Write paragraphs of about `chars` characters (newlines not counted) to `out` (binary); returns
    (characters written without newlines, lines written)."""
    if span < 1:
        raise ValueError("span: expected >= 1")
    rng = np.random.default_rng(seed)
    codes = model.codes
    n = model.n
    jump_start, jump_size, table = model.jump_start, model.jump_size, model.table_list
    newline = 10
    pos = 1  # the first line's first character (position 0 is the leading newline)
    written = 0
    lines = 0
    t0 = time.perf_counter()
    done = False
    while not done:
        u = rng.random(STEPS_PER_BLOCK).tolist()
        lengths = rng.geometric(1.0 / span, STEPS_PER_BLOCK).tolist()
        starts = [0] * STEPS_PER_BLOCK
        lens = [0] * STEPS_PER_BLOCK
        for i in range(STEPS_PER_BLOCK):
            length = lengths[i]
            if pos + length > n:
                length = n - pos
            starts[i] = pos
            lens[i] = length
            nxt = pos + length  # the position after the span: its context is the last characters written
            s = jump_size[nxt] if nxt < n else 0
            if s == 0:  # the end of the training text: start a new line at the first one
                nxt_pos = 1
            else:
                nxt_pos = table[jump_start[nxt] + int(u[i] * s)]
            pos = nxt_pos
        st = np.asarray(starts, dtype=np.int64)
        ln = np.asarray(lens, dtype=np.int64)
        # Gather the spans: index = start of its span + offset within it.
        total = int(ln.sum())
        seg = np.repeat(st - np.concatenate([[0], np.cumsum(ln)[:-1]]), ln)
        block = codes[seg + np.arange(total, dtype=np.int64)]
        nl = np.flatnonzero(block == newline)
        text_chars = total - len(nl)
        if written + text_chars >= chars:
            # Cut after the first newline at which the target is reached.
            need = chars - written
            # characters before newline i (exclusive) = nl[i] - i
            before = nl - np.arange(len(nl))
            k = np.flatnonzero(before >= need)
            if len(k):
                cut = int(nl[k[0]]) + 1
                block = block[:cut]
                done = True
            text_chars = len(block) - int((block == newline).sum())
        out.write(block.astype("<u4").tobytes().decode("utf-32-le").encode("utf-8"))
        written += text_chars
        lines += int((block == newline).sum())
        if progress:
            rate = written / max(time.perf_counter() - t0, 1e-9)
            print(f"\r{written / 1e6:,.1f} M chars, {rate / 1e6:.2f} M chars/s", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return written, lines


def default_train() -> Path:
    from zencli.datasets import data_path

    found = data_path("pd98/raw/train.txt")
    if found.missing:
        raise SystemExit(f"gen_corpus: {found.missing}; or give --train FILE")
    return found.path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chars", required=True, help="characters to write, newlines not counted (e.g. 10M, 1G)")
    ap.add_argument("-o", "--output", type=Path, required=True, help="the text file to write")
    ap.add_argument("--train", type=Path, help="raw text to train the model on (default: PD98 raw train)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--order", type=int, default=2, help="characters of context at a jump (default 2)")
    ap.add_argument("--min-count", type=int, default=2, help="back off from contexts seen fewer times (default 2)")
    ap.add_argument("--span", type=float, default=4.0, help="mean characters copied per jump (default 4)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    train = args.train or default_train()
    t0 = time.perf_counter()
    model = CharModel(train.read_text(encoding="utf-8"), order=args.order, min_count=args.min_count)
    t1 = time.perf_counter()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_name(args.output.name + ".part")
    with open(tmp, "wb", buffering=1 << 22) as out:
        written, lines = generate(model, parse_size(args.chars), out, seed=args.seed, span=args.span,
                                  progress=not args.quiet)
    tmp.replace(args.output)
    t2 = time.perf_counter()
    if not args.quiet:
        print(f"{args.output}: {written:,} chars in {lines:,} lines ({args.output.stat().st_size / 1e6:,.1f} MB); "
              f"model {t1 - t0:.1f} s, sampling {t2 - t1:.1f} s ({written / max(t2 - t1, 1e-9) / 1e6:.2f} M chars/s)",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
