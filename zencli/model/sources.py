"""Where a pretrained encoder comes from: a zen model directory, a released ZEN 1.0/2.0 directory or a
BERT(-Chinese) checkpoint. `load_pretrained` tells them apart and returns one shape of result, so every
command that takes `--model DIR` accepts all three."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from zencli.errors import ZenError
from zencli.model.checkpoint import CONFIG_NAME, NGRAM_NAME, VOCAB_NAME, load_zen_model
from zencli.model.config import read_json
from zencli.model.pretraining import ZenForPreTraining
from zencli.model.released import (
    _weights_file,
    import_bert,
    import_released,
    read_state_dict,
)

Kind = Literal["zen", "released", "bert"]


def checkpoint_kind(directory: str | Path) -> Kind:
    """zen (config.json has `zen_format`), released ZEN (an n-gram table in the weights) or BERT."""
    d = Path(directory)
    if not d.is_dir():
        raise ZenError(f"{d}: no such model directory")
    cfg = d / CONFIG_NAME
    if cfg.is_file():
        data = read_json(cfg)
        if isinstance(data, dict) and "zen_format" in data:
            return "zen"
        if isinstance(data, dict) and ("word_size" in data or "num_hidden_word_layers" in data):
            return "released"
    elif not (d / "bert_config.json").is_file():
        raise ZenError(f"{d}: no config.json; expected a zen, released ZEN or BERT model directory")
    keys = read_state_dict(_weights_file(d)).keys()
    return "released" if any("word_embeddings.word_embeddings" in k for k in keys) else "bert"


@dataclass
class Pretrained:
    model: ZenForPreTraining
    kind: Kind
    vocab: Path | None
    ngram: Path | None
    notes: list[str] = field(default_factory=list)  # what was initialised fresh or dropped


def load_pretrained(
    directory: str | Path,
    *,
    encoder: str | None = None,
    ngram: str | Path | None = None,
    ngram_layers: int = 6,
) -> Pretrained:
    """Load any supported checkpoint as a ZenForPreTraining (heads freshly initialised when absent).

    `encoder`/`ngram`/`ngram_layers` only matter for BERT checkpoints, which become the char
    encoder of a new ZEN model (default zen2) with a fresh n-gram side sized by the lexicon `ngram`.
    """
    d = Path(directory)
    kind = checkpoint_kind(d)
    if kind == "zen":
        model = load_zen_model(d)
        if not isinstance(model, ZenForPreTraining):
            raise ZenError(f"{d}: holds a bare encoder ({type(model).__name__}); expected a pretrained model")
        vocab, ng = d / VOCAB_NAME, d / NGRAM_NAME
        return Pretrained(model, kind, vocab if vocab.is_file() else None, ng if ng.is_file() else None)
    if kind == "released":
        imp = import_released(d)
        return Pretrained(imp.model, kind, imp.vocab_path, imp.ngram_path, _notes(imp))
    imp = import_bert(d, encoder=encoder or "zen2", ngram=ngram, num_hidden_word_layers=ngram_layers)
    return Pretrained(imp.model, kind, imp.vocab_path, Path(ngram) if ngram else None, _notes(imp))


def _notes(imp) -> list[str]:
    # The released sinusoid buffers are recomputed, never loaded: not worth a note.
    dropped = [k for k in imp.dropped if ".position_embedding." not in k]
    return [f"initialised: {k}" for k in imp.initialised] + [f"not used: {k}" for k in dropped]
