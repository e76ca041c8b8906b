"""Import and export of released checkpoints: ZEN 1.0 / ZEN 2.0 directories and BERT-Chinese.

Released ZEN (spec: docs/checkpoints.md): `config.json` + `pytorch_model.bin`
(+ `vocab.txt`, `ngram.txt` in pretrained directories). Import and export work in the released names and
rename at the boundary with `zencli.model.names` (zen says `char_embeddings`, `ngram_embeddings.table`,
`ngram_layers` where the release says `word_embeddings` / `word_layers`). Beyond that the mapping is only:
strip a `module.` prefix, rename TF-style LayerNorm `gamma`/`beta`, add the
`bert.` prefix when the file was saved from a bare ZenModel, and drop the ZEN 2.0
`attention.self.position_embedding.*` buffers (a fixed sinusoid zen recomputes, and an uninitialised
scratch tensor). ZEN 1.0 vs 2.0 is decided from the tensors: ZEN 2.0 has `r_r_bias`, ZEN 1.0 has an
absolute position table. Everything else is checked strictly.

BERT (HF names `bert.embeddings...`, `bert.encoder.layer.N...`, or Google-converted ones with
gamma/beta; `.bin` or `.safetensors`) becomes the character encoder of a new ZEN model whose n-gram
side is freshly initialised.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from zencli.atomic_write import atomic_write, atomic_write_path, atomic_write_text
from zencli.errors import ZenError
from zencli.lexicon.ngram_file import Lexicon
from zencli.model.checkpoint import check_tensors, check_text_files
from zencli.model.config import EncoderKind, ZenConfig, infer_encoder, read_json
from zencli.model.encoder import ZenModel
from zencli.model.names import released_state, zen_state
from zencli.model.pretraining import ZenForPreTraining

WEIGHTS_BIN = "pytorch_model.bin"
WEIGHTS_SAFETENSORS = "model.safetensors"
TASK_HEAD_PREFIXES = ("classifier.", "qa_outputs.", "crf.")  # heads of released fine-tuned models
DECODER_KEY = "cls.predictions.decoder.weight"
CHAR_EMBEDDING_KEY = "bert.embeddings.word_embeddings.weight"  # released names throughout this module
_ENCODER_PREFIXES = ("embeddings.", "word_embeddings.", "encoder.", "pooler.")
_RELEASED_TABLE_SIZE = 1201  # rows of the released position_embedding.weights buffer


@dataclass
class ImportedCheckpoint:
    model: ZenForPreTraining
    has_pretraining_heads: bool  # False: cls.* was not in the file and is freshly initialised
    task_heads: dict[str, torch.Tensor] = field(default_factory=dict)  # classifier.* etc., as stored
    vocab_path: Path | None = None
    ngram_path: Path | None = None
    initialised: list[str] = field(default_factory=list)  # tensors not in the file (fresh init)
    dropped: list[str] = field(default_factory=list)  # tensors in the file zen does not use


# -- reading -----------------------------------------------------------------------------------
def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """A state dict from `.bin` (torch.load, weights only) or `.safetensors`."""
    p = Path(path)
    if not p.is_file():
        raise ZenError(f"{p}: no such file")
    if p.suffix == ".safetensors":
        try:
            return load_file(str(p))
        except (SafetensorError, OSError, ValueError) as e:
            raise ZenError(f"{p}: cannot read weights ({e}); the file is truncated or not safetensors") from None
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises RuntimeError, EOFError, UnpicklingError, zipfile errors ...
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ZenError(f"{p}: cannot read weights ({msg}); expected a torch.save'd state dict") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ZenError(f"{p}: expected a state dict (names → tensors)")
    return dict(state)


def normalise_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`module.` prefix off, LayerNorm gamma/beta → weight/bias, `bert.` prefix on encoder keys."""
    out = {}
    for key, t in state.items():
        k = key.removeprefix("module.")
        if k.endswith(".gamma"):
            k = k[: -len("gamma")] + "weight"
        elif k.endswith(".beta"):
            k = k[: -len("beta")] + "bias"
        if k.startswith(_ENCODER_PREFIXES):
            k = "bert." + k
        out[k] = t
    return out


