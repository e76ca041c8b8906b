"""The ablation report: OUT/report.md and OUT/report.json from the finished runs, PNG plots when
matplotlib is installed (the optional `plots` extra); without it the tables carry every number.

    data = collect(out)              # everything the report shows, JSON-ready
    write_report(out)                # report.md, report.json, plots/*.png

Scores are the task's main score × 100 (entity / word F1) of the exported model — the one with the best
dev score — on the dev and test splits. Per variant: mean ± sample standard deviation over its finished
seeds. Claims are compared paired by seed: better − worse on the seeds both variants have finished.
"""

from __future__ import annotations

import json
import re
import statistics
from datetime import datetime
from pathlib import Path
from typing import Any

from zencli.atomic_write import atomic_write_text
from zencli.bench.ablation import CLAIMS, VARIANTS, Variant
from zencli.bench.ablation_runner import PLAN_FILE, RESULTS, read_json, wall_seconds
from zencli.errors import ZenError
from zencli.tasks.base import task_class
from zencli.train.progress import read_metrics

REPORT_MD = "report.md"
REPORT_JSON = "report.json"
PLOTS_DIR = "plots"
MAX_TRAIN_POINTS = 60  # train-loss points kept per run in report.json and the plots


def mean_std(values: list[float]) -> tuple[float | None, float | None]:
    """(mean, sample standard deviation); std is None with fewer than two values, both None with none."""
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def _thin(points: list[dict[str, Any]], keep: int = MAX_TRAIN_POINTS) -> list[dict[str, Any]]:
    if len(points) <= keep:
        return points
    step = (len(points) - 1) / (keep - 1)
    return [points[round(i * step)] for i in range(keep)]


def _seed_of(path: Path) -> int | None:
    m = re.fullmatch(r"seed-(\d+)", path.name)
    return int(m.group(1)) if m else None


# -- collecting ---------------------------------------------------------------------------------------

def _finetune_runs(out: Path, v: Variant, metric: str) -> dict[int, dict[str, Any]]:
    runs: dict[int, dict[str, Any]] = {}
    base = out / "finetune" / v.name
    if not base.is_dir():
        return runs
    for d in sorted(base.iterdir()):
        seed = _seed_of(d)
        rec = read_json(d / RESULTS) if seed is not None else None
        if not isinstance(rec, dict) or rec.get("kind") != "finetune":
            continue
        records = read_metrics(d)
        runs[seed] = {
            "test": 100 * rec["test"]["main_score"], "dev": 100 * rec["dev"]["main_score"],
            "wall_s": rec.get("wall_s", wall_seconds(d)), "steps": rec.get("steps"), "best_step": rec.get("best_step"),
            "resumed_from_step": rec.get("resumed_from_step", 0), "finished": rec.get("finished"), "dir": str(d),
            "dev_curve": [{"step": r["step"], "score": 100 * r[metric]} for r in records
                          if r.get("kind") == "eval" and r.get(metric) is not None],
            "train_curve": _thin([{"step": r["step"], "loss": r["loss"]} for r in records
                                  if r.get("kind") == "train" and r.get("loss") is not None]),
        }
    return dict(sorted(runs.items()))


def _pretraining(root: Path, v: Variant) -> dict[str, Any] | None:
    d = root / "pretrain" / v.name
    res = read_json(d / RESULTS)
    if not isinstance(res, dict):
        return None
    h = res.get("heldout") or {}
    final, base = h.get("final") or {}, h.get("baseline") or {}
    records = read_metrics(d)
    model = (res.get("recipe") or {}).get("model", {})
    return {
        "encoder": model.get("encoder"), "ngram_weighting": model.get("ngram_weighting"),
        "masking": (res.get("recipe") or {}).get("masking", {}).get("scheme"), "steps": res.get("steps"),
        "parameters": res.get("parameters"), "heldout_masked_acc": final.get("masked_acc"),
        "heldout_mlm_loss": final.get("mlm_loss"), "baseline_masked_acc": base.get("masked_acc"),
        "baseline_mlm_loss": base.get("mlm_loss"), "wall_s": wall_seconds(d), "dir": str(d),
        "train_curve": _thin([{"step": r["step"], "loss": r["loss"]} for r in records
                              if r.get("kind") == "train" and r.get("loss") is not None]),
        "heldout_curve": [{"step": r["step"], "mlm_loss": r.get("mlm_loss"), "masked_acc": r.get("masked_acc")}
                          for r in records if r.get("kind") == "eval"],
    }


