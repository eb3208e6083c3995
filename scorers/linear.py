"""Linear-attention scorers (module-kind): w_ij = phi(q_i)·phi(k_j) / sum_{k in V_i} phi(q_i)·phi(k_k).

``weights_from_qk`` is the dense quadratic reference; ``linear_attend`` the linear form, for masks
that are rows x keys [x causal] (others use the quadratic form). With the features phi' of
``feature`` (zero on padded keys) and v'_j = [v_j, 1]:

    [num_i, den_i] = phi'(q_i)^T S_i,   S_i = sum_{j in V_i} phi'(k_j) v'_j^T   (F x (Dv + 1)),
    out_i = num_i / max(eps, den_i)   (0 on padded rows).

:class:`LinearAttention` goes through the rows in chunks and keeps q, k, v, the output and den for
the backward: causal, a chunk's own keys by a lower-triangular chunk x chunk product and the
earlier ones through the state S carried from chunk to chunk; otherwise one S of every key.
Backward, with g'_i = [dout_i, -(dout_i·out_i) [den_i >= eps]] / max(eps, den_i) (0 on padded
rows) and R_j = sum_{i: j in V_i} phi'(q_i) g'_i^T:

    dphi'(q_i) = S_i g'_i,   dphi'(k_j) = R_j v'_j,   dv_j = (R_j^T phi'(k_j))[:Dv],

causal, in one pass through the chunks from the last one: within a chunk by the transposed
products, the earlier keys' S as the forward's last S less this chunk's and the later ones', the
later rows' R carried. The features are made again per chunk and differentiated by autograd.
Memory beyond the output and the gradients: O(chunk^2 + chunk F + F Dv) per (batch, head).
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
    """(row_valid, key_valid, causal) when ``mask`` = rows x keys [x lower triangle], else None;
    read on the mask as given, not broadcast (row_valid and key_valid broadcast as its dims)."""
    row_valid = mask.any(-1)
    key_valid = mask.any(-2)
    separable = row_valid[..., :, None] & key_valid[..., None, :]
    if torch.equal(mask, separable):
        return row_valid, key_valid, False
    lq, lk = mask.shape[-2:]
    if lq == lk and torch.equal(mask, separable.tril_()):
        return row_valid, key_valid, True
    return None


def valid_rows(valid: torch.Tensor | None, length: int, dtype) -> torch.Tensor | None:
    """A (..., length, 1) 0/1 multiplier from a boolean (..., length or 1), None when all 1."""
    if valid is None or bool(valid.all()):
        return None
    valid = valid.to(dtype)[..., None]
    return valid.expand(*valid.shape[:-2], length, 1)


def spans(length: int, chunk: int) -> list[tuple[int, int]]:
    """[a, b) of at most ``chunk`` rows from 0 to ``length`` (one empty span when it is 0)."""
    return [(a, min(a + chunk, length)) for a in range(0, max(length, 1), chunk)]


def rows_of(t: torch.Tensor | None, a: int, b: int) -> torch.Tensor | None:
    return None if t is None else t[..., a:b, :]


def phi(feature, x, start: int, valid):
    """feature(x, start), zero on the rows where ``valid`` (0/1, or None: all) is 0."""
    f = feature(x, start)
    return f if valid is None else f * valid


def phi_and_grad(feature, x, start: int, valid):
    """phi(...) detached, and the function taking its gradient to x's gradient."""
    with torch.enable_grad():
        x = x.detach().requires_grad_()
        f = phi(feature, x, start, valid)
    return f.detach(), lambda df: torch.autograd.grad(f, x, df)[0]


def with_ones(v: torch.Tensor) -> torch.Tensor:
    """v' = [v, 1]: one product gives the numerators and the denominator."""
    return F.pad(v, (0, 1), value=1.0)


def add_outer(state, a, b):
    """state + a^T b (a^T b when state is None)."""
    outer = a.transpose(-1, -2) @ b
    return outer if state is None else state.add_(outer)


