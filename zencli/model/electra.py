"""Replaced-token detection (ELECTRA, Clark et al. 2020) with a ZEN encoder as the discriminator.

One training step, for a batch whose masked positions M were chosen by the shards (whole n-gram or char
masking, 80% [MASK] / 10% random / 10% kept):

    x̃                     the masked input (shard input_ids); x: the original text
    p_G(· | x̃)_i          generator: a small MLM encoder, logits only at i ∈ M
    x̂_i ~ p_G(· | x̃)_i    at i ∈ M (sampled: no gradient flows through the sample); x̂_i = x_i elsewhere
    slots(x̂)              n-gram slots of x̂, matched AFTER sampling by the caller's `ngram_slots`
    D(x̂)_i = w·act(W h_i)  discriminator: the ZEN encoder on (x̂, slots(x̂)), one logit per token
    y_i = [x̂_i ≠ x_i]     replaced? (a sample equal to the original counts as original, as in ELECTRA)

    loss = CE(p_G, x at M) + λ · mean_{real tokens i} BCE(σ(D(x̂)_i), y_i)  (+ NSP on D's pooled output)

Embeddings are shared the ELECTRA way: the generator reads the discriminator's whole embedding module
(char table, token types, absolute positions for zen1/bert, LayerNorm) at the discriminator's width E
and projects it down to its own width (`embeddings_project`, E → H_g); its MLM head maps back up to E
and decodes with the same char table (tied), so one table learns from both models. Sharing at the
generator's width instead would give the discriminator a narrow table plus an up-projection: no longer
the plain ZEN encoder that `zen finetune --model` loads.

More: docs/design.md, "Replaced-token detection".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from zencli.model.config import ZenConfig
from zencli.model.embeddings import CharEmbeddings
from zencli.model.encoder import Encoder, additive_mask
from zencli.model.layer import activation
from zencli.model.pretraining import IGNORE_INDEX, ZenForPreTraining

# (corrupted ids [B,L], token types [B,L], attention mask [B,L]) → the n-gram slot inputs of ZenModel
NgramSlots = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], dict[str, torch.Tensor]]


def generator_config(discriminator: ZenConfig, size: float) -> ZenConfig:
    """The generator's encoder: `size` × the discriminator's heads (at least one, same head size, so
    hidden = heads × head size), the discriminator's FFN ratio and depth, no n-gram layers."""
    heads = max(1, round(discriminator.num_attention_heads * size))
    hidden = heads * discriminator.head_size
    intermediate = max(1, round(discriminator.intermediate_size * hidden / discriminator.hidden_size))
    return replace(discriminator, hidden_size=hidden, num_attention_heads=heads, intermediate_size=intermediate,
                   num_hidden_word_layers=0, word_size=1, released_ft_quirks=False)


class Generator(nn.Module):
    """A small masked-LM encoder on the discriminator's embeddings (docs/design.md, "Replaced-token detection")."""

    def __init__(self, config: ZenConfig, embeddings: CharEmbeddings, init_weights: Callable[[nn.Module], None]):
        super().__init__()
        self.config = config
        self.embeddings = embeddings  # shared with the discriminator: [V,E] table, types, positions, LN
        width = embeddings.char_embeddings.embedding_dim  # E, the discriminator's hidden size
        self.embeddings_project = nn.Linear(width, config.hidden_size)  # E → H_g
        self.encoder = Encoder(config)  # char layers only: forward is never given n-grams
        self.dense = nn.Linear(config.hidden_size, width)  # H_g → E, then LN, then the tied table
        self.act = activation(config.hidden_act)
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        for module in (self.embeddings_project, self.encoder, self.dense, self.LayerNorm):
            module.apply(init_weights)  # not the shared embeddings: they are the discriminator's

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: torch.Tensor,
                positions: torch.Tensor) -> torch.Tensor:
        """MLM logits at `positions` ([B,L] bool), row-major: [N,V]."""
        h = self.embeddings_project(self.embeddings(input_ids, token_type_ids))  # [B,L,H_g]
        h = self.encoder(h, additive_mask(attention_mask, h.dtype))[-1]  # [B,L,H_g]
        h = self.LayerNorm(self.act(self.dense(h[positions])))  # [N,E]
        return F.linear(h, self.embeddings.char_embeddings.weight, self.bias)  # [N,V]


