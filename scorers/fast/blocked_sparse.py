"""Sparsemax and 1.5-entmax attention, blocked with recompute (tiles.py's tiles).

Both are w = [z - tau]_+^p with sum_j w_ij = 1 over the visible keys of row i (sparsemax: p = 1,
z = s; 1.5-entmax: p = 2, z = s/2, folded into the queries' scale). The threshold tau_i is found
over key blocks, as AdaSplash does on GPUs (Goncalves et al., arXiv 2502.12082): every step of
the search is one pass over the row's key tiles that reduces each tile to per-row sums, so no
(Lq, Lk) matrix is ever whole. The steps are those of scorers/pivot.py, on rows shifted by their
maximum m_i (so z - m <= 0 and tau in [-1, 0)):

- sparsemax, Michelot's algorithm: tau <- tau + (sum_S (z - tau) - 1) / |S| on S = {z > tau},
  from tau = -1, until |S| repeats; the last step is the support's closed form, exact.
- 1.5-entmax, Newton on sum (z - tau)_+^2 = 1 from tau = -1 (the iterates rise to tau* without
  passing it); once |S| repeats, the support's closed form tau_S = mean_S - sqrt((1 - |S| var_S)
  / |S|) is accepted when one more pass finds it keeps S as its support (or its residual is at
  the rounding level of the row's sum: a key within rounding of tau* weighs ~0 either way).

The tiles of a query block stay in memory across the passes when they are few
(:data:`CACHE_TILES`), else each pass makes them again. The forward saves, per row, tau and one
vector: sparsemax's v_S = sum_{j in S} v_j and |S|; 1.5-entmax's sum_j r_j v_j and sum_j r_j with
r = [z - tau]_+ = sqrt(w). The backward (the ``entmax`` package's, streamed) is then one pass:
with g = dO V^T, sparsemax dL/dz = 1[S] (g - dO . v_S / |S|); 1.5-entmax dL/dz = 2 r (g - dO .
(r V) / sum r). Rows that see no key get zero output and gradients.
"""
from __future__ import annotations

import math

import torch

from ..base import compute_dtype
from ..pivot import sum_of_squares, support_size_
from .planning import NEG_INF
from .tiles import (Tiling, as_scale, hide, logit_grads, plan_tiles, scale_grads, scale_rows,
                    tile_logits)

SPARSE_KINDS = {"sparsemax": 1, "entmax15": 2}
# A query block keeps its logit tiles across the threshold's passes up to this many tiles.
CACHE_TILES = 4
MAX_NEWTON = 50


class _Rows:
    """The key tiles of one query block, shifted by the rows' maximum: ``passes()`` yields
    ``(a, b, z - m)`` (masked entries -inf), from memory or made again."""

    def __init__(self, qb, k, tiling: Tiling, i, j, e):
        self.qb, self.k, self.tiling, self.i, self.j, self.e = qb, k, tiling, i, j, e
        count = len(range(0, e, tiling.key_block))
        self.cache = [] if count <= CACHE_TILES else None
        m = None
        for a, b, z in self._make():
            tile_max = z.amax(-1, keepdim=True)
            m = tile_max if m is None else torch.maximum(m, tile_max)
            if self.cache is not None:
                self.cache.append((a, b, z))
        self.empty = m == NEG_INF
        self.m = m.masked_fill(self.empty, 0.0)
        if self.cache is not None:
            for _, _, z in self.cache:
                z.sub_(self.m)

    def _make(self):
        for a, b, hidden in self.tiling.tiles(self.i, self.j, self.e):
            z = tile_logits(self.qb, self.k, a, b)
            hide(z, hidden, NEG_INF)
            yield a, b, z

    def passes(self):
        if self.cache is not None:
            yield from self.cache
            return
        for a, b, z in self._make():
            yield a, b, z.sub_(self.m)


def _sums(rows: _Rows, tau: torch.Tensor, power: int):
    """|S|, sum_S (z - tau) and (power 2) sum_S (z - tau)^2 per row, over the key tiles."""
    k = s1 = s2 = 0
    for _, _, z in rows.passes():
        d = (z - tau).clamp_(min=0)
        s1 = s1 + d.sum(-1, keepdim=True)
        if power == 2:
            s2 = s2 + sum_of_squares(d)
        k = k + support_size_(d)
    return k, s1, s2


def _threshold(rows: _Rows, power: int) -> torch.Tensor:
    """tau (relative to the rows' maximum) of sparsemax (power 1) or 1.5-entmax (power 2)."""
    tau = torch.full_like(rows.m, -1.0)
    k = None
    steps = rows.e + 1 if power == 1 else MAX_NEWTON
    for _ in range(steps):
        k_new, s1, s2 = _sums(rows, tau, power)
        count = k_new.clamp(min=1)                      # rows that see no key: k = 0
        if power == 1:
            tau = tau + (s1 - 1) / count
            if k is not None and torch.equal(k_new, k):
                return tau
        else:
            if k is not None and torch.equal(k_new, k):
                mean = s1 / count
                var = s2 / count - mean * mean
                exact = tau + mean - ((1 - count * var) / count).clamp(min=0).sqrt()
                k_exact, _, r2 = _sums(rows, exact, 2)
                if torch.equal(k_exact, k_new):
                    return exact
                residual = (r2 - 1).abs().masked_fill(rows.empty, 0.0)
                if bool((residual <= 4 * count * torch.finfo(tau.dtype).eps).all()):
                    return exact
            tau = tau + (s2 - 1) / (2 * s1.masked_fill(s1 == 0, 1.0))
        k = k_new
    return tau


