"""zen's own model directory, and the strict state-dict checks every loader shares.

A zen model directory holds:
- `config.json`: the released keys plus zen's (`encoder`, `relative_projection`, ...), and
  `zen_format` (version) and `architecture` (which module the weights belong to);
- `model.safetensors`: the state dict (zen's names; a file written before them, with the released names,
  loads too: `zencli.model.names`) with every tensor stored once. safetensors refuses tensors
  that share memory, and the MLM decoder is tied to the char embedding, so aliases are dropped on
  save, listed in the file's metadata, and re-tied on load;
- `vocab.txt` and `ngram.txt`, copied alongside when given, so the directory is self-contained.

Every problem (missing file, truncated or corrupt weights, a missing or unexpected tensor, a shape
mismatch, vocab/lexicon files that do not fit the embedding tables) is a one-line ZenError.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from zencli.atomic_write import atomic_write_path
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.model.config import ZenConfig, read_json
from zencli.model.encoder import ZenModel
from zencli.model.names import zen_state
from zencli.model.pretraining import ZenForPreTraining
from zencli.text.vocab import Vocab

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
VOCAB_NAME = "vocab.txt"
NGRAM_NAME = "ngram.txt"
FORMAT_VERSION = 2
# 1: the n-gram modules under their released names (`word_embeddings`, `word_layers`), mapped at load
# (zencli.model.names); 2: under zen's own (`ngram_embeddings`, `ngram_layers`). An older zen reading a 2 says so
# in one line instead of tripping over the names.
READABLE_VERSIONS = (1, 2)
ARCHITECTURES: dict[str, type[nn.Module]] = {"ZenModel": ZenModel, "ZenForPreTraining": ZenForPreTraining}


# -- strict state-dict checks -------------------------------------------------------------------
def _shape(t: torch.Tensor) -> str:
    return "[" + ",".join(str(s) for s in t.shape) + "]"


def check_state_dict(model: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    """Raise a ZenError naming the first missing tensor, unexpected tensor or shape mismatch."""
    check_tensors(model.state_dict(), state, source)


def check_tensors(expected: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], source: str) -> None:
    """`check_state_dict` against the tensors `expected` (a model's state dict, possibly renamed: the
    released import checks in the released names, so its errors name the file's tensors)."""
    for key, ref in expected.items():  # model order, so the first problem reported is the earliest one
        if key not in state:
            raise ZenError(f"{source}: missing tensor '{key}' (expected shape {_shape(ref)})")
        t = state[key]
        if tuple(t.shape) != tuple(ref.shape):
            raise ZenError(f"{source}: tensor '{key}' has shape {_shape(t)}, expected {_shape(ref)}")
        if not t.is_floating_point():
            raise ZenError(f"{source}: tensor '{key}' has dtype {t.dtype}, expected a floating-point tensor")
    for key, t in state.items():
        if key not in expected:
            raise ZenError(f"{source}: unexpected tensor '{key}' {_shape(t)}")


def load_strict(model: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    check_state_dict(model, state, source)
    model.load_state_dict(state, strict=True)


# -- vocab.txt / ngram.txt against the embedding tables ------------------------------------------
def check_vocab(path: str | Path, config: ZenConfig) -> None:
    n = len(Vocab.load(path))  # also rejects empty or duplicate lines, which would shift ids
    if n != config.vocab_size:
        raise ZenError(
            f"{path}: {n} lines, but the model's char embedding has {config.vocab_size} rows "
            f"(vocab_size); expected one token per row"
        )


def check_ngrams(path: str | Path, config: ZenConfig) -> None:
    n = len(Lexicon.load(path))  # also rejects malformed lines, which would shift n-gram ids
    if n + 1 != config.word_size:
        raise ZenError(
            f"{path}: {n} n-grams, but the model's n-gram embedding has {config.word_size} rows "
            f"(word_size); expected lines + 1 = word_size (row 0 is padding)"
        )


def check_text_files(config: ZenConfig, vocab: Path | None, ngram: Path | None) -> None:
    if vocab is not None:
        check_vocab(vocab, config)
    if ngram is not None:
        if not config.has_ngrams:
            raise ZenError(f"{ngram}: a plain BERT encoder has no n-gram table to match this lexicon to")
        check_ngrams(ngram, config)


# -- tied tensors ------------------------------------------------------------------------------
def dedup_tied(state: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Keep the first name of each group of tensors sharing memory; return (unique, {alias: kept})."""
    unique: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple[int, tuple[int, ...], tuple[int, ...]], str] = {}
    for key, t in state.items():
        ident = (t.data_ptr(), tuple(t.shape), tuple(t.stride()))
        if t.numel() and ident in seen:
            aliases[key] = seen[ident]
        else:
            seen[ident] = key
            unique[key] = t.detach().contiguous()
    return unique, aliases


# -- zen format --------------------------------------------------------------------------------
def save_zen_model(
    model: nn.Module,
    directory: str | Path,
    *,
    config: ZenConfig | None = None,
    architecture: str | None = None,
    vocab: str | Path | None = None,
    ngram: str | Path | None = None,
) -> Path:
    """Write `model` as a zen model directory; returns the directory.

    `config` defaults to `model.config`, `architecture` to the class name; other modules (task models
    with heads) can be saved too and read back with `read_zen_checkpoint` + `load_strict`.
    """
    config = config if config is not None else model.config
    architecture = architecture or type(model).__name__
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    vocab_p = Path(vocab) if vocab is not None else None
    ngram_p = Path(ngram) if ngram is not None else None
    check_text_files(config, vocab_p, ngram_p)

    unique, aliases = dedup_tied(model.state_dict())
    metadata = {"zen_format": str(FORMAT_VERSION), "architecture": architecture, "tied": json.dumps(aliases)}
    atomic_write_path(out / WEIGHTS_NAME, lambda p: save_file(unique, str(p), metadata=metadata))
    cfg = {**config.to_dict(), "zen_format": FORMAT_VERSION, "architecture": architecture}
    atomic_write_path(
        out / CONFIG_NAME,
        lambda p: p.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8"),
    )
    for src, name in ((vocab_p, VOCAB_NAME), (ngram_p, NGRAM_NAME)):
        if src is not None and src.resolve() != (out / name).resolve():
            atomic_write_path(out / name, lambda p, s=src: shutil.copyfile(s, p))
    return out


def read_zen_config(directory: str | Path) -> tuple[ZenConfig, str]:
    """(config, architecture) of a zen model directory."""
    path = Path(directory) / CONFIG_NAME
    d = read_json(path)
    if not isinstance(d, dict) or "zen_format" not in d:
        raise ZenError(
            f"{path}: not a zen model config (no 'zen_format' key); a released ZEN or BERT checkpoint "
            f"is imported instead"
        )
    version = d.pop("zen_format")
    if version not in READABLE_VERSIONS:
        raise ZenError(f"{path}: zen_format {version!r} is not supported (this zen reads "
                       f"{', '.join(map(str, READABLE_VERSIONS))}; a newer zen wrote it?)")
    architecture = d.pop("architecture", "ZenModel")
    if not isinstance(architecture, str):
        raise ZenError(f"{path}: key 'architecture' must be a string, got {architecture!r}")
    return ZenConfig.from_dict(d, source=str(path)), architecture


def read_zen_checkpoint(directory: str | Path) -> tuple[ZenConfig, str, dict[str, torch.Tensor]]:
    """(config, architecture, state dict with tied aliases restored) of a zen model directory."""
    config, architecture = read_zen_config(directory)
    path = Path(directory) / WEIGHTS_NAME
    if not path.is_file():
        raise ZenError(f"{path}: no such file")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            state = {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise ZenError(f"{path}: cannot read weights ({e}); the file is truncated or not safetensors") from None
    try:
        aliases = json.loads(metadata.get("tied", "{}"))
    except json.JSONDecodeError:
        raise ZenError(f"{path}: corrupt 'tied' metadata; expected a JSON object") from None
    for alias, kept in aliases.items():
        if kept not in state:
            raise ZenError(f"{path}: tied tensor '{alias}' refers to missing tensor '{kept}'")
        state[alias] = state[kept]
    return config, architecture, zen_state(state)  # a directory written before zen's own names has the released ones


def load_zen_model(directory: str | Path) -> nn.Module:
    """Rebuild a ZenModel / ZenForPreTraining saved by `save_zen_model` (in eval mode, on the CPU).

    vocab.txt / ngram.txt, when present, must fit the embedding tables.
    """
    d = Path(directory)
    if not d.is_dir():
        raise ZenError(f"{d}: no such model directory")
    config, architecture, state = read_zen_checkpoint(d)
    if architecture not in ARCHITECTURES:
        raise ZenError(
            f"{d / CONFIG_NAME}: architecture {architecture!r} is not a bare encoder "
            f"({', '.join(ARCHITECTURES)}); load it with the task's loader"
        )
    check_text_files(
        config,
        d / VOCAB_NAME if (d / VOCAB_NAME).exists() else None,
        d / NGRAM_NAME if (d / NGRAM_NAME).exists() else None,
    )
    model = ARCHITECTURES[architecture](config)
    load_strict(model, state, str(d / WEIGHTS_NAME))
    return model.eval()