class LinearAttention(torch.autograd.Function):
    """The linear form of the module doc. ``feature(x, start)``: phi' of the rows x at key
    positions start, start + 1, ...; ``rows``, ``keys``: 0/1 multipliers (..., Lq, 1) and
    (..., Lk, 1), or None (all valid). Causal needs Lq = Lk; otherwise queries align to the last
    keys."""

    @staticmethod
    def forward(ctx, q, k, v, rows, keys, feature, eps: float, chunk: int, causal: bool):
        lq, lk = q.shape[-2], k.shape[-2]
        out = v.new_empty(*q.shape[:-1], v.shape[-1])
        den = q.new_empty(*q.shape[:-1], 1)
        state = None
        if not causal:
            for a, b in spans(lk, chunk):
                state = add_outer(state, phi(feature, k[..., a:b, :], a, rows_of(keys, a, b)),
                                  with_ones(v[..., a:b, :]))
        for a, b in spans(lq, chunk):
            qf = phi(feature, q[..., a:b, :], lk - lq + a, None)
            num = None if state is None else qf @ state
            if causal:
                kf = phi(feature, k[..., a:b, :], a, rows_of(keys, a, b))
                vf = with_ones(v[..., a:b, :])
                own = (qf @ kf.transpose(-1, -2)).tril_() @ vf
                num = own if num is None else num.add_(own)
                state = add_outer(state, kf, vf)
            den[..., a:b, :] = num[..., -1:]
            out[..., a:b, :] = num[..., :-1] / num[..., -1:].clamp(min=eps)
            if rows is not None:
                out[..., a:b, :] *= rows[..., a:b, :]
        ctx.feature, ctx.eps, ctx.chunk, ctx.causal = feature, eps, chunk, causal
        ctx.save_for_backward(q, k, v, rows, keys, out, den, state)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v, rows, keys, out, den, state = ctx.saved_tensors
        feature, eps, chunk = ctx.feature, ctx.eps, ctx.chunk
        lq, lk = q.shape[-2], k.shape[-2]
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

        def row_grads(a, b):
            """g' of rows [a, b)."""
            d = den[..., a:b, :]
            g = d_out[..., a:b, :] / d.clamp(min=eps)
            if rows is not None:
                g = g * rows[..., a:b, :]
            g_den = (g * out[..., a:b, :]).sum(-1, keepdim=True).neg_().mul_(d >= eps)
            return torch.cat([g, g_den], dim=-1)

        carried = None
        if ctx.causal:
            for a, b in reversed(spans(lq, chunk)):
                qf, q_grad = phi_and_grad(feature, q[..., a:b, :], a, None)
                kf, k_grad = phi_and_grad(feature, k[..., a:b, :], a, rows_of(keys, a, b))
                vf, g = with_ones(v[..., a:b, :]), row_grads(a, b)
                dot = (g @ vf.transpose(-1, -2)).tril_()             # g'_i·v'_j in the chunk
                d_qf = dot @ kf
                if a > 0:
                    # S before the chunk. A downdate rounds worse than a forward pass would (fp32,
                    # 8192 keys: dq 3e-5 relative in the first chunks against 3e-6; dk 2e-5 both
                    # ways), where a second pass over the chunks cost 15-25% more time.
                    state = state - kf.transpose(-1, -2) @ vf
                    d_qf += g @ state.transpose(-1, -2)
                d_kf = dot.transpose(-1, -2) @ qf
                dv_c = (qf @ kf.transpose(-1, -2)).tril_().transpose(-1, -2) @ g[..., :-1]
                if carried is not None:
                    d_kf += vf @ carried.transpose(-1, -2)
                    dv_c += kf @ carried[..., :-1]
                carried = add_outer(carried, qf, g)
                dq[..., a:b, :], dk[..., a:b, :], dv[..., a:b, :] = q_grad(d_qf), k_grad(d_kf), dv_c
            return dq, dk, dv, None, None, None, None, None, None
        for a, b in spans(lq, chunk):
            qf, q_grad = phi_and_grad(feature, q[..., a:b, :], lk - lq + a, None)
            g = row_grads(a, b)
            dq[..., a:b, :] = q_grad(g @ state.transpose(-1, -2))
            carried = add_outer(carried, qf, g)
        for a, b in spans(lk, chunk):
            kf, k_grad = phi_and_grad(feature, k[..., a:b, :], a, rows_of(keys, a, b))
            dk[..., a:b, :] = k_grad(with_ones(v[..., a:b, :]) @ carried.transpose(-1, -2))
            dv[..., a:b, :] = kf @ carried[..., :-1]
        return dq, dk, dv, None, None, None, None, None, None


