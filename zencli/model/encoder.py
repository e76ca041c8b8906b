"""The ZEN encoder (ZEN 2.0, ZEN 1.0) and its plain-BERT baseline.

Two towers. Characters go through `num_hidden_layers` Transformer layers; the n-gram slots of the
sequence go through `num_hidden_word_layers` layers of the same type. After every character layer i:

    h = char_layer[i](h)
    if i < num_hidden_word_layers: g = ngram_layer[i](g)
    h = h + P · g                  # P [B,L,M]: which slots cover which chars (ngram_fusion.py)

so once the n-gram layers run out, the last P·g is added again after each later char layer. Encoder
"bert" has no n-gram side at all (no parameters, no fusion). Pooled output = tanh(W h[:,0] + b).

Modules: `embeddings` (chars), `ngram_embeddings`, `encoder.layer` (char layers), `encoder.ngram_layers`,
`pooler`. The released checkpoints call the n-gram side `word_embeddings` / `encoder.word_layers`;
`zencli.model.names` maps their names to these.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from zencli.model.attention import Packing, SelfAttention, padded
from zencli.model.config import ZenConfig
from zencli.model.embeddings import CharEmbeddings, NgramEmbeddings
from zencli.model.export_mode import is_exporting
from zencli.model.layer import TransformerLayer
from zencli.model.ngram_fusion import ngram_position_matrix, ngram_sum
from zencli.model.relative_attention import RelativeSelfAttention


@dataclass
class EncoderOutput:
    sequence_output: torch.Tensor  # [B,L,H]
    pooled_output: torch.Tensor  # [B,H]
    all_layers: list[torch.Tensor] | None = None  # per char layer, after fusion: num_layers × [B,L,H]


def additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[B,L] of 1 (attend) / 0 (padding) → [B,1,1,L] of 0 / −10000, as the released code."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * -10000.0


class Pooler(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(h[:, 0]))  # [B,L,H] → [B,H]


@dataclass
class NgramInputs:
    """The n-gram side of a batch, ready for the towers: the slots' embeddings and where they fuse."""

    g: torch.Tensor  # [B,M,H] slot embeddings, or [N,H] with `packing` (the real slots only)
    mask: torch.Tensor  # [B,1,1,M] additive
    P: torch.Tensor  # [B,L,M]: the weight of slot m in char l (ngram_fusion.py)
    packing: Packing | None = None  # where the N real slots sit in [B,M]


