"""CHTE: CNN-Head Transformer Encoder for Chinese NER
(Shi et al., "基于CNN-Head Transformer编码器的中文命名实体识别").

A Transformer encoder changed in two places, plus a CRF decoder:

1. CNN heads. Of the `n_heads` attention heads, `n_linear_heads` take their values from a linear map as
   usual; each other head takes them from a 1-D convolution with its own window (2..7 in the paper:
   entity lengths are mostly 1–7 characters) followed by max-pooling, so a head's values summarise a
   local character n-gram — a "latent word" — without a lexicon. Queries, keys and the attention
   weights softmax(QKᵀ/√d_h) are unchanged.
2. Gated residuals. Instead of x + y after each sub-layer, a sigmoid gate computed from both the
   sub-layer input x and output y picks, per dimension, how much of each to keep: g⊙y + (1−g)⊙x, then
   LayerNorm.

The encoder output is concatenated with the embedding-layer features before the CRF. Input is either
char + two bigram embeddings (trained from scratch / pre-trained vectors) with sinusoidal positions, or
the hidden states of a pre-trained encoder (ZEN/BERT), as in the paper's "+BERT" setting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from zencli.errors import ZenError
from zencli.model.crf import TransitionConstraints
from zencli.model.heads import HeadOutput, TokenClassificationHead

# Paper §3.2. The FFN is 3× the model width, as in the Transformer; the learning rates (1e-3 from scratch,
# 4e-5 on BERT) and batch size 16 are training settings and live in the recipes.
PAPER_SETTINGS: dict[str, dict] = {
    "weibo": {"head_dim": 16, "ffn_size": 384},
    "resume": {"head_dim": 18, "ffn_size": 432},
    "bert": {"head_dim": 96, "ffn_size": 2048, "feature_size": 768},
}


@dataclass
class ChteConfig:
    """Architecture of a CHTE encoder. The paper's ablations are single switches:

    - `gated_residual=False`: plain x + y residuals ("add");
    - `concat_embeddings=False`: the CRF sees only the encoder output ("wo cat");
    - `n_linear_heads=0` with `n_heads` windows: all heads CNN ("all CNN-Head", windows 2..9 in the paper);
    - `n_linear_heads=n_heads`, `cnn_windows=()`: a plain Transformer encoder ("wo CNN-Head").
    """

    n_heads: int = 8
    n_linear_heads: int = 2
    cnn_windows: tuple[int, ...] = (2, 3, 4, 5, 6, 7)  # one window per CNN head, in head order
    head_dim: int = 16
    ffn_size: int = 384
    n_layers: int = 1  # the paper does not say; its Transformer NER baselines (TENER, FLAT) use one
    pool_size: int = 2  # max-pool over this many neighbouring conv outputs (stride 1: length is kept)
    embed_dropout: float = 0.3
    fc_dropout: float = 0.2
    attn_dropout: float = 0.0
    gated_residual: bool = True
    concat_embeddings: bool = True
    # Input from characters: vocab sizes of the char and bigram tables (both needed) ...
    char_vocab_size: int | None = None
    bigram_vocab_size: int | None = None
    char_dim: int = 50  # 50-d vectors, as the pre-trained ones of Lattice LSTM that the paper uses
    bigram_dim: int = 50
    # ... or from a pre-trained encoder's hidden states of this size.
    feature_size: int | None = None
    layer_norm_eps: float = 1e-5

    @property
    def d_model(self) -> int:
        """Width of the encoder: the heads' outputs are concatenated (no output projection)."""
        return self.n_heads * self.head_dim

    @property
    def n_cnn_heads(self) -> int:
        return self.n_heads - self.n_linear_heads

    @property
    def input_mode(self) -> Literal["chars", "features"]:
        return "features" if self.feature_size is not None else "chars"

    @property
    def input_size(self) -> int:
        """Width of the raw input features before the projection to d_model."""
        if self.feature_size is not None:
            return self.feature_size
        return self.char_dim + 2 * self.bigram_dim

    def validate(self) -> None:
        """Raise ZenError naming the first inconsistent key."""
        for key in ("n_heads", "head_dim", "ffn_size", "n_layers", "pool_size", "char_dim", "bigram_dim"):
            if getattr(self, key) < 1:
                raise ZenError(f"{key}: expected an integer >= 1, got {getattr(self, key)}")
        if not 0 <= self.n_linear_heads <= self.n_heads:
            raise ZenError(f"n_linear_heads: expected 0..n_heads ({self.n_heads}), got {self.n_linear_heads}")
        if len(self.cnn_windows) != self.n_cnn_heads:
            raise ZenError(f"cnn_windows: expected one window per CNN head, i.e. n_heads - n_linear_heads = "
                           f"{self.n_cnn_heads} windows, got {len(self.cnn_windows)}")
        if any(w < 1 for w in self.cnn_windows):
            raise ZenError(f"cnn_windows: expected windows >= 1, got {list(self.cnn_windows)}")
        for key in ("embed_dropout", "fc_dropout", "attn_dropout"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ZenError(f"{key}: expected a probability in [0, 1), got {getattr(self, key)}")
        chars = self.char_vocab_size is not None or self.bigram_vocab_size is not None
        if chars == (self.feature_size is not None):
            raise ZenError("feature_size: give either char_vocab_size + bigram_vocab_size (input from characters) "
                           "or feature_size (input from a pre-trained encoder), not both or neither")
        if chars and (self.char_vocab_size is None or self.bigram_vocab_size is None):
            raise ZenError("bigram_vocab_size: input from characters needs both char_vocab_size and bigram_vocab_size")
        for key in ("char_vocab_size", "bigram_vocab_size", "feature_size"):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise ZenError(f"{key}: expected an integer >= 1, got {value}")

    @classmethod
    def paper(cls, setting: Literal["weibo", "resume", "bert"], **overrides) -> ChteConfig:
        """The paper's settings for Weibo, Resume, or on top of a 768-wide BERT/ZEN (§3.2)."""
        if setting not in PAPER_SETTINGS:
            raise ZenError(f"setting: expected one of {', '.join(PAPER_SETTINGS)}, got {setting!r}")
        return cls(**{**PAPER_SETTINGS[setting], **overrides})


def sinusoid_positions(length: int, dim: int, device: torch.device | None = None) -> Tensor:
    """Transformer absolute positions [L, dim]: sin on even dims, cos on odd, wavelengths 2π…10000·2π."""
    pos = torch.arange(length, dtype=torch.float32, device=device).unsqueeze(1)  # [L, 1]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim, device=device)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)[:, : dim // 2]
    return table


class ChteEmbeddings(nn.Module):
    """The embedding layer: per character j, [e_c(c_j); e_b(c_j c_j+1); e_b(c_j-1 c_j)], or encoder features.

    Both bigrams come from one table; the data side passes the id of the bigram starting at j and of the
    one ending at j (with boundary markers at the sentence ends); id 0 is padding in both tables. The
    paper's sizes need a projection it does not spell out (150-d features vs a 128/144-d model), so the
    features are projected to d_model whenever the widths differ; positions are added after that, in
    model space. A pre-trained encoder already encodes positions, so none are added to its features.
    """

    def __init__(self, config: ChteConfig):
        super().__init__()
        self.config = config
        if config.input_mode == "chars":
            self.char_embeddings = nn.Embedding(config.char_vocab_size, config.char_dim, padding_idx=0)
            self.bigram_embeddings = nn.Embedding(config.bigram_vocab_size, config.bigram_dim, padding_idx=0)
        self.projection = nn.Linear(config.input_size, config.d_model) if config.input_size != config.d_model else None
        self.dropout = nn.Dropout(config.embed_dropout)

    def forward(self, char_ids: Tensor | None = None, bigram_next_ids: Tensor | None = None,
                bigram_prev_ids: Tensor | None = None, features: Tensor | None = None) -> Tensor:
        """ids [B, L] each, or features [B, L, F] → x [B, L, d_model]."""
        if self.config.input_mode == "chars":
            if char_ids is None or bigram_next_ids is None or bigram_prev_ids is None:
                raise ValueError("CHTE from characters needs char_ids, bigram_next_ids and bigram_prev_ids")
            x = torch.cat([self.char_embeddings(char_ids), self.bigram_embeddings(bigram_next_ids),
                           self.bigram_embeddings(bigram_prev_ids)], dim=-1)  # [B, L, char + 2·bigram]
        else:
            if features is None:
                raise ValueError("CHTE on a pre-trained encoder needs features [B, L, feature_size]")
            x = features
        if self.projection is not None:
            x = self.projection(x)  # [B, L, D]
        if self.config.input_mode == "chars":
            x = x + sinusoid_positions(x.shape[1], x.shape[2], x.device).to(x.dtype)
        return self.dropout(x)


class WindowConvValues(nn.Module):
    """Values of the CNN heads: per head, Conv1d (window w_h, d_model → head_dim) then max-pool (size p, stride 1).

    Length is kept by zero-padding the input by w + p − 2 in total: the pooled output at j sees the
    characters j − ⌊(w+p−2)/2⌋ … j + ⌈(w+p−2)/2⌉. When that total is odd (e.g. w = 3 with p = 2, or
    even w without pooling) the extra character is on the right, as PyTorch's padding="same" does; with
    the paper's p = 2, even windows are exactly centred. Padding positions of the batch are zeroed
    first, so a real character sees exactly what it would see in an unpadded sentence.

    All heads run as one convolution with the largest window; each head's taps outside its own window are
    held at zero by a fixed mask, which places every head's window where its own padding would put it.
    """

    def __init__(self, d_model: int, head_dim: int, windows: tuple[int, ...], pool_size: int):
        super().__init__()
        self.windows = tuple(windows)
        self.pool_size = pool_size
        kmax = max(windows)
        total = kmax + pool_size - 2
        self.pad_left, self.pad_right = total // 2, total - total // 2
        self.weight = nn.Parameter(torch.empty(len(windows) * head_dim, d_model, kmax))  # [n·dh, D, K]
        self.bias = nn.Parameter(torch.empty(len(windows) * head_dim))
        taps = torch.zeros(len(windows) * head_dim, 1, kmax)
        for h, w in enumerate(windows):
            first = self.pad_left - (w + pool_size - 2) // 2  # where this head's window starts in the big kernel
            taps[h * head_dim:(h + 1) * head_dim, :, first:first + w] = 1.0
        self.register_buffer("taps", taps, persistent=False)
        with torch.no_grad():  # nn.Conv1d's default init, with each head's own fan-in
            for h, w in enumerate(windows):
                bound = 1.0 / math.sqrt(d_model * w)
                self.weight[h * head_dim:(h + 1) * head_dim].uniform_(-bound, bound)
                self.bias[h * head_dim:(h + 1) * head_dim].uniform_(-bound, bound)
            self.weight.mul_(taps)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x [B, L, D], mask [B, L] bool → values [B, L, n_cnn·head_dim]."""
        x = x.masked_fill(~mask.unsqueeze(2), 0.0).transpose(1, 2)  # [B, D, L]
        x = F.pad(x, (self.pad_left, self.pad_right))  # [B, D, L + w + p − 2]
        y = F.conv1d(x, self.weight * self.taps, self.bias)  # [B, n·dh, L + p − 1]
        if self.pool_size > 1:
            y = F.max_pool1d(y, kernel_size=self.pool_size, stride=1)  # [B, n·dh, L]
        return y.transpose(1, 2)


class CnnHeadAttention(nn.Module):
    """Multi-head self-attention whose first `n_linear_heads` heads use linear values and the rest CNN values."""

    def __init__(self, config: ChteConfig):
        super().__init__()
        d, dh = config.d_model, config.head_dim
        self.n_heads, self.head_dim = config.n_heads, dh
        self.query = nn.Linear(d, config.n_heads * dh)
        self.key = nn.Linear(d, config.n_heads * dh)
        self.value = nn.Linear(d, config.n_linear_heads * dh) if config.n_linear_heads else None
        self.value_conv = (WindowConvValues(d, dh, config.cnn_windows, config.pool_size)
                           if config.n_cnn_heads else None)
        self.dropout = nn.Dropout(config.attn_dropout)

    def forward(self, x: Tensor, mask: Tensor, return_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x [B, L, D], mask [B, L] bool → (heads concatenated [B, L, D], weights [B, heads, L, L] or None)."""
        b, length, _ = x.shape
        q = self.query(x).view(b, length, self.n_heads, self.head_dim).transpose(1, 2)  # [B, h, L, dh]
        k = self.key(x).view(b, length, self.n_heads, self.head_dim).transpose(1, 2)
        values = []
        if self.value is not None:
            values.append(self.value(x))  # [B, L, n_lin·dh]
        if self.value_conv is not None:
            values.append(self.value_conv(x, mask))  # [B, L, n_cnn·dh]
        v = torch.cat(values, -1).view(b, length, self.n_heads, self.head_dim).transpose(1, 2)  # [B, h, L, dh]
        # A sentence that is all padding attends everywhere rather than nowhere (softmax of nothing is NaN).
        keys = (mask | ~mask.any(1, keepdim=True))[:, None, None, :]  # [B, 1, 1, L]
        if return_weights:  # the math, spelled out, when the weights themselves are wanted
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)  # [B, h, L, L]
            weights = scores.masked_fill(~keys, float("-inf")).softmax(-1)
            out = self.dropout(weights) @ v  # [B, h, L, dh]
        else:  # the same softmax(QKᵀ/√d_h)·V, fused: faster on CPU and no [L, L] tensor kept
            weights = None
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=keys,
                                                 dropout_p=self.dropout.p if self.training else 0.0)
        out = out.transpose(1, 2).reshape(b, length, self.n_heads * self.head_dim)
        return out, weights


