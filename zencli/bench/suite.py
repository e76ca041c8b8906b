"""`zen bench suite MODEL`: fine-tune one model on every fetched benchmark set under one budget per set, score
each on its test split as `zen evaluate` does, and put the published numbers beside.

    SETS                                     the benchmark sets, their files, metric and published numbers
    plan(model, sets, minutes, seeds, scratch) -> list[Run]
    run_suite(runs, out, console) -> report  resumable: a run with its result.json is not run again

A set is fine-tuned with zen's defaults for a pretrained encoder (`train.lr: auto`, `epochs: auto`, early
stopping), with the task settings of its built-in recipe where one exists (a CRF decoder for NER, MRC's window
and stride). The set's `minutes` are shared by its runs (seeds × rows), each run fitting its steps and its
learning-rate decay into its share (`train.max_minutes`); the test scoring comes on top. Rows per seed:
`pretrained` (zen's defaults), with `adapt_minutes` an `adapted` row (the same run, its first minutes spent
adapting the model to the set's training text: `zen finetune --adapt-minutes`), and with `scratch` the task's
small from-scratch model at the same budget (`zen finetune --compare-scratch`'s).

Published numbers are quoted from the text of the papers that report them (`PUBLISHED` names each source). The
ZEN 2.0 paper's results tables are images, not text: its numbers are not quoted here.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from zencli.atomic_write import atomic_write_text
from zencli.config.finetune import FinetuneConfig
from zencli.datasets import data_roots
from zencli.errors import ZenError
from zencli.jobs.compare_scratch import scratch_config
from zencli.jobs.finetune import build_config
from zencli.tasks.finetune import FinetuneResult, run_finetune

REPORT_JSON = "suite.json"
REPORT_MD = "suite.md"
RESULT = "result.json"

# Published test scores, each with where it is stated in text. Lattice LSTM (Zhang and Yang, ACL 2018) and
# TENER (Yan et al., 2019): the strongest models of their tables without a pretrained language model. CHTE: the
# CHTE paper's text gives its gains over TENER (+4.39 Weibo, +0.76 Resume), from which these follow.
PUBLISHED: dict[str, dict[str, float]] = {
    "weibo": {"Lattice LSTM": 58.79, "TENER": 58.17, "CHTE (TENER + 4.39)": 62.56},
    "resume": {"Lattice LSTM": 94.46, "TENER": 95.00, "CHTE (TENER + 0.76)": 95.76},
    "msra": {"Lattice LSTM": 93.18},
}


@dataclass(frozen=True)
class SuiteSet:
    name: str  # the dataset: `zen data fetch NAME`
    task: str
    files: tuple[str, str, str]  # train, dev, test under the dataset's folder
    recipe: str | None = None  # a built-in recipe whose task settings apply (its model is replaced)
    language: str = "zh"


SETS: tuple[SuiteSet, ...] = (
    SuiteSet("weibo", "ner", ("train.tsv", "dev.tsv", "test.tsv")),
    SuiteSet("resume", "ner", ("train.tsv", "dev.tsv", "test.tsv")),
    SuiteSet("msra", "ner", ("train.tsv", "dev.tsv", "test.tsv"), "finetune-msra-ner"),
    SuiteSet("msr", "cws", ("train.txt", "dev.txt", "test.txt"), "finetune-msr-cws"),
    SuiteSet("pku", "cws", ("train.txt", "dev.txt", "test.txt")),
    SuiteSet("ud-gsdsimp", "pos", ("train.tsv", "dev.tsv", "test.tsv")),
    SuiteSet("chnsenticorp", "sa", ("train.tsv", "dev.tsv", "test.tsv"), "finetune-chnsenticorp-sa"),
    SuiteSet("chnsenticorp-htl", "sa", ("train.tsv", "dev.tsv", "test.tsv")),
    SuiteSet("online-shopping", "dc", ("train.tsv", "dev.tsv", "test.tsv")),
    SuiteSet("waimai-10k", "sa", ("train.tsv", "dev.tsv", "test.tsv")),
    SuiteSet("nlpcc2016-cws", "cws", ("train.txt", "dev.txt", "test.txt")),
    SuiteSet("cluener", "ner", ("train.tsv", "dev.tsv", "test.tsv")),
    SuiteSet("cmrc2018", "mrc", ("train.json", "heldout.json", "cmrc2018_dev.json"), "finetune-cmrc2018-mrc"),
)
BY_NAME = {s.name: s for s in SETS}


@dataclass(frozen=True)
class Run:
    suite_set: SuiteSet
    row: str  # "pretrained", "adapted" or "scratch"
    seed: int
    cfg: FinetuneConfig  # the pretrained run's config; the scratch run derives its own from it
    out: Path


def _dataset_dir(name: str) -> Path | None:
    for _, root in data_roots():
        if (root / name).is_dir():
            return root / name
    return None


def fetched_sets(names: list[str] | None = None) -> tuple[list[SuiteSet], list[str]]:
    """The sets to run (those named, else every fetched one) and a line per set left out, saying why."""
    if names:
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            raise ZenError(f"--sets: unknown set {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
        wanted = [BY_NAME[n] for n in names]
    else:
        wanted = list(SETS)
    chosen, skipped = [], []
    for s in wanted:
        if _dataset_dir(s.name) is None:
            if names:  # asked for by name: a missing set is an error, not a silent gap in the table
                raise ZenError(f"--sets: {s.name} is not fetched; run `zen data fetch {s.name}`")
            skipped.append(f"{s.name}: not fetched (`zen data fetch {s.name}`)")
        else:
            chosen.append(s)
    if not chosen:
        raise ZenError("no benchmark set is fetched; run `zen data fetch NAME` (`zen data list` shows them)")
    return chosen, skipped


def _config(model: Path, s: SuiteSet, minutes: float, seed: int, out: Path) -> FinetuneConfig:
    folder = _dataset_dir(s.name)
    assert folder is not None
    train, dev, test = (folder / f for f in s.files)
    options: dict[str, Any] = {"model.pretrained": model, "data.train": train, "data.dev": dev, "data.test": test,
                               "train.max_minutes": minutes, "train.output_dir": out, "train.seed": seed}
    overrides = ["train.lr=auto", "epochs=auto", "train.max_steps=null"]
    if s.recipe is None:
        options["task.name"] = s.task
        overrides = []
    return build_config(s.recipe, overrides, options)


def plan(model: Path, sets: list[SuiteSet], *, minutes: float, seeds: int, scratch: bool, out: Path,
         adapt_minutes: float | None = None) -> list[Run]:
    """Every run of the suite, in order: per set, per seed, the pretrained row (then the adapted and scratch
    rows)."""
    if minutes <= 0 or seeds < 1:
        raise ZenError(f"--minutes/--seeds: expected > 0 and >= 1, got {minutes} and {seeds}")
    rows = ("pretrained", *(("adapted",) if adapt_minutes else ()), *(("scratch",) if scratch else ()))
    share = minutes / (seeds * len(rows))
    if adapt_minutes is not None and not 0 < adapt_minutes < share:
        raise ZenError(f"--adapt-minutes: each run has {share:g} minutes ({minutes:g} per set over {seeds} seed(s) "
                       f"× {len(rows)} rows); give adaptation more than 0 and less than that")
    runs = []
    for s in sets:
        for seed in range(1, seeds + 1):
            run_dir = out / s.name / f"seed-{seed}"
            cfg = _config(model, s, share, seed, run_dir)
            for row in rows:
                row_cfg = replace(cfg, adapt=replace(cfg.adapt, minutes=adapt_minutes)) if row == "adapted" else cfg
                runs.append(Run(s, row, seed, row_cfg, run_dir / row))
    return runs


def _scores(result: FinetuneResult) -> dict[str, Any]:
    test = result.test or result.dev
    return {"metric": None if test is None else test.result.main, "test": None if result.test is None
            else result.test.main_score, "dev": None if result.dev is None else result.dev.main_score,
            "steps": result.step, "best_step": result.best_step, "elapsed_s": round(result.elapsed_s, 1),
            "model_dir": str(result.model_dir)}


def run_one(run: Run, console: Console, show_progress: bool) -> dict[str, Any]:
    """Fine-tune and score one run, or read its result.json when it finished before."""
    done = run.out / RESULT
    if done.is_file():
        return json.loads(done.read_text(encoding="utf-8"))
    cfg = replace(run.cfg, train=replace(run.cfg.train, output_dir=run.out))
    what = f"{run.cfg.model.pretrained}"
    if run.row == "scratch":
        pretrained_dir = run.out.parent / "pretrained"
        kind = json.loads((pretrained_dir / RESULT).read_text(encoding="utf-8")).get("encoder")
        cfg, what = scratch_config(replace(cfg, train=replace(cfg.train, output_dir=run.out.parent)), kind)
        cfg = replace(cfg, train=replace(cfg.train, output_dir=run.out))
    console.print(f"[bold]{run.suite_set.name}[/bold] ({run.suite_set.task}) seed {run.seed}, {run.row}: {what}",
                  highlight=False)
    result = run_finetune(cfg, console=console, show_progress=show_progress)
    encoder = json.loads((result.model_dir / "task.json").read_text(encoding="utf-8")).get("encoder")
    record = {"set": run.suite_set.name, "task": run.suite_set.task, "row": run.row, "seed": run.seed,
              "model": what, "encoder": encoder, "minutes": cfg.train.max_minutes, **_scores(result)}
    atomic_write_text(done, json.dumps(record, ensure_ascii=False, indent=2) + "\n")
    return record


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (set, row): mean and sd of the test scores over the seeds, the published numbers beside."""
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        rows.setdefault((r["set"], r["row"]), []).append(r)
    out = []
    for (name, row), rs in rows.items():
        scores = [100 * r["test"] for r in rs if r["test"] is not None]
        out.append({"set": name, "task": rs[0]["task"], "row": row, "metric": rs[0]["metric"], "seeds": len(rs),
                    "test_mean": statistics.fmean(scores) if scores else None,
                    "test_sd": statistics.stdev(scores) if len(scores) > 1 else None,
                    "tests": scores, "minutes": rs[0]["minutes"], "published": PUBLISHED.get(name, {})})
    return out


