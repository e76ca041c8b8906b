"""The quickstart pipeline as library steps: data → lexicon → pretrain → finetune (NER) → evaluate → predict, on
one workspace (zencli.jobs.workspace), within a time budget. `zen quickstart` (zencli.cli.quickstart) parses its
options and draws the screens through a `Display`; everything else — which steps run, which are skipped, what
they write, the summary and WORK/quickstart.json — is here.

    data       PD98, found ($ZEN_DATA, the cache) or fetched            (every step locates it)
    lexicon    character vocabulary + PMI and branching-entropy lexicon  zen lexicon
    pretrain   tiny ZEN 2.0 (4 × 128, 2 n-gram layers), MLM + NSP       zen pretrain --max-minutes P
    finetune   NER (PER/LOC/ORG, CRF) from the pretrained model         zen finetune --task ner --max-minutes F
    evaluate   entity P/R/F on the test split                           zen evaluate MODEL --data test.tsv
    predict    two sentences written for this demo                      zen predict < sentences.txt

Each step is the library call its command makes, on the same workspace, so the commands continue where the
quickstart stopped and the other way round. A finished step (known by the file it writes last) is skipped on
the next run; an interrupted training step resumes from its checkpoint. Time: the two training runs get
`train.max_minutes` = 45% and 25% of the budget (the loop fits its step count and schedule into them); the
other 30% is left for the steps whose time does not scale (reading, lexicon, pretraining shards, baseline and
held-out scoring, NER test scoring, prediction), which on the full PD98 take a few minutes on 2 cores.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from zencli import formatting as fmt
from zencli.atomic_write import atomic_write_text
from zencli.errors import ZenError
from zencli.jobs.lexicon import build_workspace_lexicon
from zencli.jobs.workspace import CORPUS, TASK_DEFAULTS, Workspace, budget, locate_dataset

# Imports inside functions are lazy on purpose: `zen --help` imports this module; each step loads what it
# runs (the recipes' modules, and torch for training, scoring and prediction) only when it runs.

TASK = "ner"
# Written for this demo (not corpus text): names, places and organisations for the NER model to find.
SENTENCES = (
    "王小明和李华上个月从上海坐火车到北京，参观了清华大学和中国科学院。",
    "记者在广州报道，华南理工大学的张教授说，今年广东省的经济增长比去年快。",
)


@dataclass
class Step:
    name: str
    command: str
    status: str = "ran"  # ran | skipped
    seconds: float = 0.0  # this run's wall time (the check, when skipped)
    ran_seconds: float | None = None  # skipped: the wall time it took when it ran (earlier quickstart.json)
    result: str = ""
    outputs: list[str] = field(default_factory=list)


def _ignore(*_args: Any) -> None:
    return None


@dataclass
class Display:
    """How the steps show themselves (the CLI's screens; by default nothing): `out` prints plain lines and
    step headings, `err` carries progress and notes; the callbacks are those of the step's own command."""

    out: Console
    err: Console
    lexicon_result: Callable[[Any, Path], None] = _ignore  # (lexicon result, ngram.txt)
    pretrain_announce: Callable[[Any], None] = _ignore  # (config)
    pretrain_report: Callable[[Any, Workspace], None] = _ignore  # (PretrainResult, workspace)
    finetune_announce: Callable[[Any], None] = _ignore
    finetune_report: Callable[[Any, Workspace], None] = _ignore
    evaluation: Callable[[Any], None] = _ignore  # (Evaluation)


def run_quickstart(ws: Workspace, minutes: float, *, pretrain_sets: list[str], finetune_sets: list[str],
                   quiet: bool, display: Display, dtype: str = "auto") -> tuple[list[Step], dict[str, Any]]:
    """Run (or skip, when finished) the six steps on `ws` within `minutes`; write WORK/quickstart.json and
    return the steps with the summary it holds. `dtype` (auto|fp32|bf16|int8) is what the fine-tuned
    model is scored and run in: its dev evaluations (train.eval_dtype), the test scoring, the prediction."""
    if not minutes > 0:
        raise ZenError(f"--minutes: expected a number of minutes > 0, got {minutes:g}")
    chosen = _dtype(dtype, display)
    plan = budget(minutes)
    previous = _previous_steps(ws)
    ws.root.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"workdir": str(ws.root), "budget": plan, "dtype": chosen}
    steps: list[Step] = []
    t_start = time.perf_counter()
    out = display.out

    def run(name: str, command: str, body) -> None:
        out.rule(escape(f"{len(steps) + 1}/6  {name}: {command}"))
        t0 = time.perf_counter()
        step = Step(name, command)
        body(step)
        step.seconds = round(time.perf_counter() - t0, 3)
        if step.status == "skipped":
            before = previous.get(name, {})
            step.ran_seconds = before.get("ran_seconds") or (before.get("seconds") if before.get("status") == "ran"
                                                             else None)
        steps.append(step)

    run("data", f"(found or fetched by each step: {CORPUS})", lambda s: _data(s, summary, display))
    run("lexicon", ws.command("lexicon"), lambda s: _lexicon(s, ws, summary, display))
    pre_cmd = ws.command(f"pretrain --max-minutes {plan['pretrain_minutes']:g}")
    run("pretrain", pre_cmd + _sets(pretrain_sets),
        lambda s: _pretrain(s, ws, plan, pretrain_sets, quiet, summary, display))
    ft_sets = ([f"train.eval_dtype={dtype}"] if dtype != "auto" else []) + finetune_sets
    ft_cmd = ws.command(f"finetune --task {TASK} --max-minutes {plan['finetune_minutes']:g} --set data.test=null")
    run("finetune", ft_cmd + _sets(ft_sets),
        lambda s: _finetune(s, ws, plan, ft_sets, quiet, summary, display))
    test = Path(summary["data"]["test"])
    option = f" --dtype {dtype}" if dtype != "auto" else ""
    run("evaluate", f"zen evaluate {ws.finetuned_model(TASK)} --data {test}{option}",
        lambda s: _evaluate(s, ws, test, dtype, chosen, summary, display))
    run("predict", ws.command(f"predict{option} < {ws.quickstart_dir / 'sentences.txt'}"),
        lambda s: _predict(s, ws, dtype, summary, display))

    summary["steps"] = [asdict(s) for s in steps]
    summary["seconds"] = round(time.perf_counter() - t_start, 3)

    atomic_write_text(ws.quickstart_json, json.dumps(summary, ensure_ascii=False, indent=1) + "\n")
    return steps, summary


