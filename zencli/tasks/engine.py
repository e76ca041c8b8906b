"""Prediction engines: what runs a fine-tuned model's forward pass for `zen predict` — torch (the
`TaskModel` itself) or ONNX Runtime on its export (`zen model export --format onnx`).

The tasks' `predict` prepares the batches (windows, n-gram slots, collate) and decodes the scores (CRF /
Viterbi, BMES, spans) in Python; between the two it makes one call, `model.outputs(batch)` → the head's
scores (`task.output_names`). `TaskModel.outputs` answers it in torch; `OnnxTaskModel.outputs` feeds the
same batch to ONNX Runtime. So both engines share every line of input preparation and
decoding, and the graph holds the encoder, the n-gram inputs (P built from the slots) and the head.

An export folder (ONNX_CONFIG names the inputs, outputs, opset and files):

    onnx.json          format, opset, input and output names with their dynamic axes, files per dtype
    model.onnx         fp32;  model.int8.onnx: the same with int8 weights (onnxruntime quantize_dynamic)
    head.safetensors   the head's weights, for decoding in Python (a CRF's transitions)
    task.json, vocab.txt, ngram.txt, bigrams.json   as in the model directory (labels, inputs)

The graph is traced in export mode (zencli.model.export_mode): no value-dependent shortcuts, so one graph
serves every batch size, length and slot count. More: docs/design.md, "Prediction engines".
"""

from __future__ import annotations

import json
import logging
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from zencli.atomic_write import atomic_write_text
from zencli.data.collate import collate
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.model.checkpoint import NGRAM_NAME, VOCAB_NAME
from zencli.model.config import read_json
from zencli.model.export_mode import exporting
from zencli.tasks.base import task_class
from zencli.tasks.inference import load_for_inference
from zencli.tasks.inputs import BIGRAMS_NAME, BigramTable, InputPipeline
from zencli.tasks.model_dir import TASK_NAME, LoadedModel, load_task_model, read_spec
from zencli.tasks.network import ENCODER_KEYS, TaskModel
from zencli.text.vocab import Vocab

ENGINES = ("torch", "onnx")
ONNX_CONFIG = "onnx.json"
ONNX_FORMAT = "zen-onnx-model"
ONNX_VERSION = 1
OPSET = 17
FILES = {"fp32": "model.onnx", "int8": "model.int8.onnx"}
HEAD_NAME = "head.safetensors"
MODEL_INPUTS = (*ENCODER_KEYS, "bigram_next_ids", "bigram_prev_ids")  # the batch keys a graph may take
INSTALL = "pip install 'zencli[onnx]'"


def require_onnx(what: str) -> Any:
    """The onnxruntime module; a one-line ZenError saying how to install it when it is missing."""
    try:
        import onnxruntime
    except ImportError:
        raise ZenError(f"{what} needs onnxruntime, which is not installed: {INSTALL}") from None
    return onnxruntime


def _slot_axis(name: str) -> bool:
    return name.startswith("ngram_")


def with_slots(batch: dict[str, Tensor], names: tuple[str, ...]) -> dict[str, Tensor]:
    """`batch` with at least one n-gram slot: a batch that matched no n-gram has M = 0, which the torch
    encoder skips; the graph gets one padding slot instead (length 0, masked: P has no weight on it, so
    it adds exactly zero)."""
    slots = [k for k in names if _slot_axis(k) and k in batch]
    if not slots or batch[slots[0]].shape[1] > 0:
        return batch
    out = dict(batch)
    for k in slots:
        out[k] = batch[k].new_zeros((batch[k].shape[0], 1))
    return out


# --- export -----------------------------------------------------------------------------------------------

class _Graph(nn.Module):
    """`TaskModel.outputs` with positional tensor arguments, as torch.onnx traces it."""

    def __init__(self, model: TaskModel, names: tuple[str, ...]):
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *tensors: Tensor) -> tuple[Tensor, ...]:
        return self.model.outputs(dict(zip(self.names, tensors)))