class LinearScorer(ModuleScorer):
    """Shared quadratic reference and linear form; subclasses define the feature map."""

    # Rows per chunk. Forward + backward, causal, fp32, one thread, CPU clock, median of 7, ratio
    # to SDPA at (8, 8, 128, 32) / (4, 8, 512, 64) / (1, 8, 2048, 64), chunks of 32 / 64 / 128 /
    # 256: cosformer 1.72 / 1.74 / 2.15 / 2.04, 0.79 / 0.75 / 0.88 / 1.17, 0.26 / 0.23 / 0.23 /
    # 0.30; linear_elu 1.32 / 1.26 / 1.67 / 1.56, 0.54 / 0.51 / 0.61 / 0.84, 0.18 / 0.15 / 0.16 /
    # 0.21 (a chunk's masked half grows with it; smaller ones take more steps).
    chunk = 64

    def __init__(self, *, eps: float = 1e-6, **context):
        super().__init__(**context)
        self.eps = positive("eps", eps, self.name)

    def feature(self, x, start: int):
        """phi'(x) of rows x at key positions start, start + 1, ... (0-based), such that
        phi'(q_i)·phi'(k_j) is the unnormalized weight."""
        raise NotImplementedError

    def check_lengths(self, lq: int, lk: int) -> None:
        """Raise ScorerError where the scorer is not defined for these lengths."""

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
        if mask is not None and mask.dtype != torch.bool:
            raise TypeError(f"attention mask must be boolean (True = visible), got {mask.dtype}")
        structure = (None, None, False) if mask is None else mask_structure(torch.atleast_2d(mask))
        if structure is None:
            return self.reference_attend(q, k, v, mask)
        row_valid, key_valid, causal = structure
        lq, lk = q.shape[-2], k.shape[-2]
        self.check_lengths(lq, lk)
        with torch.autocast(q.device.type, enabled=False):
            dtype = compute_dtype(q, k, v)
            out = LinearAttention.apply(q.to(dtype), k.to(dtype), v.to(dtype),
                                        valid_rows(row_valid, lq, dtype),
                                        valid_rows(key_valid, lk, dtype),
                                        self.feature, self.eps, self.chunk, causal)
        return out.to(v.dtype)


@register_scorer("cosformer", family="linear", kind="module", normalization="normalized",
                 paper="arXiv:2202.08791")
class CosFormer(LinearScorer):
    """phi = ReLU, theta_i = (pi/2) i / L_max (positions 1..L, L_max = max_len fixed);
    w_ij = phi(q_i)·phi(k_j) cos(theta_i - theta_j) / max(eps, sum_{V_i} ...), eps = 1e-6.
    Linear form: features [phi(x) sin theta, phi(x) cos theta]. Queries align to the last keys."""

    def check_lengths(self, lq: int, lk: int) -> None:
        if lk > self.max_len or lq > lk:
            raise ScorerError(
                f"scorer 'cosformer': sequence length {lk} (queries {lq}) exceeds L_max = max_len = "
                f"{self.max_len}; beyond L_max cos(theta_i - theta_j) turns negative and the "
                f"normalizer can vanish. Create the scorer (or model) with a larger max_len."
            )

    def theta(self, start: int, stop: int, device, dtype):
        """theta of positions start + 1 .. stop (0-based rows start .. stop - 1)."""
        pos = torch.arange(start + 1, stop + 1, device=device, dtype=dtype)
        return pos * (math.pi / 2 / self.max_len)

    def pair_scores(self, q, k):
        lq, lk = q.shape[-2], k.shape[-2]
        self.check_lengths(lq, lk)
        tq, tk = self.theta(lk - lq, lk, q.device, q.dtype), self.theta(0, lk, q.device, q.dtype)
        return (F.relu(q) @ F.relu(k).transpose(-1, -2)) * torch.cos(tq[:, None] - tk[None, :])

    def feature(self, x, start):
        t = self.theta(start, start + x.shape[-2], x.device, x.dtype)
        trig = torch.stack([t.sin(), t.cos()], dim=-1)[:, :, None]        # (rows, 2, 1)
        return (F.relu(x)[..., None, :] * trig).flatten(-2)


@register_scorer("linear_elu", family="linear", kind="module", normalization="normalized",
                 paper="arXiv:2006.16236")
class LinearELU(LinearScorer):
    """phi(x) = elu(x) + 1 > 0; w_ij = phi(q_i)·phi(k_j) / max(eps, sum_{V_i} phi(q_i)·phi(k_k))."""

    def pair_scores(self, q, k):
        return (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-1, -2)

    def feature(self, x, start):
        return F.elu(x) + 1