def markdown(summary: list[dict[str, Any]], settings: dict[str, Any]) -> str:
    lines = [f"`zen bench suite {settings['model']} --minutes {settings['minutes']:g} --seeds {settings['seeds']}"
             f"{' --scratch' if settings['scratch'] else ''}"
             f"{' --adapt-minutes %g' % settings['adapt_minutes'] if settings.get('adapt_minutes') else ''}`; "
             "test scores ×100, mean ± sd over the seeds.", "",
             "| set | task | metric | row | test | published |", "| --- | --- | --- | --- | --- | --- |"]
    for r in summary:
        score = "—" if r["test_mean"] is None else f"{r['test_mean']:.2f}" + (
            f" ± {r['test_sd']:.2f}" if r["test_sd"] is not None else "")
        published = ", ".join(f"{k} {v:.2f}" for k, v in r["published"].items()) or "—"
        lines.append(f"| {r['set']} | {r['task']} | {r['metric'] or '—'} | {r['row']} | {score} | {published} |")
    return "\n".join(lines) + "\n"


def run_suite(model: Path, *, out: Path, sets: list[str] | None = None, minutes: float = 3.0, seeds: int = 1,
              scratch: bool = False, adapt_minutes: float | None = None, console: Console | None = None,
              show_progress: bool = True) -> dict[str, Any]:
    """The whole suite (module docstring); writes OUT/suite.json and OUT/suite.md and returns the report."""
    console = console or Console(stderr=True)
    if not Path(model).is_dir():
        raise ZenError(f"{model}: not a model directory")
    chosen, skipped = fetched_sets(sets)
    for line in skipped:
        console.print(f"[dim]skipped {line}[/dim]", highlight=False)
    runs = plan(Path(model), chosen, minutes=minutes, seeds=seeds, scratch=scratch, out=out,
                adapt_minutes=adapt_minutes)
    t0 = time.perf_counter()
    records = [run_one(r, console, show_progress) for r in runs]
    settings = {"model": str(model), "minutes": minutes, "seeds": seeds, "scratch": scratch,
                "adapt_minutes": adapt_minutes,
                "sets": [s.name for s in chosen], "skipped": skipped}
    summary = summarize(records)
    report = {"settings": settings, "rows": summary, "runs": records,
              "wall_s": round(time.perf_counter() - t0, 1)}
    atomic_write_text(out / REPORT_JSON, json.dumps(report, ensure_ascii=False, indent=2) + "\n")
    atomic_write_text(out / REPORT_MD, markdown(summary, settings))
    return report
