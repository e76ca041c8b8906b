"""Side by side, in one run: zen's encoders against the released ZEN 2.0 code and Hugging Face's BERT.

Not part of the zen package (it times third-party code users never run); from a clone:

    python benchmarks/peers.py --released DIR --hf --sizes tiny,small,base --json peers.json

Peers, each only where it is available on this machine (zen ships none of their code):
- `released`: the released ZEN 2.0 code, from a checkout the user names (`--released DIR`, the folder
  holding `ZEN2/modeling.py`); its module is imported from there. It takes the dense fusion matrix
  P [B,L,M] as input: the benchmark builds it once per batch outside the timed region, as the released
  data pipeline does on the host per example (that host cost is not in its numbers).
- `hf-bert`: Hugging Face's `BertModel` / `BertForPreTraining` (`transformers` installed) with its SDPA
  attention: the same-size plain BERT.
- zen's own `zen2` and `bert` encoders.

Per size and dtype, on the same synthetic batches as `zen bench model` (on `device`; fp32 and bf16
autocast for every model; int8 — linear layers dynamically quantized, as `zen predict --dtype int8`
runs them — for zen's encoders and inference only; seq_len tokens, `slots` n-gram slots of which ~40% per
char are filled; the released model runs its n-gram tower on all `slots`, zen on the slots any row uses):
- inference: the encoder in eval mode under `torch.inference_mode()` (pooled output included); zen's
  encoders as `zen predict` runs them (bf16: linear weights held in bf16 under autocast, the peers' plain
  autocast outputs without the per-call weight casts);
- training: MLM + NSP pretraining step (forward, backward, clipping, optimizer step): dense AdamW for the
  peers; zen with its own optimizer setup (AdamW + row-sparse LazyAdamW for big tables).
With `--profile`, zen's two encoders are also run under torch.profiler (2 forwards per dtype, after the
timed rounds) and each one's operators with the most self CPU time are reported: where a dtype's time goes.
With `--engines torch,onnx`, zen2 and the HF BERT (inference) also run in ONNX Runtime ("… ort" rows):
each encoder exported the same way, by torch.onnx's TorchScript exporter at opset 17 with batch, length
and slots dynamic (zen's in export mode, as `zen model export` traces it), in fp32 and as onnxruntime's
dynamic int8 quantization of that graph; one session per graph with `threads` intra-op threads and the
default graph optimizations. The graph's output is the sequence output.
Rounds are interleaved in rotated order (each round times every model in every dtype) after `warmup`
untimed rounds; ratios are medians of per-round ratios, timed by process CPU time with one thread (immune
to other load), else by wall clock.
"""

from __future__ import annotations

import copy
import functools
import importlib
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import typer
from rich.table import Table
from torch import nn

from zencli.bench.common import interleaved_rounds
from zencli.bench.encoder_batches import encoder_inputs, make_batches, synthetic_chars
from zencli.bench.model import (
    BETAS,
    CLIP_NORM,
    EPS,
    LR,
    WEIGHT_DECAY,
    Clock,
    ModelSize,
    Variant,
    _median,
    _ratio,
    model_config,
    parse_size,
)
from zencli.cli.bench_model import _say  # wide enough that numbers never wrap
from zencli.cli.common import progress_bar, refuse_renamed_flags, write_json_report
from zencli.errors import ZenError
from zencli.model.export_mode import exporting
from zencli.model.inference import hold_linear_weights_in
from zencli.model.ngram_fusion import ngram_position_matrix
from zencli.model.pretraining import IGNORE_INDEX, ZenForPreTraining
from zencli.tasks.engine import OPSET, ort_session, quantize_onnx_int8
from zencli.train.dtype import autocast, inference_autocast, quantize_int8
from zencli.train.optim import clip_grad_norm

PEERS = ("released", "hf-bert")
DTYPES = ("fp32", "bf16", "int8")
ENGINES = ("torch", "onnx")


