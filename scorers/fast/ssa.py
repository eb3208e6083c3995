"""The SSA family's forms: weights softmax over visible keys of t = n sgn(s) log1p(b|s|), for
every scorer that declares ``fused_ssa_parameters`` (ssa, ssa_gpt2, stablemax). Both forms take
t from :func:`scorers.ssa.ssa_transform`.

- ``fused``: one ``autograd.Function`` over query blocks that see only their visible keys
  (scorers/fast/planning.py): logits, t, ``softmax(t)``, ``P @ v``, and a hand-written backward
  (gradients for q, k, v, n and b), saving ``P``, ``u = 1/(1 + b|s|)`` and (when n or b learn)
  ``t`` of the visible blocks only. Its elementwise kernels run compiled, or eagerly
  (``compiled=False``: same numbers, no compilation).
- ``dense``: one eager ``autograd.Function`` on whole logit rows (query blocks only under a plain
  causal mask), in-place elementwise passes and a hand-written backward; compiles nothing.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from ..base import Scorer, compute_dtype, has_empty_rows
from ..forms import DEFAULT_BLOCK, FastForm, FastPathError, register_form, scorer_class
from ..ssa import ssa_transform
from .planning import (NEG_INF, block_bounds, causal_block_mask, is_plain_causal, module_device,
                       plan_blocks)
from .tiles import RECOMPUTE_FROM_KEYS


def _ssa_t_all(s, n, b):
    """t = n sgn(s) log1p(b|s|) and u = 1 / (1 + b|s|) = dt/ds / (n b) (one log1p per entry)."""
    t, a = ssa_transform(s, n, b)
    return t, 1.0 / (1.0 + a)


def _ssa_p(s, n, b, visible, with_t: bool):
    """softmax over visible keys of t (rows that see no key: zeros), u, and t if ``with_t``; one
    compiled kernel writes P without a pass over t in between."""
    t, u = _ssa_t_all(s, n, b)
    t = torch.where(visible, t, NEG_INF)
    empty = ~visible.any(-1, keepdim=True)
    p = torch.softmax(t.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)
    return (p, u, t) if with_t else (p, u)


def _ssa_p_all(s, n, b, with_t: bool):
    t, u = _ssa_t_all(s, n, b)
    p = torch.softmax(t, dim=-1)
    return (p, u, t) if with_t else (p, u)


def _ssa_p_causal(s, n, b, offset, with_t: bool):
    qi = torch.arange(s.shape[-2], device=s.device)[:, None] + offset
    ki = torch.arange(s.shape[-1], device=s.device)[None, :]
    t, u = _ssa_t_all(s, n, b)
    t = torch.where(ki <= qi, t, NEG_INF)        # every row sees its own key: none is empty
    p = torch.softmax(t, dim=-1)
    return (p, u, t) if with_t else (p, u)


def _ssa_grad_s(p, u, dp, delta, nb):
    """ds = dt n b u with dt = P (dP - delta), dP = dO V^T, delta_i = sum_j dO_ij O_ij."""
    return p * (dp - delta) * nb * u


def _ssa_grad_all(p, t, u, dp, delta, n, b):
    """ds, and this block's dn = sum dt t / n and db = sum dt n sgn(t) (1 - u) / b
    (b|s| u = 1 - u); masked entries (t = -inf, dt = 0) add nothing."""
    dt = p * (dp - delta)
    visible = t > NEG_INF
    dn = torch.where(visible, dt * t, 0.0).sum() / n
    db = torch.where(visible, dt * torch.sign(t) * (1.0 - u), 0.0).sum() * (n / b)
    return dt * (n * b) * u, dn, db


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
    u = 1 / (1 + b|s|), and t when n or b needs a gradient."""

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
            p, u, *t = kept[per_block * index: per_block * (index + 1)]
            dob = do[:, i:j]
            dv[:, :e] += torch.bmm(p.transpose(1, 2), dob)
            dp = torch.bmm(dob, v3[:, :e].transpose(1, 2))
            if ctx.param_grads:
                ds, dn_b, db_b = _kernel("grad_all", ctx.compiled)(p, t[0], u, dp, delta[:, i:j],
                                                                   n_, b_)
                dn += dn_b
                db += db_b
            else:
                ds = _kernel("grad_s", ctx.compiled)(p, u, dp, delta[:, i:j], nb)
            dq[:, i:j] = torch.bmm(ds, k3[:, :e])
            dk[:, :e] += torch.bmm(ds.transpose(1, 2), q3[:, i:j])
        dq.mul_(scale)
        return (dq.view(q_shape).to(q_dtype), dk.view(k_shape).to(k_dtype),
                dv.view(v_shape).to(v_dtype), dn.to(n_.dtype), db.to(b_.dtype), None, None, None)


