"""Fast paths of the registry's scorers: ``torch.compile``, a fused log-domain SSA kernel for
CPUs, partial-sort and sort-free forms of sparsemax and 1.5-entmax, and FlexAttention for GPUs.
Each equals the scorer's ``reference_attend`` (tests/test_fast_*.py).

    from scorers.fast import accelerate
    accelerate(model, mode="auto")       # -> {"ssa": "dense", "softmax": "sdpa"}

Each scorer declares the forms it has beside its formula (scorers/forms.py, ``fast_forms()``) and
this module runs them; nothing here is keyed by scorer name. :func:`accelerate` sets, per scorer
instance, the form its ``attend`` runs (``fast_form``); parameters, buffers, state dict and class
stay as they are. The forms:

- ``compile``: ``torch.compile`` (dynamic shapes) of the scorer's own ``weights`` + ``P @ v``, run
  on query blocks of ``block_size`` rows that only see the keys some row of the block can see (so a
  causal mask costs about half the dense work). Scorers with ``compilable = True`` (logits-kind).
- ``fused``: scorers declaring ``fused_ssa_parameters`` (ssa, ssa_gpt2, stablemax), as one
  ``autograd.Function`` over the same query blocks: logits, ``t = n sgn(s) log1p(b|s|)``,
  ``softmax(t)``, ``P @ v``, and a hand-written backward (gradients for q, k, v, n and b), saving
  ``P``, ``u = 1/(1 + b|s|)`` and (when n or b learn) ``t`` of the visible blocks only. Its
  elementwise kernels run compiled, or eagerly (``compiled=False``: same numbers, no compilation).
- ``dense``: the same scorers as one eager ``autograd.Function`` on whole logit rows (query
  blocks only under a plain causal mask), in-place elementwise passes and a hand-written backward;
  compiles nothing.
- ``topk``: scorers declaring ``topk_normalizer`` (sparsemax, entmax15), on the same query blocks,
  through the ``entmax`` package's partial sort (``k=``, exact: rows whose support reaches k are
  solved again with 2k).
- ``pivot``: scorers declaring ``pivot_normalizer`` (sparsemax, entmax15): the dense reference with
  the sort-free threshold of scorers/pivot.py in place of the package's sort (exact; no
  compilation).
- ``blocked``: scorers declaring ``blocked_spec`` (the SSA family, temperature, ssmax, the sinks,
  sigmoid, relu, relu2, sparsemax, entmax15): scorers/blocked.py and scorers/blocked_sparse.py,
  tiles of the logits with per-row statistics and recompute in the backward (memory linear in L;
  below ``RECOMPUTE_FROM_KEYS`` keys the weights are kept instead); compiles nothing.
- ``flex``: FlexAttention with the score_mod of the scorer's ``flex_spec``; scorers that are not a
  softmax of transformed logits (sigmoid, softmax_plus_one, learned_sink) rescale the output with
  the log-sum-exp. FlexAttention has no backward on CPU (torch 2.13): there it serves inference.

``auto`` picks per device what trained fastest in ``scorebench bench train`` (forward, backward
and optimizer step, compilation included): see :data:`AUTO_FORMS`.
"""
from __future__ import annotations

import math
import types
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from .base import Scorer, compute_dtype, has_empty_rows
from .forms import FORMS, FlexSpec  # noqa: F401  (FlexSpec: what flex_spec returns)

MODES = ("auto", "off", *FORMS)
DEFAULT_BLOCK = 64
NEG_INF = float("-inf")


class FastPathError(RuntimeError):
    """A fast path cannot run here; the message names the path and what to use instead."""


# ---------------------------------------------------------------------------------------------
# Query blocks and the keys they see

@dataclass(frozen=True)
class BlockPlan:
    """How a (Lq, Lk) attention is cut into query blocks ``[i, j)`` that see keys ``[0, e)``.

    ``causal``: the mask is the plain lower triangle (built from indices inside the kernels).
    ``mask``: the boolean mask expanded to (B, H, Lq, Lk), or None (no mask, or causal).
    ``empty_rows``: some query sees no key (the fully-masked-row guard must run).
    """

    blocks: tuple[tuple[int, int, int], ...]
    causal: bool
    mask: torch.Tensor | None
    empty_rows: bool