class BlockedSparse(torch.autograd.Function):
    """See :func:`sparse_attend`."""

    @staticmethod
    def forward(ctx, q, k, v, scale, tiling: Tiling, power: int):
        bsz, heads, lq = q.shape[:3]
        out = q.new_zeros(bsz, heads, lq, v.shape[-1])
        rv = q.new_zeros(bsz, heads, lq, v.shape[-1])   # v_S (p = 1) or sum r v (p = 2)
        norm = q.new_empty(bsz, heads, lq, 1)           # |S| or sum r
        thresholds = q.new_empty(bsz, heads, lq, 1)     # m + tau
        kept = []
        for i, j, e in tiling.blocks:
            rows = _Rows(q[..., i:j, :] * scale_rows(scale, i, j), k, tiling, i, j, e)
            tau = _threshold(rows, power)
            total = 0
            for a, b, z in rows.passes():
                r = z.sub_(tau).clamp_(min=0)
                on = torch.sign(r) if power == 1 else r
                w = r if power == 1 else r * r
                out[..., i:j, :] += torch.matmul(w, v[..., a:b, :])
                rv[..., i:j, :] += torch.matmul(on, v[..., a:b, :])
                total = total + on.sum(-1, keepdim=True)
                if not tiling.recompute:
                    kept.append(r)
            norm[..., i:j, :] = total
            thresholds[..., i:j, :] = (rows.m + tau).masked_fill_(rows.empty, math.inf)
        ctx.tiling, ctx.power, ctx.kept = tiling, power, kept
        ctx.save_for_backward(q, k, v, scale, thresholds, rv, norm)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v, scale, thresholds, rv, norm = ctx.saved_tensors
        kept, ctx.kept = iter(ctx.kept), None
        tiling, power = ctx.tiling, ctx.power
        need_q, need_k, need_v = ctx.needs_input_grad[:3]
        d_out = d_out.contiguous()
        # dO . v_S / |S| or dO . (r V) / sum r: the row's mean of g over the support
        centre = (d_out * rv).sum(-1, keepdim=True) / norm.masked_fill(norm == 0, 1.0)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for i, j, e in tiling.blocks:
            dob, tau, centre_b = d_out[..., i:j, :], thresholds[..., i:j, :], centre[..., i:j, :]
            qb = q[..., i:j, :] * scale_rows(scale, i, j)
            for a, b, hidden in tiling.tiles(i, j, e):
                if tiling.recompute:
                    r = tile_logits(qb, k, a, b).sub_(tau).clamp_(min=0)
                    hide(r, hidden, 0.0)
                else:
                    r = next(kept)
                if need_v:
                    w = r if power == 1 else r * r
                    dv[..., a:b, :] += torch.matmul(w.transpose(-1, -2), dob)
                    del w
                g = torch.matmul(dob, v[..., a:b, :].transpose(-1, -2)).sub_(centre_b)
                ds = g.mul_(torch.sign(r)) if power == 1 else g.mul_(r).mul_(2.0)  # dL/dz
                logit_grads(ds, qb, k, dq, dk, (i, j), (a, b), need_q, need_k)
            if need_q:
                scale_grads(dq, q, scale, i, j, False, None)
        return (dq if need_q else None, dk if need_k else None, dv if need_v else None,
                None, None, None)


def sparse_attend(q, k, v, mask=None, *, kind: str, query_scale=None,
                  block_size: int | None = None, key_block: int | None = None,
                  recompute: bool | None = None) -> torch.Tensor:
    """sparsemax (``kind="sparsemax"``) or 1.5-entmax (``"entmax15"``) over the visible keys of
    ``s = (q * query_scale) k^T`` (default scale 1/sqrt(d)), times v, blocked with recompute.
    Inputs in bf16/fp16 run in fp32 and come back in their dtype."""
    if kind not in SPARSE_KINDS:
        raise ValueError(f"kind must be one of {sorted(SPARSE_KINDS)}, got {kind!r}")
    power = SPARSE_KINDS[kind]
    dtype = compute_dtype(q, k, v)
    if query_scale is None:
        query_scale = 1.0 / (power * math.sqrt(q.shape[-1]))     # entmax15: z = s / 2
    elif power == 2:
        query_scale = query_scale / 2
    scale = as_scale(query_scale, q, dtype)
    if scale.requires_grad:
        raise ValueError("the blocked sparse forms take a constant query_scale")
    tiling = plan_tiles(q, k, mask, block_size=block_size, key_block=key_block,
                        recompute=recompute)
    out = BlockedSparse.apply(q.to(dtype), k.to(dtype), v.to(dtype), scale, tiling, power)
    return out.to(v.dtype)
