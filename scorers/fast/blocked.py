"""The ``blocked`` form: attention with recompute, memory that grows like softmax's, in eager
PyTorch, for every scorer that declares a ``blocked`` kernel (scorers/forms.py).

The logits ``s = q k^T`` are made one tile at a time, query rows ``[i, j)`` by keys ``[a, b)``
(tiles.py), never as a whole (Lq, Lk) matrix. The forward keeps only per-row statistics; the
backward makes each tile again and its gradients from them (FlashAttention's scheme, Dao et al.
2022, on a CPU: tiles of about ``TILE_ELEMENTS`` entries, so each is one large matmul and a few
elementwise passes). Below ``RECOMPUTE_FROM_KEYS`` keys (tiles.py) the weights are few: they are
kept from the forward instead (same numbers, no second matmul).

Two kinds of weights run here (blocked_sparse.py has sparsemax, 1.5-entmax and alpha-entmax,
blocked_rows.py softpick, the signed softmax, the self-adjust softmax and the row entropy that
sets adaptive temperature's query scale, blocked_stick.py sigmoid stick-breaking):

- :func:`softmax_attend`, a softmax of transformed logits with an optional sink logit sigma,

      w_ij = exp(t_ij) / (exp(sigma) + sum_{k in V_i} exp(t_ik)),   t = f(s),

  by online normalization over key blocks (running max m_i and sum l_i, rescaled as m grows;
  f is nondecreasing, so a tile's row maxima of t are f of its row maxima of s, found first).
  Saved: lse_i = log(exp(sigma) + sum exp(t)). Backward, with delta_i = sum_j dO_ij O_ij:
  dt = w (dP - delta), ds = dt f'(s), dsigma = -sum_i exp(sigma - lse_i) delta_i.
  Everything runs in base 2 (t log2 e, lse log2 e, exp2), as FlashAttention-2 does: on a CPU
  ``exp2`` is several times faster than ``exp``, and the scaling and the shift by m (or lse)
  ride on the transform's passes.
  ``f`` is a :class:`LogitTransform` the scorer declares beside its formula (identity for the
  softmaxes, n sgn(s) log1p(|s|) for the SSA family).
- :func:`gate_attend`, pointwise weights ``w = g(s)`` (sigmoid(s + beta), relu(s), relu(s)^2)
  with no row statistics: out = sum_j g(s_ij) v_j, ds = (dO V^T) g'(s).

A per-row normalizer that multiplies the logits (1/tau, sigma ln n_i, relu's 1/n_i) is folded
into the queries before the call, so autograd gives its gradient. Masked keys get exact zeros;
a query that sees no key gives a zero output and zero gradients
(docs/scorers.md#fully-masked-rows).
"""
from __future__ import annotations

import math

import torch

from ..base import compute_dtype
from ..forms import (IDENTITY, LOG2E, BlockedSpec, FastForm, LogitTransform, register_form,
                     spec_for)
from .blocked_rows import ROW_KINDS, entropy_scale, rows_attend
from .blocked_sparse import SPARSE_KINDS, sparse_attend
from .blocked_stick import STICK_KINDS, stick_breaking_attend
from .planning import NEG_INF
from .tiles import (BlockedError, Tiling, as_scale, drain, hide, logit_grads, plan_tiles,
                    scale_grads, scale_rows, tile_logits)


# ---------------------------------------------------------------------------------------------
# Softmax of transformed logits

def _row_max(t: torch.Tensor) -> torch.Tensor:
    return t.amax(-1, keepdim=True)