def is_plain_causal(mask: torch.Tensor | None, lq: int, lk: int) -> bool:
    """True when ``mask`` is the (…, L, L) lower triangle broadcast over batch and heads."""
    if mask is None or lq != lk or mask.shape[-2:] != (lq, lk) or mask.numel() != lq * lk:
        return False
    tril = torch.ones(lq, lk, dtype=torch.bool, device=mask.device).tril()
    return bool(torch.equal(mask.reshape(lq, lk), tril))


def plan_blocks(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None,
                block: int = DEFAULT_BLOCK, *, aligned_last: bool = False) -> BlockPlan:
    """Query blocks of ``block`` rows, each truncated to the keys some of its rows can see.

    Masked keys get exactly zero weight in every scorer, so dropping keys that no row of a block
    sees changes nothing. ``aligned_last``: the scorer aligns queries to the last keys (causal-only
    scorers), so a block ``[i, j)`` keeps ``j + Lk - Lq`` keys.
    """
    if block < 1:
        raise FastPathError(f"block_size must be >= 1, got {block}")
    b, h, lq = q.shape[:3]
    lk = k.shape[-2]
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"attention mask must be boolean (True = visible), got {mask.dtype}")
    causal = is_plain_causal(mask, lq, lk)
    if mask is None:
        return BlockPlan(((0, lq, lk),), False, None, False)
    full = mask.expand(b, h, lq, lk)
    if causal:
        ends = list(range(1, lq + 1))
        empty = False
    else:
        seen = full.any(0).any(0)                                             # (Lq, Lk)
        idx = torch.arange(1, lk + 1, device=mask.device)
        ends = (seen * idx).amax(-1).tolist()                                # last seen key + 1
        empty = not bool(full.any(-1).all())
    blocks = []
    for i, j in block_bounds(lq, block):
        e = max(ends[i:j])
        if aligned_last:
            e = max(e, j + lk - lq)
        blocks.append((i, j, min(max(e, 1), lk)))
    return BlockPlan(tuple(blocks), causal, None if causal else full, empty)


def block_bounds(length: int, block: int) -> list[tuple[int, int]]:
    """``[i, j)`` query blocks of ``block`` rows; a last block of one row joins the one before
    (compiled kernels specialize on size-1 dimensions, so this saves a recompilation)."""
    bounds = [(i, min(i + block, length)) for i in range(0, length, block)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] == 1:
        bounds[-2:] = [(bounds[-2][0], length)]
    return bounds


def causal_block_mask(rows: int, keys: int, offset: int, device) -> torch.Tensor:
    """(1, 1, rows, keys) mask of query rows ``offset..offset+rows`` under the lower triangle."""
    qi = torch.arange(rows, device=device)[:, None] + offset
    ki = torch.arange(keys, device=device)[None, :]
    return (ki <= qi)[None, None]


# ---------------------------------------------------------------------------------------------
# compile: torch.compile of the scorer's own weights, per query block

def _block_reference(scorer, q, k, v, mask):
    return scorer.reference_attend(q, k, v, mask)


def _block_reference_causal(scorer, q, k, v, offset):
    return scorer.reference_attend(q, k, v, causal_block_mask(q.shape[-2], k.shape[-2], offset,
                                                              q.device))


_COMPILED: dict[tuple[type, str], Callable] = {}


def _compiled_for(cls: type, kind: str) -> Callable:
    """One compiled function per (scorer class, mask kind). Dynamo counts recompilations per code
    object, so each class gets its own copy of the code: classes never evict each other."""
    key = (cls, kind)
    if key not in _COMPILED:
        fn = _block_reference_causal if kind == "causal" else _block_reference
        name = f"{fn.__name__}_{cls.__name__}"
        code = fn.__code__.replace(co_name=name)
        copy = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
        _COMPILED[key] = torch.compile(copy, dynamic=True)
    return _COMPILED[key]


