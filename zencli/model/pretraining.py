"""Pretraining heads: masked language model + next sentence prediction (BERT's, as released ZEN has).

MLM: transform (dense → act → LayerNorm), then a decoder whose weight *is* the char embedding matrix
(tied) plus a bias [V]. NSP: a [2,H] linear layer on the pooled output. Names match the released
`cls.predictions.*` / `cls.seq_relationship.*`, and the encoder sits under `bert`, so
`ZenForPreTraining.state_dict()` has exactly the released keys.

The released code computes MLM logits at every position although ~15% are masked; here they are
computed only at the positions asked for (`mlm_positions`, or the labelled positions when training),
and over the whole sequence only when neither is given.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from zencli.model.config import ZenConfig
from zencli.model.encoder import EncoderOutput, ZenModel
from zencli.model.layer import activation

IGNORE_INDEX = -100  # MLM label of positions that are not predicted


class PredictionTransform(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(h)))


class MLMHead(nn.Module):
    def __init__(self, config: ZenConfig, embedding_weight: nn.Parameter):
        super().__init__()
        self.transform = PredictionTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.decoder.weight = embedding_weight  # tied: [V,H]
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        # [..., H] → [..., V]
        return self.decoder(self.transform(h)) + self.bias


class PreTrainingHeads(nn.Module):
    def __init__(self, config: ZenConfig, embedding_weight: nn.Parameter):
        super().__init__()
        self.predictions = MLMHead(config, embedding_weight)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)


@dataclass
class PreTrainingOutput:
    mlm_logits: torch.Tensor  # [N,V] at the selected positions (row-major order), or [B,L,V]
    nsp_logits: torch.Tensor  # [B,2]
    encoder: EncoderOutput
    loss: torch.Tensor | None = None  # mlm_loss + nsp_loss (whichever labels were given)
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None


class ZenForPreTraining(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        self.config = config
        self.bert = ZenModel(config)
        self.cls = PreTrainingHeads(config, self.bert.embeddings.char_embeddings.weight)
        self.cls.predictions.transform.apply(self.bert.init_weights)
        self.cls.seq_relationship.apply(self.bert.init_weights)

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        mlm_positions: torch.Tensor | None = None,  # [B,L] bool: where to compute MLM logits
        mlm_labels: torch.Tensor | None = None,  # [B,L] token ids, IGNORE_INDEX where not predicted
        nsp_labels: torch.Tensor | None = None,  # [B] 0 = B follows A, 1 = random B
        output_all_layers: bool = False,
        **encoder_inputs: torch.Tensor | None,  # the other inputs of ZenModel.forward
    ) -> PreTrainingOutput:
        enc = self.bert(input_ids, output_all_layers=output_all_layers, **encoder_inputs)
        if mlm_positions is None and mlm_labels is not None:
            mlm_positions = mlm_labels != IGNORE_INDEX
        h = enc.sequence_output if mlm_positions is None else enc.sequence_output[mlm_positions]  # [N,H]
        mlm_logits = self.cls.predictions(h)
        nsp_logits = self.cls.seq_relationship(enc.pooled_output)

        out = PreTrainingOutput(mlm_logits=mlm_logits, nsp_logits=nsp_logits, encoder=enc)
        losses = []
        if mlm_labels is not None:
            targets = mlm_labels[mlm_positions]  # [N]
            if targets.numel() == 0:
                out.mlm_loss = mlm_logits.sum() * 0.0  # nothing masked in this batch; keeps the graph
            else:
                out.mlm_loss = F.cross_entropy(mlm_logits.float(), targets, ignore_index=IGNORE_INDEX)
            losses.append(out.mlm_loss)
        if nsp_labels is not None:
            out.nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels)
            losses.append(out.nsp_loss)
        if losses:
            out.loss = sum(losses[1:], losses[0])
        return out
