"""Blocked forms with recompute (tiles.py's tiles) for weights that a softmax's running maximum
and sum do not make alone: each row carries one or two more statistics across its key tiles.

- softpick (``kind="softpick"``): with m_i = max(0, max_{V_i} s_ij),
  w_ij = relu(e^{s_ij - m_i} - e^{-m_i}) / (sum_{k in V_i} |e^{s_ik - m_i} - e^{-m_i}| + eps).
  The running m and both sums rescale by e^{m_old - m_new} as m grows (the shift is a constant of
  the reference, detached, so it is no gradient path). Saved: m_i and the denominator D_i.
  Backward, x = e^{s - m} - e^{-m} (the sign of x decides, as relu's and abs's slopes do in the
  reference), E = e^{s - m} / D and delta_i = sum_j dO_ij O_ij:
  ds = E (1[x > 0] dP - sgn(x) delta).
- signed softmax (``"signed_softmax"``): w = sgn(s) softmax_{V_i}(|s|), a softmax of |s| (a
  tile's row maximum of |s| is the larger of its max s and -min s) whose weights take s's sign on
  the way into P V. Saved: lse_i of |s|. Backward, p = e^{|s| - lse}:
  ds = p sgn(s) (sgn(s) dP - delta).
- self-adjust softmax (``"self_adjust"``): with p = softmax_{V_i}(s), lo_i = min(min_{V_i} s, 0),
  hi_i = max(max_{V_i} s, 0), r_i = max(hi_i - lo_i, 1e-10): w = (s - lo) / r * p. The forward
  takes each query block's tiles twice: first for the row's maximum, lo and hi (and the keys
  where they are reached), then for p and O = sum_j (s_j - lo) p_j v_j / r (the logits kept
  between the two where the block keeps its tiles' state, else made again: one matmul, as the
  second numerator of a one-pass form would cost). ``"self_adjust_plain"``: w = s p (lo = 0,
  r = 1). Backward: ds = p (dP / r - delta) + w dP, and at lo's key (lo < 0)
  dL/dlo = (delta - G) / r, at hi's key (hi > 0) dL/dhi = -delta / r, G_i = sum_j p_j dP_ij
  (with r clamped: -G / r and 0).

:func:`softmax_entropy` is the row statistic of adaptive temperature: H_i of softmax(s) over
V_i, one forward pass over the tiles (running max m, sum l and u = sum e^{s - m} s:
H = m + ln l - u / l), and one more in the backward when the scorer lets a gradient through H:
dL/ds = -dL/dH p (ln p + H).

Below ``RECOMPUTE_FROM_KEYS`` keys (tiles.py) each tile's state (what its weights and gradients
are made from) is kept from the forward, from 512 keys within tiles.py's ``KEEP_BUDGET``, with a
per-row factor for the shift it was made at, instead of made again. Exponentials run in base 2,
as blocked.py's do (the queries carry log2 e, the gradients go to the natural logits). Masked
keys weigh exactly zero; a query that sees no key gets a zero output and zero gradients
(docs/scorers.md#fully-masked-rows).
"""
from __future__ import annotations

import math

import torch

from ..base import compute_dtype
from ..forms import LOG2E
from .planning import NEG_INF
from .tiles import (BlockedError, Hidden, Tiling, as_scale, drain, hide, logit_grads, plan_tiles,
                    scale_grads, scale_rows, tile_logits)

ROW_KINDS = ("softpick", "signed_softmax", "self_adjust", "self_adjust_plain")
# sa_softmax's floor on hi - lo.
SPAN_FLOOR = 1e-10


def _row_max(t: torch.Tensor) -> torch.Tensor:
    return t.amax(-1, keepdim=True)


def _blocks(q, scale, tiling: Tiling):
    """``(i, j, e, qb)`` per query block: qb the block's queries times the query scale."""
    for i, j, e in tiling.blocks:
        yield i, j, e, q[..., i:j, :] * scale_rows(scale, i, j)


def _logits2(qb, k, a, b):
    """A tile of s log2 e."""
    return tile_logits(qb * LOG2E, k, a, b)


def _visible_row_max(t: torch.Tensor, hidden: Hidden | None) -> torch.Tensor:
    """Row maxima of tile ``t`` over its visible entries (-inf where a row has none)."""
    if hidden is None:
        return _row_max(t)
    top = _row_max(hidden.part(t) + hidden.filled(t.dtype, NEG_INF))
    return torch.maximum(top, _row_max(t[..., :hidden.c])) if hidden.c else top


