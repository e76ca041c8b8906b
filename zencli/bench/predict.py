"""`zen bench predict`: end-to-end `zen predict` speed per engine and dtype, and where its time goes.

Each round runs the whole prediction path of `zen predict MODEL --input FILE` (zencli.tasks.predict's
`predict_stream`: reading and decoding the file, parsing lines, windows and n-gram matching, batching,
the encoder, the head, decoding, formatting, writing to /dev/null) once per dtype, in rotated order
after `warmup` untimed rounds; chars/s counts the input's characters. With one thread the clock is process
CPU time (least disturbed by other load), else wall time. The encoder's share is timed in every round by
forward hooks around the encoder modules (ZEN/BERT and CHTE).

`profile` adds one pass per dtype under cProfile that splits the time into the path's phases (by the
functions that do them: PHASES); cProfile slows Python code more than the encoder's native kernels, so the
share outside the encoder it shows is an upper bound — the hook-timed share is the figure to judge.

`size` rebuilds MODEL's encoder at another size (tiny, small, base or LxHxN) with random weights — task,
labels, vocabulary and lexicon kept — to time the path at a size there is no fine-tuned model of.

`engines` adds, beside torch, torch-compile (a copy with its encoder compiled, fp32 and bf16; the warm-up
rounds take the compiling) and ONNX Runtime (zencli.tasks.engine: the model, resized or not, exported to a
temporary folder and run in fp32 and int8; its "encoder" share is the ONNX Runtime call, encoder and head),
interleaved with torch's rounds in the same run.
"""

from __future__ import annotations

import copy
import cProfile
import os
import pstats
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from zencli.bench.common import interleaved_rounds, machine_facts
from zencli.bench.model import ModelSize, parse_size
from zencli.errors import ZenError
from zencli.model.encoder import ZenModel
from zencli.tasks.engine import compile_encoder, export_onnx, load_onnx
from zencli.tasks.inference import set_dtype
from zencli.tasks.model_dir import LoadedModel, load_task_model, save_task_model
from zencli.tasks.network import TaskModel
from zencli.tasks.predict import predict_stream
from zencli.text.reading import iter_lines

DTYPES = ("fp32", "bf16", "int8")
ENGINE_DTYPES = {"torch": DTYPES, "torch-compile": ("fp32", "bf16"), "onnx": ("fp32", "int8")}
# phase → (file name ending, function name) pairs whose cumulative time is the phase's (they do not nest)
PHASES: dict[str, tuple[tuple[str, str], ...]] = {
    "reading": (("text/reading.py", "decode_lines"),),
    "parsing": (("", "parse_input"),),
    "windows + n-gram matching": (("tasks/inputs.py", "char_windows"), ("tasks/inputs.py", "id_windows")),
    "batching": (("data/collate.py", "collate"),),
    "encoder": (("tasks/network.py", "encode"), ("tasks/engine.py", "outputs")),  # onnx: encoder and head
    "head": (("model/heads.py", "forward"),),
    "merging windows": (("data/windows.py", "merge_token_predictions"),),
    "decoding": (("tasks/tagging.py", "decode"),),
    "formatting": (("", "format_prediction"),),
    "writing": (("~", "<method 'write' of '_io.TextIOWrapper' objects>"),),
}


def resized(loaded: LoadedModel, size: ModelSize) -> LoadedModel:
    """`loaded` with its ZEN/BERT encoder rebuilt at `size` (random weights), task and inputs kept."""
    model = loaded.model
    if model.encoder is None or model.chte is not None:
        raise ZenError(f"--size: {loaded.path} has a CHTE encoder; --size rebuilds ZEN/BERT encoders only")
    config = replace(model.encoder.config, hidden_size=size.hidden, num_hidden_layers=size.layers,
                     num_attention_heads=size.heads, intermediate_size=size.intermediate,
                     num_hidden_word_layers=min(size.ngram_layers, size.layers) if model.encoder.config.has_ngrams
                     else model.encoder.config.num_hidden_word_layers)
    torch.manual_seed(0)
    encoder = ZenModel(config)
    rebuilt = TaskModel(loaded.task, loaded.task.build_head(size.hidden), encoder, None).to(model.device).eval()
    return LoadedModel(rebuilt, loaded.task, loaded.inputs, loaded.spec, loaded.path)


class EncoderClock:
    """Time spent inside the encoder modules (forward hooks), on the chosen clock."""

    def __init__(self, model: torch.nn.Module, clock: Callable[[], float]):
        self.clock, self.total, self.start = clock, 0.0, 0.0
        self.handles = []
        self.model = model if getattr(model, "runtime", None) is not None else None
        if self.model is not None:  # ONNX Runtime: its run call
            run = model.outputs

            def timed(batch):
                self._enter()
                try:
                    return run(batch)
                finally:
                    self._leave()

            model.outputs = timed
        for m in (getattr(model, "encoder", None), getattr(model, "chte", None)):
            if m is not None:
                self.handles.append(m.register_forward_pre_hook(self._enter))
                self.handles.append(m.register_forward_hook(self._leave))

    def _enter(self, *_: Any) -> None:
        self.start = self.clock()

    def _leave(self, *_: Any) -> None:
        self.total += self.clock() - self.start

    def close(self) -> None:
        for h in self.handles:
            h.remove()
        if self.model is not None:
            del self.model.outputs


