"""Input embeddings of the two towers.

Characters: char + token type (+ absolute position for ZEN 1.0 and BERT; ZEN 2.0 has relative positions
inside attention instead) → LayerNorm → dropout. N-grams: n-gram table + token type → LayerNorm →
dropout, with no position in any version (the n-gram side is a bag of slots; where each n-gram sits is
carried only by the fusion matrix P). The released checkpoints name both tables `word_embeddings`; zen's
names say which table is which, and `zencli.model.names` maps between the two.
"""

from __future__ import annotations

import torch
from torch import nn

from zencli.errors import ZenError
from zencli.model.config import ZenConfig
from zencli.model.export_mode import is_exporting


class CharEmbeddings(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        self.char_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=0)
        self.absolute_positions = not config.relative_positions
        if self.absolute_positions:
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        # input_ids, token_type_ids: [B,L] → [B,L,H]
        x = self.char_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        if self.absolute_positions:
            L = input_ids.shape[1]
            if not is_exporting() and L > self.position_embeddings.num_embeddings:
                raise ZenError(
                    f"sequence length {L} exceeds this model's max_position_embeddings "
                    f"({self.position_embeddings.num_embeddings}); use a shorter max_seq_len"
                )
            x = x + self.position_embeddings.weight[:L]  # [L,H] broadcast over the batch
        return self.dropout(self.LayerNorm(x))


class NgramEmbeddings(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        self.table = nn.Embedding(config.word_size, config.hidden_size, padding_idx=0)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, ngram_ids: torch.Tensor, ngram_token_type_ids: torch.Tensor) -> torch.Tensor:
        # ngram_ids, ngram_token_type_ids: [B,M] → [B,M,H]
        x = self.table(ngram_ids) + self.token_type_embeddings(ngram_token_type_ids)
        return self.dropout(self.LayerNorm(x))
