"""`zen bench gpu`: check a GPU end to end in one command — speed, a pretraining that must learn, the
fine-tunings, scoring and prediction that follow it — as one table and one JSON report.

    1. model      `zencli.bench.model.run` at base size (12×768, 6 n-gram layers), batch 32 × 128, once in fp32
                  and once in bf16: training and inference tokens/s of zen2 / zen1 / bert and the zen2/bert step
                  ratio (goal ≤ 1.3×); bf16 must keep the MLM loss within 2% of fp32 (same weights, one batch)
    2. lexicon    the workspace's vocab.txt + n-gram lexicon of PD98 raw train (`zen lexicon`; reused once built)
    3. pretrain   pretrain-zh-tiny at 6×256 (2 n-gram layers), seq 128, batch 128, dtype auto (bf16 where
                  supported), 3 minutes: held-out masked-char accuracy must end at ≥ 2× the unigram baseline
                  the pretraining reports (always guessing the most frequent training character)
    4. finetune   NER and CWS from that model (their PD98 recipes, 45 s each), scored on test by
                  `zencli.tasks.predict.evaluate_model` — what `zen evaluate MODEL --data test` runs; test F1
                  must reach 0.6 (NER: the quickstart's acceptance bar for its smaller model) and 0.9 (CWS: the
                  CWS recipe trained from scratch reaches 0.91)
    5. predict    the NER model through `zencli.tasks.predict.predict_stream` (what `zen predict` runs) on
                  3,000 lines of PD98 raw test: lines/s and chars/s, one output line per input line

More: docs/design.md, "GPU check".
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zencli import formatting as fmt
from zencli.atomic_write import atomic_write_text
from zencli.bench.common import dataset_dir, machine_facts, need_file
from zencli.bench.model import ModelBenchSettings, judging_clock, parse_size
from zencli.bench.model import run as run_model_bench
from zencli.config.loading import to_dict
from zencli.datasets import locate
from zencli.errors import ZenError
from zencli.jobs import finetune as finetune_job
from zencli.jobs import pretrain as pretrain_job
from zencli.jobs.lexicon import build_workspace_lexicon
from zencli.jobs.workspace import CORPUS, TASK_DEFAULTS, Workspace, as_overrides
from zencli.tasks.finetune import run_finetune
from zencli.tasks.inference import set_dtype
from zencli.tasks.model_dir import load_task_model
from zencli.tasks.predict import evaluate_model, predict_stream
from zencli.tasks.pretraining import run_pretrain
from zencli.text.reading import iter_lines

TASKS = ("ner", "cws")  # fine-tuned from the pretrained model; NER is also the prediction model
PREDICT_TASK = "ner"
REPORT_NAME = "bench-gpu.json"


@dataclass
class GpuCheckSettings:
    """Sizes, budgets and criteria of `zen bench gpu` (defaults: sized for one GPU)."""

    preset: str = "gpu"
    device: str = "auto"  # auto: cuda when torch sees a GPU (the GPU sizes refuse to run on a CPU unless asked)
    output_dir: Path = Path("runs/bench-gpu")
    data: Path | None = None  # the pd98 dataset directory; None: located ($ZEN_DATA, the cache)
    seed: int = 0
    threads: int | None = None  # CPU threads of every step; None: torch's default, the recipes' own for training
    # 1. zen bench model
    model_size: str = "base"  # tiny | small | base | LAYERSxHIDDENxNGRAM_LAYERS
    model_batch: int = 32
    model_seq_len: int = 128
    model_steps: int = 10  # timed rounds (one untimed warm-up round first)
    model_ngram_rows: int = 100_000
    model_vocab_size: int = 21128
    gemm_size: int = 2048
    gemm_seconds: float = 0.5
    # 3. pretraining (pretrain-zh-tiny on the workspace lexicon)
    pretrain_size: str = "6x256x2"  # LAYERSxHIDDENxNGRAM_LAYERS (heads hidden/64, FFN 4 × hidden)
    pretrain_seq_len: int = 128
    pretrain_batch: int = 128
    pretrain_dupe_factor: int = 6
    pretrain_minutes: float = 3.0
    pretrain_steps: int = 100_000  # upper bound: the time budget fits the step count
    pretrain_warmup_steps: int = 300
    pretrain_lr: float | None = None  # None: the recipe's
    dtype: str = "auto"  # pretraining and fine-tuning: auto = bf16 where the device supports it
    pretrain_sets: list[str] = field(default_factory=list)  # KEY=VALUE, as `zen pretrain --set` (win over the above)
    # 4. fine-tuning (the tasks' PD98 recipes from the pretrained model)
    finetune_minutes: float = 0.75
    finetune_steps: int | None = None  # None: the recipe's epochs, cut by the time budget
    finetune_batch: int = 32
    finetune_sets: list[str] = field(default_factory=list)  # KEY=VALUE, as `zen finetune --set`
    # 5. prediction
    predict_lines: int = 3000
    # criteria (required: the check fails) and goals (reported)
    min_pretrain_ratio: float = 2.0  # held-out masked-char accuracy ≥ this × the unigram baseline's
    min_ner_f1: float = 0.6
    min_cws_f1: float = 0.9
    max_bf16_loss_gap: float = 0.02  # |MLM loss bf16 − fp32| / fp32, per encoder
    goal_zen2_bert_ratio: float = 1.3  # ZEN 2.0 training step / BERT's: the GPU goal
    goal_minutes: float | None = 8.0  # the whole check

    def validate(self) -> None:
        for key in ("model_size", "pretrain_size"):
            try:
                parse_size(getattr(self, key))
            except ZenError as e:
                raise ZenError(str(e).replace("--sizes", f"--{key.replace('_', '-')}")) from None
        for key in ("model_batch", "model_seq_len", "model_steps", "pretrain_seq_len", "pretrain_batch",
                    "pretrain_dupe_factor", "pretrain_steps", "finetune_batch", "predict_lines"):
            if getattr(self, key) < 1:
                raise ZenError(f"--{key.replace('_', '-')}: expected an integer >= 1, got {getattr(self, key)}")
        for key in ("pretrain_minutes", "finetune_minutes"):
            if not getattr(self, key) > 0:
                raise ZenError(f"--{key.replace('_', '-')}: expected a number of minutes > 0, got {getattr(self, key)}")
        if self.finetune_steps is not None and self.finetune_steps < 1:
            raise ZenError(f"--finetune-steps: expected an integer >= 1, got {self.finetune_steps}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ZenError(f"--device: expected auto, cpu or cuda, got {self.device!r}")


GPU = GpuCheckSettings()
# CPU-sized, for a small corpus (the tests' made-up PD98): the same chain at 2 layers, bounded by steps (the
# minutes only cap a very slow machine), single-threaded (a shared 2-core machine), in well under a minute.
# 200 pretraining steps: at 100 the tiny model was just leaving the unigram plateau, so whether it passed 2× the
# unigram baseline hung on the draw of its 300-sentence corpus's masks (1.7× to 4.4× over seeds and draws).
TINY = replace(
    GPU, preset="tiny", model_size="2x64x1", model_batch=4, model_seq_len=32, model_steps=2, model_ngram_rows=2000,
    model_vocab_size=1000, gemm_size=64, gemm_seconds=0.05, pretrain_size="2x64x1", pretrain_seq_len=64,
    pretrain_batch=64, pretrain_dupe_factor=2, pretrain_minutes=2.0, pretrain_steps=200, pretrain_warmup_steps=10,
    pretrain_lr=3e-3, dtype="fp32", threads=1, finetune_minutes=0.5, finetune_steps=40, finetune_batch=16,
    predict_lines=500, min_pretrain_ratio=2.0, min_ner_f1=0.5, min_cws_f1=0.5, goal_minutes=None)


# --- rows and criteria ----------------------------------------------------------------------------------


@dataclass
class Check:
    criterion: str
    passed: bool
    required: bool = True  # False: a goal, reported but not enforced


@dataclass
class Row:
    step: str
    ran: str
    seconds: float
    key: str
    values: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)


def pretrain_check(results: dict[str, Any], min_ratio: float) -> Check:
    """Held-out masked-char accuracy at the end of the pretraining against `min_ratio` × the unigram
    baseline's (both from the pretraining's results.json). No held-out evaluation is a failure."""
    held = results.get("heldout") or {}
    final, base = (held.get("final") or {}).get("masked_acc"), (held.get("baseline") or {}).get("masked_acc")
    criterion = f"held-out masked-char acc ≥ {min_ratio:g}× unigram"
    if final is None or base is None:
        return Check(criterion + " (no held-out evaluation)", False)
    return Check(criterion, final >= min_ratio * base)


def at_least(what: str, value: float | None, minimum: float) -> Check:
    return Check(f"{what} ≥ {minimum:g}", value is not None and value >= minimum)


def bf16_check(report: dict[str, Any], max_gap: float) -> Check:
    """bf16 autocast against fp32 on one batch (same weights): the MLM loss within `max_gap` (relative)."""
    gaps = [r["mlm_loss_abs_diff"] / r["mlm_loss_fp32"] for res in report["results"] for r in res["bf16_accuracy"]]
    return Check(f"bf16 MLM loss within {100 * max_gap:g}% of fp32", bool(gaps) and max(gaps) <= max_gap)


def passed(rows: list[Row]) -> bool:
    return all(c.passed for r in rows for c in r.checks if c.required)


def failures(rows: list[Row]) -> list[str]:
    return [f"{r.step}: {c.criterion}" for r in rows for c in r.checks if c.required and not c.passed]


# --- the steps ------------------------------------------------------------------------------------------


def resolve_device(requested: str, preset: str):
    """The torch device of the check; a GPU-sized check on a CPU only when asked for (--device cpu)."""
    if requested == "cuda" and not torch.cuda.is_available():
        raise ZenError("--device cuda: torch sees no CUDA GPU")
    if requested == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if preset != "tiny":
            raise ZenError("no CUDA GPU visible: the GPU sizes (base model, 3-minute 6×256 pretraining) would take "
                           "far longer than 8 minutes on a CPU; use --tiny for the CPU-sized check (or --device cpu "
                           "to run the GPU sizes anyway)")
    return torch.device("cpu" if requested == "auto" else requested)


def locate_corpus(data: Path | None) -> Path:
    """The pd98 dataset directory: `data`, else $ZEN_DATA/pd98 or the cache (never a download here)."""
    if data is not None:
        return dataset_dir(data, CORPUS)
    try:
        return Path(locate(CORPUS, fetch=False))
    except ZenError as e:
        raise ZenError(f"{e}; or give --data DIR (a converted {CORPUS}/ folder, as `zen data fetch {CORPUS} "
                       "--out ROOT` writes it under ROOT)") from None


def gpu_facts(device) -> dict[str, Any]:
    if device.type != "cuda":
        return {"device": "cpu"}
    p = torch.cuda.get_device_properties(device)
    return {"device": str(device), "name": p.name, "capability": f"{p.major}.{p.minor}",
            "memory_gib": round(p.total_memory / 2**30, 1), "cuda": torch.version.cuda,
            "bf16": torch.cuda.is_bf16_supported()}


def model_step(s: GpuCheckSettings, device, dtype: str, callbacks: dict[str, Callable]) -> Row:
    """`zen bench model` at one dtype: tokens/s of the three encoders and the zen2/bert step ratio."""
    size = parse_size(s.model_size)
    t0 = time.perf_counter()
    report = run_model_bench(ModelBenchSettings(
        sizes=[size], encoders=["zen2", "zen1", "bert"], dtypes=[dtype], dense_opt=False,
        steps=s.model_steps, infer_steps=s.model_steps, batch=s.model_batch, seq_len=s.model_seq_len,
        ngram_rows=s.model_ngram_rows, vocab_size=s.model_vocab_size, curve_steps=0, gemm_size=s.gemm_size,
        gemm_seconds=s.gemm_seconds, threads=s.threads or 0, seed=s.seed, device=str(device)), **callbacks)
    seconds = time.perf_counter() - t0
    pre = "cpu_" if judging_clock(report["settings"]["threads"]) == "cpu" else ""
    res = report["results"][0]
    rows = {r["encoder"]: r for r in res["rows"]}
    train = {e: r["train"][pre + "tokens_per_s"] for e, r in rows.items()}
    infer = {e: r["infer"][pre + "tokens_per_s"] for e, r in rows.items()}
    ratio = rows["zen2"].get(pre + "train_ratio_vs_bert")
    values: dict[str, Any] = {"dtype": dtype, "train_tokens_per_s": train, "infer_tokens_per_s": infer,
                              "zen2_bert_step_ratio": ratio, "report": report}
    key = (f"train tok/s {_per_encoder(train)}; infer tok/s {_per_encoder(infer)}; zen2/bert step "
           f"{_x(ratio)}")
    checks = [Check(f"zen2/bert step ≤ {s.goal_zen2_bert_ratio:g}× (goal)",
                    ratio is not None and ratio <= s.goal_zen2_bert_ratio, required=False)]
    if dtype == "bf16":
        checks.insert(0, bf16_check(report, s.max_bf16_loss_gap))
        values["bf16_mlm_loss_gap"] = max(r["mlm_loss_abs_diff"] / r["mlm_loss_fp32"] for r in res["bf16_accuracy"])
        key += f"; bf16 loss gap {100 * values['bf16_mlm_loss_gap']:.2f}%"
    m = res["model"]
    ran = (f"bench model {m['name']} ({m['layers']}×{m['hidden']}, {m['ngram_layers']} n-gram layers) {dtype}, "
           f"batch {s.model_batch} × {s.model_seq_len}, {s.model_steps} rounds")
    return Row(f"model {dtype}", ran, seconds, key, values, checks)


def lexicon_step(ws: Workspace, data: Path, console: Console) -> Row:
    reused = ws.lexicon_done()
    t0 = time.perf_counter()
    lex = build_workspace_lexicon(ws, data=data, console=console)
    seconds = time.perf_counter() - t0
    key = f"{lex['ngrams']:,} n-grams, {lex['vocab_size']:,} characters" + (" (built earlier)" if reused else "")
    return Row("lexicon", f"zen lexicon: vocab + n-gram lexicon of {CORPUS} raw train", seconds, key,
               {"ngrams": lex["ngrams"], "vocab_size": lex["vocab_size"], "reused": reused})


def pretrain_config(s: GpuCheckSettings, ws: Workspace, data: Path, device):
    """pretrain-zh-tiny on the workspace lexicon at the check's sizes (the user's --pretrain-set last)."""
    size = parse_size(s.pretrain_size)
    ours = {
        "model.hidden_size": size.hidden, "model.num_hidden_layers": size.layers,
        "model.num_attention_heads": size.heads, "model.intermediate_size": size.intermediate,
        "model.num_hidden_word_layers": size.ngram_layers, "data.max_seq_len": s.pretrain_seq_len,
        "data.dupe_factor": s.pretrain_dupe_factor, "train.batch_size": s.pretrain_batch,
        "train.max_steps": s.pretrain_steps, "train.warmup_steps": s.pretrain_warmup_steps,
        "train.max_minutes": s.pretrain_minutes, "train.device": device.type, "train.dtype": s.dtype,
        "train.seed": s.seed, "train.overwrite": True,
        **({} if s.pretrain_lr is None else {"train.lr": s.pretrain_lr}),
        **({} if s.threads is None else {"train.num_threads": s.threads}),
    }
    return pretrain_job.workspace_config(ws, [*as_overrides(ours), *s.pretrain_sets], {}, data=data)


def pretrain_step(s: GpuCheckSettings, ws: Workspace, data: Path, device, console: Console,
                  show_progress: bool) -> Row:
    cfg = pretrain_config(s, ws, data, device)
    t0 = time.perf_counter()
    result = run_pretrain(cfg, console=console, show_progress=show_progress)
    seconds = time.perf_counter() - t0
    r = result.results
    held = r.get("heldout") or {}
    final, base = held.get("final") or {}, held.get("baseline") or {}
    acc, base_acc = final.get("masked_acc"), base.get("masked_acc")
    values = {"steps": r.get("steps"), "parameters": r.get("parameters"), "dtype": r.get("dtype"),
              "tokens_per_s": result.tokens_per_s, "train_seconds": round(result.elapsed_s, 3),
              "heldout_masked_acc": acc, "baseline_masked_acc": base_acc,
              "heldout_mlm_loss": final.get("mlm_loss"), "baseline_mlm_loss": base.get("mlm_loss"),
              "model": str(result.model_dir)}
    m = cfg.model
    ran = (f"pretrain {m.num_hidden_layers}×{m.hidden_size} ({m.num_hidden_word_layers} n-gram layers), seq "
           f"{cfg.data.max_seq_len}, batch {cfg.train.batch_size}, {r.get('dtype')}, "
           f"{cfg.train.max_minutes:g} min budget")
    rate = f", {result.tokens_per_s:,.0f} tok/s" if result.tokens_per_s else ""
    key = (f"{fmt.count(values['steps'])} steps{rate}; held-out masked-char acc {fmt.number(acc)} vs unigram "
           f"{fmt.number(base_acc)}" + (f" ({acc / base_acc:.1f}×)" if acc is not None and base_acc else ""))
    check = pretrain_check(r, s.min_pretrain_ratio)
    if not check.passed:  # say it now, loudly: the fine-tunings that follow start from a model that did not learn
        console.print(f"[bold red]FAIL[/bold red]: the pretraining ended at held-out masked-char accuracy "
                      f"{fmt.number(acc)} against {fmt.number(base_acc)} for the unigram baseline (needs ≥ "
                      f"{s.min_pretrain_ratio:g}×): it did not learn. Continuing with the other steps; the check "
                      f"will fail.", highlight=False)
    return Row("pretrain", ran, seconds, key, values, [check])


def finetune_config(s: GpuCheckSettings, ws: Workspace, task: str, data: Path, device):
    """The task's PD98 recipe from the workspace's pretrained model (the user's --finetune-set last); test is
    scored afterwards, by the evaluation `zen evaluate` runs."""
    ours = {"data.test": None, "train.batch_size": s.finetune_batch, "train.max_minutes": s.finetune_minutes,
            "train.device": device.type, "train.dtype": s.dtype, "train.seed": s.seed, "train.overwrite": True,
            **({} if s.threads is None else {"train.num_threads": s.threads})}
    options = {"task.name": task, "train.max_steps": s.finetune_steps}  # a step count replaces the recipe's epochs
    if s.finetune_steps is not None:
        ours["train.patience"] = 0  # the steps asked for are the ones measured: no early stopping
    return finetune_job.workspace_config(ws, [*as_overrides(ours), *s.finetune_sets], options, data=data)


def finetune_step(s: GpuCheckSettings, ws: Workspace, task: str, data: Path, device, console: Console,
                  show_progress: bool) -> Row:
    cfg = finetune_config(s, ws, task, data, device)
    test = TASK_DEFAULTS[task].files(data)["test"]
    t0 = time.perf_counter()
    result = run_finetune(cfg, console=console, show_progress=show_progress)
    trained = time.perf_counter() - t0
    # in `zen evaluate`'s default dtype (auto), as the command would score it
    evaluation = evaluate_model(set_dtype(load_task_model(result.model_dir, device=device), "auto"), test)
    seconds = time.perf_counter() - t0
    scores = evaluation.to_dict()
    f1 = scores.get("f1")
    dev = result.dev.main_score if result.dev is not None else None
    values = {"steps": result.step, "train_seconds": round(result.elapsed_s, 3),
              "finetune_seconds": round(trained, 3), "dev_f1": dev, "test": scores, "model": str(result.model_dir)}
    ran = (f"finetune {task} from it ({TASK_DEFAULTS[task].recipe}), {cfg.train.max_minutes:g} min budget; "
           f"test scored as `zen evaluate`")
    key = (f"test F1 {fmt.percent(f1)} (P {fmt.percent(scores.get('precision'))}, R "
           f"{fmt.percent(scores.get('recall'))}); dev F1 {fmt.percent(dev)}; {fmt.count(result.step)} steps")
    minimum = s.min_ner_f1 if task == "ner" else s.min_cws_f1
    return Row(f"finetune {task}", ran, seconds, key, values, [at_least("test F1", f1, minimum)])


def predict_lines(data: Path, n: int) -> list[str]:
    """`n` non-empty lines of the corpus's raw test text (repeated when it has fewer)."""
    path = need_file(data / "raw" / "test.txt", f"the {CORPUS} dataset's raw test text (raw/test.txt)")
    lines = [text for _, text in iter_lines(path) if text.strip()]
    if not lines:
        raise ZenError(f"{path}: no text lines to predict")
    return [lines[i % len(lines)] for i in range(n)]


def predict_step(s: GpuCheckSettings, ws: Workspace, data: Path, device) -> Row:
    """The NER model through `predict_stream` (as `zen predict --input IN --output OUT`), timed after loading."""
    lines = predict_lines(data, s.predict_lines)
    folder = ws.root / "predict"
    folder.mkdir(parents=True, exist_ok=True)
    source, target = folder / "input.txt", folder / "output.txt"
    atomic_write_text(source, "".join(line + "\n" for line in lines))
    t0 = time.perf_counter()
    loaded = set_dtype(load_task_model(ws.finetuned_model(PREDICT_TASK), device=device), "auto")  # as zen predict
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    with open(target, "w", encoding="utf-8", newline="\n") as out:
        written = predict_stream(loaded, iter_lines(source, allow_empty=True), out, source=str(source))
    predict_s = time.perf_counter() - t1
    output_lines = len(target.read_text(encoding="utf-8").splitlines())
    chars = sum(len(line) for line in lines)
    values = {"lines": len(lines), "chars": chars, "output_lines": output_lines, "records": written,
              "load_seconds": round(load_s, 3), "predict_seconds": round(predict_s, 3),
              "lines_per_s": len(lines) / predict_s, "chars_per_s": chars / predict_s,
              "input": str(source), "output": str(target)}
    key = f"{values['lines_per_s']:,.0f} lines/s, {values['chars_per_s']:,.0f} chars/s ({len(lines):,} lines)"
    return Row("predict", f"zen predict ({PREDICT_TASK} model) on {CORPUS} raw test lines", time.perf_counter() - t0,
               key, values, [Check("one output line per input line", output_lines == len(lines))])


# --- the whole check ------------------------------------------------------------------------------------


def run(s: GpuCheckSettings, *, console: Console | None = None, show_progress: bool = True,
        model_progress: Callable[[], AbstractContextManager[dict[str, Callable]]] | None = None) -> dict[str, Any]:
    """Run every step (module docstring) and return the JSON-ready report, also written to OUT/bench-gpu.json.
    `model_progress()`: a context manager giving `zencli.bench.model.run`'s log/advance/on_total callbacks
    (its progress display). A failed criterion does not stop the later steps; `report["passed"]` says."""
    s.validate()
    console = console or Console(stderr=True)
    device = resolve_device(s.device, s.preset)
    data = locate_corpus(s.data)
    ws = Workspace.at(s.output_dir)
    ws.root.mkdir(parents=True, exist_ok=True)
    progress = model_progress or (lambda: contextlib.nullcontext({}))
    dtypes = ["fp32"] + ([] if device.type == "cuda" and not _cuda_bf16() else ["bf16"])
    if len(dtypes) == 1:
        console.print("model bf16: skipped (this GPU has no bf16)", highlight=False)
    planned = len(dtypes) + 3 + len(TASKS)
    rows: list[Row] = []
    old_threads = torch.get_num_threads()
    t0 = time.perf_counter()

    def step(title: str, body: Callable[[], Row]) -> None:
        console.rule(escape(f"zen bench gpu · {len(rows) + 1}/{planned}  {title}"))
        # Each step starts at the thread count its own command would (a training run leaves the loop's
        # train.num_threads set; scoring and prediction outside the loop use this too).
        torch.set_num_threads(s.threads or old_threads)
        rows.append(body())
        console.print(escape(f"{rows[-1].step}: {rows[-1].key} ({fmt.seconds(rows[-1].seconds)})"), highlight=False,
                      soft_wrap=True)

    try:
        for dtype in dtypes:
            def body(p: str = dtype) -> Row:
                with progress() as callbacks:
                    return model_step(s, device, p, callbacks)
            step(f"bench model {s.model_size} {dtype}", body)
        step("lexicon", lambda: lexicon_step(ws, data, console))
        step("pretrain", lambda: pretrain_step(s, ws, data, device, console, show_progress))
        for task in TASKS:
            step(f"finetune {task}", lambda t=task: finetune_step(s, ws, t, data, device, console, show_progress))
        step("predict", lambda: predict_step(s, ws, data, device))
    finally:
        torch.set_num_threads(old_threads)
    total = time.perf_counter() - t0
    checks = [] if s.goal_minutes is None else [
        Check(f"≤ {s.goal_minutes:g} min (goal)", total <= 60 * s.goal_minutes, required=False)]
    rows.append(Row("total", f"zen bench gpu ({s.preset})", total, f"{total / 60:.1f} min", checks=checks))
    report = {
        "settings": to_dict(s), "device": gpu_facts(device), "machine": machine_facts(), "dataset": str(data),
        "workdir": str(ws.root), "passed": passed(rows), "failures": failures(rows), "seconds": round(total, 3),
        "rows": [asdict(r) for r in rows],
    }
    atomic_write_text(ws.root / REPORT_NAME, json.dumps(report, indent=1, ensure_ascii=False, default=str) + "\n")
    return report


def _cuda_bf16() -> bool:
    return torch.cuda.is_bf16_supported()


# --- the table ------------------------------------------------------------------------------------------


def status(check: dict[str, Any]) -> str:
    if check["required"]:
        return "pass" if check["passed"] else "[bold red]FAIL[/bold red]"
    return "goal met" if check["passed"] else "[yellow]goal missed[/yellow]"


def table(report: dict[str, Any]):
    """One Rich table: a row per step — what ran, its time, its key numbers, its criteria and verdicts."""
    d = report["device"]
    where = d.get("name", d["device"])
    verdict = "passed" if report["passed"] else "FAILED"
    t = Table(title=f"zen bench gpu ({report['settings']['preset']}) on {escape(where)}: {verdict}")
    for col, justify in (("step", "left"), ("ran", "left"), ("time", "right"), ("key numbers", "left"),
                         ("criterion", "left"), ("verdict", "left")):
        t.add_column(col, justify=justify, overflow="fold")
    for r in report["rows"]:
        checks = r["checks"]
        criteria = "\n".join(escape(c["criterion"]) for c in checks) or "—"
        verdicts = "\n".join(status(c) for c in checks) or "—"
        t.add_row(escape(r["step"]), escape(r["ran"]), fmt.seconds(r["seconds"]), escape(r["key"]), criteria, verdicts,
                  end_section=r["step"] == "predict")
    return t


def _per_encoder(values: dict[str, float]) -> str:
    return " · ".join(f"{e} {_k(v)}" for e, v in values.items())


def _k(v: float) -> str:
    return f"{v / 1000:,.1f}k" if v >= 10_000 else f"{v:,.0f}"


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}×"
