"""Fast paths around the registry's scorers: ``torch.compile``, a fused log-domain SSA kernel for
CPUs, and FlexAttention ``score_mod`` definitions for GPUs. Each equals the scorer's reference
``reference_attend`` (tests/test_fast_*.py).

    from scorers.fast import accelerate
    accelerate(model, mode="auto")       # every scorer inside ``model`` gets a fast ``attend``

``accelerate`` keeps each scorer object (its parameters, state dict and call counter) and swaps
its class for a subclass whose ``fast_attend`` picks, on every call, one of these paths:

- ``compile``: ``torch.compile`` (dynamic shapes) of the scorer's own ``weights`` + ``P @ v``, run
  on query blocks of ``block_size`` rows that only see the keys some row of the block can see (so a
  causal mask costs about half the dense work). Any logits-kind scorer.
- ``fused``: the SSA family (ssa, ssa_gpt2, stablemax) as one ``autograd.Function`` over the same
  query blocks: logits, ``t = n sgn(s) log1p(b|s|)`` (compiled), ``softmax(t)``, ``P @ v``, and a
  hand-written backward (gradients for q, k, v, n and b), saving ``P``, ``u = 1/(1 + b|s|)`` and
  (when n or b learn) ``t`` of the visible blocks only.
- ``topk``: sparsemax and entmax15 on the same query blocks, through the ``entmax`` package's
  partial sort (``k=``, exact: rows whose support reaches k are solved again with 2k).
- ``flex``: FlexAttention with the scorer's ``score_mod`` (``FLEX_SCORE_MODS``); scorers that are
  not a softmax of transformed logits (sigmoid, softmax_plus_one, learned_sink) rescale the output
  with the log-sum-exp. Parameters are captured as 1-element tensors. FlexAttention has no backward
  on CPU (torch 2.13), so on CPU this path serves inference only.
- ``auto``: on CUDA, flex where a score_mod exists and the scorer's own path otherwise; on CPU,
  fused for the SSA family, topk for sparsemax and entmax15, compile for other logits-kind
  scorers without a native fast path, and the scorer's own path otherwise.

Scorers a mode does not cover keep their native fast path (e.g. SDPA for softmax) or reference.
"""
from __future__ import annotations

import math
import types
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from .base import LogitsScorer, Scorer, compute_dtype
from .ssa import signed_log1p

MODES = ("auto", "compile", "fused", "flex", "topk")
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


def compiled_attend(scorer: LogitsScorer, q, k, v, mask=None, *, block_size: int = DEFAULT_BLOCK,
                    compiled: bool = True):
    """``scorer.reference_attend`` under ``torch.compile``, on query blocks with key truncation
    (``compiled=False``: the same blocks, eagerly)."""
    if not isinstance(scorer, LogitsScorer):
        raise FastPathError(f"the compile path covers logits-kind scorers; {scorer.name!r} is "
                            f"{scorer.kind}-kind and keeps its own attend")
    plan = plan_blocks(q, k, mask, block_size, aligned_last=scorer.causal_only)
    base = _base_class(type(scorer))
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
    """(n, b) of an SSA-family scorer as 1-element tensors (differentiable where learnable), on
    ``device`` (default: the scorer's; stablemax has no parameters, so pass the inputs' device)."""
    name = scorer.name
    if name in ("ssa", "ssa_gpt2"):
        n, b = scorer.n_value(dtype).reshape(1), scorer.b_value(dtype).reshape(1)
        return (n, b) if device is None else (n.to(device), b.to(device))
    if name == "stablemax":
        device = _device_of(scorer) if device is None else device
        return torch.ones(1, dtype=dtype, device=device), torch.ones(1, dtype=dtype, device=device)
    raise FastPathError(f"no SSA parameters for scorer {name!r}; the fused path covers "
                        f"{sorted(FUSED_SCORERS)}")


FUSED_SCORERS = frozenset({"ssa", "ssa_gpt2", "stablemax"})