def compiled_attend(scorer: Scorer, q, k, v, mask=None, *, block_size: int = DEFAULT_BLOCK,
                    compiled: bool = True):
    """``scorer.reference_attend`` under ``torch.compile``, on query blocks with key truncation
    (``compiled=False``: the same blocks, eagerly)."""
    if not scorer.compilable:
        raise FastPathError(f"the compile path covers scorers with compilable = True (the "
                            f"logits-kind ones); {scorer.name!r} is {scorer.kind}-kind and keeps "
                            f"its own attend")
    plan = plan_blocks(q, k, mask, block_size, aligned_last=scorer.causal_only)
    base = type(scorer)
    outs = []
    for i, j, e in plan.blocks:
        qb, kb, vb = q[..., i:j, :], k[..., :e, :], v[..., :e, :]
        if plan.causal:
            fn = _compiled_for(base, "causal") if compiled else _block_reference_causal
            outs.append(fn(scorer, qb, kb, vb, i))
        else:
            mb = None if plan.mask is None else plan.mask[..., i:j, :e]
            fn = _compiled_for(base, "mask") if compiled else _block_reference
            outs.append(fn(scorer, qb, kb, vb, mb))
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=-2)


# ---------------------------------------------------------------------------------------------
# fused: the SSA family, t = n sgn(s) log1p(b|s|), w = softmax over visible keys of t

def _ssa_t_all(s, n, b):
    """t = n sgn(s) log1p(b|s|) and u = 1 / (1 + b|s|) = dt/ds / (n b) (one log1p per entry)."""
    a = b * s.abs()
    return n * torch.sign(s) * torch.log1p(a), 1.0 / (1.0 + a)


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
    if "fused" not in scorer.fast_forms():
        raise FastPathError(f"scorer {scorer.name!r} declares no fused SSA form (define "
                            f"fused_ssa_parameters(dtype, device) -> (n, b) on its class)")
    return scorer.fused_ssa_parameters(dtype, _device_of(scorer) if device is None else device)


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
            w = s.abs()
            t = torch.log1p(w).copysign_(s).mul_(n)
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


# ---------------------------------------------------------------------------------------------
# topk: sparsemax and 1.5-entmax through the entmax package's partial sort

DEFAULT_TOPK = 32


def topk_weights(fn: Callable, s: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """A partial-sort normalizer ``fn`` (``entmax.sparsemax``, ``entmax.entmax15``) over visible
    keys with ``k=``: the package partial-sorts the k largest logits and, for rows whose support
    reaches k, solves again with 2k (exact). Masking and the fully-masked-row guard are those of
    ``LogitsScorer``."""
    row_valid = mask.any(-1, keepdim=True)
    safe = s.float().masked_fill(~row_valid, 0.0).masked_fill(~(mask | ~row_valid), NEG_INF)
    w = fn(safe, dim=-1, k=k) if k < s.shape[-1] else fn(safe, dim=-1)
    return w.masked_fill(~mask, 0.0)


def topk_attend(scorer: Scorer, q, k, v, mask=None, *, block_size: int = DEFAULT_BLOCK,
                top: int = DEFAULT_TOPK) -> torch.Tensor:
    """The scorer's ``topk_normalizer`` on query blocks with key truncation and a partial sort."""
    if scorer.topk_normalizer is None:
        raise FastPathError(f"the topk path covers scorers that declare a topk_normalizer "
                            f"(sparsemax, entmax15), not {scorer.name!r}")
    plan = plan_blocks(q, k, mask, block_size)
    outs = []
    for i, j, e in plan.blocks:
        qb, kb, vb = q[..., i:j, :], k[..., :e, :], v[..., :e, :]
        if plan.causal:
            mb = causal_block_mask(j - i, e, i, q.device)
        elif plan.mask is None:
            mb = torch.ones(1, 1, j - i, e, dtype=torch.bool, device=q.device)
        else:
            mb = plan.mask[..., i:j, :e]
        with torch.autocast(q.device.type, enabled=False):
            s = scorer.logits(qb, kb)
            w = topk_weights(scorer.topk_normalizer, s, mb.expand(s.shape), top)
        outs.append((w @ vb.to(w.dtype)).to(v.dtype))
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=-2)