def _weights_file(directory: Path) -> Path:
    for name in (WEIGHTS_BIN, WEIGHTS_SAFETENSORS):
        if (directory / name).is_file():
            return directory / name
    raise ZenError(f"{directory}: no {WEIGHTS_BIN} or {WEIGHTS_SAFETENSORS}")


def _optional_file(directory: Path, name: str) -> Path | None:
    return directory / name if (directory / name).is_file() else None


def _untie(state: dict[str, torch.Tensor], source: str) -> None:
    """zen ties the MLM decoder to the char embedding: the file must agree, and may store either key."""
    if DECODER_KEY in state:
        if CHAR_EMBEDDING_KEY not in state:
            state[CHAR_EMBEDDING_KEY] = state[DECODER_KEY]
        elif not torch.equal(state[DECODER_KEY], state[CHAR_EMBEDDING_KEY]):
            raise ZenError(
                f"{source}: '{DECODER_KEY}' differs from '{CHAR_EMBEDDING_KEY}'; zen ties the MLM decoder "
                f"to the char embedding"
            )


def _split_heads(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: state.pop(k) for k in list(state) if k.startswith(TASK_HEAD_PREFIXES)}


# -- released ZEN ------------------------------------------------------------------------------
def import_released(
    directory: str | Path,
    *,
    released_ft_quirks: bool = False,
    ngram_weighting: str | None = None,
) -> ImportedCheckpoint:
    """Load a released ZEN 1.0 / 2.0 directory (pretrained or fine-tuned) into a ZenForPreTraining.

    Fine-tuned directories have no `cls.*` heads (they are then freshly initialised and
    `has_pretraining_heads` is False) and carry a task head (`classifier.*`, `qa_outputs.*`), returned
    as stored in `task_heads`. `released_ft_quirks` / `ngram_weighting` select the compatibility
    behaviour of the released fine-tuning scripts (see ZenConfig).
    """
    d = Path(directory)
    if not d.is_dir():
        raise ZenError(f"{d}: no such checkpoint directory")
    weights = _weights_file(d)
    source = str(weights)
    state = normalise_keys(read_state_dict(weights))
    dropped = [k for k in state if ".attention.self.position_embedding." in k]
    for k in dropped:
        del state[k]
    encoder = infer_encoder(state)
    if encoder == "bert":
        raise ZenError(
            f"{source}: no n-gram embeddings ('bert.word_embeddings.word_embeddings.weight'); this is not a "
            f"ZEN checkpoint (import a BERT checkpoint with import_bert)"
        )
    overrides = {"released_ft_quirks": released_ft_quirks}
    if ngram_weighting is not None:
        overrides["ngram_weighting"] = ngram_weighting
    config = ZenConfig.from_released_dict(
        read_json(d / "config.json"), encoder=encoder, source=str(d / "config.json"), **overrides
    )
    vocab, ngram = _optional_file(d, "vocab.txt"), _optional_file(d, "ngram.txt")
    check_text_files(config, vocab, ngram)

    task_heads = _split_heads(state)
    _untie(state, source)
    model = ZenForPreTraining(config)
    expected = released_state(model.state_dict())
    cls_keys = [k for k in expected if k.startswith("cls.")]
    has_cls = any(k.startswith("cls.") for k in state)
    initialised = [] if has_cls else cls_keys
    if not has_cls:
        for k in cls_keys:  # check everything else strictly; the heads keep their fresh init
            state[k] = expected[k]
    check_tensors(expected, state, source)
    model.load_state_dict(zen_state(state), strict=True)
    return ImportedCheckpoint(
        model=model,
        has_pretraining_heads=has_cls,
        task_heads=task_heads,
        vocab_path=vocab,
        ngram_path=ngram,
        initialised=initialised,
        dropped=dropped,
    )