def _extreme(t: torch.Tensor, lower: bool):
    """(values, indices) of the rows' minima (``lower``) or maxima of tile ``t``, the first
    key where each is reached, as ``torch.min``/``torch.max`` give them: sgn |t - extreme| is 0
    there only, so the least of j + keys sgn |t_j - extreme| is that j. On the 2-core CPU
    torch.min with indices over an (8, 4, 128, 128) tile took 780 us, amin 57, this 200."""
    value = t.amin(-1, keepdim=True) if lower else t.amax(-1, keepdim=True)
    gap = (torch.sub(t, value) if lower else torch.sub(value, t)).sign_()
    order = torch.arange(t.shape[-1], dtype=t.dtype, device=t.device)
    at = torch.add(order, gap, alpha=t.shape[-1], out=gap).amin(-1, keepdim=True)
    return value, at.nan_to_num_(0.0).long()


def _running(found, best, best_at, offset: int, lower: bool):
    """The running minimum (``lower``) or maximum of a row, from 0 on, and the key where it is
    reached, from a tile's (values, indices) (:func:`_extreme`); ``best`` None: the first
    tile."""
    value, index = found
    if best is None:
        return (value.clamp_(max=0.0) if lower else value.clamp_(min=0.0)), index + offset
    take = torch.lt(value, best) if lower else torch.gt(value, best)
    return torch.where(take, value, best), torch.where(take, index + offset, best_at)


class BlockedRows(torch.autograd.Function):
    """See the module doc. Inputs: q, k, v, the query scale, the tiling and the kernel (one of
    :class:`Softpick`, :class:`SignedSoftmax`, :class:`SelfAdjust`). The kernel's ``forward``
    gives the output, the per-row statistics to save and, below the recompute length, each
    tile's state; ``tile_state`` makes a tile's state again from its logits s log2 e;
    ``row_factor`` gives a per-row factor f of a tile's weights (or None), which rides on dO
    into both matmuls (dP f = (dO f) V^T, dV += (w / f)^T (dO f)); ``tile_grads`` gives a
    tile's w / f and dL/ds from its state, dP f, f and delta = dO . O; ``row_grads`` adds what
    reaches single entries of a query block's rows."""

    @staticmethod
    def forward(ctx, q, k, v, scale, tiling: Tiling, kernel):
        out, stats, kept = kernel.forward(q, k, v, scale, tiling)
        ctx.tiling, ctx.kernel, ctx.kept = tiling, kernel, kept
        ctx.save_for_backward(q, k, v, scale, out, *stats)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v, scale, out, *stats = ctx.saved_tensors
        tiling, kernel = ctx.tiling, ctx.kernel
        kept, ctx.kept = drain(ctx.kept), None
        need_q, need_k, need_v, need_scale = ctx.needs_input_grad[:4]
        need_qs = need_q or need_scale
        d_out = d_out.contiguous()
        delta = (d_out * out).sum(-1, keepdim=True)
        dq, dk, dv = torch.zeros_like(q), k.new_zeros(k.shape), torch.zeros_like(v)
        dscale = torch.zeros_like(scale) if need_scale else None
        for i, j, e, qb in _blocks(q, scale, tiling):
            dob, delta_b = d_out[..., i:j, :], delta[..., i:j, :]
            rows = [x[..., i:j, :] for x in stats]
            carry = 0
            for a, b, hidden in tiling.tiles(i, j, e):
                if not tiling.keeps(i):
                    state = kernel.tile_state(_logits2(qb, k, a, b), hidden, rows)
                else:
                    state = next(kept)
                f = kernel.row_factor(state, rows)
                dob_f = dob if f is None else dob * f
                dp = torch.matmul(dob_f, v[..., a:b, :].transpose(-1, -2))
                w, ds, carry = kernel.tile_grads(state, rows, dp, delta_b, f, carry)
                del state
                if need_v:
                    dv[..., a:b, :] += torch.matmul(w.transpose(-1, -2), dob_f)
                del w, dp
                logit_grads(ds, qb, k, dq, dk, (i, j), (a, b), need_qs, need_k)
            kernel.row_grads(rows, delta_b, carry, qb, k, dq, dk, i, need_qs, need_k)
            if need_qs:
                scale_grads(dq, q, scale, i, j, need_scale, dscale)
        return (dq if need_q else None, dk if need_k else None, dv if need_v else None, dscale,
                None, None)