class BlockedSoftmax(torch.autograd.Function):
    """See :func:`softmax_attend`. Inputs: q, k, v, the query scale, the sink logit (or None),
    the tiling, the transform, then the transform's params. Saves lse log2 e per row (and, below
    the recompute length, the tiles' weights)."""

    @staticmethod
    def forward(ctx, q, k, v, scale, sink, tiling: Tiling, transform: LogitTransform, *params):
        bsz, heads, lq = q.shape[:3]
        out = q.new_empty(bsz, heads, lq, v.shape[-1])
        lse2 = q.new_empty(bsz, heads, lq, 1)
        sink2 = None if sink is None else sink * LOG2E
        lowest = torch.finfo(q.dtype).min
        kept = []
        for i, j, e in tiling.blocks:
            m = l = acc = None               # running max of t log2 e (-inf: no key), sum, P V
            if sink is not None:
                m = sink2.expand(bsz, heads, j - i, 1)
                l = torch.ones_like(m)
            block_kept = []
            qb = q[..., i:j, :] * scale_rows(scale, i, j)
            for a, b, hidden in tiling.tiles(i, j, e):
                s = hide(tile_logits(qb, k, a, b), hidden, lowest)
                top = transform.exponent(_row_max(s), None, *params)[0]
                m_new = top if m is None else torch.maximum(m, top)
                m_safe = m_new.masked_fill(m_new == NEG_INF, 0.0)
                t, saved = transform.exponent(s, m_safe, *params, keep=tiling.keeps(i))
                p = hide(t, hidden, NEG_INF).exp2_()
                pv = torch.matmul(p, v[..., a:b, :])
                if m is None:
                    l, acc = p.sum(-1, keepdim=True), pv
                else:
                    alpha = (m - m_safe).exp2_()
                    l = l * alpha + p.sum(-1, keepdim=True)
                    acc = pv if acc is None else acc.mul_(alpha).add_(pv)
                m = m_new
                if tiling.keeps(i):
                    block_kept.append((p, m_safe, saved))
            empty = l == 0
            if acc is None:                        # a sink and no key
                acc = out.new_zeros(bsz, heads, j - i, v.shape[-1])
            out[..., i:j, :] = acc / l.masked_fill(empty, 1.0)
            block_lse2 = (m.masked_fill(m == NEG_INF, 0.0) + l.log2()).masked_fill_(empty,
                                                                                    math.inf)
            lse2[..., i:j, :] = block_lse2
            for p, m_safe, saved in block_kept:   # exp(t - m) -> exp(t - lse)
                p.mul_((m_safe - block_lse2).exp2_())
                kept.append((p, saved))
        ctx.tiling, ctx.transform, ctx.n_params = tiling, transform, len(params)
        ctx.has_sink = sink is not None
        ctx.kept = kept
        ctx.save_for_backward(q, k, v, scale, out, lse2, *([sink] if sink is not None else []),
                              *params)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v, scale, out, lse2, *rest = ctx.saved_tensors
        sink = rest.pop(0) if ctx.has_sink else None
        params = rest[:ctx.n_params]
        kept, ctx.kept = drain(ctx.kept), None
        tiling, transform = ctx.tiling, ctx.transform
        need_q, need_k, need_v, need_scale, need_sink = ctx.needs_input_grad[:5]
        needs = ctx.needs_input_grad[7:]
        dscale = torch.zeros_like(scale) if need_scale else None
        d_out = d_out.contiguous()
        delta = (d_out * out).sum(-1, keepdim=True)
        dq = torch.zeros_like(q)
        dk, dv = torch.zeros_like(k), torch.zeros_like(v)
        dparams = [None] * len(params)
        for i, j, e in tiling.blocks:
            dob, lse_b, delta_b = d_out[..., i:j, :], lse2[..., i:j, :], delta[..., i:j, :]
            qb = q[..., i:j, :] * scale_rows(scale, i, j)
            for a, b, hidden in tiling.tiles(i, j, e):
                if not tiling.keeps(i):
                    t, saved = transform.exponent(tile_logits(qb, k, a, b), lse_b, *params,
                                                  keep=True)
                    p = hide(t, hidden, NEG_INF).exp2_()
                else:
                    p, saved = next(kept)
                if need_v:
                    dv[..., a:b, :] += torch.matmul(p.transpose(-1, -2), dob)
                dt = torch.matmul(dob, v[..., a:b, :].transpose(-1, -2)).sub_(delta_b).mul_(p)
                del p
                ds, *grads = transform.grad(saved, dt, *params, needs=needs)
                for n_, g_ in enumerate(grads):
                    if g_ is not None:
                        dparams[n_] = g_ if dparams[n_] is None else dparams[n_] + g_
                logit_grads(ds, qb, k, dq, dk, (i, j), (a, b), need_q or need_scale, need_k)
            if need_q or need_scale:
                scale_grads(dq, q, scale, i, j, need_scale, dscale)
        dsink = None
        if need_sink:
            w_sink = (sink * LOG2E - lse2).exp2_()         # exp(sigma - lse); 0 on empty rows
            dsink = -(w_sink * delta).sum_to_size(sink.shape)
        return (dq if need_q else None, dk if need_k else None, dv if need_v else None, dscale,
                dsink, None, None, *[g if g is None else g.reshape(x.shape)
                              for g, x in zip(dparams, params)])