def pivot_attend(scorer: Scorer, q, k, v, mask=None) -> torch.Tensor:
    """The reference attention with the scorer's ``pivot_normalizer`` as its weights."""
    fn = scorer.pivot_normalizer
    if fn is None:
        raise FastPathError(f"the pivot path covers scorers that declare a pivot_normalizer "
                            f"(sparsemax, entmax15), not {scorer.name!r}")

    def weights(s, m):
        return fn(s.float().masked_fill(~m, NEG_INF), dim=-1)

    with torch.autocast(q.device.type, enabled=False):
        s = scorer.logits(q, k)
        if mask is None:
            w = fn(s.float(), dim=-1)
        elif has_empty_rows(mask):
            w = scorer.weights_from_logits(s, mask, weights)
        else:  # -inf keys get exact zeros: no guard, no second pass over the mask
            w = weights(s, mask)
    return (w @ v.to(w.dtype)).to(v.dtype)


# ---------------------------------------------------------------------------------------------
# flex: FlexAttention score_mods, keyed by scorer name

def _device_of(scorer: Scorer):
    for t in (*scorer.parameters(), *scorer.buffers()):
        return t.device
    return torch.device("cpu")


_FLEX_COMPILED = None
# Every scorer, shape and mask kind is one more compiled variant of flex_attention; past dynamo's
# default recompile_limit (8) the call silently falls back to the unfused eager kernel.
FLEX_RECOMPILE_LIMIT = 256


def _flex_function(compiled: bool):
    global _FLEX_COMPILED
    from torch.nn.attention.flex_attention import flex_attention

    if not compiled:
        return flex_attention
    if _FLEX_COMPILED is None:
        _FLEX_COMPILED = torch.compile(flex_attention, dynamic=False)
    return _FLEX_COMPILED


def flex_block_mask(q, k, mask):
    """A FlexAttention BlockMask for a boolean mask (None: no mask)."""
    from torch.nn.attention.flex_attention import create_block_mask

    if mask is None:
        return None
    b, h, lq = q.shape[:3]
    lk = k.shape[-2]
    if is_plain_causal(mask, lq, lk):
        return create_block_mask(lambda bb, hh, qi, ki: qi >= ki, None, None, lq, lk,
                                 device=q.device)
    full = mask.expand(b, h, lq, lk)
    if full.stride(0) == 0 and full.stride(1) == 0:
        grid = full[0, 0]
        return create_block_mask(lambda bb, hh, qi, ki: grid[qi, ki], None, None, lq, lk,
                                 device=q.device)
    return create_block_mask(lambda bb, hh, qi, ki: full[bb, hh, qi, ki], b, h, lq, lk,
                             device=q.device)


def flex_attend(scorer: Scorer, q, k, v, mask=None, *, compiled: bool | None = None):
    """The scorer through FlexAttention with the score_mod of its ``flex_spec``.

    ``compiled``: use ``torch.compile(flex_attention)`` on CUDA (default; False runs the unfused
    implementation there too). On CPU it always runs uncompiled, forward only (for tests and
    inference)."""
    if "flex" not in scorer.fast_forms():
        raise FastPathError(f"scorer {scorer.name!r} has no FlexAttention score_mod (define "
                            f"flex_spec(q, k, mask) -> FlexSpec on its class); scorers with one: "
                            f"{scorers_with('flex')}")
    if q.device.type == "cpu" and torch.is_grad_enabled() and any(
            t.requires_grad for t in (q, k, v, *scorer.parameters())):
        raise FastPathError("FlexAttention has no backward on CPU (torch 2.13): use mode "
                            "'fused' or 'compile' for CPU training, or run under torch.no_grad()")
    from torch.nn.attention.flex_attention import AuxRequest

    # On CPU, inductor's flex_attention (torch 2.13) returns wrong values at some lengths (40 and
    # 200 of those tried, NaN at times) and cannot return the log-sum-exp: CPU runs uncompiled.
    compiled = q.device.type == "cuda" and compiled is not False
    spec = scorer.flex_spec(q, k, mask)
    block_mask = flex_block_mask(q, k, mask)
    fn = _flex_function(compiled)
    kwargs = dict(score_mod=spec.score_mod, block_mask=block_mask)
    import torch._dynamo as dynamo

    limit = max(dynamo.config.recompile_limit, FLEX_RECOMPILE_LIMIT)
    with warnings.catch_warnings(), dynamo.config.patch(recompile_limit=limit):
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile")
        if spec.post is None:
            out = fn(q, k, v, **kwargs)
        else:
            out, aux = fn(q, k, v, return_aux=AuxRequest(lse=True), **kwargs)
            out = spec.post(out.float(), aux.lse.float().unsqueeze(-1)).to(v.dtype)
    if mask is not None:
        out = out.masked_fill(~mask.expand(*q.shape[:3], k.shape[-2]).any(-1, keepdim=True), 0.0)
    return out


