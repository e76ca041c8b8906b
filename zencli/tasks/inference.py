"""Loading a fine-tuned model to run it: on which device, in which dtype (`zen predict`, `zen evaluate`,
the quickstart's scoring).

    loaded = load_for_inference("runs/ner/model", device="auto", dtype="auto", say=print)
    predict_examples(loaded, examples)   # zencli.tasks.predict: runs in loaded.dtype

The dtype logic (what `auto` picks, what each device supports, the int8 copy) is
zencli.train.dtype's, shared with training's evaluations (`train.eval_dtype`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from zencli.errors import ZenError
from zencli.model.inference import hold_linear_weights_in
from zencli.tasks.model_dir import LoadedModel, load_task_model
from zencli.train.dtype import describe_inference_dtype, inference_model, resolve_inference_dtype

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(requested: str, option: str = "--device") -> torch.device:
    """`auto|cpu|cuda` → the device to run on: auto is CUDA when torch sees a GPU, else the CPU."""
    if requested not in DEVICES:
        raise ZenError(f"{option}: expected {', '.join(DEVICES[:-1])} or {DEVICES[-1]}, got {requested!r}")
    if requested == "cuda" and not torch.cuda.is_available():
        raise ZenError(f"{option}: cuda requested but torch sees no CUDA GPU")
    use_cuda = requested == "cuda" or (requested == "auto" and torch.cuda.is_available())
    return torch.device("cuda" if use_cuda else "cpu")


def set_dtype(loaded: LoadedModel, dtype: str, say: Callable[[str], None] | None = None,
              key: str = "--dtype") -> LoadedModel:
    """`loaded` set to run in `dtype` (auto|fp32|bf16|int8, resolved for its device; errors name `key`);
    for int8 its module is replaced by a quantized copy. `say` gets one line naming what auto picked."""
    requested = dtype
    chosen, why = resolve_inference_dtype(requested, loaded.model.device, key=key)
    if say is not None and requested == "auto":
        say(describe_inference_dtype(requested, chosen, why))
    loaded.model = inference_model(loaded.model, chosen)
    loaded.dtype = chosen
    return loaded


def load_for_inference(path: str | Path, *, device: str = "auto", dtype: str = "auto",
                       say: Callable[[str], None] | None = None) -> LoadedModel:
    """A fine-tuned model directory loaded on `device` (auto|cpu|cuda) to run in `dtype`
    (auto|fp32|bf16|int8); both are checked before the model is read. The files are never changed."""
    dev = resolve_device(device)
    resolve_inference_dtype(dtype, dev, key="--dtype")  # fail before reading the model
    loaded = set_dtype(load_task_model(path, device=dev), dtype, say)
    if loaded.dtype == "bf16":
        # This model only predicts: each Linear's weight is cast to bf16 once, not by autocast on every call
        # (zencli.model.inference; the outputs are the same bit for bit).
        hold_linear_weights_in(loaded.model, torch.bfloat16)
    return loaded
