"""A fine-tuned model directory (everything `zen predict` needs, nothing else), written and read back.

    config.json        the encoder's ZenConfig (zen format: `zen_format`, `architecture: TaskModel`)
    model.safetensors  all weights: encoder.*, chte.*, head.*
    vocab.txt          the char/WordPiece vocabulary;  ngram.txt: the n-gram lexicon (ZEN encoders)
    bigrams.json       CHTE from characters: its bigram table
    task.json          task name and settings, the task's state (labels, scheme), input settings
                       (case, matching rules, slot cap, max_seq_len), encoder kind, CHTE config
    dev_scores.json / test_scores.json   written by `zen finetune` beside the model

The model itself: zencli.tasks.network (`TaskModel`); building a new one: zencli.tasks.network_build.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from zencli.atomic_write import atomic_write_path, atomic_write_text
from zencli.config.finetune import TaskSection
from zencli.config.loading import from_dict, to_dict
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.model.checkpoint import (
    CONFIG_NAME,
    FORMAT_VERSION,
    NGRAM_NAME,
    VOCAB_NAME,
    WEIGHTS_NAME,
    check_text_files,
    load_strict,
    read_zen_config,
)
from zencli.model.chte import ChteConfig, ChteEncoder
from zencli.model.config import read_json
from zencli.model.encoder import ZenModel
from zencli.model.heads import bag_state_defaults
from zencli.model.names import zen_state
from zencli.tasks.base import Task, task_class
from zencli.tasks.inputs import BIGRAMS_NAME, BigramTable, InputPipeline, InputSettings
from zencli.tasks.network import TaskModel
from zencli.text.vocab import Vocab

TASK_NAME = "task.json"
TASK_FORMAT = "zen-task-model"
TASK_VERSION = 1
ARCHITECTURE = "TaskModel"


@dataclass
class ModelSpec:
    """The architecture and inputs of a task model (task.json, with the task's settings and state)."""

    encoder: str | None  # zen2 / zen1 / bert; None: CHTE from characters alone
    chte: dict[str, Any] | None  # ChteConfig fields; None: no CHTE
    inputs: InputSettings
    source: str = ""  # where the encoder's weights came from
    notes: list[str] = field(default_factory=list)

    def chte_config(self) -> ChteConfig | None:
        if self.chte is None:
            return None
        d = dict(self.chte)
        if "cnn_windows" in d:
            d["cnn_windows"] = tuple(d["cnn_windows"])
        return ChteConfig(**d)


@dataclass
class LoadedModel:
    """A task model ready to predict: module (eval mode), task, inputs, spec, directory, and the dtype
    its forward runs in (fp32, bf16 or int8: zencli.tasks.inference.set_dtype)."""

    model: TaskModel
    task: Task
    inputs: InputPipeline
    spec: ModelSpec
    path: Path
    dtype: str = "fp32"


def save_task_model(model: TaskModel, inputs: InputPipeline, spec: ModelSpec, directory: str | Path) -> Path:
    """Write the model directory (layout in the module docstring); task.json is written last."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    task = model.task
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    metadata = {"zen_format": str(FORMAT_VERSION), "architecture": ARCHITECTURE, "task": task.name}
    atomic_write_path(out / WEIGHTS_NAME, lambda p: save_file(state, str(p), metadata=metadata))
    if model.encoder is not None:
        cfg = {**model.encoder.config.to_dict(), "zen_format": FORMAT_VERSION, "architecture": ARCHITECTURE}
    else:  # no ZEN config: a key zen's encoder loaders reject with a clear message
        cfg = {"zen_format": FORMAT_VERSION, "architecture": ARCHITECTURE, "encoder": "chte"}
    atomic_write_text(out / CONFIG_NAME, json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    inputs.vocab.save(out / VOCAB_NAME)
    if inputs.lexicon is not None:
        inputs.lexicon.save(out / NGRAM_NAME)
    else:
        (out / NGRAM_NAME).unlink(missing_ok=True)
    if inputs.bigrams is not None:
        inputs.bigrams.save(out / BIGRAMS_NAME)
    else:
        (out / BIGRAMS_NAME).unlink(missing_ok=True)
    meta = {
        "format": TASK_FORMAT, "version": TASK_VERSION,
        "task": to_dict(task.settings), "state": task.state(),
        "encoder": spec.encoder, "chte": spec.chte, "inputs": spec.inputs.to_dict(), "source": spec.source,
    }
    atomic_write_text(out / TASK_NAME, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return out


def resolve_model_dir(path: str | Path) -> Path:
    """The model directory itself, or the `model/` folder of a `zen finetune` output directory."""
    p = Path(path)
    if (p / TASK_NAME).is_file():
        return p
    if (p / "model" / TASK_NAME).is_file():
        return p / "model"
    if not p.exists():
        raise ZenError(f"{p}: no such model directory")
    raise ZenError(f"{p}: not a fine-tuned zen model (no {TASK_NAME}); expected a directory written by "
                   f"`zen finetune` (its model/ folder)")


def read_spec(directory: Path) -> tuple[dict[str, Any], TaskSection, ModelSpec]:
    """task.json → (raw data, task settings, model spec), checked."""
    path = directory / TASK_NAME
    meta = read_json(path)
    src = str(path)
    if not isinstance(meta, dict) or meta.get("format") != TASK_FORMAT:
        raise ZenError(f"{src}: not a zen task model description (expected format {TASK_FORMAT!r})")
    if meta.get("version") != TASK_VERSION:
        raise ZenError(f"{src}: version {meta.get('version')!r} is not supported (expected {TASK_VERSION})")
    for key in ("task", "state", "inputs"):
        if not isinstance(meta.get(key), dict):
            raise ZenError(f"{src}: key {key!r}: expected a JSON object")
    settings = from_dict(TaskSection, meta["task"], source=src, prefix="task.")
    if settings.name is None:
        raise ZenError(f"{src}: missing key 'task.name'")
    encoder = meta.get("encoder")
    if encoder not in (None, "zen2", "zen1", "bert"):
        raise ZenError(f"{src}: key 'encoder': expected zen2, zen1, bert or null, got {encoder!r}")
    chte = meta.get("chte")
    if chte is not None and not isinstance(chte, dict):
        raise ZenError(f"{src}: key 'chte': expected a JSON object or null")
    if encoder is None and chte is None:
        raise ZenError(f"{src}: neither 'encoder' nor 'chte': the model has no encoder")
    spec = ModelSpec(encoder, chte, InputSettings.from_dict(meta["inputs"], src), str(meta.get("source", "")))
    return meta, settings, spec


def load_task_model(path: str | Path, device: str | torch.device = "cpu") -> LoadedModel:
    """Rebuild a fine-tuned model from its directory (or a `zen finetune` output directory), in eval mode."""
    d = resolve_model_dir(path)
    meta, settings, spec = read_spec(d)
    try:
        task = task_class(settings.name)(settings, meta["state"])
    except ZenError as e:
        raise ZenError(f"{d / TASK_NAME}: {e}") from None
    encoder = _saved_encoder(d, spec)
    vocab_path = d / VOCAB_NAME
    ngram_path = d / NGRAM_NAME if (encoder is not None and encoder.config.has_ngrams) else None
    if ngram_path is not None and not ngram_path.is_file():
        raise ZenError(f"{ngram_path}: no such file; the model's n-gram table needs its lexicon")
    if encoder is not None:
        check_text_files(encoder.config, vocab_path, ngram_path)
    vocab = Vocab.load(vocab_path)
    lexicon = Lexicon.load(ngram_path) if ngram_path is not None else None
    chte, bigrams = _saved_chte(d, spec, encoder, vocab)
    inputs = InputPipeline(vocab, spec.inputs, lexicon, bigrams)
    head = task.build_head(TaskModel.output_size(encoder, chte))
    model = TaskModel(task, head, encoder, chte)
    _load_weights(model, d / WEIGHTS_NAME)
    model.to(device).eval()
    return LoadedModel(model, task, inputs, spec, d)


def _saved_encoder(d: Path, spec: ModelSpec) -> ZenModel | None:
    """The ZEN/BERT encoder config.json describes (fresh weights), checked against task.json."""
    if spec.encoder is None:
        return None
    config, architecture = read_zen_config(d)
    if architecture != ARCHITECTURE:
        raise ZenError(f"{d / CONFIG_NAME}: architecture {architecture!r}; expected {ARCHITECTURE}")
    if config.encoder != spec.encoder:
        raise ZenError(f"{d}: config.json says encoder {config.encoder}, task.json says {spec.encoder}")
    return ZenModel(config)


def _saved_chte(d: Path, spec: ModelSpec, encoder: ZenModel | None,
                vocab: Vocab) -> tuple[ChteEncoder | None, BigramTable | None]:
    """CHTE as task.json describes it (fresh weights), with its bigram table when it reads characters."""
    if spec.chte is None:
        return None, None
    try:
        config = spec.chte_config()
    except (TypeError, ZenError) as e:
        raise ZenError(f"{d / TASK_NAME}: key 'chte': {e}") from None
    bigrams = None
    if encoder is None:
        bigrams = BigramTable.load(d / BIGRAMS_NAME)
        if (config.char_vocab_size, config.bigram_vocab_size) != (len(vocab), len(bigrams)):
            raise ZenError(f"{d}: CHTE tables ({config.char_vocab_size} chars, {config.bigram_vocab_size} "
                           f"bigrams) do not fit vocab.txt ({len(vocab)}) and bigrams.json ({len(bigrams)})")
    return ChteEncoder(config), bigrams


def _load_weights(model: TaskModel, weights: Path) -> None:
    """model.safetensors into `model`, every tensor present and of the right shape (`load_strict`)."""
    if not weights.is_file():
        raise ZenError(f"{weights}: no such file")
    try:
        with safe_open(str(weights), framework="pt") as f:
            state = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not a dict)
    except (SafetensorError, OSError, ValueError) as e:
        raise ZenError(f"{weights}: cannot read weights ({e}); the file is truncated or not safetensors") from None
    # a model saved before zen's own names (the released ones), or before the n-gram bag had idf and bias
    load_strict(model, bag_state_defaults(zen_state(state)), str(weights))
