"""Linear-attention scorers (module-kind): w_ij = phi(q_i)·phi(k_j) / sum_{k in V_i} phi(q_i)·phi(k_k).

``weights_from_qk`` is the dense quadratic reference; ``linear_attend`` is the linear form
out_i = phi(q_i)·(sum_{j in V_i} phi(k_j) v_j^T) / max(eps, phi(q_i)·sum_{j in V_i} phi(k_j)), causal
through chunks (intra-chunk quadratic plus a carried state). Padded keys have their features zeroed,
so they never enter a sum. Masks that are not (rows) x (keys) [x causal] use the quadratic form.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .base import ModuleScorer, compute_dtype, full_mask
from .forms import Kernels
from .params import positive
from .registry import ScorerError, register_scorer


def mask_structure(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, bool] | None:
    """(row_valid, key_valid, causal) when ``mask`` = rows x keys [x lower triangle], else None."""
    row_valid = mask.any(-1)
    key_valid = mask.any(-2)
    separable = row_valid[..., :, None] & key_valid[..., None, :]
    if torch.equal(mask, separable):
        return row_valid, key_valid, False
    lq, lk = mask.shape[-2:]
    if lq == lk and torch.equal(mask, separable & torch.ones(lq, lk, dtype=torch.bool,
                                                              device=mask.device).tril()):
        return row_valid, key_valid, True
    return None


def causal_linear(qf, kf, v, chunk: int):
    """Numerators (B, H, L, Dv) and denominators (B, H, L, 1) of causal linear attention."""
    length = qf.shape[-2]
    pad = (-length) % chunk
    qf, kf, v = (F.pad(t, (0, 0, 0, pad)) for t in (qf, kf, v))
    n = (length + pad) // chunk
    qc, kc, vc = (t.unflatten(-2, (n, chunk)) for t in (qf, kf, v))
    intra = (qc @ kc.transpose(-1, -2)).tril()
    num = intra @ vc
    den = intra.sum(-1, keepdim=True)
    kv = kc.transpose(-1, -2) @ vc                            # (B, H, n, F, Dv)
    z = kc.sum(-2, keepdim=True)                              # (B, H, n, 1, F)
    kv_before = torch.cat([torch.zeros_like(kv[:, :, :1]), kv.cumsum(2)[:, :, :-1]], dim=2)
    z_before = torch.cat([torch.zeros_like(z[:, :, :1]), z.cumsum(2)[:, :, :-1]], dim=2)
    num = num + qc @ kv_before
    den = den + (qc * z_before).sum(-1, keepdim=True)
    return num.flatten(2, 3)[:, :, :length], den.flatten(2, 3)[:, :, :length]


class LinearScorer(ModuleScorer):
    """Shared quadratic reference and linear form; subclasses define the feature maps."""

    chunk = 64

    def __init__(self, *, eps: float = 1e-6, **context):
        super().__init__(**context)
        self.eps = positive("eps", eps, self.name)

    def linear_features(self, q, k):
        """Feature maps (phi'(q), phi'(k)) whose dot product is the unnormalized weight."""
        raise NotImplementedError

    def pair_scores(self, q, k):
        """Dense unnormalized weights (B, H, Lq, Lk), written as the formula (not the features)."""
        raise NotImplementedError

    def weights_from_qk(self, q, k, mask=None):
        with torch.autocast(q.device.type, enabled=False):
            dtype = compute_dtype(q, k)
            a = self.pair_scores(q.to(dtype), k.to(dtype)) * full_mask(q, k, mask)
            return a / a.sum(-1, keepdim=True).clamp(min=self.eps)

    def kernels(self):
        return Kernels(native=("linear", self.linear_attend))

    def linear_attend(self, q, k, v, mask):
        structure = mask_structure(full_mask(q, k, mask))
        if structure is None:
            return self.reference_attend(q, k, v, mask)
        row_valid, key_valid, causal = structure
        with torch.autocast(q.device.type, enabled=False):
            dtype = compute_dtype(q, k, v)
            qf, kf = self.linear_features(q.to(dtype), k.to(dtype))
            kf = kf * key_valid[..., None].to(dtype)
            vv = v.to(dtype)
            if causal:
                num, den = causal_linear(qf, kf, vv, self.chunk)
            else:
                num = qf @ (kf.transpose(-1, -2) @ vv)
                den = qf @ kf.sum(-2)[..., None]
            out = num / den.clamp(min=self.eps) * row_valid[..., None].to(dtype)
        return out.to(v.dtype)


@register_scorer("cosformer", family="linear", kind="module", normalization="normalized",
                 paper="arXiv:2202.08791")
class CosFormer(LinearScorer):
    """phi = ReLU, theta_i = (pi/2) i / L_max (positions 1..L, L_max = max_len fixed);
    w_ij = phi(q_i)·phi(k_j) cos(theta_i - theta_j) / max(eps, sum_{V_i} ...), eps = 1e-6.
    Linear form: features [phi(x) sin theta, phi(x) cos theta]. Queries align to the last keys."""

    def angles(self, lq: int, lk: int, device, dtype):
        if lk > self.max_len or lq > lk:
            raise ScorerError(
                f"scorer 'cosformer': sequence length {lk} (queries {lq}) exceeds L_max = max_len = "
                f"{self.max_len}; beyond L_max cos(theta_i - theta_j) turns negative and the "
                f"normalizer can vanish. Create the scorer (or model) with a larger max_len."
            )
        pos = torch.arange(1, lk + 1, device=device, dtype=dtype) * (math.pi / 2 / self.max_len)
        return pos[lk - lq:], pos

    def pair_scores(self, q, k):
        tq, tk = self.angles(q.shape[-2], k.shape[-2], q.device, q.dtype)
        return (F.relu(q) @ F.relu(k).transpose(-1, -2)) * torch.cos(tq[:, None] - tk[None, :])

    def linear_features(self, q, k):
        tq, tk = self.angles(q.shape[-2], k.shape[-2], q.device, q.dtype)

        def feats(x, t):
            x = F.relu(x)
            return torch.cat([x * t.sin()[:, None], x * t.cos()[:, None]], dim=-1)

        return feats(q, tq), feats(k, tk)


@register_scorer("linear_elu", family="linear", kind="module", normalization="normalized",
                 paper="arXiv:2006.16236")
class LinearELU(LinearScorer):
    """phi(x) = elu(x) + 1 > 0; w_ij = phi(q_i)·phi(k_j) / max(eps, sum_{V_i} phi(q_i)·phi(k_k))."""

    def pair_scores(self, q, k):
        return (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-1, -2)

    def linear_features(self, q, k):
        return F.elu(q) + 1, F.elu(k) + 1