class Softpick:
    """A tile's state: x = e^{s - m_t} - e^{-m_t} (0 where masked), m_t and the rows' factor
    e^{m_t - m} / D, m_t being the shift x was made with (the final m when made again)."""

    state = 1              # tiles of state per entry (plan_tiles' ``state``)

    def __init__(self, eps: float):
        self.eps = float(eps)

    def forward(self, q, k, v, scale, tiling: Tiling):
        bsz, heads, lq = q.shape[:3]
        out = q.new_empty(bsz, heads, lq, v.shape[-1])
        m2, den = q.new_empty(bsz, heads, lq, 1), q.new_empty(bsz, heads, lq, 1)
        kept = []
        for i, j, e, qb in _blocks(q, scale, tiling):
            m = q.new_zeros(bsz, heads, j - i, 1)          # max(0, max s) log2 e
            l = torch.zeros_like(m)
            acc = q.new_zeros(bsz, heads, j - i, v.shape[-1])
            block_kept = []
            for a, b, hidden in tiling.tiles(i, j, e):
                s = hide(_logits2(qb, k, a, b), hidden, NEG_INF)
                m_new = torch.maximum(m, _row_max(s))
                x = s.sub_(m_new).exp2_().sub_(m_new.neg().exp2_())
                hide(x, hidden, 0.0)
                alpha = (m - m_new).exp2_()
                total = x.sum(-1, keepdim=True)
                if not tiling.keeps(i):
                    positive = x.clamp_(min=0)
                else:
                    positive = x.clamp(min=0)
                    block_kept.append((x, m_new))
                # sum |x| = 2 sum relu(x) - sum x: two sums instead of a pass of |x|
                l = l.mul_(alpha).add_(positive.sum(-1, keepdim=True).mul_(2).sub_(total))
                acc = acc.mul_(alpha).add_(torch.matmul(positive, v[..., a:b, :]))
                m = m_new
            d = l + self.eps
            out[..., i:j, :] = acc / d
            m2[..., i:j, :], den[..., i:j, :] = m, d
            kept += [(x, m_t, (m_t - m).exp2_().div_(d)) for x, m_t in block_kept]
        return out, (m2, den), kept

    @staticmethod
    def tile_state(s2, hidden, rows):
        m, den = rows
        x = hide(hide(s2 - m, hidden, NEG_INF).exp2_().sub_(m.neg().exp2()), hidden, 0.0)
        return x, m, 1.0 / den

    @staticmethod
    def row_factor(state, rows):
        return state[2]

    @staticmethod
    def tile_grads(state, rows, dp, delta, f, carry):
        x, m_t, _ = state
        sign = x.sign()
        ds = dp.mul_(sign.clamp(min=0)).sub_(sign.mul_(delta * f))  # (1[x > 0] dP - sgn(x) delta) f
        return x.clamp(min=0), ds.mul_(x + m_t.neg().exp2()), carry  # times e^{s - m_t}

    @staticmethod
    def row_grads(*args):
        pass