# ---------------------------------------------------------------------------------------------
# Choosing and setting each scorer's form

def flex_available(device: torch.device) -> bool:
    if device.type != "cuda":
        return False
    try:
        from torch.nn.attention.flex_attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


# The forms ``auto`` may give a scorer without a native path, in order, per device type, and the
# shortest run (seconds, the caller's ``budget_s``) worth compiling for; measured with
# ``scorebench bench train`` (README "Speed"). CPU: dense for the SSA family (its training step ran
# 1.1-1.2x softmax's at the bench's small size, where the compiled fused kernel, its inductor cache
# already warm, ran 1.2-1.4x, and its first compilation takes 25-300 s on a 2-core machine), then
# pivot for sparsemax and entmax15 (the package's sort is most of their training step on a CPU);
# neither compiles. Not topk (the partial sort trains slower than the reference) nor compile
# (100-230 s of compilation per scorer for steps no faster than the reference). CUDA:
# FlexAttention (on an H200 the query-block paths launch too many small kernels: topk ran 3-4x
# and compile 2-3x slower than the dense reference at L = 1024-2048). CPU, first: blocked, for every
# scorer declaring it (forward+backward, causal, fp32, best of 5 at one thread, ratio to SDPA at
# (8,8,128,32) / (4,8,512,64) / (1,8,2048,64): ssa 1.75 / 0.99 / 1.02 against dense's 1.89 / 1.13
# / 0.81 at 1.0-1.15x SDPA's memory from L = 1024 against dense's 5.8x; entmax15 2.95 / 1.28 /
# 1.29 against pivot's 7.0 / 8.3 / 8.5; sigmoid 0.69 / 0.86 / 0.90 against the reference's 1.89
# / 2.57 / 2.52).
AUTO_FORMS: dict[str, tuple[str, ...]] = {"cpu": ("blocked", "dense", "pivot"), "cuda": ("flex",)}
AUTO_MIN_BUDGET_S: dict[str, float] = {"cpu": 600.0, "cuda": 0.0}
COMPILED_FORMS = ("fused", "flex", "compile")


def shipped_path(scorer: Scorer) -> str:
    """What ``attend`` runs without a fast form: the scorer's ``native_form`` or the reference."""
    return scorer.native_form if scorer.has_fast_path and scorer.use_fast_path else "reference"


def choose_path(scorer: Scorer, device: torch.device | str, mode: str,
                budget_s: float | None = None) -> str:
    """The path ``mode`` gives this scorer on ``device``: one of its ``fast_forms()`` (fused,
    dense, flex, topk, pivot, compile, or its native form such as sdpa) or reference. A mode
    naming a form the scorer lacks keeps the scorer as shipped. ``budget_s``: the run's expected
    length; under ``auto``, shorter than the device's ``AUTO_MIN_BUDGET_S``, or unknown (None)
    where that minimum is above 0, skips the forms that compile: a cell that cannot say it runs
    long enough to pay for a compilation does not start one."""
    if mode not in MODES:
        raise FastPathError(f"unknown fast-path mode {mode!r}; choose one of {MODES}")
    device = torch.device(device)
    forms = scorer.fast_forms()
    own = shipped_path(scorer)
    if mode == "off":
        return own
    if mode != "auto":
        return mode if mode in forms else own
    if own != "reference":
        return own
    min_budget = AUTO_MIN_BUDGET_S.get(device.type, 0.0)
    short = min_budget > 0 and (budget_s is None or budget_s < min_budget)
    for form in AUTO_FORMS.get(device.type, ()):
        if form not in forms or (short and form in COMPILED_FORMS):
            continue
        if form != "flex" or flex_available(device):
            return form
    return own