def load_released(directory: Path) -> Any:
    """The released `ZEN2.modeling` module from a checkout of the released code."""
    root = Path(directory)
    if not (root / "ZEN2" / "modeling.py").is_file():
        raise ZenError(f"--released: {root}: expected a checkout of the released ZEN 2.0 code "
                       "(a folder holding ZEN2/modeling.py)")
    sys.path.insert(0, str(root.resolve()))
    try:
        return importlib.import_module("ZEN2.modeling")
    except Exception as e:  # the released code's own import errors (e.g. a numpy alias it needs)
        raise ZenError(f"--released: importing {root}/ZEN2/modeling.py failed: {type(e).__name__}: {e}") from None
    finally:
        sys.path.pop(0)


def hf_available() -> bool:
    try:
        importlib.import_module("transformers")
    except ImportError:
        return False
    return True


class PeerVariant:
    """A peer model: `train_step` and `infer` with the same clocks and autocast as zen's `Variant`."""

    def __init__(self, name: str, pretraining: nn.Module, encoder: nn.Module,
                 train_fn: Callable[[nn.Module, dict], torch.Tensor], infer_fn: Callable[[nn.Module, dict], Any],
                 device: torch.device):
        self.name, self.model, self.encoder, self.device = name, pretraining.to(device), encoder, device
        self.train_fn, self.infer_fn = train_fn, infer_fn
        self.params = [p for p in pretraining.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)

    def train_step(self, batch: dict, dtype: str) -> tuple[float, float]:
        self.model.train()
        clock = Clock(self.device)
        with autocast(dtype, self.device):
            loss = self.train_fn(self.model, batch)
        loss.backward()
        clip_grad_norm(self.params, CLIP_NORM)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return clock.lap()

    def infer(self, batch: dict, dtype: str) -> tuple[float, float]:
        self.encoder.eval()
        clock = Clock(self.device)
        with torch.inference_mode(), autocast(dtype, self.device):
            self.infer_fn(self.encoder, batch)
        return clock.lap()


def released_variant(module: Any, size: ModelSize, vocab_size: int, ngram_rows: int, seed: int,
                     device: torch.device) -> PeerVariant:
    torch.manual_seed(seed)
    cfg = module.ZenConfig(vocab_size, word_vocab_size=ngram_rows, hidden_size=size.hidden,
                           num_hidden_layers=size.layers, num_attention_heads=size.heads,
                           intermediate_size=size.intermediate, num_hidden_word_layers=size.ngram_layers)
    model = module.ZenForPreTraining(cfg)

    def inputs(b: dict) -> tuple:
        return (b["input_ids"], b["ngram_ids"], b["released_P"], b["token_type_ids"], b["ngram_token_type_ids"],
                b["attention_mask"], b["ngram_attention_mask"])

    def train(m: nn.Module, b: dict) -> torch.Tensor:
        labels = b["mlm_labels"].masked_fill(b["mlm_labels"] == IGNORE_INDEX, -1)  # its ignore_index is -1
        return m(*inputs(b), masked_lm_labels=labels, next_sentence_label=b["nsp_labels"])

    def infer(m: nn.Module, b: dict) -> Any:
        return m(*inputs(b), output_all_encoded_layers=False)

    return PeerVariant("released zen2", model, model.bert, train, infer, device)


