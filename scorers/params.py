"""Helpers for scorer parameters: deterministic constants, per-head broadcasting, positivity."""
from __future__ import annotations

import math

import torch
from torch import nn

from .registry import ScorerError


def constant(value: float, shape: tuple[int, ...] = (1,)) -> nn.Parameter:
    """A parameter filled with ``value``: never drawn from the global RNG, so seeds pair scorers."""
    return nn.Parameter(torch.full(shape, float(value)))


def inverse_softplus(y: float) -> float:
    """rho with softplus(rho) = y, i.e. ln(e^y - 1)."""
    return y + math.log(-math.expm1(-y))


def per_head(param: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """A (H,) tensor shaped to broadcast against logits ``s`` (..., H, Lq, Lk), in ``s``'s dtype."""
    p = param.to(s.dtype)
    if s.dim() >= 3 and s.shape[-3] == p.numel():
        return p.view(-1, 1, 1)
    if p.numel() == 1:
        return p.view(())
    raise ScorerError(
        f"a per-head parameter has {p.numel()} heads but the logits have shape {tuple(s.shape)} "
        f"(expected (..., {p.numel()}, Lq, Lk)); create the scorer with num_heads matching the layer"
    )


def positive(name: str, value: float, scorer: str) -> float:
    """``value`` as a float, or a clear error when it is not > 0."""
    value = float(value)
    if not value > 0:
        raise ScorerError(f"scorer {scorer!r}: {name} must be > 0, got {value}")
    return value