def fused_ssa_attend(q, k, v, mask, n, b, *, block_size: int = DEFAULT_BLOCK,
                     compiled: bool = True) -> torch.Tensor:
    """softmax over visible keys of t = n sgn(s) log1p(b|s|), s = q k^T / sqrt(d), times v;
    ``n`` and ``b`` are 1-element tensors. Fully-masked rows give zero output. ``compiled=False``
    runs the same elementwise kernels eagerly (same numbers, slower; no compilation)."""
    if n.numel() != 1 or b.numel() != 1:
        raise FastPathError(f"n and b must be 1-element tensors, got shapes {tuple(n.shape)} and "
                            f"{tuple(b.shape)}")
    return FusedSSA.apply(q, k, v, n, b, mask, block_size, compiled)


# ---------------------------------------------------------------------------------------------
# topk: sparsemax and 1.5-entmax through the entmax package's partial sort

TOPK_SCORERS = ("sparsemax", "entmax15")
DEFAULT_TOPK = 32


def topk_weights(name: str, s: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """``entmax.sparsemax`` / ``entmax.entmax15`` over visible keys with ``k=``: the package
    partial-sorts the k largest logits and, for rows whose support reaches k, solves again with 2k
    (exact). Masking and the fully-masked-row guard are those of ``LogitsScorer``."""
    import entmax

    fn = {"sparsemax": entmax.sparsemax, "entmax15": entmax.entmax15}[name]
    row_valid = mask.any(-1, keepdim=True)
    safe = s.float().masked_fill(~row_valid, 0.0).masked_fill(~(mask | ~row_valid), NEG_INF)
    w = fn(safe, dim=-1, k=k) if k < s.shape[-1] else fn(safe, dim=-1)
    return w.masked_fill(~mask, 0.0)


def topk_attend(scorer: LogitsScorer, q, k, v, mask=None, *, block_size: int = DEFAULT_BLOCK,
                top: int = DEFAULT_TOPK) -> torch.Tensor:
    """sparsemax / entmax15 attention on query blocks with key truncation and a partial sort."""
    if scorer.name not in TOPK_SCORERS:
        raise FastPathError(f"the topk path covers {TOPK_SCORERS}, not {scorer.name!r}")
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
            w = topk_weights(scorer.name, s, mb.expand(s.shape), top)
        outs.append((w @ vb.to(w.dtype)).to(v.dtype))
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=-2)


# ---------------------------------------------------------------------------------------------
# flex: FlexAttention score_mods, keyed by scorer name

@dataclass
class FlexSpec:
    """A scorer as FlexAttention: ``score_mod`` (None = plain softmax) and ``post(out, lse)``
    turning the softmax output into the scorer's output (None = identity)."""

    score_mod: Callable | None = None
    post: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None


FLEX_SCORE_MODS: dict[str, Callable] = {}


def flex_score_mod(*names: str):
    """Register ``fn(scorer, q, k, mask) -> FlexSpec`` for the scorers ``names`` (plugins too)."""

    def decorator(fn):
        for name in names:
            FLEX_SCORE_MODS[name] = fn
        return fn

    return decorator


def _device_of(scorer: Scorer):
    for t in (*scorer.parameters(), *scorer.buffers()):
        return t.device
    return torch.device("cpu")


def visible_counts(q, k, mask) -> torch.Tensor:
    """n_i: visible keys per query, (B, H, Lq) float (1 where a row sees none)."""
    b, h, lq = q.shape[:3]
    lk = k.shape[-2]
    if mask is None:
        return torch.full((b, h, lq), float(lk), device=q.device)
    return mask.expand(b, h, lq, lk).sum(-1).clamp(min=1).float()


@flex_score_mod("softmax")
def _flex_softmax(scorer, q, k, mask):
    return FlexSpec()


@flex_score_mod("temperature_softmax")
def _flex_temperature(scorer, q, k, mask):
    if scorer.learnable:
        inv_tau = torch.exp(-scorer.log_tau.float())                     # (H,)
        return FlexSpec(lambda score, b, h, qi, ki: score * inv_tau[h])
    inv = torch.tensor([1.0 / scorer.tau], device=q.device)
    return FlexSpec(lambda score, b, h, qi, ki: score * inv[0])