def softmax_attend(q, k, v, mask=None, *, transform: LogitTransform = IDENTITY,
                   query_scale=None, sink=None, block_size: int | None = None,
                   key_block: int | None = None, recompute: bool | None = None) -> torch.Tensor:
    """softmax over visible keys (and the sink logit ``sink``, whose weight is dropped) of
    ``t = transform(s)``, ``s = (q * query_scale) k^T``, times v, blocked with recompute.

    ``query_scale``: a float or a tensor broadcastable to (B, H, Lq, 1) (default 1/sqrt(d));
    ``sink``: None or a tensor broadcastable to (B, H, 1, 1). Both may require gradients. Inputs
    in bf16/fp16 run in fp32 and come back in their dtype."""
    dtype = compute_dtype(q, k, v)
    scale = as_scale(query_scale, q, dtype)
    tiling = plan_tiles(q, k, mask, block_size=block_size, key_block=key_block,
                        recompute=recompute, state=1 + transform.kept_tiles)
    if sink is not None:
        sink = sink.to(dtype)
        if sink.dim() != 4 or sink.shape[-2:] != (1, 1):
            raise BlockedError(f"sink must broadcast to (B, H, 1, 1), got {tuple(sink.shape)}")
    params = [p.to(dtype) for p in transform.params]
    out = BlockedSoftmax.apply(q.to(dtype), k.to(dtype), v.to(dtype), scale, sink, tiling,
                               transform, *params)
    return out.to(v.dtype)


# ---------------------------------------------------------------------------------------------
# Pointwise gates

GATES = ("sigmoid", "relu", "relu2")


def _gate(kind: str, s: torch.Tensor, bias: float) -> torch.Tensor:
    if kind == "sigmoid":
        return s.add_(bias).sigmoid_()
    if kind == "relu":
        return s.clamp_(min=0)
    return s.clamp_(min=0).square_()


def _gate_slope(kind: str, w: torch.Tensor) -> torch.Tensor:
    """g'(s) from w = g(s): w (1 - w), 1[w > 0], 2 sqrt(w)."""
    if kind == "sigmoid":
        return w * (1.0 - w)
    if kind == "relu":
        return torch.sign(w)
    return w.sqrt().mul_(2.0)


