"""``dense``: the SSA family's whole-matrix kernel, for every scorer that declares an ``ssa``
kernel (ssa, ssa_gpt2, stablemax): softmax over visible keys of t = n sgn(s) log1p(b|s|), t from
:func:`scorers.ssa.ssa_transform`, as one eager ``autograd.Function`` on whole logit rows (query
blocks only under a plain causal mask), in-place elementwise passes and a hand-written backward;
compiles nothing. The compiled blocked kernel ``fused`` is an opt-in form
(scorers/fast/extra/fused.py).
"""
from __future__ import annotations

import math

import torch

from ..base import Scorer, compute_dtype, has_empty_rows
from ..forms import DEFAULT_BLOCK, LOG2E, FastForm, FastPathError, register_form
from ..ssa import ssa_grad, ssa_transform
from .planning import block_bounds, causal_block_mask, is_plain_causal, module_device
from .tiles import MASK_ALIGN, Hidden, drain, hide


def ssa_parameters(scorer: Scorer, dtype=torch.float32, device=None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, b) of a scorer that declares an ``ssa`` kernel, as 1-element tensors (differentiable
    where learnable), on ``device`` (default: the scorer's)."""
    parameters = scorer.kernels().ssa
    if parameters is None:
        raise FastPathError(f"scorer {scorer.name!r} declares no SSA kernel (return "
                            f"Kernels(ssa=...) from its kernels(): (dtype, device) -> (n, b))")
    return parameters(dtype, module_device(scorer) if device is None else device)


class DenseSSA(torch.autograd.Function):
    """SSA attention on whole logit rows (see :func:`dense_ssa_attend`), eagerly, with in-place
    elementwise passes. b is folded into the queries' scale (s' = b s), and n b / sqrt(d) into
    the (L, d)-sized gradients of q and k; the softmax runs in base 2 (exp2 is several times
    faster than exp on a CPU), the scale n log2 e riding on its shift, and divides the output
    rows, not the weights. Keeps, per query block, u = sgn(s') log1p(|s'|) = t / n alone (masked
    keys at the dtype's lowest finite value: exp2 gives exact zeros, 0 u stays 0 in dn) and each
    row's lse log2 e: the backward makes P = 2^{n u log2 e - lse log2 e} and 1 + |s'| = e^{|u|}
    again by two passes of exp2 (cheaper than the logits again by a matmul), and s' from them
    where b learns. ``blocks``: ``(i, j, e)`` query rows ``[i, j)`` seeing keys ``[0, e)``, each
    with its :class:`Hidden` entries (or None); ``empty_rows``: some query sees no key (its
    output and gradients are zero)."""

    @staticmethod
    def forward(ctx, q, k, v, n, b, blocks, hidden, empty_rows):
        scale = 1.0 / math.sqrt(q.shape[-1])
        qs = q * (b * scale)
        n2 = float(n) * LOG2E
        out = q.new_empty(*q.shape[:-1], v.shape[-1])
        lse2 = q.new_empty(*q.shape[:-1], 1)
        lowest = torch.finfo(q.dtype).min
        kept = []
        for (i, j, e), h in zip(blocks, hidden):
            s = torch.matmul(qs[..., i:j, :], k[..., :e, :].transpose(-1, -2))
            u = hide(ssa_transform(s)[0], h, lowest)
            del s
            m = u.amax(-1, keepdim=True).mul_(n2)
            m.masked_fill_(m == -math.inf, 0.0)                   # a row that sees no key
            p = torch.add(-m, u, alpha=n2).exp2_()
            total = p.sum(-1, keepdim=True)
            out[..., i:j, :] = torch.matmul(p, v[..., :e, :]).div_(total)
            del p
            block_lse2 = total.log2_().add_(m)
            if h is not None and empty_rows:
                none = h.tile.all(-1, keepdim=True)
                out[..., i:j, :].masked_fill_(none, 0.0)
                block_lse2.masked_fill_(none, math.inf)
            lse2[..., i:j, :] = block_lse2
            kept.append(u)
        ctx.scale, ctx.n2, ctx.blocks, ctx.kept = scale, n2, blocks, kept
        ctx.save_for_backward(q, k, v, n, b, out, lse2)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v, n, b, out, lse2 = ctx.saved_tensors
        kept, ctx.kept = drain(ctx.kept), None
        need_q, need_k, need_v, need_n, need_b = ctx.needs_input_grad[:5]
        delta = (d_out * out).sum(-1, keepdim=True)
        dq, dk, dv = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dn, db = n.new_zeros(()), b.new_zeros(())
        top = math.log2(torch.finfo(q.dtype).max) - 1
        for i, j, e in ctx.blocks:
            u = next(kept)
            dob = d_out[..., i:j, :]
            p = torch.add(-lse2[..., i:j, :], u, alpha=ctx.n2).exp2_()
            if need_v:
                dv[..., :e, :] += torch.matmul(p.transpose(-1, -2), dob)
            g = torch.matmul(dob, v[..., :e, :].transpose(-1, -2))
            g.sub_(delta[..., i:j, :]).mul_(p)                             # dL/dt
            del p
            w = (u.abs() if need_n or need_b else u.abs_()).mul_(LOG2E)    # log2(1 + |s'|)
            if need_b:                       # finite where masked, where g = 0, for g s' there
                w.clamp_(max=top)
            w.exp2_()                                                       # 1 + |s'|
            s = (w - 1.0).copysign_(u) if need_b else None
            g, dn_b, db_b = ssa_grad(g, w, t=u if need_n else None, s=s, out=g)  # g: dL/ds' / n
            del u, w, s
            if need_n:
                dn += dn_b
            if need_b:
                db += db_b
            if need_q:
                dq[..., i:j, :] = torch.matmul(g, k[..., :e, :])
            if need_k:
                dk[..., :e, :] += torch.matmul(g.transpose(-1, -2), q[..., i:j, :])
        c = n * b * ctx.scale
        return (dq.mul_(c) if need_q else None, dk.mul_(c) if need_k else None,
                dv if need_v else None, dn.reshape(n.shape) if need_n else None,
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
        starts = [i // MASK_ALIGN * MASK_ALIGN for i, _, _ in blocks]   # keys before i: seen
        hidden = tuple(Hidden(c, ~causal_block_mask(j - i, e - c, i - c, q.device))
                       for (i, j, e), c in zip(blocks, starts))
        empty = False
    else:
        if mask is not None and mask.dtype != torch.bool:
            raise TypeError(f"attention mask must be boolean (True = visible), got {mask.dtype}")
        blocks, hidden = ((0, lq, lk),), (None if mask is None else Hidden(0, ~mask),)
        empty = mask is not None and has_empty_rows(mask)
    dtype = compute_dtype(q, k, v)
    out = DenseSSA.apply(q.to(dtype), k.to(dtype), v.to(dtype), n.to(dtype), b.to(dtype),
                         blocks, hidden, empty)
    return out.to(v.dtype)


@register_form("dense")
class DenseForm(FastForm):
    """:func:`dense_ssa_attend` with the scorer's (n, b); compiles nothing. ``auto`` on a CPU below
    ``RECOMPUTE_FROM_KEYS`` keys: forward+backward, causal, fp32, 2 threads, ratio to SDPA, dense
    against blocked, ssa 1.20 / 0.93 against 1.35 / 0.95 and stablemax 0.96 / 0.82 against
    1.17 / 0.95 at (8, 8, 128, 32) / (4, 8, 512, 64); from there ``blocked`` (its memory 1.05x
    SDPA's at 2,048 keys). Keeping u alone, one thread, CPU clock, 11 rounds on a loaded 2-core
    host, at (4, 8, 512, 64): ssa 0.90x SDPA's time (0.91 keeping P, 1 + |s'| and t, in the
    same sitting), ssa_gpt2 0.91 (0.92), stablemax 0.85 (0.85), at 1.72-1.74x SDPA's memory
    (3.66x)."""

    kernel = "ssa"

    def attend(self, scorer, q, k, v, mask):
        n, b = ssa_parameters(scorer, compute_dtype(q, k, v), q.device)
        return dense_ssa_attend(q, k, v, mask, n, b, block_size=self.block_size)