def released_position_table(head_size: int) -> torch.Tensor:
    """The released `position_embedding.weights` buffer ([1201, d]; row 0 zeroed as padding), written
    on export so the released code finds every tensor it expects."""
    half = head_size // 2
    omega = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000.0) / (half - 1)))
    n = _RELEASED_TABLE_SIZE
    angles = torch.arange(-n // 2, n // 2, dtype=torch.float32)[:, None] * omega[None, :]
    table = torch.cat([angles.sin(), angles.cos()], dim=1)
    table[0] = 0
    return table


def export_released(
    model: ZenForPreTraining | ZenModel,
    directory: str | Path,
    *,
    vocab: str | Path | None = None,
    ngram: str | Path | None = None,
    task_heads: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Write the released layout: `pytorch_model.bin` (`bert.` prefix, `cls.` heads with both the decoder
    and the embedding key of the tied matrix, ZEN 2.0 sinusoid buffers), the released `config.json`,
    and copies of vocab.txt / ngram.txt. zen-only settings (W_r, fine-tuning quirks) have no released
    form: a model with W_r cannot be exported."""
    config: ZenConfig = model.config
    if config.relative_projection:
        raise ZenError("relative_projection=True (trainable W_r) has no released form; cannot export this model")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    vocab_p = Path(vocab) if vocab is not None else None
    ngram_p = Path(ngram) if ngram is not None else None
    check_text_files(config, vocab_p, ngram_p)

    if isinstance(model, ZenForPreTraining):
        state = released_state(model.state_dict())
    else:
        state = {"bert." + k: v for k, v in released_state(model.state_dict()).items()}
    if config.relative_positions:
        table = released_position_table(config.head_size)
        for k in [k for k in state if k.endswith(".attention.self.r_r_bias")]:
            prefix = k[: -len("r_r_bias")]
            state[prefix + "position_embedding.weights"] = table
            state[prefix + "position_embedding._float_tensor"] = torch.zeros(1)
    for k, t in (task_heads or {}).items():
        if k in state:
            raise ZenError(f"task head tensor '{k}' clashes with an encoder tensor")
        state[k] = t
    atomic_write(out / WEIGHTS_BIN, lambda f: torch.save({k: v.detach() for k, v in state.items()}, f))

    cfg = config.to_released_dict()
    if not config.has_ngrams:
        cfg.pop("word_size")
        cfg.pop("num_hidden_word_layers")
    atomic_write_text(out / "config.json", json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    for src, name in ((vocab_p, "vocab.txt"), (ngram_p, "ngram.txt")):
        if src is not None and src.resolve() != (out / name).resolve():
            atomic_write_path(out / name, lambda p, s=src: shutil.copyfile(s, p))
    return out


# -- BERT-Chinese ------------------------------------------------------------------------------
def import_bert(
    path: str | Path,
    *,
    encoder: EncoderKind = "zen2",
    ngram: str | Path | None = None,
    word_size: int | None = None,
    num_hidden_word_layers: int = 6,
    relative_projection: bool = False,
) -> ImportedCheckpoint:
    """A BERT checkpoint (directory with config.json or bert_config.json + pytorch_model.bin or
    model.safetensors) as the char encoder of a new ZEN 2.0 / ZEN 1.0 model (or of plain BERT).

    The n-gram side (embeddings, n-gram layers) is freshly initialised from the global torch RNG
    (seed it first), with `word_size` rows (default: lines of `ngram` + 1). ZEN 2.0 uses relative
    positions, so BERT's absolute position embeddings are dropped for it (listed in `dropped`) and
    its relative-attention biases u, v start fresh; ZEN 1.0 and plain BERT keep the position table.
    Pooler and pretraining heads are taken when the file has them (BertForMaskedLM has no pooler or
    NSP head), otherwise initialised.
    """
    p = Path(path)
    if not p.is_dir():
        raise ZenError(f"{p}: expected a BERT checkpoint directory (config.json + weights)")
    weights = _weights_file(p)
    cfg_path = next((p / n for n in ("config.json", "bert_config.json") if (p / n).is_file()), None)
    if cfg_path is None:
        raise ZenError(f"{p}: no config.json or bert_config.json")
    vocab = _optional_file(p, "vocab.txt")
    source = str(weights)

    ngram_p = Path(ngram) if ngram is not None else None
    if encoder != "bert":
        if ngram_p is not None:
            n = len(Lexicon.load(ngram_p)) + 1
            if word_size is not None and word_size != n:
                raise ZenError(f"{ngram_p}: {n - 1} n-grams, so word_size must be {n}, got {word_size}")
            word_size = n
        if word_size is None:
            raise ZenError("importing BERT into a ZEN model needs the n-gram lexicon (ngram.txt) or word_size")
    overrides = {"relative_projection": relative_projection}
    if encoder != "bert":
        overrides.update(word_size=word_size, num_hidden_word_layers=num_hidden_word_layers)
    bert_cfg = read_json(cfg_path)
    if isinstance(bert_cfg, dict) and encoder == "bert":
        bert_cfg = {k: v for k, v in bert_cfg.items() if k not in ("word_size", "num_hidden_word_layers")}
    config = ZenConfig.from_released_dict(bert_cfg, encoder=encoder, source=str(cfg_path), **overrides)
    check_text_files(config, vocab, ngram_p)

    state = normalise_keys(read_state_dict(weights))
    dropped = [k for k in state if k.endswith("embeddings.position_ids")]  # HF buffer, recomputed
    if infer_encoder(state) != "bert":
        raise ZenError(f"{source}: this is a ZEN checkpoint, not BERT; import it with import_released")
    bias_key = "cls.predictions.decoder.bias"  # HF ties it to cls.predictions.bias
    if bias_key in state:
        if "cls.predictions.bias" in state and not torch.equal(state[bias_key], state["cls.predictions.bias"]):
            raise ZenError(f"{source}: '{bias_key}' differs from 'cls.predictions.bias'")
        state.setdefault("cls.predictions.bias", state[bias_key])
        dropped.append(bias_key)
    if config.relative_positions and "bert.embeddings.position_embeddings.weight" in state:
        dropped.append("bert.embeddings.position_embeddings.weight")
    for k in dropped:
        state.pop(k, None)
    _untie(state, source)

    model = ZenForPreTraining(config)
    expected = released_state(model.state_dict())
    # Tensors BERT cannot provide, and optional groups BERT variants may lack, keep their fresh init.
    fresh = [k for k in expected if _is_ngram_side(k) or k.endswith(("r_r_bias", "r_w_bias", "r_proj.weight"))]
    for prefix in ("bert.pooler.", "cls.seq_relationship.", "cls.predictions."):
        group = [k for k in expected if k.startswith(prefix) and k != DECODER_KEY]
        present = [k for k in group if k in state]
        if not present:
            fresh.extend(group)
        elif len(present) != len(group):
            missing = next(k for k in group if k not in state)
            raise ZenError(f"{source}: missing tensor '{missing}' (the file has other {prefix}* tensors)")
    for k in fresh:
        if k in state:
            raise ZenError(f"{source}: unexpected tensor '{k}' in a BERT checkpoint")
        state[k] = expected[k]
    if DECODER_KEY not in state and CHAR_EMBEDDING_KEY in state:
        state[DECODER_KEY] = state[CHAR_EMBEDDING_KEY]  # the tie; HF files often store only one name
    check_tensors(expected, state, source)
    model.load_state_dict(zen_state(state), strict=True)
    return ImportedCheckpoint(
        model=model,
        has_pretraining_heads="cls.predictions.bias" not in fresh,
        vocab_path=vocab,
        ngram_path=ngram_p,
        initialised=sorted(fresh),
        dropped=dropped,
    )


def _is_ngram_side(key: str) -> bool:
    return key.startswith(("bert.word_embeddings.", "bert.encoder.word_layers."))