class DiscriminatorHead(nn.Module):
    """ELECTRA's per-token head: dense → act → one logit (replaced?)."""

    def __init__(self, config: ZenConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(self.act(self.dense(h))).squeeze(-1)  # [B,L,H] → [B,L]


@dataclass
class RTDOutput:
    # Only tensors that reach the loss (or need no gradient): DDP with find_unused_parameters walks the
    # output's graph, and e.g. the pooled output without NSP would mark the pooler used but leave it gradient-less.
    loss: torch.Tensor  # mlm_loss + λ · rtd_loss (+ nsp_loss)
    mlm_loss: torch.Tensor  # the generator's, mean over masked positions
    rtd_loss: torch.Tensor  # the discriminator's, mean over real tokens
    mlm_logits: torch.Tensor  # [N,V] generator logits at the masked positions (row-major)
    rtd_logits: torch.Tensor  # [B,L] discriminator logits (padding included: mask with attention_mask)
    corrupted: torch.Tensor  # [B,L] x̂, what the discriminator read
    replaced: torch.Tensor  # [B,L] bool, x̂ ≠ x
    nsp_logits: torch.Tensor | None = None  # [B,2] when NSP labels were given
    nsp_loss: torch.Tensor | None = None


class ZenForReplacedTokenDetection(nn.Module):
    def __init__(self, discriminator: ZenForPreTraining, generator_size: float = 0.25,
                 discriminator_weight: float = 50.0, samplable: torch.Tensor | None = None):
        """`samplable`: [V] bool, the token ids a replacement may be (None: all); special tokens such as
        [MASK] or [PAD] in the discriminator's input would be noise, not a replacement."""
        super().__init__()
        self.discriminator = discriminator  # the model this objective trains and a run saves
        bert = discriminator.bert
        self.generator = Generator(generator_config(discriminator.config, generator_size), bert.embeddings,
                                   bert.init_weights)
        self.discriminator_predictions = DiscriminatorHead(discriminator.config)
        self.discriminator_predictions.apply(bert.init_weights)
        self.discriminator_weight = discriminator_weight  # λ
        V = discriminator.config.vocab_size
        mask = torch.ones(V, dtype=torch.bool) if samplable is None else samplable.to(torch.bool)
        if mask.shape != (V,) or not mask.any():
            raise ValueError(f"samplable: expected a [{V}] bool mask with at least one True")
        self.register_buffer("samplable", mask, persistent=False)  # derived from the vocab, not trained

    @property
    def config(self) -> ZenConfig:
        return self.discriminator.config

    def forward(
        self,
        input_ids: torch.Tensor,  # [B,L] x̃, the masked input
        *,
        mlm_labels: torch.Tensor,  # [B,L] x at masked positions, IGNORE_INDEX elsewhere
        token_type_ids: torch.Tensor | None = None,  # [B,L]
        attention_mask: torch.Tensor | None = None,  # [B,L]
        nsp_labels: torch.Tensor | None = None,  # [B]; None: no NSP
        ngram_slots: NgramSlots | None = None,  # slot inputs of x̂ (None: the discriminator gets no n-grams)
        sampling_generator: torch.Generator | None = None,  # None: the global RNG (checkpointed by the loop)
    ) -> RTDOutput:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        masked = mlm_labels != IGNORE_INDEX  # [B,L]
        targets = mlm_labels[masked]  # [N] x at M, row-major

        # 1. generator: MLM on x̃
        mlm_logits = self.generator(input_ids, token_type_ids, attention_mask, masked)  # [N,V]
        if targets.numel():
            mlm_loss = F.cross_entropy(mlm_logits.float(), targets)
        else:
            mlm_loss = mlm_logits.sum() * 0.0  # nothing masked; keeps the graph

        # 2. x̂: samples of p_G at M, x elsewhere; no gradient through the sample
        with torch.no_grad():
            logits = mlm_logits.detach().float().masked_fill(~self.samplable, float("-inf"))  # [N,V]
            if targets.numel():
                sampled = torch.multinomial(logits.softmax(-1), 1, generator=sampling_generator).squeeze(1)  # [N]
            else:
                sampled = targets
            original = input_ids.masked_scatter(masked, targets)  # [B,L] x
            corrupted = original.masked_scatter(masked, sampled)  # [B,L] x̂
            replaced = corrupted != original  # [B,L] y

        # 3. discriminator on x̂ and the n-grams of x̂
        slots = ngram_slots(corrupted, token_type_ids, attention_mask) if ngram_slots is not None else {}
        enc = self.discriminator.bert(corrupted, token_type_ids=token_type_ids, attention_mask=attention_mask,
                                      **slots)
        rtd_logits = self.discriminator_predictions(enc.sequence_output)  # [B,L]
        real = attention_mask.bool()  # [B,L]
        rtd_loss = F.binary_cross_entropy_with_logits(rtd_logits[real].float(), replaced[real].float())

        out = RTDOutput(loss=mlm_loss + self.discriminator_weight * rtd_loss, mlm_loss=mlm_loss,
                        rtd_loss=rtd_loss, mlm_logits=mlm_logits, rtd_logits=rtd_logits, corrupted=corrupted,
                        replaced=replaced)
        if nsp_labels is not None:
            out.nsp_logits = self.discriminator.cls.seq_relationship(enc.pooled_output)  # [B,2]
            out.nsp_loss = F.cross_entropy(out.nsp_logits.float(), nsp_labels)
            out.loss = out.loss + out.nsp_loss
        return out