def _pass(loaded: LoadedModel, path: Path, batch_size: int | None, chunk_lines: int) -> int:
    with open(os.devnull, "w", encoding="utf-8") as sink:
        return predict_stream(loaded, iter_lines(path, allow_empty=True), sink, fmt=None, source=str(path),
                              chunk_lines=chunk_lines, batch_size=batch_size)


def phase_profile(loaded: LoadedModel, path: Path, batch_size: int | None, chunk_lines: int) -> dict[str, float]:
    """Seconds per phase (PHASES, and `other`) of one prediction pass under cProfile."""
    prof = cProfile.Profile()
    t0 = time.process_time()
    prof.enable()
    _pass(loaded, path, batch_size, chunk_lines)
    prof.disable()
    total = time.process_time() - t0
    stats = pstats.Stats(prof).stats  # {(file, line, function): (calls, primitive calls, tottime, cumtime, callers)}
    out: dict[str, float] = {}
    for phase, functions in PHASES.items():
        out[phase] = sum(v[3] for (file, _, func), v in stats.items()
                         if any(file.endswith(f) and func == name for f, name in functions))
    scale = total / max(sum(v[2] for v in stats.values()), 1e-9)  # cProfile's own clock → process CPU time
    out = {k: v * scale for k, v in out.items()}
    out["other"] = max(0.0, total - sum(out.values()))
    out["total"] = total
    return out


def run(model: Path, data: Path, *, dtypes: list[str] | None = None, engines: list[str] | None = None,
        size: str | None = None,
        max_lines: int = 0, rounds: int = 3, warmup: int = 1, threads: int = 1, batch_size: int | None = None,
        chunk_lines: int = 256, profile: bool = False, device: str = "cpu",
        log: Callable[[str], None] = lambda s: None, advance: Callable[[str], None] = lambda s: None,
        on_total: Callable[[int], None] = lambda n: None) -> dict[str, Any]:
    """chars/s of `zen predict` per engine (torch, onnx) and dtype on `data` (its first `max_lines` lines;
    0: all), the encoder's share, and optionally the phases."""
    if max_lines < 0:
        raise ZenError(f"--max-lines: expected >= 0 (0: every line), got {max_lines}")
    if not max_lines:
        return _run(model, data, dtypes, engines, size, rounds, warmup, threads, batch_size, chunk_lines,
                    profile, device, log, advance, on_total)
    with tempfile.TemporaryDirectory() as tmp:
        head = Path(tmp) / data.name  # the first lines, read from a file as `zen predict --input` reads
        with open(head, "w", encoding="utf-8", newline="\n") as f:
            for i, (_, text) in enumerate(iter_lines(data, allow_empty=True)):
                if i >= max_lines:
                    break
                f.write(text + "\n")
        report = _run(model, head, dtypes, engines, size, rounds, warmup, threads, batch_size, chunk_lines, profile,
                      device, log, advance, on_total)
    report["settings"].update(data=str(data), max_lines=max_lines)
    return report