class BlockedGate(torch.autograd.Function):
    """See :func:`gate_attend`. Saves nothing per entry when recomputing, else the tile weights."""

    @staticmethod
    def forward(ctx, q, k, v, scale, tiling: Tiling, kind: str, bias: float):
        bsz, heads, lq = q.shape[:3]
        out = q.new_zeros(bsz, heads, lq, v.shape[-1])
        kept = []
        for i, j, e in tiling.blocks:
            qb = q[..., i:j, :] * scale_rows(scale, i, j)
            for a, b, hidden in tiling.tiles(i, j, e):
                w = _gate(kind, tile_logits(qb, k, a, b), bias)
                hide(w, hidden, 0.0)
                out[..., i:j, :] += torch.matmul(w, v[..., a:b, :])
                if tiling.keeps(i):
                    kept.append(w)
        ctx.tiling, ctx.kind, ctx.bias, ctx.kept = tiling, kind, bias, kept
        ctx.save_for_backward(q, k, v, scale)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v, scale = ctx.saved_tensors
        kept, ctx.kept = drain(ctx.kept), None
        tiling, kind = ctx.tiling, ctx.kind
        need_q, need_k, need_v, need_scale = ctx.needs_input_grad[:4]
        d_out = d_out.contiguous()
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dscale = torch.zeros_like(scale) if need_scale else None
        for i, j, e in tiling.blocks:
            dob = d_out[..., i:j, :]
            qb = q[..., i:j, :] * scale_rows(scale, i, j)
            for a, b, hidden in tiling.tiles(i, j, e):
                if not tiling.keeps(i):
                    w = _gate(kind, tile_logits(qb, k, a, b), ctx.bias)
                    hide(w, hidden, 0.0)
                else:
                    w = next(kept)
                if need_v:
                    dv[..., a:b, :] += torch.matmul(w.transpose(-1, -2), dob)
                ds = torch.matmul(dob, v[..., a:b, :].transpose(-1, -2)).mul_(
                    _gate_slope(kind, w))
                logit_grads(ds, qb, k, dq, dk, (i, j), (a, b), need_q or need_scale, need_k)
            if need_q or need_scale:
                scale_grads(dq, q, scale, i, j, need_scale, dscale)
        return (dq if need_q else None, dk if need_k else None, dv if need_v else None,
                dscale, None, None, None)


def gate_attend(q, k, v, mask=None, *, gate: str, bias: float = 0.0, query_scale=None,
                block_size: int | None = None, key_block: int | None = None,
                recompute: bool | None = None) -> torch.Tensor:
    """sum over visible keys of g(s_ij) v_j, ``s = (q * query_scale) k^T``, ``g`` one of
    :data:`GATES` (sigmoid(s + bias), relu(s), relu(s)^2), blocked with recompute.
    ``query_scale`` as in :func:`softmax_attend` (relu's 1/n_i folds in: relu(s)/n = relu(s/n))."""
    if gate not in GATES:
        raise BlockedError(f"gate must be one of {GATES}, got {gate!r}")
    dtype = compute_dtype(q, k, v)
    scale = as_scale(query_scale, q, dtype)
    tiling = plan_tiles(q, k, mask, block_size=block_size, key_block=key_block,
                        recompute=recompute)
    out = BlockedGate.apply(q.to(dtype), k.to(dtype), v.to(dtype), scale, tiling, gate,
                            float(bias))
    return out.to(v.dtype)


def blocked_attend(spec: BlockedSpec, q, k, v, mask=None, *, block_size: int | None = None,
                   key_block: int | None = None, recompute: bool | None = None):
    """Run the blocked form ``spec`` (a scorer's ``blocked`` kernel for these inputs)."""
    options = dict(block_size=block_size, key_block=key_block, recompute=recompute)
    if spec.kind == "softmax":
        scale = spec.query_scale
        if spec.entropy_scale is not None:
            scale = entropy_scale(spec.entropy_scale, q, k, mask, query_scale=scale,
                                  block_size=block_size, key_block=key_block)
        return softmax_attend(q, k, v, mask, transform=spec.transform, query_scale=scale,
                              sink=spec.sink, **options)
    if spec.kind in GATES:
        return gate_attend(q, k, v, mask, gate=spec.kind, bias=spec.bias,
                           query_scale=spec.query_scale, **options)
    if spec.kind in SPARSE_KINDS:
        return sparse_attend(q, k, v, mask, kind=spec.kind, query_scale=spec.query_scale,
                             alpha=spec.alpha, **options)
    if spec.kind in STICK_KINDS:
        return stick_breaking_attend(q, k, v, mask, current=spec.kind == "stick_breaking",
                                     query_scale=spec.query_scale, **options)
    if spec.kind in ROW_KINDS:
        return rows_attend(q, k, v, mask, kind=spec.kind, eps=spec.eps,
                           query_scale=spec.query_scale, **options)
    raise BlockedError(f"unknown blocked kind {spec.kind!r}; choose softmax, {', '.join(GATES)}, "
                       f"{', '.join(SPARSE_KINDS)}, {', '.join(ROW_KINDS)}, "
                       f"{', '.join(STICK_KINDS)}")