class SignedSoftmax:
    """A tile's state: sgn(s) e^{|s| - m_t} (0 where masked) and the rows' factor
    e^{m_t - lse} (None when made again, with m_t = lse)."""

    state = 1

    @staticmethod
    def forward(q, k, v, scale, tiling: Tiling):
        bsz, heads, lq = q.shape[:3]
        out = q.new_empty(bsz, heads, lq, v.shape[-1])
        lse2 = q.new_empty(bsz, heads, lq, 1)
        kept = []
        for i, j, e, qb in _blocks(q, scale, tiling):
            m = l = acc = None
            block_kept = []
            for a, b, hidden in tiling.tiles(i, j, e):
                s = _logits2(qb, k, a, b)
                t = hide(s.abs(), hidden, NEG_INF)
                top = _row_max(t)
                m_new = top if m is None else torch.maximum(m, top)
                m_safe = m_new.masked_fill(m_new == NEG_INF, 0.0)
                p = t.sub_(m_safe).exp2_()
                l_tile = p.sum(-1, keepdim=True)
                signed = p.mul_(s.sign_())
                pv = torch.matmul(signed, v[..., a:b, :])
                if m is None:
                    l, acc = l_tile, pv
                else:
                    alpha = (m - m_safe).exp2_()
                    l = l.mul_(alpha).add_(l_tile)
                    acc = acc.mul_(alpha).add_(pv)
                m = m_new
                if tiling.keeps(i):
                    block_kept.append((signed, m_safe))
            empty = l == 0
            out[..., i:j, :] = acc / l.masked_fill(empty, 1.0)
            block_lse2 = (m.masked_fill(m == NEG_INF, 0.0) + l.log2()).masked_fill_(empty,
                                                                                    math.inf)
            lse2[..., i:j, :] = block_lse2
            kept += [(signed, (m_t - block_lse2).exp2_()) for signed, m_t in block_kept]
        return out, (lse2,), kept

    @staticmethod
    def tile_state(s2, hidden, rows):
        (lse2,) = rows
        p = hide(s2.abs().sub_(lse2), hidden, NEG_INF).exp2_()
        return p.mul_(s2.sign_()), None

    @staticmethod
    def row_factor(state, rows):
        return state[1]

    @staticmethod
    def tile_grads(state, rows, dp, delta, f, carry):
        signed = state[0]                                      # sgn(s) p / f
        ds = signed.abs().mul_(dp).addcmul_(signed, delta if f is None else delta * f,
                                            value=-1.0)       # p sgn(s) (sgn(s) dP - delta)
        return signed, ds, carry

    @staticmethod
    def row_grads(*args):
        pass


