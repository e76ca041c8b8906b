"""Lexicon extraction benchmark: chars/s and peak memory of `build` on PD98 and on larger synthetic corpora.

The synthetic corpus is generated deterministically (seeded) from the PD98 segmented training text by a
word-bigram Markov chain: a line starts with a word that starts some PD98 line, each next word is the
successor of a random occurrence of the current word, and the line ends where that occurrence ended its
line. Unlike repeating PD98 lines, this keeps PD98's vocabulary and local statistics while creating new
long n-grams, so the number of distinct n-grams grows with size as in real text. It is written to a temp
folder and deleted afterwards; nothing of it is kept in the repository.

Each size is built in a fresh process (`python -m zencli.bench.lexicon RUN.json`), so peak RSS is that
run's own.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from zencli.errors import ZenError
from zencli.lexicon.extract import build
from zencli.lexicon.settings import LexiconConfig
from zencli.text.reading import iter_lines

_MAX_WORDS = 600


def synthesize(cws_path: str | Path, n_chars: int, out: str | Path, *, seed: int = 0,
               batch: int = 20_000) -> dict[str, int]:
    """Write about `n_chars` characters (whole lines, at least n_chars) of Markov-chain text to `out`."""
    vocab: dict[str, int] = {}
    occ: list[int] = []  # word id of each word occurrence
    nxt: list[int] = []  # word id of the next occurrence in the same line, -1 at the end of a line
    starts: list[int] = []  # occurrences that begin a line
    for _, text in iter_lines(cws_path):
        ids = [vocab.setdefault(w, len(vocab)) for w in text.split()]
        if not ids:
            continue
        starts.append(len(occ))
        occ += ids
        nxt += ids[1:] + [-1]
    if not occ:
        raise ZenError(f"{cws_path}: no words; expected a segmented text (words separated by spaces)")
    words = list(vocab)
    occ_a, nxt_a = np.array(occ, np.int64), np.array(nxt, np.int64)
    order = np.argsort(occ_a, kind="stable")  # occurrences grouped by word
    succ = nxt_a[order]
    block_len = np.bincount(occ_a, minlength=len(words))
    block_start = np.concatenate(([0], np.cumsum(block_len)[:-1]))
    first_words = occ_a[np.array(starts)]
    rng = np.random.default_rng(seed)
    chars = lines = 0
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        while chars < n_chars:
            cur = first_words[rng.integers(0, len(first_words), batch)]
            alive = np.ones(batch, dtype=bool)
            cols = [cur]
            for _ in range(_MAX_WORDS - 1):
                pick = block_start[cur] + (rng.random(batch) * block_len[cur]).astype(np.int64)
                step = np.where(alive, succ[pick], -1)
                alive &= step >= 0
                cols.append(step)
                if not alive.any():
                    break
                cur = np.where(alive, step, 0)
            out_lines = []
            for row in np.stack(cols, axis=1).tolist():
                line = "".join(words[w] for w in row if w >= 0)
                out_lines.append(line)
                chars += len(line)
                lines += 1
                if chars >= n_chars:
                    break
            f.write("\n".join(out_lines) + "\n")
    return {"chars": chars, "lines": lines}


def prefix_file(src: Path, n_chars: int, out: Path) -> dict[str, int]:
    """The first lines of `src` holding at least n_chars characters."""
    chars = lines = 0
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        for _, text in iter_lines(src):
            if chars >= n_chars:
                break
            f.write(text + "\n")
            chars += len(text)
            lines += 1
    return {"chars": chars, "lines": lines}


def run_build(corpus: Path, out_dir: Path, workers: int, language: str = "zh") -> dict[str, Any]:
    """`build` in a fresh process; returns its sidecar plus wall and CPU time seen from here."""
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = {"corpus": [str(corpus)], "output": str(out_dir / "ngram.txt"), "workers": workers, "language": language}
    spec_path = out_dir / "run.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "zencli.bench.lexicon", str(spec_path)],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        raise ZenError(f"benchmark build of {corpus} failed: {tail[0]}")
    side = json.loads((out_dir / "ngram.json").read_text(encoding="utf-8"))
    side["bench"] = {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}
    return side


def _row(name: str, side: dict[str, Any]) -> dict[str, Any]:
    corpus, t, mem = side["corpus"], side["time_s"], side["memory_bytes"]
    return {
        "corpus": name,
        "chars": corpus["chars"],
        "lines": corpus["lines"],
        "ngrams": side["ngrams"],
        "per_length": {n: v["selected"] for n, v in side["per_length"].items()},
        "workers": side["settings"]["workers"],
        "time_count_s": t.get("count"),
        "time_merge_s": t.get("merge"),
        "time_total_s": t.get("total"),
        "wall_s": round(side["bench"]["wall_s"], 3),
        "cpu_s": round(side["bench"]["cpu_s"], 3),
        "chars_per_s": round(corpus["chars"] / t["total"]),
        "peak_rss_total": mem["peak_rss_total_sampled"],
        "peak_rss_main": mem["peak_rss_main"],
        "peak_rss_worker": mem["peak_rss_worker_max"],
    }


def run_bench(
    sizes: list[int],
    *,
    workers: int = 2,
    raw: Path | None,
    cws: Path,
    tmp_dir: Path | None = None,
    seed: int = 0,
    log: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    """Build on `raw` (PD98 train) and on synthetic corpora of `sizes` chars; one row per corpus."""
    rows = []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="zen-bench-lexicon-", dir=tmp_dir) as tmp:
        tmp = Path(tmp)
        if raw is not None:
            log(f"building on {raw}")
            rows.append(_row(Path(raw).name, run_build(Path(raw), tmp / "pd98", workers)))
        if sizes:
            big = tmp / "synthetic.txt"
            t0 = time.perf_counter()
            made = synthesize(cws, max(sizes), big, seed=seed)
            log(f"synthesized {made['chars']:,} chars in {time.perf_counter() - t0:.1f} s")
            for size in sorted(sizes):
                corpus = big
                if size < max(sizes):
                    corpus = tmp / f"synthetic-{size}.txt"
                    prefix_file(big, size, corpus)
                log(f"building on {size:,} synthetic chars")
                rows.append(_row(f"synthetic {size / 1e6:g}M", run_build(corpus, tmp / f"s{size}", workers)))
                if corpus != big:
                    corpus.unlink()
    return {"rows": rows, "seed": seed, "cpu_count": os.cpu_count(), "load_avg_at_start": load,
            "python": sys.version.split()[0]}


def _main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    cfg = LexiconConfig(corpus=[Path(p) for p in spec["corpus"]], output=Path(spec["output"]),
                        workers=spec["workers"], language=spec["language"])
    build(cfg)


if __name__ == "__main__":
    _main(sys.argv[1])
