"""Softmax and the scorers that keep its exponential normalizer."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .base import (LogitsScorer, masked_fill_neg_inf, row_count, visible_keys,
                   zero_empty_rows)
from .forms import BlockedSpec, FlexSpec, Kernels
from .params import constant, per_head, positive
from .registry import ScorerError, register_scorer


@register_scorer("softmax", family="softmax", kind="logits", normalization="normalized",
                 paper="arXiv:1706.03762")
class Softmax(LogitsScorer):
    """w_ij = exp(s_ij - m_i) / sum_{k in V_i} exp(s_ik - m_i), m_i = max_{k in V_i} s_ik."""

    def weights(self, s, mask):
        return torch.softmax(masked_fill_neg_inf(s, mask), dim=-1)

    def sdpa_attend(self, q, k, v, mask):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return zero_empty_rows(out, mask)

    def kernels(self):
        return Kernels(native=("sdpa", self.sdpa_attend), flex=FlexSpec())


@register_scorer("temperature_softmax", family="softmax", normalization="normalized",
                 paper="arXiv:1503.02531; arXiv:2010.04245")
class TemperatureSoftmax(LogitsScorer):
    """w = softmax(s / tau): tau fixed (> 0), or with ``learnable=True`` tau_h = exp(theta_h) per
    head, theta_h initialized to ln(tau) (theta = 0 gives tau = 1, i.e. softmax)."""

    def __init__(self, *, tau: float = 1.0, learnable: bool = False, **context):
        super().__init__(**context)
        self.tau = positive("tau", tau, "temperature_softmax")
        self.learnable = bool(learnable)
        if self.learnable:
            self.log_tau = constant(math.log(self.tau), (self.num_heads,))

    def inverse_tau(self, s: torch.Tensor) -> torch.Tensor | float:
        if self.learnable:
            return torch.exp(-per_head(self.log_tau, s))
        return 1.0 / self.tau

    def weights(self, s, mask):
        return torch.softmax(masked_fill_neg_inf(s * self.inverse_tau(s), mask), dim=-1)

    def kernels(self):
        return Kernels(native=("sdpa", self.sdpa_attend), blocked=self.blocked_spec,
                       flex=self.flex_spec)

    def sdpa_attend(self, q, k, v, mask):
        if self.learnable:
            q = q * torch.exp(-self.log_tau.to(q.dtype)).view(-1, 1, 1)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            scale = 1.0 / (self.tau * math.sqrt(q.shape[-1]))
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        return zero_empty_rows(out, mask)

    def flex_spec(self, q, k, mask):
        if self.learnable:
            inv_tau = torch.exp(-self.log_tau.float())                     # (H,)
            return FlexSpec(lambda score, b, h, qi, ki: score * inv_tau[h])
        inv = torch.tensor([1.0 / self.tau], device=q.device)
        return FlexSpec(lambda score, b, h, qi, ki: score * inv[0])

    def blocked_spec(self, q, k, mask):
        """softmax of s / tau: 1 / (tau sqrt(d)) scales the queries."""
        if self.learnable:
            inv_tau = torch.exp(-self.log_tau).view(1, -1, 1, 1)
            return BlockedSpec("softmax", query_scale=inv_tau / math.sqrt(q.shape[-1]))
        return BlockedSpec("softmax", query_scale=1.0 / (self.tau * math.sqrt(q.shape[-1])))


@register_scorer("ssmax", family="softmax", normalization="normalized", paper="arXiv:2501.19399")
class SSMax(LogitsScorer):
    """Scalable-Softmax: w = softmax(sigma_h * ln(n_i) * s), n_i = number of keys row i sees;
    sigma_h learnable per head, initialized to 1/ln(max_len) (softmax at the training length)."""

    def __init__(self, *, sigma: float | None = None, **context):
        super().__init__(**context)
        if sigma is None:
            if self.max_len < 2:
                raise ScorerError(f"scorer 'ssmax': max_len must be >= 2 for the default "
                                  f"sigma = 1/ln(max_len), got {self.max_len}; or pass sigma=")
            sigma = 1.0 / math.log(self.max_len)
        self.sigma = constant(sigma, (self.num_heads,))

    def weights(self, s, mask):
        log_n = row_count(mask).to(s.dtype).log()
        return torch.softmax(masked_fill_neg_inf(per_head(self.sigma, s) * log_n * s, mask), dim=-1)

    def kernels(self):
        return Kernels(native=("sdpa", self.sdpa_attend), blocked=self.blocked_spec,
                       flex=self.flex_spec)

    def sdpa_attend(self, q, k, v, mask):
        log_n = visible_keys(q, k, mask, q.dtype).log()
        q = q * (self.sigma.to(q.dtype).view(-1, 1, 1) * log_n)
        return zero_empty_rows(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), mask)

    def flex_spec(self, q, k, mask):
        sigma = self.sigma.float()                                        # (H,)
        log_n = visible_counts(q, k, mask).log()                          # (B, H, Lq)
        return FlexSpec(lambda score, b, h, qi, ki: score * (sigma[h] * log_n[b, h, qi]))

    def blocked_spec(self, q, k, mask):
        """softmax of sigma_h ln(n_i) s: sigma_h ln(n_i) / sqrt(d) scales query i."""
        n = visible_keys(q, k, mask, self.sigma.dtype)                   # (B, H, Lq, 1)
        scale = self.sigma.view(1, -1, 1, 1) * n.log()
        return BlockedSpec("softmax", query_scale=scale / math.sqrt(q.shape[-1]))


def visible_counts(q, k, mask) -> torch.Tensor:
    """n_i: visible keys per query, (B, H, Lq) float (1 where a row sees none)."""
    b, h, lq = q.shape[:3]
    lk = k.shape[-2]
    if mask is None:
        return torch.full((b, h, lq), float(lk), device=q.device)
    return mask.expand(b, h, lq, lk).sum(-1).clamp(min=1).float()


# Veličković et al. (arXiv 2410.01104), highest power first.
ADAPTIVE_POLYNOMIAL = (-0.037, 0.481, -2.3, 4.917, -1.791)


def adaptive_beta(entropy: torch.Tensor) -> torch.Tensor:
    """beta = max(P(H), 1) if H > 0.5 else 1, P(H) = -0.037H^4 + 0.481H^3 - 2.3H^2 + 4.917H - 1.791."""
    poly = torch.zeros_like(entropy)
    for c in ADAPTIVE_POLYNOMIAL:
        poly = poly * entropy + c
    return torch.where(entropy > 0.5, poly.clamp(min=1.0), torch.ones_like(entropy))


@register_scorer("adaptive_temperature", family="softmax", normalization="normalized",
                 paper="arXiv:2410.01104")
class AdaptiveTemperature(LogitsScorer):
    """p = softmax(s), H = -sum_{V_i} p log p, w = softmax(beta(H) * s) with ``adaptive_beta``.
    ``beta_grad=False`` (default) detaches beta; H comes from log_softmax with masked entries 0."""

    def __init__(self, *, beta_grad: bool = False, **context):
        super().__init__(**context)
        self.beta_grad = bool(beta_grad)

    def weights(self, s, mask):
        log_p = torch.log_softmax(masked_fill_neg_inf(s, mask), dim=-1).masked_fill(~mask, 0.0)
        entropy = -(log_p.exp() * log_p).sum(-1, keepdim=True)
        return torch.softmax(masked_fill_neg_inf(self.beta(entropy) * s, mask), dim=-1)

    def beta(self, entropy: torch.Tensor) -> torch.Tensor:
        beta = adaptive_beta(entropy)
        return beta if self.beta_grad else beta.detach()

    def kernels(self):
        """blocked: softmax of beta(H_i) s, beta(H_i) / sqrt(d) scaling query i, H_i from a pass
        before."""
        return Kernels(blocked=BlockedSpec("softmax", entropy_scale=self.beta))


@register_scorer("sa_softmax", family="softmax", normalization="subnormalized",
                 paper="arXiv:2502.18277")
class SASoftmax(LogitsScorer):
    """Self-Adjust Softmax. p = softmax(s) over V_i, z = s with masked entries 0,
    lo_i = min(min_{V_i} s, 0), hi_i = max(max_{V_i} s, 0):
    w = (z - lo) / max(hi - lo, 1e-10) * p (rows sum <= 1). ``variant="plain"``: w = s * softmax(s)
    (signed, unbounded)."""

    VARIANTS = ("normalized", "plain")

    def __init__(self, *, variant: str = "normalized", **context):
        super().__init__(**context)
        if variant not in self.VARIANTS:
            raise ScorerError(f"scorer 'sa_softmax': variant must be one of {self.VARIANTS}, "
                              f"got {variant!r}")
        self.variant = variant
        if variant == "plain":
            self.normalization = "unnormalized"

    def weights(self, s, mask):
        p = torch.softmax(masked_fill_neg_inf(s, mask), dim=-1)
        z = s.masked_fill(~mask, 0.0)
        if self.variant == "plain":
            return z * p
        lo = z.amin(-1, keepdim=True).clamp(max=0.0)
        hi = z.amax(-1, keepdim=True).clamp(min=0.0)
        return (z - lo) / (hi - lo).clamp(min=1e-10) * p

    def kernels(self):
        return Kernels(blocked=BlockedSpec("self_adjust_plain" if self.variant == "plain"
                                           else "self_adjust"))


@register_scorer("cog_signed", family="softmax", normalization="signed", paper="arXiv:2411.07176")
class CogSigned(LogitsScorer):
    """w_ij = sgn(s_ij) * softmax_{V_i}(|s|)_ij (the mask is applied to |s|, after the abs);
    sum_j |w_ij| = 1 except where s_ij = 0 exactly."""

    def weights(self, s, mask):
        return torch.sign(s) * torch.softmax(masked_fill_neg_inf(s.abs(), mask), dim=-1)

    def kernels(self):
        return Kernels(blocked=BlockedSpec("signed_softmax"))
