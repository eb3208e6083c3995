"""Base classes of every scorer: one interface, ``attend(q, k, v, mask) -> out``.

Shapes are (B, H, L, D); ``mask`` is boolean and broadcastable to (B, H, Lq, Lk), True = visible.
Logits-kind scorers implement ``weights(s, mask)`` on logits ``s = q k^T / sqrt(d)``; module-kind
scorers override ``attend`` and expose ``weights_from_qk`` for probes and tests.

Fully-masked rows follow one policy for every scorer (SCORERS.md section 0): their logits are
replaced by an all-visible row of zeros, the scorer runs, then their weights and outputs are zeroed.
"""
from __future__ import annotations

import math

import torch
from torch import nn


def compute_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """fp32 for half-precision inputs, fp64 when any input is fp64."""
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def full_mask(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The boolean mask broadcast to (B, H, Lq, Lk)."""
    shape = (*q.shape[:-2], q.shape[-2], k.shape[-2])
    if mask is None:
        return torch.ones(shape, dtype=torch.bool, device=q.device)
    if mask.dtype != torch.bool:
        raise TypeError(f"attention mask must be boolean (True = visible), got {mask.dtype}")
    return mask.expand(shape)


def causal_mask(length: int, device=None) -> torch.Tensor:
    """(1, 1, L, L) lower-triangular mask, True = visible."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]


def padding_mask(key_valid: torch.Tensor) -> torch.Tensor:
    """(B, 1, 1, L) mask from a (B, L) boolean that is True on real (non-pad) tokens."""
    return key_valid[:, None, None, :]


class Scorer(nn.Module):
    """Common base: registry metadata, a per-forward call counter, and the masking policy."""

    # Filled in by @register_scorer.
    name = "?"
    aliases: tuple[str, ...] = ()
    family = "?"
    kind = "logits"
    normalization = "normalized"
    paper = ""
    version = 1
    causal_only = False
    description = ""

    def __init__(self, *, num_heads: int = 1, max_len: int = 1024):
        super().__init__()
        self.num_heads = num_heads
        self.max_len = max_len
        self.calls = 0
        self.use_fast_path = True

    @property
    def has_fast_path(self) -> bool:
        return type(self).fast_attend is not Scorer.fast_attend

    def fast_attend(self, q, k, v, mask):
        raise NotImplementedError

    def reference_attend(self, q, k, v, mask=None):
        raise NotImplementedError

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               mask: torch.Tensor | None = None) -> torch.Tensor:
        """Attention output (B, H, Lq, Dv); the fast path when it exists and is enabled."""
        self.calls += 1
        if self.causal_only and mask is not None:
            _check_causal(mask)
        if self.use_fast_path and self.has_fast_path:
            return self.fast_attend(q, k, v, mask)
        return self.reference_attend(q, k, v, mask)

    forward = attend

    def extra_repr(self) -> str:
        return f"name={self.name!r}, num_heads={self.num_heads}"


def _check_causal(mask: torch.Tensor) -> None:
    lq, lk = mask.shape[-2:]
    if lq == lk and bool(mask.triu(1).any()):
        raise ValueError("this scorer is causal-only: keys after the query must be masked")


class LogitsScorer(Scorer):
    """A scorer that maps logits to weights; subclasses implement :meth:`weights`."""

    def weights(self, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Weights (B, H, Lq, Lk) from logits ``s``; every row of ``mask`` has a visible key."""
        raise NotImplementedError

    def logits(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        dtype = compute_dtype(q, k)
        return (q.to(dtype) @ k.to(dtype).transpose(-1, -2)) / math.sqrt(q.shape[-1])

    def weights_from_logits(self, s: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Weights with the fully-masked-row guard and exact zeros on masked keys."""
        if mask is None:
            mask = torch.ones_like(s, dtype=torch.bool)
        mask = mask.expand(s.shape)
        row_valid = mask.any(-1, keepdim=True)
        safe_mask = mask | ~row_valid
        safe_s = s.masked_fill(~row_valid, 0.0)
        w = self.weights(safe_s, safe_mask)
        return w.masked_fill(~mask, 0.0)

    def weights_from_qk(self, q: torch.Tensor, k: torch.Tensor,
                        mask: torch.Tensor | None = None) -> torch.Tensor:
        with torch.autocast(q.device.type, enabled=False):
            return self.weights_from_logits(self.logits(q, k), full_mask(q, k, mask))

    def reference_attend(self, q, k, v, mask=None):
        w = self.weights_from_qk(q, k, mask)
        return (w @ v.to(w.dtype)).to(v.dtype)


class ModuleScorer(Scorer):
    """A scorer that needs q and k themselves (features, positions); overrides :meth:`attend`."""

    def weights_from_qk(self, q: torch.Tensor, k: torch.Tensor,
                        mask: torch.Tensor | None = None) -> torch.Tensor:
        """Dense (B, H, Lq, Lk) weights: the quadratic reference, for probes and tests."""
        raise NotImplementedError

    def reference_attend(self, q, k, v, mask=None):
        w = self.weights_from_qk(q, k, mask)
        return (w @ v.to(w.dtype)).to(v.dtype)


def masked_fill_neg_inf(s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mask mode A: additive -inf on hidden keys."""
    return s.masked_fill(~mask, float("-inf"))


def row_count(mask: torch.Tensor) -> torch.Tensor:
    """n_i, the number of visible keys per row, shaped (..., Lq, 1), as the mask's float dtype."""
    return mask.sum(-1, keepdim=True)


def zero_empty_rows(out: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Zero the output rows of queries that see no key (for fast paths that bypass the guard)."""
    if mask is None:
        return out
    return out.masked_fill(~mask.any(-1, keepdim=True), 0.0)
