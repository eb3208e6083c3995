"""Multi-head attention with a pluggable scorer: the layer every backbone uses."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .base import Scorer
from .registry import create_scorer


class Attention(nn.Module):
    """q/k/v/o projections around a scorer; grouped-query attention when ``num_kv_heads < num_heads``.

    ``forward(x, mask=None, rotary=None)``: ``x`` is (B, L, dim); ``mask`` is boolean, broadcastable
    to (B, H, L, L), True = visible; ``rotary`` optionally maps (q, k) -> (q, k) (e.g. RoPE).
    """

    def __init__(self, dim: int, num_heads: int, scorer: str | Scorer = "softmax", *,
                 num_kv_heads: int | None = None, head_dim: int | None = None, bias: bool = True,
                 max_len: int = 1024, scorer_kwargs: dict | None = None):
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads or num_heads
        if num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={self.num_kv_heads}")
        self.head_dim = head_dim or dim // num_heads
        self.q_proj = nn.Linear(dim, num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(dim, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(dim, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(num_heads * self.head_dim, dim, bias=bias)
        if isinstance(scorer, str):
            scorer = create_scorer(scorer, num_heads=num_heads, max_len=max_len, **(scorer_kwargs or {}))
        elif scorer_kwargs:
            raise ValueError("scorer_kwargs only apply when the scorer is given by name")
        self.scorer = scorer

    def heads(self, x: torch.Tensor, proj: nn.Linear, n: int) -> torch.Tensor:
        b, length, _ = x.shape
        return proj(x).view(b, length, n, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                rotary: Callable | None = None) -> torch.Tensor:
        q = self.heads(x, self.q_proj, self.num_heads)
        k = self.heads(x, self.k_proj, self.num_kv_heads)
        v = self.heads(x, self.v_proj, self.num_kv_heads)
        if rotary is not None:
            q, k = rotary(q, k)
        if self.num_kv_heads != self.num_heads:
            group = self.num_heads // self.num_kv_heads
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
        out = self.scorer.attend(q, k, v, mask)
        b, _, length, _ = out.shape
        return self.o_proj(out.transpose(1, 2).reshape(b, length, -1))

    def attention_weights(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                          rotary: Callable | None = None) -> torch.Tensor:
        """Dense weights (B, H, L, L) of this layer for ``x``: for probes."""
        q = self.heads(x, self.q_proj, self.num_heads)
        k = self.heads(x, self.k_proj, self.num_kv_heads)
        if rotary is not None:
            q, k = rotary(q, k)
        if self.num_kv_heads != self.num_heads:
            k = k.repeat_interleave(self.num_heads // self.num_kv_heads, dim=1)
        return self.scorer.weights_from_qk(q, k, mask)