def _run(model: Path, data: Path, dtypes: list[str] | None, engines: list[str] | None, size: str | None,
         rounds: int, warmup: int, threads: int, batch_size: int | None, chunk_lines: int, profile: bool, device: str,
         log: Callable[[str], None], advance: Callable[[str], None], on_total: Callable[[int], None]
         ) -> dict[str, Any]:
    if threads:
        torch.set_num_threads(threads)
    if rounds < 1 or warmup < 0:
        raise ZenError(f"--rounds/--warmup: expected >= 1 and >= 0, got {rounds} and {warmup}")
    chosen = chosen_dtypes = list(dict.fromkeys(dtypes or DTYPES))
    bad = [p for p in chosen if p not in DTYPES]
    if bad:
        raise ZenError(f"--dtype: expected a comma-separated list of {', '.join(DTYPES)}, got {bad[0]!r}")
    engines = list(dict.fromkeys(engines or ["torch"]))
    bad = [e for e in engines if e not in ENGINE_DTYPES]
    if bad:
        raise ZenError(f"--engine: expected a comma-separated list of {', '.join(ENGINE_DTYPES)}, got {bad[0]!r}")
    if "onnx" in engines and device != "cpu":
        raise ZenError("--engine onnx: runs on the CPU only")
    chars = lines = 0
    for _, text in iter_lines(data, allow_empty=True):
        chars, lines = chars + len(text), lines + 1
    if chars == 0:
        raise ZenError(f"{data}: no text to predict")
    base = load_task_model(model, device=device)
    spec = parse_size(size) if size is not None else None
    if spec is not None:
        base = resized(base, spec)
    with tempfile.TemporaryDirectory() as tmp:
        onnx = _onnx_models(base, [p for p in chosen if p in ENGINE_DTYPES["onnx"] and "onnx" in engines],
                            Path(tmp), threads, log)
    models = {}  # name → model: a dtype for torch (as before engines), "onnx fp32" / "onnx int8"
    if "torch" in engines:
        models = {p: set_dtype(LoadedModel(base.model, base.task, base.inputs, base.spec, base.path), p)
                  for p in chosen}
    if "torch-compile" in engines:  # a copy each: compiling wraps the encoder of the model it is given
        models.update({f"torch-compile {p}": compile_encoder(set_dtype(LoadedModel(
            copy.deepcopy(base.model), base.task, base.inputs, base.spec, base.path), p))
            for p in chosen if p in ENGINE_DTYPES["torch-compile"]})
    if "onnx" in engines:
        models.update(onnx)
    chosen = list(models)
    if not chosen:
        raise ZenError(f"--engine {','.join(engines)}: none of them runs {','.join(chosen_dtypes)} "
                       f"(torch-compile: fp32, bf16; onnx: fp32, int8)")
    by_cpu = (threads == 1) and device == "cpu"
    clock = time.process_time if by_cpu else time.perf_counter
    hooks = {p: EncoderClock(m.model, clock) for p, m in models.items()}
    on_total((warmup + rounds) * len(chosen) + (len(chosen) if profile else 0))

    def one(p: str, r: int) -> tuple[float, float]:
        hooks[p].total = 0.0
        t0 = clock()
        _pass(models[p], data, batch_size, chunk_lines)
        elapsed = clock() - t0
        advance(f"round {r + 1}: {p}")
        return elapsed, hooks[p].total

    timed = interleaved_rounds(chosen, rounds, warmup, one)
    times = {p: [t for t, _ in timed[p]] for p in chosen}
    encoder = {p: [e for _, e in timed[p]] for p in chosen}
    for h in hooks.values():
        h.close()
    rows = []
    for p in chosen:
        t = sorted(times[p])[len(times[p]) // 2]
        share = sorted(e / s for e, s in zip(encoder[p], times[p]))[len(times[p]) // 2]
        engine, _, dtype = p.rpartition(" ")
        rows.append({"engine": engine or "torch", "dtype": dtype, "seconds": t, "chars_per_s": chars / t,
                     "lines_per_s": lines / t,
                     "encoder_share": share, "outside_encoder_share": 1 - share})
    fp32 = next((r for r in rows if r["dtype"] == "fp32" and r["engine"] == "torch"), None)
    for row in rows:
        row["speed_vs_fp32"] = fp32["seconds"] / row["seconds"] if fp32 else None
    log("  ".join(f"{r['engine']} {r['dtype']} {r['chars_per_s']:,.0f} chars/s "
                  f"(encoder {100 * r['encoder_share']:.0f}%)" for r in rows))
    phases = {}
    if profile:
        for p in chosen:
            phases[p] = phase_profile(models[p], data, batch_size, chunk_lines)
            advance(f"profile: {p}")
    enc = base.model.encoder.config if base.model.encoder is not None else None
    return {
        "settings": {"model": str(base.path), "data": str(data), "chars": chars, "lines": lines,
                     "size": spec.name if spec else "as saved", "rounds": rounds, "warmup": warmup,
                     "threads": threads or torch.get_num_threads(), "clock": "cpu" if by_cpu else "wall",
                     "batch_size": batch_size or base.task.settings.eval_batch_size, "chunk_lines": chunk_lines,
                     "device": device, "task": base.task.name, "engines": engines,
                     "encoder": None if enc is None else {"kind": enc.encoder, "layers": enc.num_hidden_layers,
                                                          "hidden": enc.hidden_size,
                                                          "ngram_layers": enc.num_hidden_word_layers}},
        "machine": machine_facts(),
        "rows": rows,
        "phases": phases,
    }



def _onnx_models(base: LoadedModel, dtypes: list[str], tmp: Path, threads: int,
                 log: Callable[[str], None]) -> dict[str, LoadedModel]:
    """`base` exported to ONNX in `tmp` and loaded into ONNX Runtime per dtype (fp32, int8),
    named "onnx fp32" / "onnx int8"; {} without any such dtype."""
    if not dtypes:
        return {}
    export_onnx(save_task_model(base.model, base.inputs, base.spec, tmp / "model"), tmp / "onnx",
                int8="int8" in dtypes, say=log)
    return {f"onnx {p}": load_onnx(tmp / "onnx", dtype=p, threads=threads or torch.get_num_threads())
            for p in dtypes}  # ONNX Runtime holds the graph in memory: the folder may go
