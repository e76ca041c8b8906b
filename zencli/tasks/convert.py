"""`zen model import|export`: convert a released ZEN or BERT checkpoint into a zen model directory, and a zen
model directory into the released ZEN layout."""

from __future__ import annotations

from pathlib import Path

import torch

from zencli.model.checkpoint import save_zen_model
from zencli.model.released import export_released
from zencli.model.sources import Pretrained, load_pretrained


def import_checkpoint(source: Path, output: Path, *, encoder: str = "zen2", ngram: Path | None = None,
                      ngram_layers: int = 6, seed: int = 0) -> Pretrained:
    """Write `source` (released ZEN, or BERT: `encoder`, the lexicon `ngram` and `ngram_layers` shape the new
    n-gram side, initialised from `seed`) to `output` as a zen model directory; return what was loaded."""
    torch.manual_seed(seed)
    p = load_pretrained(source, encoder=encoder, ngram=ngram, ngram_layers=ngram_layers)
    save_zen_model(p.model, output, vocab=p.vocab, ngram=p.ngram)
    return p


def export_checkpoint(directory: Path, output: Path) -> None:
    """Write the zen model directory `directory` to `output` in the released ZEN layout (pytorch_model.bin,
    config.json, vocab.txt, ngram.txt)."""
    p = load_pretrained(directory)
    export_released(p.model, output, vocab=p.vocab, ngram=p.ngram)