@flex_score_mod("ssmax")
def _flex_ssmax(scorer, q, k, mask):
    sigma = scorer.sigma.float()                                          # (H,)
    log_n = visible_counts(q, k, mask).log()                              # (B, H, Lq)
    return FlexSpec(lambda score, b, h, qi, ki: score * (sigma[h] * log_n[b, h, qi]))


@flex_score_mod("ssa", "ssa_gpt2", "stablemax")
def _flex_ssa(scorer, q, k, mask):
    n, b_ = ssa_parameters(scorer, device=q.device)
    return FlexSpec(lambda score, b, h, qi, ki: n[0] * signed_log1p(score, b_[0]))


@flex_score_mod("sigmoid")
def _flex_sigmoid(scorer, q, k, mask):
    bias = torch.tensor([scorer.bias], device=q.device)
    return FlexSpec(lambda score, b, h, qi, ki: F.logsigmoid(score + bias[0]),
                    lambda out, lse: out * torch.exp(lse))


@flex_score_mod("softmax_plus_one")
def _flex_softmax_plus_one(scorer, q, k, mask):
    return FlexSpec(None, lambda out, lse: out * torch.sigmoid(lse))


@flex_score_mod("learned_sink")
def _flex_learned_sink(scorer, q, k, mask):
    sink = scorer.sink.float().view(1, -1, 1, 1)
    return FlexSpec(None, lambda out, lse: out * torch.sigmoid(lse - sink))


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
    """The scorer through FlexAttention with its registered score_mod.

    ``compiled``: use ``torch.compile(flex_attention)`` on CUDA (default; False runs the unfused
    implementation there too). On CPU it always runs uncompiled, forward only (for tests and
    inference)."""
    if scorer.name not in FLEX_SCORE_MODS:
        raise FastPathError(f"scorer {scorer.name!r} has no FlexAttention score_mod; registered: "
                            f"{sorted(FLEX_SCORE_MODS)} (add one with @flex_score_mod)")
    if q.device.type == "cpu" and torch.is_grad_enabled() and any(
            t.requires_grad for t in (q, k, v, *scorer.parameters())):
        raise FastPathError("FlexAttention has no backward on CPU (torch 2.13): use mode "
                            "'fused' or 'compile' for CPU training, or run under torch.no_grad()")
    from torch.nn.attention.flex_attention import AuxRequest

    # On CPU, inductor's flex_attention (torch 2.13) returns wrong values at some lengths (40 and
    # 200 of those tried, NaN at times) and cannot return the log-sum-exp: CPU runs uncompiled.
    compiled = q.device.type == "cuda" and compiled is not False
    spec = FLEX_SCORE_MODS[scorer.name](scorer, q, k, mask)
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
# The mixin that accelerate() puts in front of a scorer's class

def flex_available(device: torch.device) -> bool:
    if device.type != "cuda":
        return False
    try:
        from torch.nn.attention.flex_attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def choose_path(scorer: Scorer, device: torch.device, mode: str) -> str:
    """The path ``mode`` gives this scorer on ``device``: flex, fused, topk, compile, native or
    reference (native = the scorer's own fast path)."""
    base = _base_class(type(scorer))
    own = "native" if base.fast_attend is not Scorer.fast_attend else "reference"
    logits = issubclass(base, LogitsScorer)
    if mode == "flex":
        return "flex" if scorer.name in FLEX_SCORE_MODS else own
    if mode == "fused":
        return "fused" if scorer.name in FUSED_SCORERS else own
    if mode == "compile":
        return "compile" if logits else own
    if mode == "topk":
        return "topk" if scorer.name in TOPK_SCORERS else own
    if mode == "auto":
        if scorer.name in FLEX_SCORE_MODS and flex_available(device) and own == "reference":
            return "flex"
        if device.type != "cpu":
            # On an H200 the query-block paths launch too many small kernels: topk ran 3-4x and
            # compile 2-3x slower than the dense reference at L = 1024-2048.
            return own
        if scorer.name in FUSED_SCORERS:
            return "fused"
        if scorer.name in TOPK_SCORERS:
            return "topk"
        if logits and own == "reference":
            return "compile"
        return own
    raise FastPathError(f"unknown fast-path mode {mode!r}; choose one of {MODES}")