def collect(out: Path) -> dict[str, Any]:
    """Everything the report shows, from OUT/plan.json and the run directories."""
    out = Path(out)
    doc = read_json(out / PLAN_FILE)
    if not isinstance(doc, dict):
        raise ZenError(f"{out / PLAN_FILE}: no ablation here (no readable plan.json); run `zen bench ablation` "
                       f"with --out {out} first")
    plan, fp = doc["plan"], doc["fingerprint"]
    metric = task_class(fp["task"]).main_metric
    root = Path(plan["pretrained_from"]) if plan.get("pretrained_from") else out  # lexicon + pretrainings
    variants = []
    for v in VARIANTS:
        runs = _finetune_runs(out, v, metric)
        tests, devs = [r["test"] for r in runs.values()], [r["dev"] for r in runs.values()]
        (tm, ts), (dm, ds) = mean_std(tests), mean_std(devs)
        walls = [r["wall_s"] for r in runs.values() if r["wall_s"]]
        variants.append({
            "name": v.name, "description": v.description, "pretrained": v.pretrain is not None,
            "in_plan": v.name in {x["name"] for x in plan["variants"]},
            "seeds": list(runs), "test_mean": tm, "test_std": ts, "dev_mean": dm, "dev_std": ds,
            "wall_s_mean": statistics.fmean(walls) if walls else None, "runs": runs,
            "pretraining": _pretraining(root, v) if v.pretrain is not None else None,
        })
    by_name = {v["name"]: v for v in variants}
    comparisons = []
    for c in CLAIMS:
        a, b = by_name[c.better]["runs"], by_name[c.worse]["runs"]
        seeds = sorted(set(a) & set(b))
        diffs = [a[s]["test"] - b[s]["test"] for s in seeds]
        dev_diffs = [a[s]["dev"] - b[s]["dev"] for s in seeds]
        mean, std = mean_std(diffs)
        comparisons.append({
            "claim": c.claim, "source": c.source, "better": c.better, "worse": c.worse, "seeds": seeds,
            "test_diffs": diffs, "test_diff_mean": mean, "test_diff_std": std,
            "dev_diff_mean": mean_std(dev_diffs)[0], "wins": sum(d > 0 for d in diffs),
            "agrees": None if mean is None else mean > 0,
        })
    expected = [r for r in plan["runs"]]
    missing = []
    for r in expected:
        if r["kind"] == "finetune" and r["seed"] not in by_name[r["variant"]]["runs"]:
            missing.append(f"finetune {r['variant']} seed {r['seed']}")
        elif r["kind"] == "pretrain" and by_name[r["variant"]]["pretraining"] is None:
            missing.append(f"pretrain {r['variant']}")
        elif r["kind"] == "lexicon" and read_json(root / "lexicon" / RESULTS) is None:
            missing.append("lexicon")
    invocations = doc.get("invocations", [])
    return {
        "out": str(out), "task": fp["task"], "metric": metric, "built": datetime.now().astimezone().isoformat(
            timespec="seconds"), "fingerprint": fp, "plan": plan, "invocations": invocations,
        "machine": invocations[-1]["machine"] if invocations else None,
        "variants": variants, "comparisons": comparisons, "missing": missing,
        "finished_runs": len(expected) - len(missing), "planned_runs": len(expected),
    }


# -- markdown -----------------------------------------------------------------------------------------

def _pm(mean: float | None, std: float | None, digits: int = 2) -> str:
    if mean is None:
        return "—"
    return f"{mean:.{digits}f} ± {std:.{digits}f}" if std is not None else f"{mean:.{digits}f} (1 seed)"