# Measured in one sitting (forward+backward, causal, fp32, 2 threads, median of 7, ratio to SDPA
# at (8,8,128,32) / (4,8,512,64) / (1,8,2048,64); time / peak memory at 2,048):
# - ssa 1.35 / 0.95 / 1.03 (memory 1.05x) against dense's 1.20 / 0.93 / 0.69 (5.8x), hence
#   dense below 1,024 keys (scorers/fast/ssa.py);
# - sparsemax 1.32 / 1.06 / 1.05 (0.95x) and entmax15 1.68 / 1.13 / 1.15 (0.95x) against pivot's
#   1.46 / 6.23 / 5.82 (17x) and 1.50 / 8.28 / about 10 (20x);
# - sigmoid 0.98 / 0.68 / 0.80 (0.95x) against the reference's 1.12 / 2.80 / 2.69 (10x);
# - temperature_softmax 1.00 / 0.85 / 0.79 (0.74x), ssmax 1.09 / 0.76 / 0.90 and learned_sink
#   0.96 / 0.76 / 0.80 against their SDPA paths' 1.13 / 0.98 / 1.01 (1.21x), 1.17 / 1.07 / 1.03
#   (1.32x) and 1.69 / 1.27 / 1.11 (1.66x), hence ``over_native`` in auto's table.
# With the row maximum taken from the logits and 128-row blocks where the weights are recomputed
# (tiles.py), a later sitting read at 2,048 keys ssa 0.87 (1.17x), sparsemax 1.00, entmax15 1.18,
# sigmoid 0.66, temperature_softmax 0.71, ssmax 0.76 and learned_sink 0.77.
# entmax_bisect (median of 5), alpha 1.5 fixed / learned per head: 4.93 / 2.13 / 1.66 (1.01x) and
# 6.26 / 2.58 / 2.12 (1.23x) against pivot's 4.75 / 9.74 / 13.33 (20x) and 8.14 / 7.61 / 26.56
# (31x) in the same sitting.
# softpick, adaptive_temperature, cog_signed, sa_softmax and stick_breaking (one thread, CPU
# clock, median of 3, a 2-core machine shared with other jobs; time at the same three shapes,
# peak memory at 2,048): 1.88 / 1.15 / 1.05 (0.79x), 1.75 / 1.38 / 0.90 (0.61x), 1.34 / 0.88 /
# 0.77 (0.66x), 2.80 / 1.36 / 1.11 (0.83x) and 2.04 / 1.27 / 1.41 (0.93x) against their
# references' 2.59 / 3.60 / 3.78, 2.45 / 3.52 / 3.42, 2.11 / 2.81 / 3.09, 3.49 / 5.16 / 4.58 and
# 4.25 / 6.00 / 6.70 (sa_softmax's reference took 32x SDPA's memory at 2,048); sa_softmax at 128
# keys read 1.99 once lo's and hi's gradients went through index_add_.
# (scorers/fast/policy.py: auto's table.)
@register_form("blocked")
class BlockedForm(FastForm):
    """:func:`blocked_attend` of the scorer's ``blocked`` kernel; compiles nothing. ``auto`` on a
    CPU, before ``dense`` and ``pivot`` and over SDPA: below ``RECOMPUTE_FROM_KEYS`` keys (kept
    weights) it ran as fast as they did or faster, and from there its memory stays within 1.5x
    SDPA's."""

    kernel = "blocked"
    default_block = None              # tiles.py's BLOCK_ROWS, by whether the weights are kept

    def attend(self, scorer, q, k, v, mask):
        return blocked_attend(spec_for(scorer.kernels().blocked, q, k, mask), q, k, v, mask,
                              block_size=self.block_size)
