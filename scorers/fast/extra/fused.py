"""``fused``: SSA attention as one ``autograd.Function`` over query blocks that see only their
visible keys (scorers/fast/planning.py), for every scorer that declares an ``ssa`` kernel:
logits, t = n sgn(s) log1p(b|s|) (:func:`scorers.ssa.ssa_transform`), ``softmax(t)``, ``P @ v``,
and a backward through :func:`scorers.ssa.ssa_grad` (gradients for q, k, v, n and b), saving
``P``, ``w = 1 + b|s|`` and (when n or b learn) ``t`` of the visible blocks only. Its elementwise kernels run compiled,
or eagerly (``compiled=False``: same numbers, no compilation).
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from ...base import compute_dtype
from ...forms import DEFAULT_BLOCK, FastForm, FastPathError, register_form
from ...ssa import ssa_grad, ssa_transform
from ..planning import NEG_INF, plan_blocks
from ..ssa import ssa_parameters


def _ssa_t_all(s, n, b):
    """t = n sgn(s) log1p(b|s|) and w = 1 + b|s| (one log1p per entry)."""
    t, a = ssa_transform(s, n, b)
    return t, 1.0 + a


def _ssa_p(s, n, b, visible, with_t: bool):
    """softmax over visible keys of t (rows that see no key: zeros), w, and t if ``with_t``; one
    compiled kernel writes P without a pass over t in between."""
    t, w = _ssa_t_all(s, n, b)
    t = torch.where(visible, t, NEG_INF)
    empty = ~visible.any(-1, keepdim=True)
    p = torch.softmax(t.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)
    return (p, w, t) if with_t else (p, w)


def _ssa_p_all(s, n, b, with_t: bool):
    t, w = _ssa_t_all(s, n, b)
    p = torch.softmax(t, dim=-1)
    return (p, w, t) if with_t else (p, w)


def _ssa_p_causal(s, n, b, offset, with_t: bool):
    qi = torch.arange(s.shape[-2], device=s.device)[:, None] + offset
    ki = torch.arange(s.shape[-1], device=s.device)[None, :]
    t, w = _ssa_t_all(s, n, b)
    t = torch.where(ki <= qi, t, NEG_INF)        # every row sees its own key: none is empty
    p = torch.softmax(t, dim=-1)
    return (p, w, t) if with_t else (p, w)


def _ssa_grad_s(p, w, dp, delta, nb):
    """ds from dt = P (dP - delta), dP = dO V^T, delta_i = sum_j dO_ij O_ij."""
    return ssa_grad(p * (dp - delta), w)[0] * nb


def _ssa_grad_all(p, t, w, dp, delta, n, b):
    """ds, and this block's dn and db; masked entries (t = -inf, dt = 0) add nothing."""
    g, dn, db = ssa_grad(p * (dp - delta), w, t=torch.where(t > NEG_INF, t, 0.0),
                         s=(w - 1.0).copysign(t))
    return g * (n * b), dn / n, db * (n / b)


_EAGER_KERNELS = {"all": _ssa_p_all, "mask": _ssa_p, "causal": _ssa_p_causal,
                  "grad_s": _ssa_grad_s, "grad_all": _ssa_grad_all}
_COMPILED_KERNELS: dict[str, Callable] = {}


def _kernel(name: str, compiled: bool) -> Callable:
    if not compiled:
        return _EAGER_KERNELS[name]
    if name not in _COMPILED_KERNELS:
        _COMPILED_KERNELS[name] = torch.compile(_EAGER_KERNELS[name], dynamic=True)
    return _COMPILED_KERNELS[name]


