"""Base classes of every scorer: one interface, ``attend(q, k, v, mask) -> out``.

Shapes are (B, H, L, D); ``mask`` is boolean and broadcastable to (B, H, Lq, Lk), True = visible.
Logits-kind scorers implement ``weights(s, mask)`` on logits ``s = q k^T / sqrt(d)``; module-kind
scorers override ``attend`` and expose ``weights_from_qk`` for probes and tests.

Fully-masked rows follow one policy for every scorer (docs/scorers.md#fully-masked-rows): their logits are
replaced by an all-visible row of zeros, the scorer runs, then their weights and outputs are zeroed.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from .forms import NO_KERNELS, FastForm, Kernels, shipped_form


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

    def reference_attend(self, q, k, v, mask=None):
        raise NotImplementedError

    def kernels(self) -> Kernels:
        """What this scorer's fast forms need, as data (scorers/forms.py); none by default."""
        return NO_KERNELS

    @property
    def form(self) -> FastForm:
        """The form ``attend`` runs: set once per model by ``scorers.fast.accelerate``; until
        then the scorer's native path, else its reference."""
        form = self.__dict__.get("_form")
        if form is None:
            form = self.__dict__["_form"] = shipped_form(self)
        return form

    @form.setter
    def form(self, form: FastForm | None) -> None:
        self.__dict__["_form"] = form

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               mask: torch.Tensor | None = None) -> torch.Tensor:
        """Attention output (B, H, Lq, Dv) through :attr:`form`."""
        self.calls += 1
        if self.causal_only and mask is not None:
            _check_causal(mask)
        return self.form.attend(self, q, k, v, mask)

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

    def weights_from_logits(self, s: torch.Tensor, mask: torch.Tensor | None = None,
                            weights: Callable | None = None) -> torch.Tensor:
        """Weights with the fully-masked-row guard and exact zeros on masked keys. The guard's
        full-size passes run only when some row of ``mask`` sees no key (one boolean reduction
        over the mask as given, before broadcasting, decides). ``weights``: another form of
        :meth:`weights` with its signature (a fast form's)."""
        weights = weights or self.weights
        if mask is None:
            return weights(s, s.new_ones((1,) * s.dim(), dtype=torch.bool).expand(s.shape))
        if not has_empty_rows(mask):
            return weights(s, mask.expand(s.shape)).masked_fill(~mask, 0.0)
        mask = mask.expand(s.shape)
        row_valid = mask.any(-1, keepdim=True)
        safe_mask = mask | ~row_valid
        safe_s = s.masked_fill(~row_valid, 0.0)
        w = weights(safe_s, safe_mask)
        return w.masked_fill(~mask, 0.0)

    def weights_from_qk(self, q: torch.Tensor, k: torch.Tensor,
                        mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is not None and mask.dtype != torch.bool:
            raise TypeError(f"attention mask must be boolean (True = visible), got {mask.dtype}")
        with torch.autocast(q.device.type, enabled=False):
            return self.weights_from_logits(self.logits(q, k), mask)

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


def has_empty_rows(mask: torch.Tensor) -> bool:
    """True when some query row of the boolean ``mask`` sees no key (always True while
    ``torch.compile`` traces, where the answer cannot be read)."""
    if torch.compiler.is_compiling():
        return True
    return not bool(mask.any(-1).all())


def masked_fill_neg_inf(s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mask mode A: additive -inf on hidden keys."""
    return s.masked_fill(~mask, float("-inf"))


def row_count(mask: torch.Tensor) -> torch.Tensor:
    """n_i, the number of visible keys per row, shaped (..., Lq, 1), as the mask's float dtype."""
    return mask.sum(-1, keepdim=True)


def visible_keys(q, k, mask, dtype=torch.float64) -> torch.Tensor:
    """n_i, the keys query i sees, as a (B, H, Lq, 1) view (1 where it sees none), counted on
    the mask as given (no (B, H, Lq, Lk) copy): the row counts of the blocked forms' query
    scales."""
    b, h, lq = q.shape[:3]
    if mask is None:
        return torch.full((1, 1, 1, 1), float(k.shape[-2]), dtype=dtype,
                          device=q.device).expand(b, h, lq, 1)
    n = mask.sum(-1, keepdim=True, dtype=dtype).clamp_(min=1)
    return n.expand(b, h, lq, 1)


def zero_empty_rows(out: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Zero the output rows of queries that see no key (for fast paths that bypass the guard)."""
    if mask is None:
        return out
    return out.masked_fill(~mask.any(-1, keepdim=True), 0.0)