def _dtype(requested: str, display: Display) -> str:
    """The dtype `requested` resolves to on the device the steps use (checked before anything runs);
    `auto` says what it picked."""
    from zencli.tasks.inference import resolve_device
    from zencli.train.dtype import describe_inference_dtype, resolve_inference_dtype

    chosen, why = resolve_inference_dtype(requested, resolve_device("auto"), key="--dtype")
    if requested == "auto":
        display.err.print(describe_inference_dtype(requested, chosen, why), highlight=False)
    return chosen


def _sets(sets: list[str]) -> str:
    return "".join(f" --set {s}" for s in sets)


def _previous_steps(ws: Workspace) -> dict[str, dict]:
    """The steps of the last quickstart.json (for the time a skipped step took when it ran)."""
    try:
        data = json.loads(ws.quickstart_json.read_text(encoding="utf-8"))
        return {s["name"]: s for s in data.get("steps", []) if isinstance(s, dict) and "name" in s}
    except (OSError, ValueError, UnicodeDecodeError, AttributeError, TypeError):
        return {}


# --- the steps --------------------------------------------------------------------------------------------


def _data(step: Step, summary: dict, display: Display) -> None:
    root = locate_dataset(CORPUS, console=display.err)
    files = TASK_DEFAULTS[TASK].files(root)
    summary["data"] = {"dataset": str(root), **{k: str(v) for k, v in files.items()}}
    step.result = f"{CORPUS} at {root}"
    step.outputs = [str(root)]


