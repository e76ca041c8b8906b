"""Time and memory of each pretraining stage on one corpus: the lexicon, the shards, the first training steps.

Not part of the zen package; from a clone, on a corpus of any size (e.g. one `benchmarks/gen_corpus.py` wrote):

    python benchmarks/scale.py CORPUS.txt [CORPUS2.txt ...] -o OUT [--steps 50] [--workers 1]

Each stage runs as its own process (`python -m zencli ...`, in OUT/NAME/ per corpus):

- `floor-cat`: `cat CORPUS > /dev/null`, the bytes read once (from the page cache when the file is there);
- `floor-python`: one Python pass over the lines, decoding UTF-8 and counting characters: the least any stage
  that reads the text in Python costs;
- `lexicon`: `zen lexicon build CORPUS --recipe lexicon-zh-pd98-entropy` (PMI >= 3, frequency >= 10, branching
  entropy >= 1.5 bits: the lexicon pretrain-zh-tiny builds);
- `data`: `zen data pretrain CORPUS --recipe pretrain-zh-tiny --ngram THAT` (the character vocabulary built from
  the corpus, then the masked NSP shards: two rounds, 64 tokens, character masking);
- `pretrain`: `zen pretrain --recipe pretrain-zh-tiny --max-steps N` on those shards (reused, not made again):
  the tiny model's first N steps, a final held-out evaluation and the model saved.

Per stage: wall seconds, CPU seconds (user + system of the process and its children, from wait4: a figure a
busy machine does not inflate), characters per wall second, and the peak RSS of the process tree (the sum over
the process and its descendants, sampled every 0.25 s with psutil) and of its largest process (ru_maxrss).
`--workers` is passed to the lexicon and the shards (the recipes' default, 0, is one process per CPU core).
Writes OUT/scale.json and OUT/scale.md (a Markdown table); a stage already in scale.json for the same corpus
size is not run again (delete the entry to redo it), so an interrupted run continues.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POLL_S = 0.25  # seconds between RSS samples (ru_maxrss is exact per process; the tree sum is sampled)
DISK_S = 2.0  # seconds between samples of the bytes under the stage's work folder (temp files included)
STAGES = ("floor-cat", "floor-python", "lexicon", "data", "pretrain")

FLOOR_PYTHON = (
    "import sys\n"
    "chars = lines = 0\n"
    "with open(sys.argv[1], encoding='utf-8') as f:\n"
    "    for line in f:\n"
    "        chars += len(line.rstrip('\\n')); lines += 1\n"
    "print(chars, lines)\n"
)


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under `folder` (files that vanish while it walks count as 0)."""
    total = 0
    for root, _, files in os.walk(folder):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def run_measured(cmd: list[str], log: Path, env: dict[str, str] | None = None, disk: Path | None = None) -> dict:
    """Run `cmd` (stdout and stderr to `log`); wall and CPU seconds, peak RSS of the tree and of one process,
    and the peak bytes under `disk` above what it held at the start (sampled every DISK_S)."""
    import psutil

    t0 = time.perf_counter()
    disk_start = peak_disk = folder_bytes(disk) if disk else 0
    next_disk = t0
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        ps = psutil.Process(proc.pid)
        peak_tree = 0
        status = None
        while status is None:
            total = 0
            try:
                procs = [ps] + ps.children(recursive=True)
            except psutil.Error:
                procs = []
            for p in procs:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            peak_tree = max(peak_tree, total)
            if disk and time.perf_counter() >= next_disk:
                peak_disk = max(peak_disk, folder_bytes(disk))
                next_disk = time.perf_counter() + DISK_S
            pid, status_code, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status = status_code
                break
            time.sleep(POLL_S)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "cmd": shlex.join(cmd), "rc": proc.returncode, "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_tree_mb": round(peak_tree / 1e6, 1),
        "peak_rss_max_process_mb": round(usage.ru_maxrss * 1024 / 1e6, 1),
        "peak_disk_gb": round((peak_disk - disk_start) / 1e9, 2),
    }


def stage_command(stage: str, corpus: Path, work: Path, steps: int, workers: int,
                  lexicon: Path | None = None, lexicon_set: list[str] = ()) -> list[str]:
    py = [sys.executable]
    zen = py + ["-m", "zencli"]
    ngram = lexicon or work / "ngram.txt"
    pt = work / "pretrain"
    common = ["--set", "data.heldout=[]"]
    if stage == "floor-cat":
        return ["sh", "-c", f"cat {shlex.quote(str(corpus))} > /dev/null"]
    if stage == "floor-python":
        return py + ["-c", FLOOR_PYTHON, str(corpus)]
    if stage == "lexicon":
        return zen + ["lexicon", "build", str(corpus), "--recipe", "lexicon-zh-pd98-entropy", "-o", str(ngram),
                      "--workers", str(workers), *[a for kv in lexicon_set for a in ("--set", kv)]]
    if stage == "data":
        return zen + ["data", "pretrain", str(corpus), "--recipe", "pretrain-zh-tiny", "--ngram", str(ngram),
                      "-o", str(pt), "--workers", str(workers), *common]
    if stage == "pretrain":
        return zen + ["pretrain", "--recipe", "pretrain-zh-tiny", "-o", str(pt), "--max-steps", str(steps),
                      "--quiet", "--set", f"data.corpus=[{corpus}]", "--set", f"data.ngram={ngram}",
                      "--set", f"data.workers={workers}", "--set", f"train.warmup_steps={max(1, steps // 10)}",
                      "--set", f"train.save_every={steps}", "--set", f"train.log_every={max(1, steps // 5)}",
                      "--set", f"train.eval_every={steps}", *common]
    raise ValueError(stage)