class SelfAdjust:
    """``plain``: w = s p; else w = (s - lo) / r p (see the module doc). Statistics are in base
    2 (lse, lo and hi times log2 e). A tile's state: p' = e^{s - m} (0 where masked),
    u = (s - lo) log2 e p' and the rows' 1 / l, so that p = p' / l (made again: p' = p and
    None for 1 / l)."""

    state = 2

    def __init__(self, plain: bool):
        self.plain = bool(plain)

    def inverse_span(self, lo2, hi2):
        """1 / (r log2 e), so that (s log2 e - lo log2 e) / (r log2 e) = (s - lo) / r."""
        if self.plain:
            return torch.full_like(lo2, 1.0 / LOG2E)
        return 1.0 / (hi2 - lo2).clamp_(min=SPAN_FLOOR * LOG2E)

    def forward(self, q, k, v, scale, tiling: Tiling):
        bsz, heads, lq = q.shape[:3]
        out = q.new_empty(bsz, heads, lq, v.shape[-1])
        stats = q.new_empty(4, bsz, heads, lq, 1)                  # lse2, lo2, hi2, 1 / (r log2 e)
        where = q.new_zeros(2, bsz, heads, lq, 1, dtype=torch.long)
        kept = []
        for i, j, e, qb in _blocks(q, scale, tiling):
            lo = hi = lo_at = hi_at = m = None
            logits = []
            for a, b, hidden in tiling.tiles(i, j, e):
                z = hide(_logits2(qb, k, a, b), hidden, 0.0)     # masked keys as 0, as lo and hi
                top = _visible_row_max(z, hidden)
                m = top if m is None else torch.maximum(m, top)
                if not self.plain:
                    lo, lo_at = _running(_extreme(z, lower=True), lo, lo_at, a, True)
                    hi, hi_at = _running(_extreme(z, lower=False), hi, hi_at, a, False)
                logits.append(z if tiling.keeps(i) else None)
            m = m.masked_fill_(m == NEG_INF, 0.0)
            l = acc = 0
            block_kept = []
            for (a, b, hidden), z in zip(tiling.tiles(i, j, e), logits):
                if z is None:
                    z = hide(_logits2(qb, k, a, b), hidden, 0.0)
                p = hide(z - m, hidden, NEG_INF).exp2_()
                u = (z if self.plain else z.sub_(lo)).mul_(p)
                l = l + p.sum(-1, keepdim=True)
                acc = acc + torch.matmul(u, v[..., a:b, :])
                if tiling.keeps(i):
                    block_kept.append((u, p))
            empty = l == 0
            norm = 1.0 / l.masked_fill(empty, 1.0)
            if self.plain:
                lo = hi = torch.zeros_like(m)
            inv_r2 = self.inverse_span(lo, hi)
            out[..., i:j, :] = acc * (inv_r2 * norm)
            stats[..., i:j, :] = torch.stack([(m + l.log2()).masked_fill_(empty, math.inf),
                                              lo, hi, inv_r2])
            if not self.plain:
                where[..., i:j, :] = torch.stack([lo_at, hi_at])
            kept += [(u, p, norm) for u, p in block_kept]
        return out, (*stats, *where), kept

    @staticmethod
    def tile_state(s2, hidden, rows):
        lse2, lo2 = rows[:2]
        z = hide(s2, hidden, 0.0)
        p = hide(z - lse2, hidden, NEG_INF).exp2_()
        return z.sub_(lo2).mul_(p), p, None

    @staticmethod
    def row_factor(state, rows):
        return rows[3] if state[2] is None else rows[3] * state[2]

    def tile_grads(self, state, rows, dp, delta, f, carry):
        u, p, norm = state
        if not self.plain:
            carry = carry + torch.linalg.vecdot(p, dp).unsqueeze(-1)      # G f
        ds = torch.add(u, p, alpha=LOG2E).mul_(dp).addcmul_(   # p ((s - lo + 1) dP / r - delta)
            p, delta if norm is None else delta * norm, value=-1.0)
        return u, ds, carry

    def row_grads(self, rows, delta, carry, qb, k, dq, dk, i, need_q, need_k):
        """lo's and hi's gradients, each to the one key where it is reached: with r clamped,
        -G / r and 0, else (delta - G) / r and -delta / r; none where lo or hi is 0."""
        if self.plain:
            return
        _, lo2, hi2, inv_r2, lo_at, hi_at = rows
        clamped = (hi2 - lo2) < SPAN_FLOOR * LOG2E
        scaled = (delta * inv_r2).masked_fill_(clamped, 0.0)
        g = torch.cat([(scaled - carry).masked_fill_(lo2 >= 0, 0.0),
                       scaled.neg_().masked_fill_(hi2 <= 0, 0.0)], -2).mul_(LOG2E)
        lk, d = k.shape[-2:]
        rows_of = torch.arange(0, lo_at.shape[0] * lo_at.shape[1] * lk, lk, device=k.device)
        index = torch.cat([lo_at, hi_at], -2).add_(rows_of.view(*lo_at.shape[:2], 1, 1)).view(-1)
        n = qb.shape[-2]
        if need_q:       # index_select and index_add_ ran 5x faster than gather and scatter_add_
            keys = k.reshape(-1, d).index_select(0, index).view(*g.shape[:-1], d)
            dq[..., i:i + n, :] += (g * keys).view(*qb.shape[:-2], 2, n, d).sum(-3)
        if need_k:
            dk.view(-1, d).index_add_(0, index, (g * torch.cat([qb, qb], -2)).view(-1, d))


def _kernel(kind: str, eps: float):
    if kind == "softpick":
        return Softpick(eps)
    if kind == "signed_softmax":
        return SignedSoftmax()
    if kind in ("self_adjust", "self_adjust_plain"):
        return SelfAdjust(plain=kind == "self_adjust_plain")
    raise BlockedError(f"kind must be one of {ROW_KINDS}, got {kind!r}")


def rows_attend(q, k, v, mask=None, *, kind: str, eps: float = 0.0, query_scale=None,
                block_size: int | None = None, key_block: int | None = None,
                recompute: bool | None = None) -> torch.Tensor:
    """softpick (``eps``), the signed softmax or the self-adjust softmax (``kind``, one of
    :data:`ROW_KINDS`) over the visible keys of ``s = (q * query_scale) k^T``, times v, blocked
    with recompute (below the recompute length the tiles' weights are kept). ``query_scale``
    as in blocked.py's ``softmax_attend``; inputs in bf16/fp16 run in fp32 and come back in
    their dtype."""
    kernel = _kernel(kind, eps)
    dtype = compute_dtype(q, k, v)
    scale = as_scale(query_scale, q, dtype)
    tiling = plan_tiles(q, k, mask, block_size=block_size, key_block=key_block,
                        recompute=recompute, state=kernel.state)
    out = BlockedRows.apply(q.to(dtype), k.to(dtype), v.to(dtype), scale, tiling, kernel)
    return out.to(v.dtype)


