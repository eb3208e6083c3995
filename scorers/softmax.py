"""Softmax and the scorers that keep its exponential normalizer."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import LogitsScorer, masked_fill_neg_inf, zero_empty_rows
from .registry import register_scorer


@register_scorer("softmax", family="softmax", kind="logits", normalization="normalized",
                 paper="arXiv:1706.03762")
class Softmax(LogitsScorer):
    """w_ij = exp(s_ij - m_i) / sum_{k in V_i} exp(s_ik - m_i), m_i = max_{k in V_i} s_ik."""

    def weights(self, s, mask):
        return torch.softmax(masked_fill_neg_inf(s, mask), dim=-1)

    def fast_attend(self, q, k, v, mask):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return zero_empty_rows(out, mask)
