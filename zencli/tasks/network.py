"""The fine-tuned task model as a torch module: an encoder (ZEN 2.0 / ZEN 1.0 / BERT, `ZenModel`) and/or
CHTE, then the task's head. Building a new one: zencli.tasks.network_build; its directory: zencli.tasks.model_dir.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from zencli.model.chte import ChteEncoder
from zencli.model.encoder import ZenModel
from zencli.tasks.base import Encoded, Task

ENCODER_KEYS = ("input_ids", "token_type_ids", "attention_mask", "ngram_ids", "ngram_token_type_ids",
                "ngram_attention_mask", "ngram_starts", "ngram_lengths", "ngram_freqs")


def inner_mask(attention_mask: Tensor) -> Tensor:
    """[B, L] attention mask → bool mask of the tokens between [CLS] (position 0) and the final [SEP]."""
    mask = attention_mask.bool().clone()
    mask[:, 0] = False
    last = attention_mask.long().sum(1) - 1  # [B]
    mask[torch.arange(mask.shape[0], device=mask.device), last.clamp(min=0)] = False
    return mask


class TaskModel(nn.Module):
    """encoder (ZEN/BERT) and/or chte (CHTE), then the task's head. `forward(batch)` → (loss, metrics),
    as the training loop needs; `encode(batch)` → `Encoded` for prediction."""

    def __init__(self, task: Task, head: nn.Module, encoder: ZenModel | None = None,
                 chte: ChteEncoder | None = None):
        super().__init__()
        if encoder is None and chte is None:
            raise ValueError("a task model needs an encoder, a CHTE encoder, or both")
        self.task = task  # plain attribute: the task's settings and state, not parameters
        self.encoder = encoder
        self.chte = chte
        self.head = head

    @staticmethod
    def output_size(encoder: ZenModel | None, chte: ChteEncoder | None) -> int:
        return chte.output_size if chte is not None else encoder.config.hidden_size

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def encode(self, batch: dict[str, Tensor]) -> Encoded:
        mask = batch["attention_mask"].bool()
        pooled = None
        if self.encoder is not None:
            out = self.encoder(**{k: batch[k] for k in ENCODER_KEYS if k in batch})
            hidden, pooled = out.sequence_output, out.pooled_output  # [B, L, H], [B, H]
            if self.chte is not None:
                hidden = self.chte(mask, features=hidden).hidden  # [B, L, chte output]
        else:
            # CHTE from characters sees the characters only: [CLS]/[SEP] are masked like padding
            # (zeroed before its convolutions, never attended), and collate pads the bigram ids with -100.
            hidden = self.chte(inner_mask(mask), char_ids=batch["input_ids"],
                               bigram_next_ids=batch["bigram_next_ids"].clamp(min=0),
                               bigram_prev_ids=batch["bigram_prev_ids"].clamp(min=0)).hidden
        return Encoded(hidden, pooled, mask)

    def outputs(self, batch: dict[str, Tensor]) -> tuple[Tensor, ...]:
        """The head's scores for prediction (`task.output_names`), before decoding: the call a prediction
        engine makes (this module in torch, or its ONNX export: zencli.tasks.engine)."""
        return self.task.head_outputs(self.head, self.encode(batch), batch)

    def forward(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Any]]:
        return self.task.loss(self, self.encode(batch), batch)