class FusedSSA(torch.autograd.Function):
    """SSA attention over query blocks (see :func:`fused_ssa_attend`). Saves, per block, P and
    w = 1 + b|s|, and t when n or b needs a gradient."""

    @staticmethod
    def forward(ctx, q, k, v, n, b, mask, block_size, compiled):
        bsz, heads, lq, d = q.shape
        lk, dv_ = k.shape[-2], v.shape[-1]
        dtype = compute_dtype(q, k, v)
        plan = plan_blocks(q, k, mask, block_size)
        scale = 1.0 / math.sqrt(d)
        q3 = (q.to(dtype) * scale).reshape(bsz * heads, lq, d)
        k3 = k.to(dtype).reshape(bsz * heads, lk, d)
        v3 = v.to(dtype).reshape(bsz * heads, lk, dv_)
        n_, b_ = n.to(dtype), b.to(dtype)
        param_grads = ctx.needs_input_grad[3] or ctx.needs_input_grad[4]
        out = torch.empty(bsz * heads, lq, dv_, dtype=dtype, device=q.device)
        mask3 = None if plan.mask is None else plan.mask.reshape(bsz * heads, lq, lk)
        kept = []
        for i, j, e in plan.blocks:
            s = torch.bmm(q3[:, i:j], k3[:, :e].transpose(1, 2))
            if plan.causal:
                saved = _kernel("causal", compiled)(s, n_, b_, i, param_grads)
            elif mask3 is None:
                saved = _kernel("all", compiled)(s, n_, b_, param_grads)
            else:
                saved = _kernel("mask", compiled)(s, n_, b_, mask3[:, i:j, :e], param_grads)
            out[:, i:j] = torch.bmm(saved[0], v3[:, :e])   # (bmm with out= a slice loops per batch)
            kept += saved
        ctx.blocks, ctx.compiled, ctx.param_grads = plan.blocks, compiled, param_grads
        ctx.shapes = (q.shape, k.shape, v.shape, q.dtype, k.dtype, v.dtype, scale)
        ctx.save_for_backward(q3, k3, v3, n_, b_, out, *kept)
        return out.view(bsz, heads, lq, dv_).to(v.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q3, k3, v3, n_, b_, out, *kept = ctx.saved_tensors
        q_shape, k_shape, v_shape, q_dtype, k_dtype, v_dtype, scale = ctx.shapes
        per_block = 3 if ctx.param_grads else 2
        do = d_out.to(out.dtype).reshape(out.shape)
        delta = (do * out).sum(-1, keepdim=True)
        nb = n_ * b_
        dq = torch.empty_like(q3)
        dk = torch.zeros_like(k3)
        dv = torch.zeros_like(v3)
        dn = torch.zeros(1, dtype=out.dtype, device=out.device)
        db = torch.zeros(1, dtype=out.dtype, device=out.device)
        for index, (i, j, e) in enumerate(ctx.blocks):
            p, w, *t = kept[per_block * index: per_block * (index + 1)]
            dob = do[:, i:j]
            dv[:, :e] += torch.bmm(p.transpose(1, 2), dob)
            dp = torch.bmm(dob, v3[:, :e].transpose(1, 2))
            if ctx.param_grads:
                ds, dn_b, db_b = _kernel("grad_all", ctx.compiled)(p, t[0], w, dp, delta[:, i:j],
                                                                   n_, b_)
                dn += dn_b
                db += db_b
            else:
                ds = _kernel("grad_s", ctx.compiled)(p, w, dp, delta[:, i:j], nb)
            dq[:, i:j] = torch.bmm(ds, k3[:, :e])
            dk[:, :e] += torch.bmm(ds.transpose(1, 2), q3[:, i:j])
        dq.mul_(scale)
        return (dq.view(q_shape).to(q_dtype), dk.view(k_shape).to(k_dtype),
                dv.view(v_shape).to(v_dtype), dn.to(n_.dtype), db.to(b_.dtype), None, None, None)


def fused_ssa_attend(q, k, v, mask, n, b, *, block_size: int = DEFAULT_BLOCK,
                     compiled: bool = True) -> torch.Tensor:
    """softmax over visible keys of t = n sgn(s) log1p(b|s|), s = q k^T / sqrt(d), times v;
    ``n`` and ``b`` are 1-element tensors. Fully-masked rows give zero output. ``compiled=False``
    runs the same elementwise kernels eagerly (same numbers, slower; no compilation)."""
    if n.numel() != 1 or b.numel() != 1:
        raise FastPathError(f"n and b must be 1-element tensors, got shapes {tuple(n.shape)} and "
                            f"{tuple(b.shape)}")
    return FusedSSA.apply(q, k, v, n, b, mask, block_size, compiled)


@register_form("fused")
class FusedForm(FastForm):
    """:func:`fused_ssa_attend` with the scorer's (n, b). Preparing it compiles its elementwise
    kernels (25-300 s on a 2-core CPU the first time; none with ``compiled=False``)."""

    opt_in = True
    kernel = "ssa"
    compiles = True

    def attend(self, scorer, q, k, v, mask):
        dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        n, b = ssa_parameters(scorer, dtype, q.device)
        return fused_ssa_attend(q, k, v, mask, n, b, block_size=self.block_size,
                                compiled=self.compiled)
