"""Plain multi-head self-attention (BERT, ZEN 1.0): softmax(Q·Kᵀ/√d + mask)·V per head.

`mask` is additive, [B,1,1,L] with 0 for keys to attend and −10000 for padding, as the released code
builds it; the product runs in `scaled_dot_product_attention`, which picks a fused kernel.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zencli.model.config import ZenConfig


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    # [B,L,H] → [B,A,L,d]
    B, L, H = x.shape
    return x.view(B, L, num_heads, H // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    # [B,A,L,d] → [B,L,H]
    B, A, L, d = x.shape
    return x.transpose(1, 2).reshape(B, L, A * d)


class SelfAttention(nn.Module):
    def __init__(self, config: ZenConfig):
        super().__init__()
        H = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.query = nn.Linear(H, H)
        self.key = nn.Linear(H, H)
        self.value = nn.Linear(H, H)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # x: [B,L,H], mask: [B,1,1,L] additive → [B,L,H]
        q = split_heads(self.query(x), self.num_heads)
        k = split_heads(self.key(x), self.num_heads)
        v = split_heads(self.value(x), self.num_heads)
        ctx = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask.to(q.dtype), dropout_p=self.dropout_p if self.training else 0.0
        )
        return merge_heads(ctx)
