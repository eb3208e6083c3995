"""Sparse normalizers from the ``entmax`` package: sparsemax, 1.5-entmax and alpha-entmax.

alpha-entmax: w = [(alpha - 1) s - tau]_+^{1/(alpha - 1)}, tau such that sum_{V_i} w = 1;
alpha -> 1 is softmax, alpha = 2 is sparsemax (w = [s - tau]_+), alpha = 1.5 is w = [s/2 - tau]_+^2.
Logits are cast to fp32 (bf16 gives NaN rows in entmax_bisect) and always normalized over dim=-1.
"""
from __future__ import annotations

import functools

import entmax
import torch
from entmax.root_finding import EntmaxBisectFunction

from . import pivot
from .base import LogitsScorer, masked_fill_neg_inf
from .forms import BlockedSpec, Kernels
from .params import constant
from .registry import ScorerError, register_scorer


def _fp32(s: torch.Tensor) -> torch.Tensor:
    return s.float() if s.dtype in (torch.float16, torch.bfloat16) else s


@functools.lru_cache(maxsize=None)
def fixed_alpha_bisection(alpha: float) -> type[EntmaxBisectFunction]:
    """The ``entmax`` package's bisection (forward and backward) with its powers x^(alpha - 1) and
    y^(1/(alpha - 1)) taken to a Python float: torch's scalar exponents run a square (alpha = 1.5)
    or a square root as one cheap pass, where the package's tensor-valued alpha runs the general
    elementwise power (about 100x slower for the square on a CPU, 50 times per call)."""
    lift, root = alpha - 1.0, 1.0 / (alpha - 1.0)
    return type(f"EntmaxBisectAlpha{alpha:g}", (EntmaxBisectFunction,), {
        "_gp": classmethod(lambda cls, x, _alpha: x ** lift),
        "_gp_inv": classmethod(lambda cls, y, _alpha: y ** root)})


@register_scorer("sparsemax", family="entmax", normalization="normalized",
                 paper="arXiv:1602.02068")
class Sparsemax(LogitsScorer):
    """w = [s - tau]_+ with sum_{V_i} w = 1: the Euclidean projection onto the simplex."""

    def weights(self, s, mask):
        return entmax.sparsemax(masked_fill_neg_inf(_fp32(s), mask), dim=-1)

    def kernels(self):
        return Kernels(blocked=BlockedSpec("sparsemax"), pivot=pivot.sparsemax,
                       topk=entmax.sparsemax)


@register_scorer("entmax15", family="entmax", normalization="normalized", paper="arXiv:1905.05702")
class Entmax15(LogitsScorer):
    """1.5-entmax: w = [s/2 - tau]_+^2 with sum_{V_i} w = 1 (exact sort-based solver)."""

    def weights(self, s, mask):
        return entmax.entmax15(masked_fill_neg_inf(_fp32(s), mask), dim=-1)

    def kernels(self):
        return Kernels(blocked=BlockedSpec("entmax15"), pivot=pivot.entmax15,
                       topk=entmax.entmax15)


@register_scorer("entmax_bisect", family="entmax", normalization="normalized",
                 paper="arXiv:1905.05702; arXiv:1909.00015")
class EntmaxBisect(LogitsScorer):
    """alpha-entmax by bisection (``n_iter`` steps). Fixed ``alpha`` > 1, or with
    ``learn_alpha=True`` alpha_h = clamp(1 + sigmoid(a_h), 1.01, 2) per head, a_h = 0 (alpha = 1.5)
    shaped (1, H, 1, 1) to broadcast over (B, H, Lq, Lk) logits. A fixed alpha runs the package's
    bisection through :func:`fixed_alpha_bisection`, a learned one ``entmax.entmax_bisect``;
    the pivot and blocked forms find the same threshold by Newton's method (scorers/pivot.py,
    scorers/fast/blocked_sparse.py), alpha <= 2."""

    def __init__(self, *, alpha: float = 1.5, learn_alpha: bool = False, n_iter: int = 50,
                 **context):
        super().__init__(**context)
        alpha = float(alpha)
        if not alpha > 1.0:
            raise ScorerError(
                f"scorer 'entmax_bisect': alpha must be > 1, got {alpha} (entmax_bisect with "
                f"alpha = 1 returns the uniform distribution, not softmax); use 'softmax' for alpha = 1"
            )
        if int(n_iter) < 1:
            raise ScorerError(f"scorer 'entmax_bisect': n_iter must be >= 1, got {n_iter}")
        self.alpha = alpha
        self.n_iter = int(n_iter)
        self.learn_alpha = bool(learn_alpha)
        if self.learn_alpha:
            self.alpha_logit = constant(0.0, (1, self.num_heads, 1, 1))
        else:
            self.bisection = fixed_alpha_bisection(alpha)

    def alpha_value(self, s: torch.Tensor) -> torch.Tensor:
        """The learned per-head alpha (``learn_alpha=True``)."""
        if s.dim() != 4 or s.shape[1] != self.num_heads:
            raise ScorerError(f"scorer 'entmax_bisect' with learn_alpha=True needs (B, "
                              f"{self.num_heads}, Lq, Lk) logits, got {tuple(s.shape)}")
        return (1.0 + torch.sigmoid(self.alpha_logit.to(s.dtype))).clamp(1.01, 2.0)

    def pivot_normalizer(self, s, dim=-1):
        if self.learn_alpha:
            return pivot.entmax_alpha(s, self.alpha_value(s), dim=dim)
        if self.alpha <= 2.0:
            return pivot.entmax_alpha(s, self.alpha, dim=dim)
        return self.bisection.apply(s, self.alpha, dim, self.n_iter, True)

    def kernels(self):
        """pivot: Newton steps in place of the bisection (alpha <= 2); blocked: alpha <= 2."""
        blocked = None
        if self.learn_alpha:
            blocked = self.blocked_spec
        elif self.alpha <= 2.0:
            blocked = BlockedSpec("entmax_alpha", alpha=self.alpha)
        return Kernels(blocked=blocked, pivot=self.pivot_normalizer)

    def blocked_spec(self, q, k, mask):
        return BlockedSpec("entmax_alpha", alpha=self.alpha_value(q))

    def weights(self, s, mask):
        s = masked_fill_neg_inf(_fp32(s), mask)
        if self.learn_alpha:
            return entmax.entmax_bisect(s, self.alpha_value(s), dim=-1, n_iter=self.n_iter)
        return self.bisection.apply(s, self.alpha, -1, self.n_iter, True)
