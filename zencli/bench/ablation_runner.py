"""Running an ablation plan: skip what is finished, resume what was interrupted, stop at the budget.

    summary = run_plan(plan, command="zen bench ablation --task ner", budget_min=60)

A run is finished when its directory holds `results.json` (the lexicon's and a fine-tuning's are
written by this module when the run completes; a pretraining's by `zen pretrain` itself). An
unfinished run is started again with the same recipe in the same directory, and the training loop
continues from its newest checkpoint. `timing.json` in each run directory adds up the wall time of the
invocations that worked on it.

The budget is checked before each run: once `budget_min` minutes have passed since this invocation
began, no new run starts (one run always does, so every invocation makes progress) and the summary
says what is left; running the same command again continues. A run that stops with a ZenError (a
diverged training, say) is reported and the next run starts; the next invocation tries it again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from zencli.atomic_write import atomic_write_text
from zencli.bench.ablation import PLAN_FORMAT, PRETRAIN_KEYS, RUN_FORMAT, Plan, Run, variant
from zencli.bench.common import machine_facts
from zencli.diffs import first_difference
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.tasks.base import task_class
from zencli.tasks.finetune import run_finetune
from zencli.tasks.pretraining import run_pretrain
from zencli.tasks.pretraining.vocab_lexicon import build_lexicon_file, build_vocab_file
from zencli.text.vocab import Vocab

RESULTS = "results.json"
TIMING = "timing.json"
PLAN_FILE = "plan.json"


def now_iso() -> str:
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")


def read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or unreadable (a run that never finished)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def is_finished(run: Run, runs: list[Run] | None = None) -> bool:
    """Whether `run` has nothing left to do. A pretraining is finished with its model, or — given the
    plan's `runs` — once every fine-tuning of its variant is (its model may then be gone: deleted to
    save disk, or never copied with the records of an ablation continued on another machine); the
    lexicon with its files, or once no pretraining needs them."""
    if not (run.dir / RESULTS).is_file():
        return False
    if run.kind == "pretrain":
        if (run.dir / "model" / "config.json").is_file():
            return True
        seeds = [r for r in runs or [] if r.kind == "finetune" and r.variant == run.variant]
        return bool(seeds) and all(is_finished(r) for r in seeds)
    if run.kind == "lexicon":  # its files feed the pretrainings still to come (if any)
        if all((run.dir / name).is_file() for name in ("vocab.txt", "ngram.txt")):
            return True
        return runs is not None and all(is_finished(r, runs) for r in runs if r.kind == "pretrain")
    return True


def wall_seconds(run_dir: Path) -> float:
    """Wall time of every recorded invocation on this run (a killed invocation records what it had at its
    last update: the start, so its time is lost, not guessed)."""
    t = read_json(run_dir / TIMING) or {}
    return float(sum(i.get("wall_s", 0.0) for i in t.get("invocations", [])))


# -- the plan file ----------------------------------------------------------------------------------

def open_plan_dir(plan: Plan, command: str, machine: dict[str, Any]) -> dict[str, Any]:
    """Create OUT/plan.json, or check that the one there has the same fingerprint; append this invocation."""
    out = plan.out
    path = out / PLAN_FILE
    fp = plan.settings.fingerprint()
    if plan.settings.pretrained_from is not None:
        check_pretrained_from(Path(plan.settings.pretrained_from), fp)
    old = read_json(path) if path.is_file() else None
    if path.is_file() and not isinstance(old, dict):
        raise ZenError(f"{path}: not a readable ablation plan; use another --out")
    if old is not None:
        diff = first_difference(old.get("fingerprint", {}), fp)
        if diff:
            raise ZenError(f"{out}: holds an ablation with other settings ({diff}); continue it with its own "
                           f"options (see {path}) or use another --out")
        doc = old
    else:
        doc = {"format": PLAN_FORMAT, "fingerprint": fp, "invocations": []}
    doc["plan"] = plan.describe()
    doc["invocations"].append({"command": command, "started": now_iso(), "machine": machine})
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return doc


def check_pretrained_from(other: Path, fp: dict[str, Any]) -> None:
    """--pretrained-from OTHER: OTHER is an ablation whose pretrainings were made as this one's would be."""
    doc = read_json(other / PLAN_FILE)
    if not isinstance(doc, dict) or not isinstance(doc.get("fingerprint"), dict):
        raise ZenError(f"--pretrained-from: {other / PLAN_FILE} is missing or unreadable; give the --out of an "
                       "ablation that pretrained")
    theirs = {k: doc["fingerprint"].get(k) for k in PRETRAIN_KEYS}
    diff = first_difference(theirs, {k: fp[k] for k in PRETRAIN_KEYS})
    if diff:
        raise ZenError(f"--pretrained-from: {other} pretrained with other settings ({diff}); its models would not "
                       "be this plan's")


