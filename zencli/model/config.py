"""Model configuration: the released ZEN `config.json` keys plus the few choices zen adds.

The released keys keep their released names and meaning, so a released `config.json` reads directly
(unknown keys, e.g. from converted Google BERT configs, are ignored there). zen's own keys:

- `encoder`: "zen2" (relative positions, frequency-weighted n-gram fusion), "zen1" (absolute positions,
  0/1 fusion) or "bert" (no n-gram side at all: the baseline for ablations).
- `relative_projection`: ZEN 2.0 paper eq. 4 applies a trainable W_r to the sinusoid; the released
  model has none. False = released form.
- `ngram_weighting`: "frequency" (ZEN 2.0 eq. 2) or "binary" (ZEN 1.0); defaults follow `encoder`.
  "int_cast" reproduces the released ZEN 2.0 token-level/MRC fine-tuning scripts, which cast the
  frequency matrix to an integer type (see `ngram_fusion.ngram_position_matrix`).
- `released_ft_quirks`: reproduce what the released fine-tuning scripts feed the encoder (spec
  §Quirks), to run released fine-tuned models as they were trained. Never for zen's own training.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from zencli.atomic_write import atomic_write_text
from zencli.errors import ZenError

EncoderKind = Literal["zen2", "zen1", "bert"]
NgramWeighting = Literal["frequency", "binary", "int_cast"]
ACTIVATIONS = ("gelu", "gelu_new", "relu", "swish", "silu")

# Keys of a released config.json, in the order the released code writes them (sorted).
RELEASED_KEYS = (
    "attention_probs_dropout_prob",
    "hidden_act",
    "hidden_dropout_prob",
    "hidden_size",
    "initializer_range",
    "intermediate_size",
    "layer_norm_eps",
    "max_position_embeddings",
    "num_attention_heads",
    "num_hidden_layers",
    "num_hidden_word_layers",
    "type_vocab_size",
    "vocab_size",
    "word_size",
)
ZEN_KEYS = ("encoder", "relative_projection", "ngram_weighting", "released_ft_quirks")


@dataclass
class EncoderSizes:
    """The sizes of an encoder built from scratch, under their released config.json names: one definition,
    shared by ZenConfig (its defaults) and the `model:` sections of the pretraining and fine-tuning recipes
    (which inherit these keys)."""

    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    num_hidden_word_layers: int = 6


@dataclass
class ZenConfig:
    vocab_size: int = 21128
    hidden_size: int = EncoderSizes.hidden_size
    num_hidden_layers: int = EncoderSizes.num_hidden_layers
    num_attention_heads: int = EncoderSizes.num_attention_heads
    intermediate_size: int = EncoderSizes.intermediate_size
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    word_size: int = 201493  # n-gram table rows = lines of ngram.txt + 1 (row 0 = padding); released default
    num_hidden_word_layers: int = EncoderSizes.num_hidden_word_layers
    encoder: EncoderKind = "zen2"
    relative_projection: bool = False
    ngram_weighting: NgramWeighting | None = None  # None: "frequency" for zen2, "binary" for zen1
    released_ft_quirks: bool = False

    def __post_init__(self) -> None:
        if self.ngram_weighting is None:
            self.ngram_weighting = "frequency" if self.encoder == "zen2" else "binary"
        self.validate()

    # -- derived -------------------------------------------------------------------------------
    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def has_ngrams(self) -> bool:
        return self.encoder != "bert"

    @property
    def relative_positions(self) -> bool:
        return self.encoder == "zen2"

    def validate(self, source: str = "config") -> None:
        """Check types and ranges; errors name the key."""
        hints = typing.get_type_hints(ZenConfig)
        for f in dataclasses.fields(self):
            _check_type(getattr(self, f.name), hints[f.name], f"{source}: key '{f.name}'")
        if self.encoder not in typing.get_args(EncoderKind):
            raise ZenError(f"{source}: key 'encoder' must be one of zen2, zen1, bert, got {self.encoder!r}")
        if self.hidden_act not in ACTIVATIONS:
            raise ZenError(
                f"{source}: key 'hidden_act' must be one of {', '.join(ACTIVATIONS)}, got {self.hidden_act!r}"
            )
        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            if getattr(self, key) < 1:
                raise ZenError(f"{source}: key '{key}' must be >= 1, got {getattr(self, key)}")
        if self.has_ngrams:
            if self.word_size < 1:
                raise ZenError(f"{source}: key 'word_size' must be >= 1, got {self.word_size}")
            if self.num_hidden_word_layers < 0:
                raise ZenError(
                    f"{source}: key 'num_hidden_word_layers' must be >= 0, got {self.num_hidden_word_layers}"
                )
            if self.num_hidden_word_layers > self.num_hidden_layers:
                # n-gram layer i runs next to char layer i; extra ones would never run.
                raise ZenError(
                    f"{source}: key 'num_hidden_word_layers' ({self.num_hidden_word_layers}) must not exceed "
                    f"num_hidden_layers ({self.num_hidden_layers})"
                )
        if self.hidden_size % self.num_attention_heads:
            raise ZenError(
                f"{source}: key 'hidden_size' ({self.hidden_size}) must be a multiple of "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.relative_positions and (self.head_size % 2 or self.head_size < 4):
            # The sinusoid is [sin | cos] halves with ω_j = 10000^(−j/(d/2−1)): d even and d/2 > 1.
            raise ZenError(
                f"{source}: ZEN 2.0 relative attention needs an even head size >= 4 "
                f"(hidden_size / num_attention_heads), got {self.head_size}"
            )
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ZenError(f"{source}: key '{key}' must be in [0, 1), got {getattr(self, key)}")

    # -- dict / JSON ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_released_dict(self) -> dict[str, Any]:
        """Only the keys a released ZEN config.json holds (what the released code can read)."""
        d = self.to_dict()
        return {k: d[k] for k in RELEASED_KEYS}

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "config") -> ZenConfig:
        """zen's own config: every key must be known (a typo must not silently fall back to a default)."""
        if not isinstance(d, dict):
            raise ZenError(f"{source}: expected a JSON object, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        for key in d:
            if key not in names:
                raise ZenError(f"{source}: unknown key '{key}'; expected one of {', '.join(sorted(names))}")
        return _build(cls, d, source)

    @classmethod
    def from_released_dict(
        cls, d: dict[str, Any], *, encoder: EncoderKind, source: str = "config.json", **overrides: Any
    ) -> ZenConfig:
        """A released config.json: unknown keys ignored; `encoder` comes from the state dict
        (see `infer_encoder`), since the released files do not say which version they are."""
        if not isinstance(d, dict):
            raise ZenError(f"{source}: expected a JSON object, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)} - set(ZEN_KEYS)
        kept = {k: v for k, v in d.items() if k in names}
        kept.update(overrides)
        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
            if key not in kept:
                raise ZenError(f"{source}: missing key '{key}'")
        if encoder != "bert":
            for key in ("word_size", "num_hidden_word_layers"):
                if key not in kept:
                    raise ZenError(f"{source}: missing key '{key}' (required for a ZEN checkpoint)")
        kept["encoder"] = encoder
        return _build(cls, kept, source)

    @classmethod
    def from_json(cls, path: str | Path) -> ZenConfig:
        return cls.from_dict(read_json(path), source=str(path))

    def to_json(self, path: str | Path, *, released: bool = False) -> None:
        d = self.to_released_dict() if released else self.to_dict()
        atomic_write_text(path, json.dumps(d, indent=2, sort_keys=True) + "\n")


def infer_encoder(keys: typing.Iterable[str]) -> EncoderKind:
    """ZEN 2.0 has `r_r_bias` in every attention layer; ZEN 1.0 has an absolute position table and an
    n-gram side; without an n-gram side it is plain BERT."""
    keys = list(keys)
    if any(k.endswith("attention.self.r_r_bias") for k in keys):
        return "zen2"
    has_ngrams = any(k.endswith("word_embeddings.word_embeddings.weight") for k in keys)
    if has_ngrams:
        return "zen1"
    return "bert"


def read_json(path: str | Path) -> Any:
    p = Path(path)
    if not p.is_file():
        raise ZenError(f"{p}: no such file")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise ZenError(f"{p}: invalid UTF-8 at byte offset {e.start}; expected a JSON file") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ZenError(f"{p}:{e.lineno}: invalid JSON ({e.msg} at column {e.colno})") from None


def _build(cls: type[ZenConfig], d: dict[str, Any], source: str) -> ZenConfig:
    hints = typing.get_type_hints(cls)
    values = {}
    for key, value in d.items():
        tp = hints[key]
        if tp is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)  # JSON writes 1e-12 fine but 0 for 0.0
        values[key] = value
    try:
        return cls(**values)
    except ZenError as e:
        # validate() names the key; add the file.
        msg = str(e)
        raise ZenError(msg if msg.startswith(source) else f"{source}: {msg.removeprefix('config: ')}") from None


def _check_type(value: Any, tp: Any, what: str) -> None:
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ZenError(f"{what} must be one of {', '.join(map(str, allowed))}, got {value!r}")
        return
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return
        errs = []
        for a in args:
            if a is type(None):
                continue
            try:
                _check_type(value, a, what)
                return
            except ZenError as e:
                errs.append(e)
        raise errs[0]
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is str:
        ok = isinstance(value, str)
    else:
        ok = True
    if not ok:
        raise ZenError(f"{what} must be {tp.__name__}, got {value!r}")