def _signed(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "—"
    return f"{mean:+.2f} ± {std:.2f}" if std is not None else f"{mean:+.2f} (1 seed)"


def duration(seconds: float | None) -> str:
    """`42 s`, `3.5 min`, `2.1 h` (— when unknown)."""
    if not seconds:
        return "—"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def render_markdown(data: dict[str, Any], plots: list[str] | str) -> str:
    """report.md; `plots`: the PNG file names under plots/, or the reason there are none."""
    fp, plan, m = data["fingerprint"], data["plan"], data["machine"] or {}
    metric = data["metric"]
    task = data["task"].upper()
    runs = [i for i in data["invocations"] if "--report-only" not in i["command"]]
    last = runs[-1] if runs else (data["invocations"][-1] if data["invocations"] else None)
    lines = [f"# zen bench ablation: {task}" + ("" if fp.get("task_data") else " on PD98"), ""]
    lines.append(f"Report built {data['built']} from the runs in `{data['out']}`: {data['finished_runs']} of "
                 f"{data['planned_runs']} planned runs finished.")
    lines.append("")
    if last is not None:
        first = runs[0]["started"] if runs else "—"
        lines.append(f"- Command: `{last['command']}` ({len(runs)} invocation(s); first {first}, last "
                     f"{last['started']}). Run the same command again to continue an unfinished plan.")
    lines.append(f"- Machine: {m.get('cpu_count', '?')} CPU(s) ({m.get('cpu_model') or 'unknown model'}), torch "
                 f"{m.get('torch', '?')} ({m.get('torch_threads', '?')} threads), Python {m.get('python', '?')}, "
                 f"{m.get('platform', '?')}")
    if m.get("commit"):
        lines.append(f"- zen {m.get('zen', '?')}, commit `{m['commit'][:12]}`"
                     + (" with uncommitted changes" if m.get("dirty") else ""))
    if fp.get("task_data"):
        where = f"`{fp['task_data']}`/train, scored on dev and test; pretrained on `{fp['data']}`/raw/train.txt"
    else:
        folder = {"ner": "ner/*.tsv", "cws": "cws/*.txt", "pos": "pos/*.tsv"}.get(data["task"], data["task"])
        where = f"`{fp['data']}`: fine-tuned on {folder} train, scored on dev and test; pretrained on raw/train.txt"
    lines.append(f"- Data: {where} (held-out: raw/dev.txt)")
    if data["plan"].get("pretrained_from"):
        lines.append(f"- Lexicon and pretrained models: those of the ablation in `{data['plan']['pretrained_from']}`")
    sets = f" with {', '.join(fp['pretrain_sets'])}" if fp["pretrain_sets"] else ""
    lines.append(f"- Pretraining: recipe `{fp['pretrain_recipe']['name']}`{sets}, {fp['pretrain_steps']:,} steps "
                 "for every pretrained variant, one run per variant shared by its seeds")
    sets = f" with {', '.join(fp['finetune_sets'])}" if fp["finetune_sets"] else ""
    length = (f"{fp['finetune_steps']:,} steps" if fp["finetune_steps"] is not None
              else f"{fp['finetune_epochs']:g} epoch(s)")
    if fp.get("scratch_steps") is not None:
        length += f" for the pretrained variants and {fp['scratch_steps']:,} steps for those trained from scratch"
    lines.append(f"- Fine-tuning: recipe `{fp['finetune_recipe']['name']}`{sets}, {length} per run, seeds "
                 f"{', '.join(map(str, plan['seeds']))}; score = {metric} × 100 of the model with the best dev "
                 f"score, mean ± sample std over seeds")
    lines += ["", f"## Scores ({metric} × 100)", "",
              f"| variant | pretrained | test {metric} | dev {metric} | seeds | test per seed | wall per run |",
              "|---|---|---|---|---|---|---|"]
    for v in data["variants"]:
        if not v["runs"] and not v["in_plan"]:
            continue
        per_seed = " · ".join(f"{s}: {r['test']:.2f}" for s, r in v["runs"].items()) or "not run yet"
        lines.append(f"| {v['name']} | {'yes' if v['pretrained'] else 'no (from scratch)'} | "
                     f"{_pm(v['test_mean'], v['test_std'])} | {_pm(v['dev_mean'], v['dev_std'])} | "
                     f"{len(v['runs'])} | {per_seed} | {duration(v['wall_s_mean'])} |")
    lines += ["", "## The papers' claims (paired by seed)", "",
              "Difference = better − worse on the test score, mean ± std over the seeds both variants finished; "
              "*agrees* = the mean difference has the sign the paper reports. With a few seeds, a difference "
              "within about one std is not evidence either way.", "",
              "| claim | better | worse | test difference | dev difference | seeds won | agrees | source |",
              "|---|---|---|---|---|---|---|---|"]
    shown = {v["name"] for v in data["variants"] if v["in_plan"] or v["runs"]}
    for c in data["comparisons"]:
        if not {c["better"], c["worse"]} <= shown:
            continue  # a claim about variants this ablation does not include
        agrees = "—" if c["agrees"] is None else ("yes" if c["agrees"] else "no")
        won = f"{c['wins']}/{len(c['seeds'])}" if c["seeds"] else "—"
        dev = "—" if c["dev_diff_mean"] is None else f"{c['dev_diff_mean']:+.2f}"
        diff = _signed(c["test_diff_mean"], c["test_diff_std"])
        lines.append(f"| {c['claim']} | {c['better']} | {c['worse']} | {diff} | {dev} | {won} | {agrees} | "
                     f"{c['source']} |")
    pre = [v for v in data["variants"] if v["pretraining"] is not None]
    if pre:
        lines += ["", "## Pretraining (held-out raw/dev.txt)", "",
                  "| variant | encoder | n-gram weights | masking | steps | masked-char acc | MLM loss | "
                  "unigram baseline acc | wall |", "|---|---|---|---|---|---|---|---|---|"]
        for v in pre:
            p = v["pretraining"]
            weights = "—" if p["encoder"] == "bert" else (p["ngram_weighting"] or "encoder default")
            lines.append(f"| {v['name']} | {p['encoder']} | {weights} | {p['masking']} | {p['steps']:,} | "
                         f"{_num(p['heldout_masked_acc'])} | {_num(p['heldout_mlm_loss'])} | "
                         f"{_num(p['baseline_masked_acc'])} | {duration(p['wall_s'])} |")
    lines += ["", "## Variants", "", "| variant | what |", "|---|---|"]
    for v in data["variants"]:
        if v["in_plan"] or v["runs"]:
            lines.append(f"| {v['name']} | {v['description']} |")
    lines += ["", "## Plots", ""]
    if isinstance(plots, str):
        lines.append(plots)
    else:
        titles = {"test_scores.png": "test scores (mean ± std, dots: seeds)",
                  "dev_curves.png": "dev learning curves (mean over seeds)",
                  "train_loss.png": "fine-tuning training loss (mean over seeds)",
                  "pretrain_curves.png": "pretraining loss"}
        for name in plots:
            lines.append(f"![{titles.get(name, name)}]({PLOTS_DIR}/{name})")
            lines.append("")
    lines += ["", "## Runs", "", "| run | steps | best dev step | resumed from | wall | finished |",
              "|---|---|---|---|---|---|"]
    for v in data["variants"]:
        p = v["pretraining"]
        if p is not None:
            lines.append(f"| pretrain {v['name']} | {p['steps']:,} | — | — | {duration(p['wall_s'])} | — |")
        for s, r in v["runs"].items():
            lines.append(f"| finetune {v['name']} seed {s} | {r['steps']} | {r['best_step']} | "
                         f"{r['resumed_from_step'] or '—'} | {duration(r['wall_s'])} | {r['finished']} |")
    if data["missing"]:
        lines += ["", "## Not finished yet", ""] + [f"- {x}" for x in data["missing"]]
    return "\n".join(lines) + "\n"


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.4f}"


