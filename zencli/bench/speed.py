"""`zen bench speed`: the three speed benchmarks in one run, side by side, and the ratios that matter.

A composition, with no measurement code of its own:
- models: `zencli.bench.model.run` — training and inference tokens/s of ZEN 2.0, ZEN 1.0 and a plain
  BERT of the same size (interleaved rounds, ratios as medians of per-round ratios), and the GEMM peak
  measured at the start and at the end of that run;
- matcher: `zencli.bench.matcher.run` — the trie matcher against the released per-position loop on
  the dataset's raw dev text (n-grams counted from its raw train text);
- lexicon: `zencli.bench.lexicon.run_bench` — `zen lexicon build` chars/s on the raw train text and on
  synthetic corpora of the given sizes.

`quick` keeps every section but shortens it: one model size unless given (tiny), 2 timed rounds,
fp32 and bf16 as the model benchmark picks them, no dense-AdamW variant, a 0.25 s GEMM peak; one matcher
pass over n-grams counted from the first 300k chars; the lexicon on the raw train text only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from zencli.bench import lexicon as lexicon_bench
from zencli.bench import matcher as matcher_bench
from zencli.bench import model as model_bench
from zencli.bench.common import dataset_dir, machine_facts, need_file
from zencli.bench.model import judging_clock
from zencli.errors import ZenError

DEFAULT_SIZES = ("tiny", "small", "base")
QUICK_SIZES = ("tiny",)
DEFAULT_LEXICON_SIZES = (12_500_000,)
# The matcher row the pipeline uses (a batch of padded id arrays per call), compared with the naive loop.
MATCHER_ROW = "match_batch(), padded array"


def settings(*, quick: bool, sizes: list[str] | None, lexicon_sizes: list[int] | None) -> dict[str, Any]:
    """What each section runs with (the quick or the full settings; explicit sizes win)."""
    return {
        "sizes": list(sizes) if sizes else list(QUICK_SIZES if quick else DEFAULT_SIZES),
        "model": ({"steps": 2, "warmup": 1, "infer_steps": 2, "curve_steps": 0, "dense_opt": False,
                   "gemm_seconds": 0.25} if quick else
                  {"steps": 0, "warmup": 1, "infer_steps": 0, "curve_steps": 0, "dense_opt": True,
                   "gemm_seconds": 1.0}),
        "matcher": {"repeats": 1, "train_chars": 300_000} if quick else {"repeats": 3, "train_chars": 0},
        "lexicon_sizes": (list(lexicon_sizes) if lexicon_sizes is not None
                          else [] if quick else list(DEFAULT_LEXICON_SIZES)),
    }


def run(*, data: Path | None = None, sizes: list[str] | None = None, quick: bool = False,
        lexicon_sizes: list[int] | None = None, threads: int = 0, workers: int = 2, seed: int = 0,
        log: Callable[[str], None] = lambda s: None,
        section: Callable[[str, int | None], Callable[[str], None]] = lambda name, total: (lambda s: None),
        ) -> dict[str, Any]:
    """Run the three benchmarks; returns {"settings", "machine", "model", "matcher", "lexicon", "summary"}.

    `section(name, total)` is called when a section starts (total: its number of progress steps, None
    when unknown) and returns the `advance(label)` callback for that section."""
    d = dataset_dir(data)
    raw_train = need_file(d / "raw" / "train.txt", "raw training text (one sentence per line)")
    raw_dev = need_file(d / "raw" / "dev.txt", "raw dev text (one sentence per line)")
    cws_train = d / "cws" / "train.txt"
    s = settings(quick=quick, sizes=sizes, lexicon_sizes=lexicon_sizes)
    if s["lexicon_sizes"]:
        need_file(cws_train, "segmented training text (the synthetic lexicon corpora are generated from it)")
    size_list = [model_bench.parse_size(x) for x in s["sizes"]]
    if not size_list:
        raise ZenError("--sizes: expected at least one size")
    facts = machine_facts()

    holder: dict[str, Callable[[str], None]] = {}
    m = s["model"]
    model = model_bench.run(
        model_bench.ModelBenchSettings(sizes=size_list, steps=m["steps"], warmup=m["warmup"],
                                       infer_steps=m["infer_steps"], curve_steps=m["curve_steps"],
                                       dense_opt=m["dense_opt"], gemm_seconds=m["gemm_seconds"], threads=threads,
                                       seed=seed),
        log=log, on_total=lambda n: holder.__setitem__("model", section("models", n)),
        advance=lambda label: holder.get("model", lambda _: None)(label))

    mt = s["matcher"]
    advance = section("matcher", 5 * mt["repeats"])
    matcher = matcher_bench.run(train=raw_train, train_chars=mt["train_chars"], dev=raw_dev, repeats=mt["repeats"],
                                log=log, advance=advance)

    advance = section("lexicon", None)

    def lexicon_log(text: str) -> None:
        log(text)
        advance(text)

    lexicon = lexicon_bench.run_bench(s["lexicon_sizes"], workers=workers, raw=raw_train, cws=cws_train, seed=seed,
                                      log=lexicon_log)
    report = {"settings": {**s, "quick": quick, "data": str(d), "threads": threads, "workers": workers, "seed": seed},
              "machine": facts, "model": model, "matcher": matcher, "lexicon": lexicon}
    report["summary"] = summarize(report)
    return report


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """The ratios: per size and dtype, ZEN 2.0 / BERT and ZEN 1.0 / BERT step time (training) and
    forward time (inference), tokens/s and % of the GEMM peak per encoder; the matcher's speed-up over
    the naive loop; lexicon chars/s per corpus; the GEMM peak (the larger of start and end)."""
    model = report["model"]
    clock = judging_clock(model["settings"]["threads"])
    pre = "cpu_" if clock == "cpu" else ""
    sizes: dict[str, Any] = {}
    for res in model["results"]:
        per: dict[str, Any] = {}
        for row in res["rows"]:
            enc, prec = row["encoder"], row["dtype"]
            p = per.setdefault(prec, {"train_tokens_per_s": {}, "infer_tokens_per_s": {}, "train_pct_of_gemm_peak": {}})
            p["train_tokens_per_s"][enc] = row["train"][pre + "tokens_per_s"]
            p["train_pct_of_gemm_peak"][enc] = row["train"][pre + "pct_of_gemm_peak"]
            if "infer" in row:
                p["infer_tokens_per_s"][enc] = row["infer"][pre + "tokens_per_s"]
            if enc in ("zen2", "zen1"):
                for phase in ("train", "infer"):
                    key = f"{pre}{phase}_ratio_vs_bert"
                    if key in row:
                        p[f"{enc}_{phase}_ratio_vs_bert"] = row[key]
        sizes[res["size"]] = per
    peak = {p: max(v["start"], v["end"]) for p, v in model["gemm_peak_gflops"].items()}

    rows = {r["method"]: r for r in report["matcher"]["rows"]}
    batched = rows.get(MATCHER_ROW)
    naive = report["matcher"]["rows"][0]
    lexicon = {r["corpus"]: r["chars_per_s"] for r in report["lexicon"]["rows"]}
    return {
        "clock": clock,
        "models": sizes,
        "gemm_peak_gflops": peak,
        "matcher": {"method": MATCHER_ROW, "speedup_vs_naive": batched["speedup"] if batched else None,
                    "cpu_speedup_vs_naive": batched["cpu_speedup"] if batched else None,
                    "tokens_per_s": batched["tokens_per_s"] if batched else None,
                    "naive_tokens_per_s": naive["tokens_per_s"]},
        "lexicon_chars_per_s": lexicon,
    }


def ratio_lines(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(what, value) pairs of the summary, in reading order, for the printed ratio table."""
    out: list[tuple[str, str]] = []
    for size, per in summary["models"].items():
        for prec, p in per.items():
            for enc in ("zen2", "zen1"):
                for phase, word in (("train", "training step"), ("infer", "inference")):
                    value = p.get(f"{enc}_{phase}_ratio_vs_bert")
                    if value is not None:
                        out.append((f"{size} {prec}: {enc.upper().replace('ZEN', 'ZEN ')} / BERT {word} time",
                                    f"{value:.2f}×"))
            for enc, pct in p["train_pct_of_gemm_peak"].items():
                out.append((f"{size} {prec}: {enc} training, achieved / GEMM peak", f"{pct:.0f}%"))
    for prec, g in summary["gemm_peak_gflops"].items():
        out.append((f"GEMM peak {prec}", f"{g:,.0f} GFLOP/s"))
    m = summary["matcher"]
    if m["speedup_vs_naive"] is not None:
        out.append((f"n-gram matcher ({m['method']}) / naive loop", f"{m['speedup_vs_naive']:.1f}× "
                    f"({m['tokens_per_s'] / 1e6:.2f} vs {m['naive_tokens_per_s'] / 1e6:.2f} M tok/s)"))
    for corpus, cps in summary["lexicon_chars_per_s"].items():
        out.append((f"lexicon extraction, {corpus}", f"{cps / 1e6:.2f} M chars/s"))
    return out