def corpus_size(path: Path) -> tuple[int, int]:
    """(characters without newlines, lines) of a UTF-8 text file, streamed."""
    chars = lines = 0
    with open(path, encoding="utf-8") as f:
        while block := f.read(1 << 22):
            nl = block.count("\n")
            chars += len(block) - nl
            lines += nl
    return chars, lines


def fmt_size(chars: int) -> str:
    for unit, div in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if chars >= div:
            return f"{chars / div:.3g}{unit}"
    return str(chars)


def table(results: dict) -> str:
    rows = ["| corpus | stage | wall s | CPU s | M chars/s (wall) | M chars/s (CPU) | peak RSS MB (tree) | "
            "peak RSS MB (largest process) | peak disk GB | wall ÷ floor-python |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for entry in sorted(results.values(), key=lambda e: e["chars"]):
        floor = entry["stages"].get("floor-python", {}).get("wall_s")
        for stage in STAGES:
            r = entry["stages"].get(stage)
            if not r:
                continue
            ratio = f"{r['wall_s'] / floor:.1f}" if floor and not stage.startswith("floor") else "—"
            per_wall = entry["chars"] / r["wall_s"] / 1e6 if r["wall_s"] else 0
            per_cpu = entry["chars"] / r["cpu_s"] / 1e6 if r["cpu_s"] else 0
            note = "" if r["rc"] == 0 else f" (exit {r['rc']})"
            rows.append(f"| {fmt_size(entry['chars'])} | {stage}{note} | {r['wall_s']:,.1f} | {r['cpu_s']:,.1f} | "
                        f"{per_wall:.2f} | {per_cpu:.2f} | {r['peak_rss_tree_mb']:,.0f} | "
                        f"{r['peak_rss_max_process_mb']:,.0f} | {r.get('peak_disk_gb', '—')} | {ratio} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path, nargs="+", help="raw text files, one paragraph per line")
    ap.add_argument("-o", "--out", type=Path, required=True, help="work folder: stage outputs, logs, scale.json/md")
    ap.add_argument("--steps", type=int, default=50, help="training steps of the pretrain stage (default 50)")
    ap.add_argument("--workers", type=int, default=1, help="lexicon and shard processes (0: one per CPU core)")
    ap.add_argument("--stages", default=",".join(STAGES), help=f"some of {','.join(STAGES)}")
    ap.add_argument("--lexicon", type=Path, help="the ngram.txt the data and pretrain stages use (default: the "
                    "lexicon stage's; with this, leave `lexicon` out of --stages)")
    ap.add_argument("--set", dest="lexicon_set", action="append", default=[], metavar="KEY=VALUE",
                    help="a lexicon recipe key for the lexicon stage (repeatable), e.g. first_pass_n=0")
    args = ap.parse_args(argv)
    args.out = args.out.resolve()  # the stages run in the repository root: a relative OUT would land there
    stages = [s for s in args.stages.split(",") if s]
    unknown = set(stages) - set(STAGES)
    if unknown:
        ap.error(f"--stages: unknown {sorted(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / "scale.json"
    results = json.loads(json_path.read_text()) if json_path.is_file() else {}
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for corpus in args.corpus:
        corpus = corpus.resolve()
        chars, lines = corpus_size(corpus)
        name = fmt_size(chars)
        work = args.out / name
        work.mkdir(parents=True, exist_ok=True)
        entry = results.setdefault(name, {"corpus": str(corpus), "chars": chars, "lines": lines,
                                          "bytes": corpus.stat().st_size, "stages": {}})
        for stage in stages:
            if stage in entry["stages"] and entry["stages"][stage]["rc"] == 0:
                continue
            cmd = stage_command(stage, corpus, work, args.steps, args.workers,
                                args.lexicon.resolve() if args.lexicon else None, args.lexicon_set)
            log = work / f"{stage}.log"
            print(f"{name} {stage}: {shlex.join(cmd)}", file=sys.stderr, flush=True)
            r = run_measured(cmd, log, env, disk=work)
            entry["stages"][stage] = r
            print(f"  {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, {r['peak_rss_tree_mb']:,.0f} MB peak (tree), "
                  f"exit {r['rc']}", file=sys.stderr, flush=True)
            json_path.write_text(json.dumps(results, indent=2) + "\n")
            if r["rc"] != 0:
                print(f"  failed: see {log}", file=sys.stderr)
                break
    (args.out / "scale.md").write_text(table(results))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
