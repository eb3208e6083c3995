"""Scaled Signed Averaging (arXiv 2508.14685) and stablemax, in the log domain.

Direct form w_ij ∝ (1 + b|s_ij|)^(n sgn s_ij) over V_i; computed only as
SSA(s) = softmax(t), t = n sgn(s) log1p(b|s|), masked t = -inf. t is C^1 at s = 0 (slope n b).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import LogitsScorer, masked_fill_neg_inf
from .params import constant, inverse_softplus, positive
from .registry import register_scorer


def signed_log1p(s: torch.Tensor, b: torch.Tensor | float) -> torch.Tensor:
    """sgn(s) log1p(b|s|), with derivative b at s = 0 (torch.sign would give 0 there)."""
    return torch.where(s >= 0, torch.log1p(b * s.clamp(min=0)), -torch.log1p(b * (-s).clamp(min=0)))


def ssa_weights(s: torch.Tensor, mask: torch.Tensor, n, b) -> torch.Tensor:
    """softmax over V_i of t = n sgn(s) log1p(b|s|)."""
    return torch.softmax(masked_fill_neg_inf(n * signed_log1p(s, b), mask), dim=-1)


@register_scorer("ssa", family="ssa", normalization="normalized", paper="arXiv:2508.14685")
class SSA(LogitsScorer):
    """w = softmax(n sgn(s) log1p(b|s|)). n = softplus(rho), one scalar per layer shared by heads,
    n0 = 1.5 (rho0 = 1.2475), learnable unless ``learn_n=False``; b = 0.8 fixed buffer unless
    ``learn_b=True`` (then b = softplus(beta), b0 = ``b``). Both are 1-element tensors."""

    def __init__(self, *, n: float = 1.5, b: float = 0.8, learn_n: bool = True,
                 learn_b: bool = False, **context):
        super().__init__(**context)
        n = positive("n", n, "ssa")
        b = positive("b", b, "ssa")
        self.learn_n = bool(learn_n)
        self.learn_b = bool(learn_b)
        if self.learn_n:
            self.rho = constant(inverse_softplus(n))
        else:
            self.register_buffer("n_fixed", torch.tensor([n]))
        if self.learn_b:
            self.beta = constant(inverse_softplus(b))
        else:
            self.register_buffer("b_fixed", torch.tensor([b]))

    def n_value(self, dtype=torch.float32) -> torch.Tensor:
        return F.softplus(self.rho.to(dtype))[0] if self.learn_n else self.n_fixed.to(dtype)[0]

    def b_value(self, dtype=torch.float32) -> torch.Tensor:
        return F.softplus(self.beta.to(dtype))[0] if self.learn_b else self.b_fixed.to(dtype)[0]

    def weights(self, s, mask):
        return ssa_weights(s, mask, self.n_value(s.dtype), self.b_value(s.dtype))


@register_scorer("ssa_gpt2", family="ssa", normalization="normalized", paper="arXiv:2508.14685")
class SSAGPT2(LogitsScorer):
    """SSA of the nanoGPT code: b = e^a, n = e^nu, 1-element parameters per layer,
    a0 = 1, nu0 = 0.4 (b0 = 2.71828, n0 = 1.49182), both learnable."""

    def __init__(self, *, a: float = 1.0, nu: float = 0.4, **context):
        super().__init__(**context)
        self.a = constant(a)
        self.nu = constant(nu)

    def n_value(self, dtype=torch.float32) -> torch.Tensor:
        return torch.exp(self.nu.to(dtype))[0]

    def b_value(self, dtype=torch.float32) -> torch.Tensor:
        return torch.exp(self.a.to(dtype))[0]

    def weights(self, s, mask):
        return ssa_weights(s, mask, self.n_value(s.dtype), self.b_value(s.dtype))


@register_scorer("stablemax", family="ssa", normalization="normalized", paper="arXiv:2501.04697")
class Stablemax(LogitsScorer):
    """w ∝ s + 1 for s >= 0 and 1/(1 - s) for s < 0: SSA with b = n = 1."""

    def weights(self, s, mask):
        return ssa_weights(s, mask, 1.0, 1.0)