# -- plots --------------------------------------------------------------------------------------------

def _mean_curve(curves: list[list[dict[str, Any]]], key: str) -> tuple[list[int], list[float]]:
    """Mean of `key` over the runs at each step they share (the seeds of a variant log the same steps)."""
    by_step: dict[int, list[float]] = {}
    for curve in curves:
        for p in curve:
            by_step.setdefault(p["step"], []).append(p[key])
    steps = sorted(s for s, v in by_step.items() if len(v) == len(curves))
    return steps, [statistics.fmean(by_step[s]) for s in steps]


def write_plots(data: dict[str, Any], folder: Path) -> list[str] | str:
    """PNGs under `folder`; returns their names, or the reason for none (matplotlib missing, no runs)."""
    try:
        import matplotlib  # optional dependency (zencli[plots])

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return (f"matplotlib is not installed, so there are no plots (`pip install 'zencli[plots]'`, then "
                f"`zen bench ablation --task {data['task']} --out {data['out']} --report-only`); the tables "
                "above hold every number.")
    done = [v for v in data["variants"] if v["runs"]]
    if not done:
        return "No finished fine-tuning run yet, so nothing to plot."
    folder.mkdir(parents=True, exist_ok=True)
    metric, names = data["metric"], []
    groups = [("pretrained", [v for v in done if v["pretrained"]]),
              ("from scratch", [v for v in done if not v["pretrained"]])]
    groups = [(title, vs) for title, vs in groups if vs]

    fig, ax = plt.subplots(figsize=(8, 0.45 * len(done) + 1.5))
    ys = list(range(len(done)))[::-1]
    means = [v["test_mean"] for v in done]
    errs = [v["test_std"] or 0.0 for v in done]
    ax.barh(ys, means, xerr=errs, color=["tab:blue" if v["pretrained"] else "tab:orange" for v in done],
            alpha=0.75, capsize=4)
    for y, v in zip(ys, done):
        ax.plot([r["test"] for r in v["runs"].values()], [y] * len(v["runs"]), "k.", ms=4)
    ax.set_yticks(ys, [v["name"] for v in done])
    lo = min(r["test"] for v in done for r in v["runs"].values())
    hi = max(r["test"] for v in done for r in v["runs"].values())
    pad = max(1.0, 0.15 * (hi - lo))
    ax.set_xlim(max(0.0, lo - pad), min(100.0, hi + pad))
    ax.set_xlabel(f"test {metric} × 100 (mean ± std over seeds; blue: pretrained, orange: from scratch)")
    ax.set_title(f"{data['task'].upper()} test scores")
    fig.tight_layout()
    fig.savefig(folder / "test_scores.png", dpi=110)
    plt.close(fig)
    names.append("test_scores.png")

    for fname, key, field, ylabel in (("dev_curves.png", "dev_curve", "score", f"dev {metric} × 100"),
                                      ("train_loss.png", "train_curve", "loss", "training loss")):
        fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4), squeeze=False)
        for ax, (title, vs) in zip(axes[0], groups):
            for v in vs:
                steps, values = _mean_curve([r[key] for r in v["runs"].values()], field)
                if steps:
                    ax.plot(steps, values, marker="o" if key == "dev_curve" else None, ms=3, label=v["name"])
            ax.set_title(title)
            ax.set_xlabel("fine-tuning step")
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(folder / fname, dpi=110)
        plt.close(fig)
        names.append(fname)

    pre = [v for v in data["variants"] if v["pretraining"] is not None and v["pretraining"]["train_curve"]]
    if pre:
        fig, ax = plt.subplots(figsize=(7, 4))
        for v in pre:
            c = v["pretraining"]["train_curve"]
            ax.plot([p["step"] for p in c], [p["loss"] for p in c], label=v["name"])
        ax.set_xlabel("pretraining step")
        ax.set_ylabel("MLM + NSP loss (training)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(folder / "pretrain_curves.png", dpi=110)
        plt.close(fig)
        names.append("pretrain_curves.png")
    return names


def write_report(out: Path) -> tuple[Path, list[str] | str, dict[str, Any]]:
    """Collect, plot, and write OUT/report.md + OUT/report.json; returns (report.md, plot names or the
    reason there are none, the collected data)."""
    out = Path(out)
    data = collect(out)
    plots = write_plots(data, out / PLOTS_DIR)
    data["plots"] = plots if isinstance(plots, list) else []
    data["plots_note"] = plots if isinstance(plots, str) else None
    atomic_write_text(out / REPORT_JSON, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    atomic_write_text(out / REPORT_MD, render_markdown(data, plots))
    return out / REPORT_MD, plots, data