def _lexicon(step: Step, ws: Workspace, summary: dict, display: Display) -> None:
    if ws.lexicon_done():
        step.status = "skipped"
    lex = build_workspace_lexicon(ws, console=display.out, show=display.lexicon_result)
    summary["lexicon"] = lex
    step.result = f"{lex['ngrams']:,} n-grams, {lex['vocab_size']:,} characters"
    step.outputs = [str(ws.vocab), str(ws.ngram)]


def _pretrain(step: Step, ws: Workspace, plan: dict, sets: list[str], quiet: bool, summary: dict,
              display: Display) -> None:
    from zencli.jobs.pretrain import workspace_config

    if ws.pretrain_done():
        step.status = "skipped"
        display.out.print(f"pretrain: finished earlier ({ws.pretrain_dir / 'results.json'})", highlight=False)
        results = json.loads((ws.pretrain_dir / "results.json").read_text(encoding="utf-8"))
        per_step = None
    else:
        from zencli.tasks.pretraining import run_pretrain

        budgeted = [f"train.max_minutes={plan['pretrain_minutes']}", *sets]  # a --pretrain-set may change it
        cfg = workspace_config(ws, budgeted, {}, console=display.err)
        display.pretrain_announce(cfg)
        result = run_pretrain(cfg, console=display.err, show_progress=not quiet)
        display.pretrain_report(result, ws)
        results = result.results
        trained = result.step - result.start_step
        per_step = result.elapsed_s / trained if trained else None
    first, last = results.get("first_train_record") or {}, results.get("last_train_record") or {}
    held = results.get("heldout") or {}
    final, base = held.get("final") or {}, held.get("baseline") or {}
    initial = held.get("initial") or {}
    summary["pretrain"] = {
        "model": str(ws.pretrained_model), "steps": results.get("steps"), "parameters": results.get("parameters"),
        # training loss of the first and the last logged window (train.log_every steps each)
        "loss_start": first.get("loss"), "loss_end": last.get("loss"),
        "loss_curve": [{"step": r.get("step"), "loss": r.get("loss")} for r in results.get("curve", [])],
        # held-out MLM loss before the first step and after the last
        "heldout_mlm_loss_start": initial.get("mlm_loss"), "heldout_mlm_loss_end": final.get("mlm_loss"),
        "heldout_masked_acc": final.get("masked_acc"), "baseline_masked_acc": base.get("masked_acc"),
        "seconds_per_step": per_step if per_step is not None else _previous(summary, "pretrain", "seconds_per_step"),
    }
    p = summary["pretrain"]
    n = fmt.number
    step.result = (f"{fmt.count(p['steps'])} steps · train loss {n(p['loss_start'])} → {n(p['loss_end'])} · "
                   f"held-out MLM loss {n(p['heldout_mlm_loss_start'])} → {n(p['heldout_mlm_loss_end'])}, "
                   "masked-char acc "
                   f"{n(p['heldout_masked_acc'])} (unigram {n(p['baseline_masked_acc'])})")
    step.outputs = [str(ws.pretrained_model), str(ws.pretrain_dir / "results.json")]


def _finetune(step: Step, ws: Workspace, plan: dict, sets: list[str], quiet: bool, summary: dict,
              display: Display) -> None:
    from zencli.jobs.finetune import workspace_config

    model = ws.finetuned_model(TASK)
    if ws.finetune_done(TASK):
        step.status = "skipped"
        display.out.print(f"finetune: finished earlier ({model})", highlight=False)
        per_step, steps = None, _last_step(ws.finetune_dir(TASK))
    else:
        from zencli.tasks.finetune import run_finetune

        # test is scored by the next step (once, not twice); a --finetune-set may change either
        budgeted = ["data.test=null", f"train.max_minutes={plan['finetune_minutes']}", *sets]
        cfg = workspace_config(ws, budgeted, {"task.name": TASK}, console=display.err)
        display.finetune_announce(cfg)
        result = run_finetune(cfg, console=display.err, show_progress=not quiet)
        display.finetune_report(result, ws)
        trained = result.step - result.start_step
        per_step, steps = (result.elapsed_s / trained if trained else None), result.step
    dev = _read_json(model / "dev_scores.json")
    summary["finetune"] = {
        "task": TASK, "model": str(model), "steps": steps,
        "dev_f1": dev.get("f1") if dev else None,
        "seconds_per_step": per_step if per_step is not None else _previous(summary, "finetune", "seconds_per_step"),
    }
    f = summary["finetune"]
    step.result = f"{fmt.count(f['steps'])} steps · dev F1 {fmt.percent(f['dev_f1'])}"
    step.outputs = [str(model)]