# -- one run --------------------------------------------------------------------------------------

class _Timing:
    """Records this invocation's wall time in RUN/timing.json at the start and when it ends (any way)."""

    def __init__(self, run_dir: Path, clock: Callable[[], float]):
        self.path = run_dir / TIMING
        self.clock = clock
        run_dir.mkdir(parents=True, exist_ok=True)
        self.doc = read_json(self.path) or {"invocations": []}
        self.entry = {"started": now_iso(), "wall_s": 0.0, "completed": False}
        self.doc["invocations"].append(self.entry)
        self.t0 = clock()
        self._write()

    def _write(self) -> None:
        atomic_write_text(self.path, json.dumps(self.doc, indent=1) + "\n")

    def end(self, completed: bool) -> float:
        self.entry.update(wall_s=round(self.clock() - self.t0, 3), completed=completed)
        self._write()
        return float(sum(i["wall_s"] for i in self.doc["invocations"]))


def run_lexicon(plan: Plan, run: Run, console: Console) -> dict[str, Any]:
    """The vocabulary and n-gram lexicon of the raw train text, built as `zen pretrain` builds missing
    ones (the base recipe's data.* settings). results.json is written last: it marks them complete."""
    cfg = plan.lexicon_config()

    def say(text: str) -> None:
        console.print(escape(text), highlight=False, soft_wrap=True)

    corpus = [Path(p) for p in cfg.data.corpus]
    vocab, ngram = run.dir / "vocab.txt", run.dir / "ngram.txt"
    build_vocab_file(cfg, corpus, vocab, say)
    say(build_lexicon_file(cfg, corpus, vocab, ngram, console))
    n_vocab, n_ngrams = len(Vocab.load(vocab)), len(Lexicon.load(ngram))
    if n_ngrams == 0:
        raise ZenError(f"{corpus[0]}: the lexicon is empty (no n-gram passes the thresholds); ZEN needs n-grams: "
                       "use a larger corpus or lower data.ngram_min_freq with --set-pretrain")
    return {"format": RUN_FORMAT, "kind": "lexicon", "corpus": [str(p) for p in corpus], "vocab_size": n_vocab,
            "ngrams": n_ngrams, "finished": now_iso()}


def run_pretraining(plan: Plan, run: Run, console: Console, show_progress: bool) -> None:
    """`zen pretrain` with the variant's recipe; it writes RUN/results.json itself when done."""
    run_pretrain(plan.pretrain_config(variant(run.variant)), console=console, show_progress=show_progress)


def run_finetuning(plan: Plan, run: Run, console: Console, show_progress: bool) -> dict[str, Any]:
    """Fine-tune; returns the run's record: dev and test scores of the exported (best dev) model."""
    v = variant(run.variant)
    cfg = plan.finetune_config(v, run.seed)
    result = run_finetune(cfg, console=console, show_progress=show_progress)
    scores = {}
    for name in ("dev", "test"):
        doc = read_json(result.model_dir / f"{name}_scores.json")
        if doc is None:
            raise ZenError(f"{result.model_dir}: no {name}_scores.json after fine-tuning; expected the {name} scores")
        scores[name] = {k: doc[k] for k in ("main_score", "metric", "precision", "recall", "f1") if k in doc}
    return {
        "format": RUN_FORMAT, "kind": "finetune", "variant": v.name, "seed": run.seed, "task": plan.settings.task,
        "main_metric": task_class(plan.settings.task).main_metric,
        "pretrained": str(cfg.model.pretrained) if cfg.model.pretrained else None,
        "dev": scores["dev"], "test": scores["test"], "steps": result.step, "best_step": result.best_step,
        "resumed_from_step": result.start_step, "train_s_last_invocation": round(result.elapsed_s, 3),
        "finished": now_iso(),
    }


# -- the plan -------------------------------------------------------------------------------------