def ssa_parameters(scorer: Scorer, dtype=torch.float32, device=None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, b) of a scorer that declares ``fused_ssa_parameters``, as 1-element tensors
    (differentiable where learnable), on ``device`` (default: the scorer's)."""
    if not FusedForm.applies_to(scorer):
        raise FastPathError(f"scorer {scorer.name!r} declares no fused SSA form (define "
                            f"fused_ssa_parameters(dtype, device) -> (n, b) on its class)")
    return scorer.fused_ssa_parameters(dtype, module_device(scorer) if device is None else device)


def fused_ssa_attend(q, k, v, mask, n, b, *, block_size: int = DEFAULT_BLOCK,
                     compiled: bool = True) -> torch.Tensor:
    """softmax over visible keys of t = n sgn(s) log1p(b|s|), s = q k^T / sqrt(d), times v;
    ``n`` and ``b`` are 1-element tensors. Fully-masked rows give zero output. ``compiled=False``
    runs the same elementwise kernels eagerly (same numbers, slower; no compilation)."""
    if n.numel() != 1 or b.numel() != 1:
        raise FastPathError(f"n and b must be 1-element tensors, got shapes {tuple(n.shape)} and "
                            f"{tuple(b.shape)}")
    return FusedSSA.apply(q, k, v, n, b, mask, block_size, compiled)


class DenseSSA(torch.autograd.Function):
    """SSA attention on whole logit rows (see :func:`dense_ssa_attend`), eagerly, with in-place
    elementwise passes. b is folded into the queries' scale (s' = b s), and n b / sqrt(d) into
    the (L, d)-sized gradients of q and k, so a training step makes six full-size elementwise
    passes forward (|s'|, log1p, copysign, n, + 1, mask) and three backward (dP - delta, P,
    1 / (1 + |s'|)). Saves, per query block, P, w = 1 + b|s| and t (masked keys at the dtype's
    lowest finite value: exp gives exact zeros and 0 t stays 0 in dn). ``blocks``: ``(i, j, e)``
    query rows ``[i, j)`` seeing keys ``[0, e)``, each with its ``hidden`` mask (or None);
    ``empty_rows``: some query sees no key (its P row is zeroed, so its output and gradients
    are zero)."""

    @staticmethod
    def forward(ctx, q, k, v, n, b, blocks, hidden, empty_rows):
        scale = 1.0 / math.sqrt(q.shape[-1])
        qs = q * (b * scale)
        out = q.new_empty(*q.shape[:-1], v.shape[-1])
        kept = []
        for (i, j, e), h in zip(blocks, hidden):
            s = torch.matmul(qs[..., i:j, :], k[..., :e, :].transpose(-1, -2))
            t, w = ssa_transform(s, n)
            w.add_(1.0)
            del s
            if h is not None:
                t.masked_fill_(h, torch.finfo(t.dtype).min)
            p = torch.softmax(t, dim=-1)
            if h is not None and empty_rows:
                p.masked_fill_(h.all(-1, keepdim=True), 0.0)
            out[..., i:j, :] = torch.matmul(p, v[..., :e, :])
            kept += [p, w, t]
        ctx.scale, ctx.blocks = scale, blocks
        ctx.save_for_backward(q, k, v, n, b, out, *kept)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v, n, b, out, *kept = ctx.saved_tensors
        need_q, need_k, need_v, need_n, need_b = ctx.needs_input_grad[:5]
        delta = (d_out * out).sum(-1, keepdim=True)
        dq, dk, dv = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dn, db = n.new_zeros(()), b.new_zeros(())
        for index, (i, j, e) in enumerate(ctx.blocks):
            p, w, t = kept[3 * index: 3 * index + 3]
            dob = d_out[..., i:j, :]
            if need_v:
                dv[..., :e, :] += torch.matmul(p.transpose(-1, -2), dob)
            g = torch.matmul(dob, v[..., :e, :].transpose(-1, -2))
            g.sub_(delta[..., i:j, :]).mul_(p)                             # dL/dt
            if need_n:                                                     # dt/dn = t / n
                dn += torch.dot(g.reshape(-1), t.reshape(-1))
            g.div_(w)                                                      # dL/ds' / n
            if need_b:                                                     # s' = sgn(t)(w - 1)
                db += torch.dot(g.reshape(-1), (w - 1.0).copysign_(t).reshape(-1))
            if need_q:
                dq[..., i:j, :] = torch.matmul(g, k[..., :e, :])
            if need_k:
                dk[..., :e, :] += torch.matmul(g.transpose(-1, -2), q[..., i:j, :])
        c = n * b * ctx.scale
        return (dq.mul_(c) if need_q else None, dk.mul_(c) if need_k else None,
                dv if need_v else None, (dn / n).reshape(n.shape) if need_n else None,
                (db * n / b).reshape(b.shape) if need_b else None, None, None, None)


def dense_ssa_attend(q, k, v, mask, n, b, *, block_size: int = DEFAULT_BLOCK) -> torch.Tensor:
    """softmax over visible keys of t = n sgn(s) log1p(b|s|), s = q k^T / sqrt(d), times v, as
    one autograd node, eagerly (no compilation); ``n`` and ``b`` are 1-element tensors. A plain
    causal mask is cut into query blocks of ``block_size`` rows that see only their key prefix;
    other masks run as one block. Queries that see no key give zero output."""
    if n.numel() != 1 or b.numel() != 1:
        raise FastPathError(f"n and b must be 1-element tensors, got shapes {tuple(n.shape)} and "
                            f"{tuple(b.shape)}")
    lq, lk = q.shape[-2], k.shape[-2]
    if is_plain_causal(mask, lq, lk):
        blocks = tuple((i, j, j) for i, j in block_bounds(lq, block_size))
        hidden = tuple(~causal_block_mask(j - i, e, i, q.device) for i, j, e in blocks)
        empty = False
    else:
        if mask is not None and mask.dtype != torch.bool:
            raise TypeError(f"attention mask must be boolean (True = visible), got {mask.dtype}")
        blocks, hidden = ((0, lq, lk),), (None if mask is None else ~mask,)
        empty = mask is not None and has_empty_rows(mask)
    dtype = compute_dtype(q, k, v)
    out = DenseSSA.apply(q.to(dtype), k.to(dtype), v.to(dtype), n.to(dtype), b.to(dtype),
                         blocks, hidden, empty)
    return out.to(v.dtype)


def declares_ssa(scorer) -> bool:
    return scorer_class(scorer).fused_ssa_parameters is not Scorer.fused_ssa_parameters


@register_form("fused")
class FusedForm(FastForm):
    """:func:`fused_ssa_attend` with the scorer's (n, b). Preparing it compiles its elementwise
    kernels (25-300 s on a 2-core CPU the first time; none with ``compiled=False``)."""

    compiles = True

    @classmethod
    def applies_to(cls, scorer) -> bool:
        return declares_ssa(scorer)

    def attend(self, scorer, q, k, v, mask):
        dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        n, b = ssa_parameters(scorer, dtype, q.device)
        return fused_ssa_attend(q, k, v, mask, n, b, block_size=self.block_size,
                                compiled=self.compiled)


@register_form("dense")
class DenseForm(FastForm):
    """:func:`dense_ssa_attend` with the scorer's (n, b); compiles nothing. ``auto`` on a CPU below
    ``RECOMPUTE_FROM_KEYS`` keys, where the blocked form keeps the weights too (same memory):
    forward+backward, causal, fp32, 2 threads, ratio to SDPA, dense against blocked, ssa 1.20 /
    0.93 against 1.35 / 0.95 and stablemax 0.96 / 0.82 against 1.17 / 0.95 at (8, 8, 128, 32) /
    (4, 8, 512, 64); from there ``blocked`` (its memory 1.05x SDPA's at 2,048 keys, dense's
    5.8x)."""

    auto = ("cpu",)
    auto_below = {"cpu": RECOMPUTE_FROM_KEYS["cpu"]}

    @classmethod
    def applies_to(cls, scorer) -> bool:
        return declares_ssa(scorer)

    def attend(self, scorer, q, k, v, mask):
        n, b = ssa_parameters(scorer, compute_dtype(q, k, v), q.device)
        return dense_ssa_attend(q, k, v, mask, n, b, block_size=self.block_size)
