"""Stage 3's model: a fresh ZenForPreTraining or the `init` checkpoint, wrapped for replaced-token detection
with `objective: rtd`, with the loss and evaluation the training loop calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from zencli.config.pretrain import PretrainConfig
from zencli.data.shards import PretrainShards
from zencli.errors import ZenError
from zencli.model.checkpoint import check_text_files
from zencli.model.config import ZenConfig
from zencli.model.pretraining import ZenForPreTraining
from zencli.model.sources import load_pretrained
from zencli.tasks.pretraining import rtd
from zencli.tasks.pretraining.heldout import evaluate
from zencli.tasks.pretraining.objective import pretraining_loss
from zencli.tasks.pretraining.preparation import Prepared, PretrainData
from zencli.train.checkpoint import seed_everything
from zencli.train.settings import TrainSettings


def model_and_objective(cfg: PretrainConfig, prepared: Prepared, data: PretrainData, say: Callable[[str], None]
                        ) -> tuple[TrainSettings, torch.nn.Module, Callable, Callable]:
    """(the loop's settings, the model, loss_fn, eval_fn(model, heldout)); the model is seeded first."""
    s = replace(cfg.train)
    s.overwrite = False  # prepare() has cleared the directory already
    seed_everything(s.seed)  # model initialisation is reproducible
    model, notes = build_model(cfg, prepared, len(data.vocab), len(data.lexicon))
    if model.config.has_ngrams:
        s.find_unused_parameters = True  # DDP: a batch without n-grams leaves the n-gram side without gradient
    loss_fn, eval_fn = pretraining_loss, evaluate
    if cfg.objective == "rtd":
        model, loss_fn, eval_fn = rtd_objective(cfg, model, data.shards, data.vocab, data.lexicon, notes)
        s.find_unused_parameters = True  # DDP: the discriminator's MLM head is not trained
    s.validate()
    for note in notes:
        say(f"note: {note}")
    return s, model, loss_fn, eval_fn


def build_model(cfg: PretrainConfig, prepared: Prepared, vocab_size: int,
                n_ngrams: int) -> tuple[ZenForPreTraining, list[str]]:
    """A fresh ZenForPreTraining (global torch RNG: seed first) or the `init` checkpoint; notes."""
    notes: list[str] = []
    if cfg.init.pretrained is None:
        config = ZenConfig(vocab_size=vocab_size, word_size=n_ngrams + 1, **cfg.model.zen_config_kwargs())
        return ZenForPreTraining(config), notes
    p = load_pretrained(cfg.init.pretrained, encoder=cfg.model.encoder, ngram=prepared.ngram,
                        ngram_layers=cfg.model.num_hidden_word_layers)
    model = p.model
    config = model.config
    # The shards' token and n-gram ids must index the checkpoint's tables.
    check_text_files(config, prepared.vocab, prepared.ngram if config.has_ngrams else None)
    if not config.relative_positions and config.max_position_embeddings < cfg.data.max_seq_len:
        raise ZenError(f"data.max_seq_len: {cfg.data.max_seq_len} exceeds the {config.max_position_embeddings} "
                       f"positions of {cfg.init.pretrained}")
    notes.append(f"init: {p.kind} checkpoint {cfg.init.pretrained} ({config.encoder}, {config.num_hidden_layers} × "
                 f"{config.hidden_size}); model.* sizes are taken from it")
    if p.notes:
        fresh = sum(n.startswith("initialised") for n in p.notes)
        notes.append(f"init: {fresh} tensor(s) initialised fresh, {len(p.notes) - fresh} not used")
    return model, notes


def rtd_objective(cfg: PretrainConfig, model: ZenForPreTraining, shards: PretrainShards, vocab: Any, lexicon: Any,
                  notes: list[str]):
    """(model, loss_fn, eval_fn) of replaced-token detection around `model` (see zencli.tasks.pretraining.rtd)."""
    slots = rtd.corrupted_slots(shards, vocab, lexicon)
    model = rtd.build_rtd_model(cfg, model, vocab)
    notes.append(rtd.describe(model))
    return (model, rtd.rtd_loss_fn(slots, cfg.rtd.nsp),
            lambda m, heldout: rtd.evaluate_rtd(m, heldout, slots, cfg.rtd.nsp))