@dataclass
class RunSummary:
    """What one invocation did."""

    total: int  # runs in the plan
    done_before: int  # already finished when this invocation started
    completed: list[Run] = field(default_factory=list)
    left: list[Run] = field(default_factory=list)  # not finished when this invocation stopped
    failed: list[tuple[Run, str]] = field(default_factory=list)  # runs that stopped with a ZenError
    stopped_by_budget: bool = False
    elapsed_s: float = 0.0
    estimate_left_s: float | None = None  # the runs left at the measured pace (None: nothing measured)


def estimate_left(plan: Plan, left: list[Run]) -> float | None:
    """Seconds the `left` runs take at the measured pace: the mean wall time of the finished runs of the
    same variant and kind (a ZEN fine-tuning is several times a CHTE one), else of the same kind, else of
    all; None when nothing has finished yet."""
    by_variant: dict[tuple[str, str | None], list[float]] = {}
    by_kind: dict[str, list[float]] = {}
    runs = plan.runs()
    for r in runs:
        w = wall_seconds(r.dir) if is_finished(r, runs) else 0.0
        if w > 0:
            by_variant.setdefault((r.kind, r.variant), []).append(w)
            by_kind.setdefault(r.kind, []).append(w)
    if not left:
        return 0.0
    if not by_kind:
        return None

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    overall = mean([w for ws in by_kind.values() for w in ws])
    return sum(mean(by_variant[(r.kind, r.variant)]) if (r.kind, r.variant) in by_variant
               else mean(by_kind[r.kind]) if r.kind in by_kind else overall for r in left)


def run_plan(plan: Plan, *, command: str, budget_min: float | None = None, console: Console | None = None,
             show_progress: bool = True, clock: Callable[[], float] = time.monotonic) -> RunSummary:
    """Run every unfinished run of `plan` in order (see the module docstring). A run that stops with a
    ZenError (e.g. training diverged) is reported in `failed` and the next run starts; it is tried again
    by the next invocation."""
    console = console or Console(stderr=True)
    if budget_min is not None and budget_min <= 0:
        raise ZenError(f"--budget: expected minutes > 0, got {budget_min}")
    plan.settings.check_data(plan.pretraining)
    plan.check_recipes()  # a bad --set key fails here, once, not in every run
    open_plan_dir(plan, command, machine_facts())
    runs = plan.runs()
    pending = [r for r in runs if not is_finished(r, runs)]
    summary = RunSummary(total=len(runs), done_before=len(runs) - len(pending))
    t0 = clock()
    if summary.done_before:
        console.print(f"{summary.done_before} of {len(runs)} runs already finished in {escape(str(plan.out))}: "
                      "skipped", highlight=False)
    for i, run in enumerate(pending):
        elapsed = clock() - t0
        if budget_min is not None and i > 0 and elapsed >= 60 * budget_min:
            summary.stopped_by_budget = True
            summary.left = pending[i:]
            break
        position = summary.done_before + i + 1
        budget = f" · budget left {max(0.0, budget_min - elapsed / 60):.0f} min" if budget_min is not None else ""
        console.rule(f"run {position}/{len(runs)}: {run.label}{budget}", style="dim")
        timing = _Timing(run.dir, clock)
        completed = False
        record: dict[str, Any] | None = None
        try:
            if run.kind == "lexicon":
                record = run_lexicon(plan, run, console)
            elif run.kind == "pretrain":
                run_pretraining(plan, run, console, show_progress)  # writes its own results.json
            else:
                record = run_finetuning(plan, run, console, show_progress)
            completed = True
        except ZenError as e:
            summary.failed.append((run, str(e)))
            console.print(f"[bold red]{escape(run.label)} failed[/bold red]: {escape(str(e))}", highlight=False)
            continue
        finally:
            wall = timing.end(completed)
        if record is not None:
            record["wall_s"] = wall
            atomic_write_text(run.dir / RESULTS, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        if run.kind == "finetune":
            console.print(f"{escape(run.label)}: test {record['main_metric']} {100 * record['test']['main_score']:.2f} "
                          f"(dev {100 * record['dev']['main_score']:.2f}) · {wall / 60:.1f} min", highlight=False)
        else:
            console.print(f"{escape(run.label)}: done in {wall / 60:.1f} min", highlight=False)
        summary.completed.append(run)
    summary.elapsed_s = clock() - t0
    summary.left = [r for r in runs if not is_finished(r, runs)]  # what the budget left, and what failed
    summary.estimate_left_s = estimate_left(plan, summary.left)
    return summary