def hf_variant(size: ModelSize, vocab_size: int, seed: int, device: torch.device) -> PeerVariant:
    from transformers import BertConfig, BertForPreTraining

    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=vocab_size, hidden_size=size.hidden, num_hidden_layers=size.layers,
                     num_attention_heads=size.heads, intermediate_size=size.intermediate,
                     attn_implementation="sdpa")
    model = BertForPreTraining(cfg)

    def train(m: nn.Module, b: dict) -> torch.Tensor:
        return m(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"],
                 labels=b["mlm_labels"], next_sentence_label=b["nsp_labels"]).loss

    def infer(m: nn.Module, b: dict) -> Any:
        return m(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"])

    return PeerVariant("hf-bert", model, model.bert, train, infer, device)


def dtype_list(spec: str | list[str] | None, device: torch.device) -> list[str]:
    """`fp32,bf16,int8` → the dtypes to time (default: all three on CPU, fp32 and bf16 on CUDA)."""
    if spec is None:
        return list(DTYPES) if device.type == "cpu" else ["fp32", "bf16"]
    items = [p.strip() for p in (spec.split(",") if isinstance(spec, str) else spec) if p.strip()]
    bad = [p for p in items if p not in DTYPES]
    if not items or bad:
        raise ZenError(f"--dtype: expected a comma-separated list of {', '.join(DTYPES)}, got "
                       f"{','.join(items) if items else repr(spec)}")
    if "int8" in items and device.type != "cpu":
        raise ZenError(f"--dtype: int8 (dynamic quantization) runs on CPUs only, not on {device}")
    return list(dict.fromkeys(items))


class PredictEncoder:
    """zen's encoder as `zen predict` runs it in `dtype` (inference only, timed like `Variant.infer`):
    int8 — a copy with its linear layers dynamically quantized; bf16 — a copy whose linear weights are held
    in bf16 (zencli.model.inference), under autocast: the outputs of plain autocast, without its casts of
    the weights on every call."""

    def __init__(self, variant: Variant, dtype: str):
        encoder = variant.model.bert
        if dtype == "int8":
            self.encoder = quantize_int8(encoder)
        else:
            self.encoder = hold_linear_weights_in(copy.deepcopy(encoder).eval(), torch.bfloat16)
        self.dtype, self.has_ngrams, self.device = dtype, variant.has_ngrams, variant.device

    def infer(self, batch: dict[str, torch.Tensor]) -> tuple[float, float]:
        inputs = encoder_inputs(batch, self.has_ngrams)
        clock = Clock(self.device)
        with torch.inference_mode(), inference_autocast(self.dtype, self.device):
            self.encoder(batch["input_ids"], **inputs)
        return clock.lap()


class _Traced(nn.Module):
    """An encoder with positional tensor inputs and its sequence output, as torch.onnx traces it."""

    def __init__(self, encoder: nn.Module, keys: tuple[str, ...], zen: bool):
        super().__init__()
        self.encoder, self.keys, self.zen = encoder, keys, zen

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        kw = dict(zip(self.keys, tensors))
        if self.zen:
            return self.encoder(kw.pop("input_ids"), **kw).sequence_output
        return self.encoder(**kw).last_hidden_state


class OrtEncoder:
    """An encoder exported to ONNX and run by ONNX Runtime in fp32 or int8 (module docstring), timed like
    `Variant.infer`: the session's run on the batch's inputs as numpy arrays."""

    def __init__(self, encoder: nn.Module, keys: tuple[str, ...], zen: bool, sample: dict[str, torch.Tensor],
                 seq_len: int, folder: Path, threads: int):
        graph = _Traced(copy.deepcopy(encoder).float().eval(), keys, zen)
        axes = {k: {0: "batch", 1: "slots" if k.startswith("ngram_") else "length"} for k in keys}
        fp32 = folder / "model.onnx"
        with warnings.catch_warnings(), torch.no_grad(), exporting(seq_len):
            warnings.simplefilter("ignore")
            torch.onnx.export(graph, tuple(sample[k] for k in keys), str(fp32), input_names=list(keys),
                              output_names=["sequence_output"],
                              dynamic_axes={**axes, "sequence_output": {0: "batch", 1: "length"}},
                              opset_version=OPSET, dynamo=False, do_constant_folding=True)
        quantize_onnx_int8(fp32, folder / "model.int8.onnx")
        self.sessions = {d: ort_session(folder / f, threads)
                         for d, f in (("fp32", "model.onnx"), ("int8", "model.int8.onnx"))}
        self.inputs = {d: [i.name for i in s.get_inputs()] for d, s in self.sessions.items()}

    def feed(self, batch: dict[str, torch.Tensor], dtype: str) -> dict[str, np.ndarray]:
        return {k: batch[k].numpy() for k in self.inputs[dtype]}

    def outputs(self, batch: dict[str, torch.Tensor], dtype: str) -> np.ndarray:
        """The sequence output [B,L,H]."""
        return self.sessions[dtype].run(None, self.feed(batch, dtype))[0]

    def infer(self, batch: dict[str, torch.Tensor], dtype: str) -> tuple[float, float]:
        feed = self.feed(batch, dtype)
        clock = Clock(torch.device("cpu"))
        self.sessions[dtype].run(None, feed)
        return clock.lap()


def ort_encoders(variants: dict[str, Any], batch: dict[str, torch.Tensor], seq_len: int, folder: Path,
                 threads: int) -> dict[str, OrtEncoder]:
    """ONNX Runtime versions of zen2 and the HF BERT (where it is timed): "zen zen2 ort", "hf-bert ort"."""
    out = {}
    if "zen zen2" in variants:
        keys = ("input_ids", *encoder_inputs(batch, True))
        out["zen zen2 ort"] = OrtEncoder(variants["zen zen2"].model.bert, keys, True, batch, seq_len,
                                         _subfolder(folder, "zen2"), threads)
    if "hf-bert" in variants:
        out["hf-bert ort"] = OrtEncoder(variants["hf-bert"].encoder, ("input_ids", "token_type_ids", "attention_mask"),
                                        False, batch, seq_len, _subfolder(folder, "hf-bert"), threads)
    return out


def _subfolder(folder: Path, name: str) -> Path:
    (folder / name).mkdir(parents=True, exist_ok=True)
    return folder / name


def op_profile(run: Callable[[], Any], passes: int = 2, top: int = 10) -> list[dict[str, Any]]:
    """The operators of `passes` calls of `run` with the most self CPU time: name, share of the total, calls."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(passes):
            run()
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    events.sort(key=lambda e: -e.self_cpu_time_total)
    return [{"op": e.key, "share": e.self_cpu_time_total / total, "calls": e.count // passes} for e in events[:top]]


def cases(names: list[str], mode: str, dtypes: list[str]) -> list[tuple[str, str]]:
    """(model, dtype) pairs one round times: every model in every dtype, int8 for zen's encoders and the
    ONNX Runtime graphs, inference only (the torch peers have no int8 path of their own); the ONNX Runtime
    graphs in fp32 and int8, inference only."""
    out = []
    for p in dtypes:
        for n in names:
            if n.endswith(" ort"):
                ok = mode == "infer" and p in ("fp32", "int8")
            else:
                ok = p != "int8" or (mode == "infer" and n.startswith("zen "))
            if ok:
                out.append((n, p))
    return out


def _time_case(variants: dict[str, Any], predict: dict[tuple[str, str], Any], batches: list[dict[str, Any]],
               mode: str, by_cpu: bool, advance: Callable[[str, str], None], case: tuple[str, str], r: int) -> float:
    """One timed step (mode "train") or forward (mode "infer") of `case` = (model, dtype) on round r's batch:
    its CPU or wall seconds."""
    name, prec = case
    v, b = variants[name], batches[r % len(batches)]
    if isinstance(v, OrtEncoder):
        wall, cpu = v.infer(b, prec)
    elif mode == "infer" and case in predict:
        wall, cpu = predict[case].infer(b)
    elif isinstance(v, Variant):
        if mode == "train":
            phases, _ = v.train_step(b, prec)
            wall, cpu = (sum(p[i] for p in phases.values()) for i in (0, 1))
        else:
            wall, cpu = v.infer(b, prec)
    else:
        wall, cpu = v.train_step(b, prec) if mode == "train" else v.infer(b, prec)
    advance(name, prec)
    return cpu if by_cpu else wall


def _ratios(times: dict[tuple[str, str], list[float]]) -> dict[str, float]:
    """zen2 against every other model in the same dtype; zen2 in each dtype against the released
    code's fp32 (or, without it, HF's / zen's BERT fp32): the speed a user gains by moving to zen."""
    out: dict[str, float] = {}
    zen = "zen zen2"
    for (name, prec), t in times.items():
        if name != zen and (zen, prec) in times:
            out[f"zen2 vs {name}, {prec}"] = _ratio(t, times[(zen, prec)])
    if ("zen zen2 ort", "fp32") in times:  # zen2 in each engine and dtype against its own torch fp32
        for (name, prec), t in times.items():
            if name.startswith("zen zen2") and (name, prec) != (zen, "fp32"):
                out[f"{name} {prec} vs zen zen2 fp32"] = _ratio(times[(zen, "fp32")], t)
        if ("hf-bert ort", "fp32") in times:
            for prec in ("fp32", "int8"):
                out[f"zen2 ort vs hf-bert ort, {prec}"] = _ratio(times[("hf-bert ort", prec)],
                                                                 times[("zen zen2 ort", prec)])
    if ("hf-bert", "fp32") in times:
        for prec in ("fp32", "bf16"):
            if ("hf-bert", prec) in times and ("zen bert", prec) in times:
                out[f"zen bert vs hf-bert, {prec}"] = _ratio(times[("hf-bert", prec)], times[("zen bert", prec)])
    base = next((b for b in ("released zen2", "hf-bert") if (b, "fp32") in times), None)
    if base is not None:
        for (name, prec), t in times.items():
            if name == zen:
                out[f"zen2 {prec} vs {base} fp32"] = _ratio(times[(base, "fp32")], t)
    return out


def run(*, sizes: list[ModelSize], released: Path | None, hf: bool, modes: list[str], steps: int, warmup: int,
        batch: int, seq_len: int, slots: int, ngram_rows: int, vocab_size: int, threads: int, seed: int,
        device: str = "cpu", dtype: str | list[str] | None = None, engines: list[str] = ("torch",),
        profile: bool = False,
        log: Callable[[str], None] = lambda s: None,
        advance: Callable[[str], None] = lambda s: None,
        on_total: Callable[[int], None] = lambda n: None) -> dict[str, Any]:
    """Interleaved timings of zen2, zen's bert and the available peers per size and dtype (`dtype`:
    a comma-separated list of fp32, bf16, int8); see the module docstring."""
    if threads:
        torch.set_num_threads(threads)
    release_mod = load_released(released) if released is not None else None
    if hf and not hf_available():
        raise ZenError("--hf: the transformers package is not installed (pip install transformers)")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ZenError("--device cuda: no CUDA device is available")
    dtypes = dtype_list(dtype, dev)
    bad = [e for e in engines if e not in ENGINES]
    if bad or not engines:
        raise ZenError(f"--engines: expected a comma-separated list of {', '.join(ENGINES)}, got {','.join(engines)}")
    onnx = "onnx" in engines
    if onnx:
        if dev.type != "cpu":
            raise ZenError(f"--engines onnx: ONNX Runtime is timed on the CPU here, not on {dev}")
        if "infer" not in modes:
            raise ZenError("--engines onnx: ONNX Runtime rows are inference only; add infer to --modes")
        try:
            importlib.import_module("onnxruntime")
        except ImportError:
            raise ZenError("--engines onnx: onnxruntime is not installed (pip install 'zencli[onnx]')") from None
    rng_batches = make_batches(max(2, steps), batch=batch, seq_len=seq_len, slots=slots, ngram_rows=ngram_rows,
                               vocab_size=vocab_size,
                               chars=synthetic_chars(batch * seq_len * 4, vocab_size, np.random.default_rng(seed)),
                               matcher=None, ngram_rate=0.4, seed=seed)
    for b in rng_batches:  # the released model's input: the dense P over all slots (host-side, untimed)
        b["released_P"] = ngram_position_matrix(b["ngram_starts"], b["ngram_lengths"], b["ngram_freqs"], seq_len)
    rng_batches = [{k: t.to(dev) for k, t in b.items()} for b in rng_batches]
    by_cpu = threads == 1 and dev.type == "cpu"
    names_all = ["zen zen2", "zen bert"] + (["released zen2"] if release_mod is not None else []) + (
        ["hf-bert"] if hf else []) + (["zen zen2 ort"] + (["hf-bert ort"] if hf else []) if onnx else [])
    on_total(len(sizes) * (warmup + steps) * sum(len(cases(names_all, m, dtypes)) for m in modes))
    results = []
    for size in sizes:
        variants: dict[str, Any] = {}
        for enc in ("zen2", "bert"):
            torch.manual_seed(seed)
            model = ZenForPreTraining(model_config(size, enc, vocab_size=vocab_size, ngram_rows=ngram_rows)).to(dev)
            variants[f"zen {enc}"] = Variant(f"zen {enc}", model, True, dev)
        if release_mod is not None:
            variants["released zen2"] = released_variant(release_mod, size, vocab_size, ngram_rows, seed, dev)
        if hf:
            variants["hf-bert"] = hf_variant(size, vocab_size, seed, dev)
        tmp = tempfile.TemporaryDirectory(prefix="zen-peers-onnx-") if onnx else None
        if tmp is not None:
            variants.update(ort_encoders(variants, rng_batches[0], seq_len, Path(tmp.name), threads))
        predict = ({(n, p): PredictEncoder(variants[n], p) for n in ("zen zen2", "zen bert")
                    for p in ("bf16", "int8") if p in dtypes} if "infer" in modes else {})
        names = list(variants)
        row: dict[str, Any] = {"size": size.name, "layers": size.layers, "hidden": size.hidden,
                               "ngram_layers": size.ngram_layers}
        for mode in modes:
            todo = cases(names, mode, dtypes)

            one = functools.partial(_time_case, variants, predict, rng_batches, mode, by_cpu,
                                    lambda name, prec, where=f"{size.name} {mode}": advance(f"{where}: {name} {prec}"))
            times = interleaved_rounds(todo, steps, warmup, one)
            tokens = batch * seq_len
            row[mode] = [{"model": n, "dtype": p, "tokens_per_s": tokens / _median(t), "ms": 1e3 * _median(t)}
                         for (n, p), t in times.items()]
            row[mode + "_ratios"] = _ratios(times)
            log(f"{size.name} {mode}: " + ", ".join(f"{k} {v:.2f}×" for k, v in row[mode + "_ratios"].items()))
        if profile and "infer" in modes:
            b = rng_batches[0]
            row["profile"] = {f"{n} {p}": op_profile(functools.partial(
                predict[(n, p)].infer if (n, p) in predict else variants[n].infer, *((b,) if (n, p) in predict
                                                                                   else (b, p))))
                for n in ("zen zen2", "zen bert") for p in dtypes}
        results.append(row)
        del variants, predict
        if tmp is not None:
            tmp.cleanup()
    return {"settings": {"batch": batch, "seq_len": seq_len, "slots": slots, "ngram_rows": ngram_rows,
                         "vocab_size": vocab_size, "threads": threads or torch.get_num_threads(),
                         "clock": "cpu" if by_cpu else "wall", "steps": steps, "warmup": warmup,
                         "released": str(released) if released else None, "hf": hf,
                         "device": str(dev), "dtypes": dtypes, "engines": list(engines),
                         "onnxruntime": importlib.import_module("onnxruntime").__version__ if onnx else None,
                         "torch": torch.__version__},
            "results": results}


app = typer.Typer(add_completion=False)


@app.command()
def peers(
    released: Path = typer.Option(None, "--released", help="A checkout of the released ZEN 2.0 code (the folder "
                                  "holding ZEN2/modeling.py) to time beside zen."),
    hf: bool = typer.Option(False, "--hf", help="Also time Hugging Face's BertModel (needs transformers)."),
    sizes: str = typer.Option("tiny,small,base", "--sizes", help="tiny, small, base or LAYERSxHIDDENxNGRAM_LAYERS."),
    modes: str = typer.Option("infer,train", "--modes", help="infer, train or both."),
    steps: int = typer.Option(5, "--steps", help="Timed rounds per size and mode."),
    warmup: int = typer.Option(1, "--warmup", help="Untimed rounds first."),
    batch: int = typer.Option(8, "--batch", "-b", help="Sequences per batch."),
    seq_len: int = typer.Option(128, "--seq-len", help="Tokens per sequence."),
    slots: int = typer.Option(128, "--slots", help="N-gram slots per sequence."),
    ngram_rows: int = typer.Option(100_000, "--ngram-rows", help="Rows of the n-gram table."),
    threads: int = typer.Option(1, "--threads", help="Torch threads; with 1 on CPU, process CPU time is the clock."),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda."),
    dtype: str = typer.Option(None, "--dtype", help="Comma-separated: fp32, bf16 (autocast, every model "
                              "alike), int8 (zen's encoders, inference; CPU). Default: all three on CPU, "
                              "fp32,bf16 on CUDA."),
    profile: bool = typer.Option(False, "--profile", help="Also profile zen's encoders' inference per dtype "
                                 "(torch.profiler): the operators with the most self CPU time."),
    engines: str = typer.Option("torch", "--engines", help="torch, onnx or both: onnx adds zen2 and the HF "
                                "BERT exported to ONNX and run by ONNX Runtime in fp32 and int8 (inference)."),
    seed: int = typer.Option(0, "--seed"),
    json_path: Path = typer.Option(None, "--json", help="Also write the results as JSON here."),
) -> None:
    """Time zen's encoders against the code they replace, interleaved in one run."""
    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    if not mode_list or any(m not in ("infer", "train") for m in mode_list):
        raise ZenError(f"--modes: expected infer, train or infer,train, got {modes!r}")
    with progress_bar() as progress:
        task = progress.add_task("building models", total=None)
        report = run(sizes=[parse_size(s) for s in sizes.split(",") if s.strip()], released=released, hf=hf,
                     modes=mode_list, steps=steps, warmup=warmup, batch=batch, seq_len=seq_len, slots=slots,
                     ngram_rows=ngram_rows, vocab_size=21128, threads=threads, seed=seed, device=device,
                     dtype=dtype, engines=[e.strip() for e in engines.split(",") if e.strip()], profile=profile,
                     log=lambda s: progress.console.print(f"[dim]{s}[/dim]"),
                     advance=lambda name: progress.update(task, advance=1, description=name),
                     on_total=lambda n: progress.update(task, total=n))
    s = report["settings"]
    for mode in mode_list:
        dtypes = [p for p in s["dtypes"] if mode == "infer" or p != "int8"]  # int8: inference only
        t = Table(title=f"{mode}: batch {s['batch']} × {s['seq_len']}, {s['slots']} n-gram slots, "
                        f"{', '.join(dtypes)} on {s['device']}, "
                        f"{s['threads']} thread(s), {s['clock']} clock")
        for c in ("size", "model", "dtype", "tokens/s", "ms", "zen2 × (same dtype)"):
            t.add_column(c, justify="left" if c in ("size", "model", "dtype") else "right", no_wrap=True)
        ratios = Table(title=f"{mode}: ratios (> 1: the first named is faster)")
        for c in ("size", "what", "×"):
            ratios.add_column(c, justify="right" if c == "×" else "left", no_wrap=True)
        for r in report["results"]:
            rr = r[mode + "_ratios"]
            for m in r[mode]:
                ratio = rr.get(f"zen2 vs {m['model']}, {m['dtype']}")
                t.add_row(r["size"], m["model"], m["dtype"], f"{m['tokens_per_s']:,.0f}", f"{m['ms']:.1f}",
                          "" if ratio is None else f"{ratio:.2f}")
            t.add_section()
            for key, ratio in rr.items():
                if not key.startswith("zen2 vs "):  # zen's BERT vs HF's; zen2 in each dtype vs a fp32 peer
                    ratios.add_row(r["size"], key, f"{ratio:.2f}")
        _say(t)
        if ratios.row_count:
            _say(ratios)
    for r in report["results"]:
        for case, ops in r.get("profile", {}).items():
            t = Table(title=f"{r['size']} {case}: self CPU time per operator (torch.profiler, per forward)")
            for c in ("operator", "share", "calls"):
                t.add_column(c, justify="left" if c == "operator" else "right", no_wrap=True)
            for o in ops:
                t.add_row(o["op"], f"{100 * o['share']:.1f}%", str(o["calls"]))
            _say(t)
    write_json_report(json_path, report)


if __name__ == "__main__":
    refuse_renamed_flags(app)  # --precision: an error naming --dtype
    try:
        app()
    except ZenError as e:  # one line, as zen's own commands print it
        print(f"peers: error: {e}", file=sys.stderr)
        sys.exit(2)