class FastAttend:
    """Mixin placed before a scorer's class by :func:`accelerate`."""

    fast_mode = "auto"
    fast_block_size = DEFAULT_BLOCK
    fast_compiled = True

    def fast_path(self, device: torch.device | str = "cpu") -> str:
        return choose_path(self, torch.device(device), self.fast_mode)

    def fast_attend(self, q, k, v, mask):
        path = choose_path(self, q.device, self.fast_mode)
        if path == "flex":
            return flex_attend(self, q, k, v, mask)
        if path == "fused":
            n, b = ssa_parameters(self, torch.float64 if q.dtype == torch.float64
                                  else torch.float32, q.device)
            return fused_ssa_attend(q, k, v, mask, n, b, block_size=self.fast_block_size,
                                    compiled=self.fast_compiled)
        if path == "topk":
            return topk_attend(self, q, k, v, mask, block_size=self.fast_block_size)
        if path == "compile":
            return compiled_attend(self, q, k, v, mask, block_size=self.fast_block_size,
                                   compiled=self.fast_compiled)
        if path == "native":
            return super().fast_attend(q, k, v, mask)
        return self.reference_attend(q, k, v, mask)


_FAST_CLASSES: dict[tuple[type, str], type] = {}


def _base_class(cls: type) -> type:
    return getattr(cls, "_fast_base", cls) if issubclass(cls, FastAttend) else cls


def fast_class(cls: type, mode: str = "auto") -> type:
    """The subclass of scorer class ``cls`` whose ``fast_attend`` follows ``mode``."""
    if mode not in MODES:
        raise FastPathError(f"unknown fast-path mode {mode!r}; choose one of {MODES}")
    base = _base_class(cls)
    key = (base, mode)
    if key not in _FAST_CLASSES:
        _FAST_CLASSES[key] = type(f"{base.__name__}Fast_{mode}", (FastAttend, base),
                                  {"fast_mode": mode, "_fast_base": base,
                                   "__module__": base.__module__})
    return _FAST_CLASSES[key]


def accelerate(module: torch.nn.Module, mode: str = "auto", *, block_size: int = DEFAULT_BLOCK,
               compiled: bool = True) -> torch.nn.Module:
    """Give every scorer in ``module`` (or ``module`` itself) the fast paths of ``mode``.

    ``compiled=False`` runs the fused and blocked paths without ``torch.compile`` (same numbers;
    for debugging and quick tests). Parameters, buffers and state-dict keys are unchanged;
    :func:`restore` undoes it."""
    if block_size < 1:
        raise FastPathError(f"block_size must be >= 1, got {block_size}")
    for m in module.modules():
        if isinstance(m, Scorer):
            m.__class__ = fast_class(type(m), mode)
            m.fast_block_size = int(block_size)
            m.fast_compiled = bool(compiled)
    return module


def restore(module: torch.nn.Module) -> torch.nn.Module:
    """Undo :func:`accelerate`: every scorer gets its registered class back."""
    for m in module.modules():
        if isinstance(m, FastAttend):
            m.__class__ = _base_class(type(m))
            m.__dict__.pop("fast_block_size", None)
            m.__dict__.pop("fast_compiled", None)
    return module


def fast_paths(module: torch.nn.Module, device="cpu") -> dict[str, str]:
    """{scorer module name: the path it takes on ``device``} for the accelerated scorers."""
    return {name or "<root>": m.fast_path(device) for name, m in module.named_modules()
            if isinstance(m, FastAttend)}