class Encoder(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        self.layer = nn.ModuleList(TransformerLayer(config) for _ in range(config.num_hidden_layers))
        if config.has_ngrams:
            self.ngram_layers = nn.ModuleList(TransformerLayer(config) for _ in range(config.num_hidden_word_layers))

    def forward(
        self,
        h: torch.Tensor,  # [B,L,H]
        mask: torch.Tensor | None,  # [B,1,1,L] additive; None: no padding
        ngrams: NgramInputs | None = None,  # None: no n-grams in this batch
        output_all_layers: bool = False,
    ) -> list[torch.Tensor]:
        layers = []
        g = ngrams.g if ngrams is not None else None
        for i, char_layer in enumerate(self.layer):
            h = char_layer(h, mask)
            if ngrams is not None:
                if i < len(self.ngram_layers):  # P·g changes only while the n-gram layers run
                    g = self.ngram_layers[i](g, ngrams.mask, ngrams.packing)
                    Pg = ngram_sum(ngrams.P, padded(g, ngrams.packing))  # [B,L,H]
                h = h + Pg
            if output_all_layers:
                layers.append(h)
        return layers if output_all_layers else [h]


class ZenModel(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        self.config = config
        self.embeddings = CharEmbeddings(config)
        if config.has_ngrams:
            self.ngram_embeddings = NgramEmbeddings(config)
        self.encoder = Encoder(config)
        self.pooler = Pooler(config)
        self.apply(self.init_weights)

    def init_weights(self, module: nn.Module) -> None:
        """BERT's initialisation (normal(0, initializer_range), LayerNorm 1/0, zero biases); the ZEN 2.0
        biases u, v get the released xavier-normal init."""
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, RelativeSelfAttention):
            nn.init.xavier_normal_(module.r_r_bias)
            nn.init.xavier_normal_(module.r_w_bias)

    def set_dropout(self, hidden: float | None = None, attention: float | None = None) -> None:
        """Change the dropout rates of a built (e.g. pretrained) encoder and its config; None keeps one."""
        if hidden is not None:
            self.config.hidden_dropout_prob = hidden
            for module in self.modules():
                if isinstance(module, nn.Dropout):
                    module.p = hidden
        if attention is not None:
            self.config.attention_probs_dropout_prob = attention
            for module in self.modules():
                if isinstance(module, (SelfAttention, RelativeSelfAttention)):
                    module.dropout_p = attention

    def resize_ngram_table(self, rows: int) -> None:
        """Grow the n-gram table to `rows` (n-grams appended to the lexicon): the existing rows are kept,
        the new ones initialised as every n-gram row is; `config.word_size` follows."""
        old = self.ngram_embeddings.table
        if rows < old.num_embeddings:
            raise ValueError(f"the n-gram table has {old.num_embeddings} rows; it can only grow, not to {rows}")
        if rows == old.num_embeddings:
            return
        new = nn.Embedding(rows, old.embedding_dim, padding_idx=0, sparse=old.sparse,
                           device=old.weight.device, dtype=old.weight.dtype)
        self.init_weights(new)
        with torch.no_grad():
            new.weight[:old.num_embeddings] = old.weight
        self.ngram_embeddings.table = new
        self.config.word_size = rows

    def sparse_ngram_gradients(self, enabled: bool = True) -> nn.Parameter | None:
        """Make the n-gram table's gradient sparse (only the rows of the batch's n-grams) and return the
        table, so the trainer can give it a sparse optimizer (e.g. SparseAdam). With a dense gradient
        every step zero-fills, and Adam updates, the whole 100k-row table although a batch touches a
        few hundred rows. None for plain BERT."""
        if not self.config.has_ngrams:
            return None
        table = self.ngram_embeddings.table
        table.sparse = enabled
        return table.weight

    def forward(
        self,
        input_ids: torch.Tensor,  # [B,L]
        token_type_ids: torch.Tensor | None = None,  # [B,L]
        attention_mask: torch.Tensor | None = None,  # [B,L] 1 = token, 0 = padding
        ngram_ids: torch.Tensor | None = None,  # [B,M], 0 = padding slot
        ngram_token_type_ids: torch.Tensor | None = None,  # [B,M]
        ngram_attention_mask: torch.Tensor | None = None,  # [B,M]
        ngram_starts: torch.Tensor | None = None,  # [B,M] char index incl. [CLS]
        ngram_lengths: torch.Tensor | None = None,  # [B,M], 0 for padding slots
        ngram_freqs: torch.Tensor | None = None,  # [B,M] lexicon frequency (ZEN 2.0 weighting)
        ngram_position_matrix: torch.Tensor | None = None,  # [B,L,M] precomputed P instead of the above
        output_all_layers: bool = False,
    ) -> EncoderOutput:
        if self.config.released_ft_quirks:
            token_type_ids, attention_mask, ngram_token_type_ids, ngram_attention_mask = self._released_ft_inputs(
                token_type_ids, attention_mask)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)

        h = self.embeddings(input_ids, token_type_ids)  # 1. embed the chars: [B,L,H]
        mask = self._char_mask(attention_mask, h.dtype)  # [B,1,1,L] additive, or None
        ngrams = None  # 2. the n-grams: their positions P [B,L,M] and embeddings g [B,M,H]
        if self.config.has_ngrams and ngram_ids is not None:
            ngrams = self._embed_ngrams(input_ids.shape[1], ngram_ids, ngram_token_type_ids, ngram_attention_mask,
                                        ngram_starts, ngram_lengths, ngram_freqs, ngram_position_matrix)
        layers = self.encoder(h, mask, ngrams, output_all_layers)  # 3. the two towers, fused after every char layer
        sequence_output = layers[-1]
        return EncoderOutput(
            sequence_output=sequence_output,
            pooled_output=self.pooler(sequence_output),  # 4. pool [CLS]: [B,H]
            all_layers=layers if output_all_layers else None,
        )

    def _released_ft_inputs(self, token_type_ids: torch.Tensor | None, attention_mask: torch.Tensor | None
                            ) -> tuple[torch.Tensor | None, torch.Tensor | None, None, None]:
        """What the released fine-tuning scripts pass (`released_ft_quirks`, for their fine-tuned models):
        ZEN 2.0 drops the n-gram types and mask (padding slots are attended, all types 0); ZEN 1.0 passes no
        char mask or types either. Returns (token types, char mask, n-gram types, n-gram mask)."""
        if self.config.encoder == "zen1":
            return None, None, None, None
        return token_type_ids, attention_mask, None, None

    def _char_mask(self, attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
        """The additive char mask [B,1,1,L]; None where no row has padding. Without padding the mask adds
        zeros: on the CPU (a host read is free there) attention then runs without one, as it would on a
        batch of equal-length rows."""
        if self._host_reads_are_free(attention_mask) and bool(attention_mask.all()):
            return None
        return additive_mask(attention_mask, dtype)

    def _embed_ngrams(self, seq_len: int, ngram_ids: torch.Tensor, types: torch.Tensor | None,
                      mask: torch.Tensor | None, starts: torch.Tensor | None, lengths: torch.Tensor | None,
                      freqs: torch.Tensor | None, P: torch.Tensor | None) -> NgramInputs | None:
        """The n-gram slots embedded, with their position matrix P; None when they cannot add anything."""
        P, ngram_ids, types, mask, packing = self._ngram_slots(seq_len, ngram_ids, types, mask, starts, lengths,
                                                               freqs, P)
        if P is None:
            return None
        g = self.ngram_embeddings(ngram_ids, types)  # [B,M,H]
        return NgramInputs(g=g if packing is None else packing.pack(g),  # [N,H]: the real slots only
                           mask=additive_mask(mask, g.dtype), P=P, packing=packing)

    def _ngram_slots(
        self,
        seq_len: int,
        ngram_ids: torch.Tensor,
        types: torch.Tensor | None,
        mask: torch.Tensor | None,
        starts: torch.Tensor | None,
        lengths: torch.Tensor | None,
        freqs: torch.Tensor | None,
        P: torch.Tensor | None,
    ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor, torch.Tensor, Packing | None]:
        """P, the slot tensors and where the real slots are, with the work that cannot change the result
        cut away.

        A batch without slots (M = 0) skips the n-gram tower (P = None). On the CPU, where looking at
        values is cheap, so does a batch whose P is all zero (it adds nothing to any char), and trailing
        slots that are padding in every row are dropped: they are masked out of attention (their softmax
        weight exp(−10000) is exactly 0) and P has no weight on them; the padding slots left inside rows
        shorter than the widest are gathered out (`Packing`), so the tower's linears skip them. Without an
        n-gram mask (e.g. under the released fine-tuning quirks) padding slots are attended: nothing is
        trimmed or packed.

        On a GPU those two checks would make the host wait for the device twice a step, so they are left
        to the host: `collate` and `PretrainShards.get_batch` pad the slots to the batch's longest row
        (no trailing all-padding slot reaches the model) and give M = 0 to a batch without n-grams. A P
        that is all zero with slots present (zero-frequency n-grams, `int_cast`) then runs the tower and
        adds exactly zero.
        """
        if ngram_ids.shape[1] == 0:  # no slot in the batch (a shape: known on the host); the rest goes unused
            return None, ngram_ids, types, mask, None
        if P is None:
            if starts is None or lengths is None:
                raise ValueError("n-gram slots need ngram_position_matrix or ngram_starts + ngram_lengths")
            P = ngram_position_matrix(starts, lengths, freqs, seq_len, self.config.ngram_weighting)
        if types is None:
            types = torch.zeros_like(ngram_ids)
        trim = mask is not None  # without a mask every slot is attended: trailing padding still matters
        if mask is None:
            mask = torch.ones_like(ngram_ids)
        if not self._host_reads_are_free(ngram_ids):
            return P, ngram_ids, types, mask, None
        if not bool(P.any()):
            return None, ngram_ids, types, mask, None
        packing = None
        if trim:
            used = mask.bool().any(0) | (P != 0).any(1).any(0)  # [M]
            keep = int(used.nonzero().max()) + 1
            if keep < ngram_ids.shape[1]:
                P, ngram_ids, types, mask = P[:, :, :keep], ngram_ids[:, :keep], types[:, :keep], mask[:, :keep]
            real = mask.reshape(-1).nonzero().squeeze(1)  # [N]: flat indices of the real slots
            if len(real) < mask.numel():
                packing = Packing(real, *mask.shape)
        return P, ngram_ids, types, mask, packing

    @staticmethod
    def _host_reads_are_free(t: torch.Tensor) -> bool:
        """Whether reading a value of `t` on the host (`bool(t)`, `int(t)`) is cheap: on the CPU it is; on
        a GPU it waits for every kernel queued before it (a host sync). Not while exporting a graph, which
        must not depend on values (zencli.model.export_mode)."""
        return t.device.type == "cpu" and not is_exporting()