def _evaluate(step: Step, ws: Workspace, test: Path, dtype: str, chosen: str, summary: dict,
              display: Display) -> None:
    model = ws.finetuned_model(TASK)
    scores_path = model / "test_scores.json"
    earlier = _read_json(scores_path) if scores_path.is_file() else None
    # scores from before the dtype setting were fp32 ones; until its rename the key was inference_precision
    if (earlier is not None and earlier.get("inference_dtype", earlier.get("inference_precision", "fp32")) == chosen
            and scores_path.stat().st_mtime_ns >= (model / "task.json").stat().st_mtime_ns):
        step.status = "skipped"
        report = earlier
        display.out.print(f"evaluate: scored earlier ({scores_path})", highlight=False)
    else:
        from zencli.tasks.inference import load_for_inference
        from zencli.tasks.predict import evaluate_model

        evaluation = evaluate_model(load_for_inference(model, dtype=dtype), test)
        display.evaluation(evaluation)
        report = {**evaluation.to_dict(), "model": str(model)}
        atomic_write_text(scores_path, json.dumps(report, ensure_ascii=False, indent=2) + "\n")
    summary["ner_test"] = {k: report.get(k) for k in ("precision", "recall", "f1")}
    summary["ner_test"]["per_type"] = report.get("per_type")
    t = summary["ner_test"]
    step.result = f"test P {fmt.percent(t['precision'])} · R {fmt.percent(t['recall'])} · F1 {fmt.percent(t['f1'])}"
    step.outputs = [str(scores_path)]


def _predict(step: Step, ws: Workspace, dtype: str, summary: dict, display: Display) -> None:
    from zencli.tasks.inference import load_for_inference
    from zencli.tasks.predict import predict_chunks

    ws.quickstart_dir.mkdir(parents=True, exist_ok=True)
    source = ws.quickstart_dir / "sentences.txt"
    atomic_write_text(source, "".join(s + "\n" for s in SENTENCES))
    loaded = load_for_inference(ws.finetuned_model(TASK), dtype=dtype)
    lines = [line for chunk in predict_chunks(loaded, enumerate(SENTENCES, 1)) for line in chunk]
    target = ws.quickstart_dir / "predictions.txt"
    atomic_write_text(target, "".join(line + "\n" for line in lines))
    for line in lines:
        display.out.print(escape(line), highlight=False)
    summary["predictions"] = [{"text": s, "prediction": p} for s, p in zip(SENTENCES, lines)]
    if ws.latest_finetuned() != ws.finetuned_model(TASK):  # another task was fine-tuned later: name the model
        option = f" --dtype {dtype}" if dtype != "auto" else ""
        step.command = f"zen predict {ws.finetuned_model(TASK)}{option} < {source}"
    step.result = f"{len(lines)} sentences, entities marked [text]/TYPE"
    step.outputs = [str(source), str(target)]


# --- reading results back, formatting ---------------------------------------------------------------------


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _last_step(out: Path) -> int | None:
    """The last training step a finished run logged (metrics.jsonl)."""
    from zencli.train.progress import read_metrics

    steps = [r.get("step") for r in read_metrics(out) if r.get("kind") == "train"]
    return steps[-1] if steps else None


def _previous(summary: dict, section: str, key: str) -> Any:
    """A value of the last quickstart.json (a skipped step's training speed)."""
    old = _read_json(Path(summary["workdir"]) / "quickstart.json") or {}
    return (old.get(section) or {}).get(key)