class GatedResidual(nn.Module):
    """g = σ(W[x; y] + b); out = g⊙y + (1−g)⊙x — the sub-layer output y and its input x mixed per dimension.

    Plain x + y weighs both equally everywhere; the gate lets the layer keep the input where the sub-layer
    adds little and take the sub-layer where it matters (the paper's "adaptive" fusion).
    """

    def __init__(self, size: int):
        super().__init__()
        self.gate = nn.Linear(2 * size, size)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        g = torch.sigmoid(self.gate(torch.cat([x, y], dim=-1)))  # [B, L, D]
        return g * y + (1.0 - g) * x


class ChteLayer(nn.Module):
    """CNN-head attention → residual (gated or plain) → LayerNorm → FFN → residual → LayerNorm."""

    def __init__(self, config: ChteConfig):
        super().__init__()
        d = config.d_model
        self.attention = CnnHeadAttention(config)
        self.attn_gate = GatedResidual(d) if config.gated_residual else None
        self.attn_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(d, config.ffn_size)
        self.ffn_out = nn.Linear(config.ffn_size, d)
        self.ffn_gate = GatedResidual(d) if config.gated_residual else None
        self.ffn_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.fc_dropout)

    @staticmethod
    def _residual(gate: GatedResidual | None, x: Tensor, y: Tensor) -> Tensor:
        return gate(x, y) if gate is not None else x + y

    def forward(self, x: Tensor, mask: Tensor, return_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x [B, L, D] → [B, L, D] (and the attention weights when asked)."""
        y, weights = self.attention(x, mask, return_weights)
        x = self.attn_norm(self._residual(self.attn_gate, x, self.dropout(y)))
        y = self.ffn_out(self.dropout(F.relu(self.ffn_in(x))))  # ReLU, as in the Transformer
        x = self.ffn_norm(self._residual(self.ffn_gate, x, self.dropout(y)))
        return x, weights


@dataclass
class ChteOutput:
    hidden: Tensor  # [B, L, output_size]: encoder output, concatenated with the embeddings if configured
    attentions: list[Tensor] | None = None  # per layer [B, heads, L, L]


class ChteEncoder(nn.Module):
    """Embeddings → `n_layers` CHTE layers → [encoder output; embedding features] (U in the paper)."""

    def __init__(self, config: ChteConfig):
        super().__init__()
        config.validate()
        self.config = config
        self.embeddings = ChteEmbeddings(config)
        self.layers = nn.ModuleList(ChteLayer(config) for _ in range(config.n_layers))

    @property
    def output_size(self) -> int:
        return self.config.d_model * (2 if self.config.concat_embeddings else 1)

    def forward(self, mask: Tensor, char_ids: Tensor | None = None, bigram_next_ids: Tensor | None = None,
                bigram_prev_ids: Tensor | None = None, features: Tensor | None = None,
                return_attentions: bool = False) -> ChteOutput:
        """mask [B, L] (1 = real position, 0 = padding) plus the inputs of `ChteEmbeddings`."""
        mask = mask.bool()
        x0 = self.embeddings(char_ids, bigram_next_ids, bigram_prev_ids, features)  # [B, L, D]
        x, attentions = x0, []
        for layer in self.layers:
            x, w = layer(x, mask, return_attentions)
            attentions.append(w)
        if self.config.concat_embeddings:
            # The embedding features carry the character identity itself to the decoder, which the
            # attention mixing can blur (the paper's "wo cat" ablation).
            x = torch.cat([x, x0], dim=-1)  # [B, L, 2D]
        x = x.masked_fill(~mask.unsqueeze(2), 0.0)  # padding rows carry nothing downstream
        return ChteOutput(x, attentions if return_attentions else None)


class ChteTagger(nn.Module):
    """CHTE encoder + dropout + linear emissions + CRF: the paper's full NER model."""

    def __init__(self, config: ChteConfig, num_labels: int, constraints: TransitionConstraints | None = None):
        super().__init__()
        self.encoder = ChteEncoder(config)
        self.head = TokenClassificationHead(self.encoder.output_size, num_labels, dropout=config.fc_dropout,
                                            decoder="crf", constraints=constraints)

    def forward(self, mask: Tensor, labels: Tensor | None = None, label_mask: Tensor | None = None,
                **inputs: Tensor) -> HeadOutput:
        """mask [B, L]; labels [B, L]; label_mask [B, L]: positions the CRF tags (default: mask), e.g. to
        skip [CLS]/[SEP] when running on a pre-trained encoder. `inputs`: char/bigram ids or features."""
        hidden = self.encoder(mask, **inputs).hidden
        return self.head(hidden, mask if label_mask is None else label_mask, labels)

    @torch.no_grad()
    def decode(self, mask: Tensor, label_mask: Tensor | None = None, **inputs: Tensor) -> Tensor:
        """Best well-formed label ids [B, L]; -100 outside `label_mask` (default: mask)."""
        tagged = mask if label_mask is None else label_mask
        return self.head.decode(self.forward(mask, label_mask=tagged, **inputs).logits, tagged)