class BlockedEntropy(torch.autograd.Function):
    """H_i of softmax over the visible keys of ``s = (q * scale) k^T`` (see
    :func:`softmax_entropy`). Saves lse log2 e and H per row. Backward, p = e^{s - lse}:
    dL/ds_ij = -dL/dH_i p_ij (ln p_ij + H_i)."""

    @staticmethod
    def forward(ctx, q, k, scale, tiling: Tiling):
        bsz, heads, lq = q.shape[:3]
        entropy, lse2 = q.new_empty(bsz, heads, lq, 1), q.new_empty(bsz, heads, lq, 1)
        lowest = torch.finfo(q.dtype).min
        for i, j, e, qb in _blocks(q, scale, tiling):
            m = l = u = None
            for a, b, hidden in tiling.tiles(i, j, e):
                s = hide(_logits2(qb, k, a, b), hidden, lowest)
                top = _row_max(s)
                m_new = top if m is None else torch.maximum(m, top)
                p = hide((s - m_new).exp2_(), hidden, 0.0)
                ps = (p * s).sum(-1, keepdim=True)
                if m is None:
                    l, u = p.sum(-1, keepdim=True), ps
                else:
                    alpha = (m - m_new).exp2_()
                    l = l.mul_(alpha).add_(p.sum(-1, keepdim=True))
                    u = u.mul_(alpha).add_(ps)
                m = m_new
            empty = l == 0
            l = l.masked_fill(empty, 1.0)
            block_lse2 = (m + l.log2()).masked_fill_(empty, 0.0)
            lse2[..., i:j, :] = block_lse2
            entropy[..., i:j, :] = (block_lse2 - u / l).masked_fill_(empty, 0.0).div_(LOG2E)
        ctx.tiling = tiling
        ctx.save_for_backward(q, k, scale, lse2, entropy)
        return entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_entropy):
        q, k, scale, lse2, entropy = ctx.saved_tensors
        tiling = ctx.tiling
        need_q, need_k, need_scale = ctx.needs_input_grad[:3]
        need_qs = need_q or need_scale
        dq, dk = torch.zeros_like(q), torch.zeros_like(k)
        dscale = torch.zeros_like(scale) if need_scale else None
        for i, j, e, qb in _blocks(q, scale, tiling):
            lse_b, h_b, dh_b = lse2[..., i:j, :], entropy[..., i:j, :], d_entropy[..., i:j, :]
            for a, b, hidden in tiling.tiles(i, j, e):
                log_p2 = _logits2(qb, k, a, b).sub_(lse_b)
                p = hide(log_p2.clone(), hidden, NEG_INF).exp2_()
                ds = log_p2.div_(LOG2E).add_(h_b).mul_(p).mul_(-dh_b)     # -dH p (ln p + H)
                logit_grads(ds, qb, k, dq, dk, (i, j), (a, b), need_qs, need_k)
            if need_qs:
                scale_grads(dq, q, scale, i, j, need_scale, dscale)
        return dq if need_q else None, dk if need_k else None, dscale, None


def softmax_entropy(q, k, mask=None, *, query_scale=None, block_size: int | None = None,
                    key_block: int | None = None) -> torch.Tensor:
    """H_i = -sum_{j in V_i} p_ij ln p_ij of p = softmax over the visible keys of
    ``s = (q * query_scale) k^T``, (B, H, Lq, 1) in the compute dtype, 0 where a row sees no
    key; q and k (and a tensor query_scale) get its gradient."""
    dtype = compute_dtype(q, k)
    scale = as_scale(query_scale, q, dtype)
    tiling = plan_tiles(q, k, mask, block_size=block_size, key_block=key_block, recompute=True)
    return BlockedEntropy.apply(q.to(dtype), k.to(dtype), scale, tiling)


def entropy_scale(scale_of_entropy, q, k, mask=None, *, query_scale=None,
                  block_size: int | None = None, key_block: int | None = None) -> torch.Tensor:
    """``query_scale`` times ``scale_of_entropy(H)`` per row, H the row's
    :func:`softmax_entropy` at ``query_scale``: (B, H, Lq, 1), with the gradient through H
    that ``scale_of_entropy`` leaves (none where it detaches)."""
    h = softmax_entropy(q, k, mask, query_scale=query_scale, block_size=block_size,
                        key_block=key_block)
    return as_scale(query_scale, q, h.dtype) * scale_of_entropy(h)