def sample_batch(loaded: LoadedModel) -> dict[str, Tensor]:
    """A batch of two windows of different lengths (padding) with matched n-grams, to trace the graph."""
    inputs = loaded.inputs
    room = max(inputs.max_seq_len - 2, 2)
    if inputs.lexicon is not None and len(inputs.lexicon):
        tokens = [t for g in inputs.lexicon.ngrams[:32] for t in g]
    else:
        tokens = [t for t in inputs.vocab.tokens if not (t.startswith("[") and t.endswith("]"))][:32]
    tokens = (tokens or ["a"]) * (1 + room // max(len(tokens), 1))
    sentences = [tokens[:room], tokens[1:max(2, room // 2)]]
    records = [r for recs in inputs.char_windows(sentences, [[(0, len(s))] for s in sentences]) for r in recs]
    batch = collate(records, pad_id=inputs.pad_id)
    return {k: v for k, v in batch.items() if k in MODEL_INPUTS}


def _length_axes(graph: _Graph, batch: dict[str, Tensor], names: tuple[str, ...]) -> list[bool]:
    """Per output, whether its dim 1 follows the sequence length (found by running one more padding token)."""
    longer = dict(batch)
    for k in names:
        if not _slot_axis(k):
            longer[k] = torch.cat([batch[k], batch[k].new_zeros((batch[k].shape[0], 1))], 1)
    with torch.no_grad():
        a = graph(*(batch[k] for k in names))
        b = graph(*(longer[k] for k in names))
    return [x.dim() >= 2 and x.shape[1] + 1 == y.shape[1] for x, y in zip(a, b)]


def export_onnx(model_dir: str | Path, output: str | Path, *, int8: bool = True,
                say: Callable[[str], None] | None = None) -> Path:
    """Write the ONNX export folder of a fine-tuned model (layout in the module docstring); returns it."""
    ort = require_onnx("zen model export --format onnx")
    loaded = load_task_model(model_dir)
    model, task = loaded.model, loaded.task
    out = Path(output)
    if out.resolve() == loaded.path.resolve():
        raise ZenError(f"{out}: is the model directory itself; give another folder for the export")
    out.mkdir(parents=True, exist_ok=True)
    batch = with_slots(sample_batch(loaded), MODEL_INPUTS)
    names = tuple(k for k in MODEL_INPUTS if k in batch)
    graph = _Graph(model, names).eval()
    length_axes = _length_axes(graph, batch, names)
    input_axes = {k: {0: "batch", 1: "slots" if _slot_axis(k) else "length"} for k in names}
    output_axes = {k: ({0: "batch", 1: "length"} if by_length else {0: "batch"})
                   for k, by_length in zip(task.output_names, length_axes)}
    fp32 = out / FILES["fp32"]
    with warnings.catch_warnings(), torch.no_grad(), exporting(loaded.inputs.max_seq_len):
        warnings.simplefilter("ignore")  # the TorchScript exporter's notes on traced shapes and its deprecation
        torch.onnx.export(graph, tuple(batch[k] for k in names), str(fp32), input_names=list(names),
                          output_names=list(task.output_names), dynamic_axes={**input_axes, **output_axes},
                          opset_version=OPSET, dynamo=False, do_constant_folding=True)
    # the graph's inputs: those the model reads (ZEN 1.0 weighs no frequencies, CHTE from characters no types)
    used = [i.name for i in ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"]).get_inputs()]
    files = {"fp32": FILES["fp32"]}
    if int8:
        quantize_onnx_int8(fp32, out / FILES["int8"])
        files["int8"] = FILES["int8"]
    else:
        (out / FILES["int8"]).unlink(missing_ok=True)
    head = {k: v.detach().contiguous() for k, v in model.head.state_dict().items() if not k.startswith("bag.")}
    save_file(head, str(out / HEAD_NAME))
    for name in (TASK_NAME, VOCAB_NAME, NGRAM_NAME, "bigrams.json"):
        if (loaded.path / name).is_file():
            shutil.copyfile(loaded.path / name, out / name)
    config = {
        "format": ONNX_FORMAT, "version": ONNX_VERSION, "opset": OPSET,
        "exporter": f"torch.onnx (TorchScript) {torch.__version__}", "onnxruntime": ort.__version__,
        "task": task.name, "inputs": {k: [input_axes[k][0], input_axes[k][1]] for k in used},
        "outputs": {k: list(output_axes[k].values()) for k in task.output_names},
        "files": files, "head_input_size": TaskModel.output_size(model.encoder, model.chte),
        "max_seq_len": loaded.inputs.max_seq_len, "source": str(loaded.path),
    }
    atomic_write_text(out / ONNX_CONFIG, json.dumps(config, indent=1) + "\n")
    if say is not None:
        say(f"{loaded.path} → {out}: {', '.join(files.values())} (opset {OPSET}; inputs {', '.join(used)})")
    return out


def quantize_onnx_int8(fp32: Path, out: Path) -> None:
    """ONNX Runtime's dynamic int8 quantization of an fp32 graph (int8 weights, activations per call)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # not its advice on pre-processing, a warning for every model
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quantize_dynamic(str(fp32), str(out), weight_type=QuantType.QInt8)
    finally:
        root.setLevel(level)


def ort_session(path: Path, threads: int | None = None) -> Any:
    """An ONNX Runtime CPU session with `threads` intra-op threads (default torch's, so both engines use the
    same) and one inter-op thread."""
    ort = require_onnx("--engine onnx")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


# --- running ----------------------------------------------------------------------------------------------

class OnnxTaskModel:
    """ONNX Runtime in the place of a `TaskModel` for prediction: `outputs(batch)` and the few
    attributes the tasks' predict code reads (device, training, eval/train, the head for decoding)."""

    training = False
    device = torch.device("cpu")

    def __init__(self, runtime: Any, input_names: tuple[str, ...], output_names: tuple[str, ...], head: nn.Module):
        self.runtime = runtime
        self.input_names = input_names
        self.output_names = output_names
        self.head = head.eval()

    def eval(self) -> OnnxTaskModel:
        return self

    def train(self, mode: bool = True) -> OnnxTaskModel:
        if mode:
            raise ValueError("an ONNX model only predicts")
        return self

    def outputs(self, batch: dict[str, Tensor]) -> tuple[Tensor, ...]:
        batch = with_slots(batch, self.input_names)
        feeds = {k: np.ascontiguousarray(batch[k].cpu().numpy(), np.int64) for k in self.input_names}
        return tuple(torch.from_numpy(x) for x in self.runtime.run(list(self.output_names), feeds))


def is_onnx_export(path: str | Path) -> bool:
    return (Path(path) / ONNX_CONFIG).is_file()


ENGINES = ("torch", "torch-compile", "onnx")


def load_engine(path: str | Path, *, engine: str, device: str = "auto", dtype: str = "auto",
                say: Callable[[str], None] | None = None) -> LoadedModel:
    """A model ready to predict through `engine`: torch (a model directory), torch-compile (the same with
    its encoder compiled) or onnx (an export folder of `zen model export --format onnx`, on the CPU)."""
    if engine == "onnx":
        if device == "cuda":
            raise ZenError("--device cuda: the onnx engine runs on the CPU")
        return load_onnx(path, dtype=dtype, say=say)
    if engine in ("torch", "torch-compile"):
        loaded = load_for_inference(path, device=device, dtype=dtype, say=say)
        return compile_encoder(loaded) if engine == "torch-compile" else loaded
    raise ZenError(f"--engine: expected {', '.join(ENGINES[:-1])} or {ENGINES[-1]}, got {engine!r}")


def compile_encoder(loaded: LoadedModel) -> LoadedModel:
    """`loaded` with its encoder (ZEN/BERT and CHTE) compiled by torch.compile (inductor, dynamic shapes). The
    first batches compile, tens of seconds on a CPU and again for a new range of shapes; then the generated
    kernels run, the same scores as eager within float rounding. It pays on long inputs, not on a few lines."""
    if loaded.dtype == "int8":
        raise ZenError("--engine torch-compile: runs fp32 or bf16 (int8 is torch's quantized eager path; "
                       "--engine onnx --dtype int8 is the faster int8)")
    if loaded.model.device.type == "cpu" and not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        raise ZenError("--engine torch-compile: torch.compile writes C++ for the CPU and needs a C++ compiler "
                       "(g++ or clang++) on PATH; install one, or use --engine torch")
    for name in ("encoder", "chte"):
        module = getattr(loaded.model, name, None)
        if module is not None:
            setattr(loaded.model, name, torch.compile(module, dynamic=True))
    return loaded


def load_onnx(path: str | Path, *, dtype: str = "auto", threads: int | None = None,
              say: Callable[[str], None] | None = None) -> LoadedModel:
    """An ONNX export folder loaded into ONNX Runtime: fp32 (auto) or int8; `threads`: intra-op
    threads (default torch's, so both engines use the same)."""
    require_onnx("--engine onnx")  # a missing extra: one line, before anything is read
    d = Path(path)
    if not is_onnx_export(d):
        if not d.exists():
            raise ZenError(f"{d}: no such directory")
        raise ZenError(f"{d}: not an ONNX export (no {ONNX_CONFIG}); make one with "
                       f"`zen model export --format onnx MODEL -o {d}`")
    config = read_json(d / ONNX_CONFIG)
    if not isinstance(config, dict) or config.get("format") != ONNX_FORMAT:
        raise ZenError(f"{d / ONNX_CONFIG}: not a zen ONNX export description (expected format {ONNX_FORMAT!r})")
    if config.get("version") != ONNX_VERSION:
        raise ZenError(f"{d / ONNX_CONFIG}: version {config.get('version')!r} is not supported "
                       f"(expected {ONNX_VERSION})")
    chosen = "fp32" if dtype == "auto" else dtype
    files = config.get("files", {})
    if chosen not in FILES:
        raise ZenError(f"--dtype {chosen}: the onnx engine runs fp32 or int8")
    if chosen not in files:
        raise ZenError(f"{d}: no {chosen} model in this export (it has {', '.join(files)})")
    loaded = _task_side(d, int(config["head_input_size"]))
    runtime = ort_session(d / files[chosen], threads)
    names = tuple(i.name for i in runtime.get_inputs())
    if set(names) - set(config["inputs"]):
        raise ZenError(f"{d / files[chosen]}: inputs {', '.join(names)} differ from {ONNX_CONFIG}'s")
    loaded.model = OnnxTaskModel(runtime, names, tuple(config["outputs"]), loaded.model)
    loaded.dtype = chosen
    if say is not None and dtype == "auto":
        say(f"onnx engine: {chosen} ({files[chosen]})")
    return loaded


def _task_side(d: Path, head_input_size: int) -> LoadedModel:
    """Task, inputs and head of an export folder; `model` holds the head (the runtime replaces it)."""
    meta, settings, spec = read_spec(d)
    try:
        task = task_class(settings.name)(settings, meta["state"])
    except ZenError as e:
        raise ZenError(f"{d / TASK_NAME}: {e}") from None
    lexicon = Lexicon.load(d / NGRAM_NAME) if (d / NGRAM_NAME).is_file() else None
    bigrams = BigramTable.load(d / BIGRAMS_NAME) if (d / BIGRAMS_NAME).is_file() else None
    inputs = InputPipeline(Vocab.load(d / VOCAB_NAME), spec.inputs, lexicon, bigrams)
    head = task.build_head(head_input_size)
    missing, unexpected = head.load_state_dict(load_file(str(d / HEAD_NAME)), strict=False)
    if unexpected or any(not k.startswith("bag.") for k in missing):
        raise ZenError(f"{d / HEAD_NAME}: the head's weights do not fit task {task.name} "
                       f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    return LoadedModel(head, task, inputs, spec, d)  # type: ignore[arg-type]