def attend_form(scorer: Scorer, form: str, q, k, v, mask):
    """Run ``form`` of ``scorer`` (what ``Scorer.attend`` calls when ``fast_form`` is set)."""
    if form == "blocked":
        from .blocked import blocked_attend

        return blocked_attend(scorer.blocked_spec(q, k, mask), q, k, v, mask,
                              block_size=scorer.fast_block_size)
    if form == "flex":
        return flex_attend(scorer, q, k, v, mask)
    if form == "fused":
        dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        n, b = ssa_parameters(scorer, dtype, q.device)
        return fused_ssa_attend(q, k, v, mask, n, b, block_size=scorer.fast_block_size,
                                compiled=scorer.fast_compiled)
    if form == "dense":
        n, b = ssa_parameters(scorer, compute_dtype(q, k, v), q.device)
        return dense_ssa_attend(q, k, v, mask, n, b, block_size=scorer.fast_block_size)
    if form == "topk":
        return topk_attend(scorer, q, k, v, mask, block_size=scorer.fast_block_size)
    if form == "pivot":
        return pivot_attend(scorer, q, k, v, mask)
    if form == "compile":
        return compiled_attend(scorer, q, k, v, mask, block_size=scorer.fast_block_size,
                               compiled=scorer.fast_compiled)
    raise FastPathError(f"scorer {scorer.name!r}: unknown fast form {form!r}; forms: {FORMS}")


def _module_device(module: torch.nn.Module) -> torch.device:
    for t in (*module.parameters(), *module.buffers()):
        return t.device
    return torch.device("cpu")


def accelerate(module: torch.nn.Module, mode: str = "auto", *, block_size: int = DEFAULT_BLOCK,
               compiled: bool = True, device=None, budget_s: float | None = None
               ) -> dict[str, str]:
    """Set the form every scorer in ``module`` (or ``module`` itself) runs, and return
    ``{scorer name: path}`` (blocked, fused, dense, flex, topk, pivot, compile, sdpa, linear or
    reference),
    e.g.
    for a record's provenance. Call it after moving the model to its device (``device`` defaults to
    the module's).

    ``mode``: ``"auto"`` (the measured choice per device), ``"off"`` (as shipped) or a form.
    ``budget_s``: how long the run is expected to take (a cell's time limit); under ``auto`` a
    run too short to pay for compilation keeps the uncompiled paths (:data:`AUTO_MIN_BUDGET_S`).
    ``compiled=False`` runs the fused and compile forms eagerly (same numbers; for tests).
    Parameters, buffers, state-dict keys and classes are unchanged; :func:`restore` undoes it."""
    if mode not in MODES:
        raise FastPathError(f"unknown fast-path mode {mode!r}; choose one of {MODES}")
    if block_size < 1:
        raise FastPathError(f"block_size must be >= 1, got {block_size}")
    device = _module_device(module) if device is None else torch.device(device)
    found: dict[str, set[str]] = {}
    for m in module.modules():
        if isinstance(m, Scorer):
            restore(m)
            path = choose_path(m, device, mode, budget_s)
            if path in FORMS:
                m.fast_form = path
                m.fast_block_size = int(block_size)
                m.fast_compiled = bool(compiled)
            found.setdefault(m.name, set()).add(path)
    return {name: "+".join(sorted(paths)) for name, paths in found.items()}


def restore(module: torch.nn.Module) -> torch.nn.Module:
    """Undo :func:`accelerate`: every scorer runs as shipped again."""
    for m in module.modules():
        if isinstance(m, Scorer):
            for key in ("fast_form", "fast_block_size", "fast_compiled"):
                m.__dict__.pop(key, None)
    return module


def scorer_path(scorer: Scorer) -> str:
    """The path the scorer's ``attend`` runs now."""
    form = scorer.fast_form
    return shipped_path(scorer) if form is None or form == scorer.native_form else form


def fast_paths(module: torch.nn.Module) -> dict[str, str]:
    """{scorer module name: the path its ``attend`` runs} for every scorer in ``module``."""
    return {name or "<root>": scorer_path(m) for name, m in module.named_modules()
            if isinstance(m, Scorer)}


def scorers_with(form: str) -> list[str]:
    """Registered scorers that declare ``form`` (fused, dense, flex, topk, pivot, compile, or a
    native form)."""
    from .registry import get_scorer_class, list_scorers

    return [n for n in list_scorers() if form in get_scorer_class(n).fast_forms()]
