"""Sparsemax, 1.5-entmax and alpha-entmax attention, blocked with recompute (tiles.py's tiles).

Each is w = [z - tau]_+^p with sum_j w_ij = 1 over the visible keys of row i (sparsemax: p = 1, z =
s; 1.5-entmax: p = 2, z = s/2, folded into the queries' scale; alpha-entmax below). The threshold
tau_i is found over key blocks, as AdaSplash does on GPUs (Goncalves et al., arXiv 2502.12082):
every step of the search is one pass over the row's key tiles that reduces each tile to per-row
sums, so no (Lq, Lk) matrix is ever whole. The steps are those of scorers/pivot.py, on rows shifted
by their maximum m_i (so z - m <= 0 and tau in [-1, 0)):

- sparsemax, Michelot's algorithm: tau <- tau + (sum_S (z - tau) - 1) / |S| on S = {z > tau},
  from tau = -1, until |S| repeats; the last step is the support's closed form, exact.
- 1.5-entmax, Newton on sum (z - tau)_+^2 = 1 from tau = -1 (the iterates rise to tau* without
  passing it); once |S| repeats, the support's closed form tau_S = mean_S - sqrt((1 - |S| var_S)
  / |S|) is accepted when one more pass finds it keeps S as its support (or its residual is at
  the rounding level of the row's sum: a key within rounding of tau* weighs ~0 either way).
- alpha-entmax, alpha in (1, 2] (a float, or a tensor such as a learned alpha per head),
  w = [z - tau]_+^r with z = (alpha - 1) s (folded into the queries' scale) and r = 1/(alpha - 1):
  Newton on ||[z - tau]_+||_r = 1 from tau = -1 (where pivot.py's ``entmax_threshold`` works on
  the r-th power, which takes about twice the steps), until no row's step exceeds the rounding of
  tau; the weights are divided by their sum, as the package's ``ensure_sum_one`` does. Only the
  entries above tau = -1 can ever be in the support; where they are few, the passes run over them
  alone, flat, and shed those that fall below tau as it rises (:class:`_Candidates`).

The tiles of a query block stay in memory across the passes when they are few
(:data:`CACHE_TILES`), else each pass makes them again. The forward saves, per row, tau and one
vector (two for a learned alpha): sparsemax's v_S = sum_{j in S} v_j and |S|; 1.5-entmax's sum_j
r_j v_j and sum_j r_j with r = [z - tau]_+ = sqrt(w); alpha-entmax's sum_j u_j v_j, sum_j u_j and
sum_j w_j with u = [z - tau]_+^(r - 1) (and, when alpha learns, sum_j w_j log w_j and sum_j (w_j
log w_j) v_j). The backward (the ``entmax`` package's, streamed) is then one pass: with g = dO V^T,
sparsemax dL/dz = 1[S] (g - dO . v_S / |S|); 1.5-entmax dL/dz = 2 r (g - dO . (r V) / sum r);
alpha-entmax dL/dz = r u (g - c) with c = dO . (u V) / sum u, and per row dL/dalpha = (dO . O - c)
/ (alpha - 1)^2 - (sum_j g_j w_j log w_j - c sum_j w_j log w_j) / (alpha - 1), the package's
formula summed over the row. Rows that see no key get zero output and gradients.
"""
from __future__ import annotations

import math

import torch

from ..base import compute_dtype
from ..pivot import power_on_support, sum_of_squares, support_size_
from .planning import NEG_INF
from .tiles import (BlockedError, Tiling, as_scale, drain, hide, logit_grads, plan_tiles,
                    scale_grads, scale_rows, tile_logits)

SPARSE_KINDS = {"sparsemax": 1, "entmax15": 2, "entmax_alpha": None}
# A query block keeps its logit tiles across the threshold's passes up to this many tiles.
CACHE_TILES = 4
MAX_NEWTON = 50
MAX_NEWTON_ALPHA = 100
# alpha-entmax's threshold passes run over a query block's candidates alone (flat) where they are
# at most this share of its entries, or of its first CACHE_TILES tiles where it has more (so
# that they take no more memory than the cached tiles).
COMPACT_SHARE = 0.5
# ... and only where the query block's rows see at least this many keys: below it, finding the
# candidates (a nonzero over the tiles, several dense passes' time) and scattering them back for
# the output cost more than the dense passes they save. On the 2-core CPU (1 thread, alpha 1.5,
# forward + backward) at (8, 8, 128, 32) dense passes alone took 36 ms against 50 with the
# candidates, and at (4, 8, 512, 64) the rows of 256 keys and more ran faster with them.
COMPACT_FROM_KEYS = 256
# alpha-entmax's output pass is made once no row's Newton step exceeds SETTLE sqrt(tol), tol the
# rounding of tau: the step after it, about the square of this one, is then a rounding.
SETTLE = 0.25
# After a Newton step larger than this, the candidates narrow to those above the new tau. On the
# 2-core CPU (1 thread, learned alpha 1.45, forward + backward) it ran 8-12% faster at
# (32, 4, 128, 16) to (1, 8, 2048, 64) than never narrowing, and as fast as after every step.
# Where the candidates were too many, they are looked for again only after such a step: on an
# Intel Xeon (2 threads, logits of small scale, where all entries are candidates) forward +
# backward at (1, 8, 2048, 64) and 4 MiB tiles took 310 ms against 434 after every step.
NARROW = 0.1


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
                if tiling.keeps(i):
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
        kept, ctx.kept = drain(ctx.kept), None
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
                if not tiling.keeps(i):
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


def _root(alpha: torch.Tensor):
    """r = 1/(alpha - 1): a float for one alpha (torch's power of a float 1, alpha = 1.5, is a
    copy), else a tensor shaped as alpha."""
    return 1 / (alpha.item() - 1) if alpha.numel() == 1 else 1 / (alpha - 1)


def _norm_step(su, sw, r, empty):
    """Newton's step on h(tau) = ||[z - tau]_+||_r - 1 from su = sum u and sw = sum u d = ||.||_r^r:
    h / -h' = (N - 1) N^(r-1) / su = (1 - 1/N) sw / su with N = sw^(1/r)."""
    return ((1 - sw.pow(1 / r).reciprocal()) * sw / su).masked_fill_(empty, 0.0)


def _linear(r) -> bool:
    """u = d: alpha = 1.5 (r = 2), where d^1 would be a copy."""
    return isinstance(r, float) and r == 2.0


def _dense_sums(rows: _Rows, tau, r):
    """sum u and sum u d per row at tau (u = [z - tau]_+^(r-1), d = [z - tau]_+), over the tiles."""
    su = sw = 0
    for _, _, z in rows.passes():
        d = torch.sub(z, tau).clamp_(min=0)
        if _linear(r):
            su, sw = su + d.sum(-1, keepdim=True), sw + sum_of_squares(d)
        else:
            u = power_on_support(d, r - 1)
            su = su + u.sum(-1, keepdim=True)
            sw = sw + torch.linalg.vecdot(u, d).unsqueeze(-1)
    return su, sw


class _Candidates:
    """The entries z > tau0 of a query block, flat: their values ``z``, rows ``row`` (flat over
    (B, H, rows)), powers r - 1, and per key tile ``(a, b, shape, at, part)``, ``at`` their
    places in the tile, ``part`` their slice of the flat arrays. tau only rises from tau0, so no
    other entry ever enters the support: sums over the candidates are the rows' sums. ``of``
    returns None where they are more than :data:`COMPACT_SHARE` of the entries (the dense passes
    are then as fast), or of :data:`CACHE_TILES` tiles' entries."""

    def __init__(self, z, row, power, tiles, tau0):
        self.z, self.row, self.power, self.tiles = z, row, power, tiles
        self.n_rows, self.shape = tau0.numel(), tau0.shape

    @classmethod
    def of(cls, rows: _Rows, tau0, r):
        budget = COMPACT_SHARE * rows.m.numel() * min(rows.e, CACHE_TILES * rows.tiling.key_block)
        values, places, tiles, count = [], [], [], 0
        for a, b, z in rows.passes():
            at = (z > tau0).view(-1).nonzero().squeeze(1)
            tiles.append((a, b, z.shape, at, slice(count, count + len(at))))
            count += len(at)
            if count > budget:
                return None
            values.append(z.reshape(-1)[at])
            places.append(at // (b - a))
        z, row = torch.cat(values), torch.cat(places)
        power = r - 1 if isinstance(r, float) else (r - 1).expand_as(tau0).reshape(-1)[row]
        return cls(z, row, power, tiles, tau0)

    def above(self, tau) -> "_Candidates":
        """Those still above tau (>= tau0): the others stay below tau* for good."""
        keep = (self.z > tau.reshape(-1)[self.row]).nonzero().squeeze(1)
        stops = torch.tensor([part.stop for *_, part in self.tiles], device=keep.device)
        ends = torch.searchsorted(keep, stops).tolist()     # keep is sorted: each tile's share
        tiles = [(a, b, shape, at[keep[start:end] - part.start], slice(start, end))
                 for (a, b, shape, at, part), start, end in zip(self.tiles, [0, *ends], ends)]
        power = self.power if isinstance(self.power, float) else self.power[keep]
        return _Candidates(self.z[keep], self.row[keep], power, tiles, tau)

    def row_sums(self, x):
        return x.new_zeros(self.n_rows).index_add_(0, self.row, x).view(self.shape)

    def at(self, tau):
        """u and d of every candidate at tau."""
        d = (self.z - tau.reshape(-1)[self.row]).clamp_(min=0)
        return power_on_support(d, self.power), d

    def sums(self, tau):
        u, d = self.at(tau)
        return self.row_sums(u), self.row_sums(u * d)

    def dense(self, x, a, b, shape, at, part):
        """A tile's dense (…, rows, keys) tensor with x's candidates in it, zeros elsewhere."""
        t = x.new_zeros(shape)
        t.view(-1)[at] = x[part]
        return t


class _Output:
    """The output pass at tau over the tiles, or over the candidates where there are any: su = sum
    u, sw = sum w (w = u d, before normalizing), wv = sum w v, uv = sum u v and (``entropy``) sum
    w log w and sum (w log w) v; ``kept``: each tile's (u, w) where ``keep``, w None where
    alpha = 1.5 (w = u^2: one tile less to keep)."""

    def __init__(self, rows: _Rows, candidates, tau, r, v, entropy: bool,
                 keep: bool):
        self.wv = self.uv = self.wlogw_v = 0
        self.kept = []
        self.linear = _linear(r)
        if candidates is None:
            self.su = self.sw = self.wlogw = 0
            for a, b, z in rows.passes():
                d = torch.sub(z, tau).clamp_(min=0)
                u = d if _linear(r) else power_on_support(d, r - 1)
                w = d * d if _linear(r) else d.mul_(u)
                self.su = self.su + u.sum(-1, keepdim=True)
                self.sw = self.sw + w.sum(-1, keepdim=True)
                wlogw = torch.xlogy(w, w) if entropy else None
                if entropy:
                    self.wlogw = self.wlogw + wlogw.sum(-1, keepdim=True)
                self._add(a, b, u, w, wlogw, v, keep)
            return
        u, d = candidates.at(tau)
        w = d.mul_(u)
        self.su, self.sw = candidates.row_sums(u), candidates.row_sums(w)
        wlogw = torch.xlogy(w, w) if entropy else None
        if entropy:
            self.wlogw = candidates.row_sums(wlogw)
        for tile in candidates.tiles:
            dense = [None if x is None else candidates.dense(x, *tile) for x in (u, w, wlogw)]
            self._add(*tile[:2], *dense, v, keep)

    def _add(self, a, b, u, w, wlogw, v, keep):
        vb = v[..., a:b, :]
        self.wv = self.wv + torch.matmul(w, vb)
        self.uv = self.uv + torch.matmul(u, vb)
        if wlogw is not None:
            self.wlogw_v = self.wlogw_v + torch.matmul(wlogw, vb)
        if keep:
            self.kept.append((u, None if self.linear else w))


def _entmax_block(rows: _Rows, r, v, entropy, keep):
    """tau (relative to the rows' maximum) of alpha-entmax, r = 1/(alpha - 1) >= 1, by Newton's
    method on ||[z - tau]_+||_r = 1 from tau = -1 (convex and decreasing in tau: the iterates rise
    to tau* without passing it, and a step is exact where the support's entries are equal), and
    the output pass at it. The passes run over the candidates alone once they are few
    (:class:`_Candidates`), and sum only until the steps fall below :data:`SETTLE`'s bound; the
    output pass is then also the check that no row's step exceeds the rounding of tau, else
    Newton goes on."""
    tau = torch.full_like(rows.m, -1.0)
    tol = 4 * torch.finfo(tau.dtype).eps
    settle = SETTLE * tol ** 0.5
    step = candidates = None
    retry = True                    # look for few candidates: at the start and after a long step
    for _ in range(MAX_NEWTON_ALPHA):
        if candidates is None and retry and rows.e >= COMPACT_FROM_KEYS:
            candidates = _Candidates.of(rows, tau, r)
        if step is not None and not bool((step > settle).any()):
            output = _Output(rows, candidates, tau, r, v, entropy, keep)
            step = _norm_step(output.su, output.sw, r, rows.empty)
            if not bool((step > tol).any()) or torch.equal(tau + step, tau):  # NaN rows stay
                return tau, output
        else:
            sums = _dense_sums(rows, tau, r) if candidates is None else candidates.sums(tau)
            step = _norm_step(*sums, r, rows.empty)
            retry = bool((step > NARROW).any())
            if candidates is not None and retry:
                candidates = candidates.above(tau + step)
        tau = tau + step
    return tau, _Output(rows, candidates, tau, r, v, entropy, keep)


class BlockedEntmaxAlpha(torch.autograd.Function):
    """See :func:`sparse_attend`, ``kind="entmax_alpha"``."""

    @staticmethod
    def forward(ctx, q, k, v, scale, alpha, tiling: Tiling):
        bsz, heads, lq = q.shape[:3]
        r = _root(alpha)
        zscale = scale * (alpha - 1)
        entropy = ctx.needs_input_grad[4]
        out = q.new_zeros(bsz, heads, lq, v.shape[-1])
        uv = q.new_zeros(bsz, heads, lq, v.shape[-1])       # sum_j u_j v_j
        su = q.new_empty(bsz, heads, lq, 1)                 # sum_j u_j
        sw = q.new_empty(bsz, heads, lq, 1)                 # sum_j w_j before normalizing
        thresholds = q.new_empty(bsz, heads, lq, 1)
        # normalized: sum_j w_j log w_j and sum_j (w_j log w_j) v_j
        neg_entropy = q.new_zeros(bsz, heads, lq, 1) if entropy else None
        wlogw_v = q.new_zeros(bsz, heads, lq, v.shape[-1]) if entropy else None
        kept = []
        for i, j, e in tiling.blocks:
            rows = _Rows(q[..., i:j, :] * scale_rows(zscale, i, j), k, tiling, i, j, e)
            tau, sums = _entmax_block(rows, r, v, entropy, tiling.keeps(i))
            kept += sums.kept
            total = sums.sw.masked_fill(rows.empty, 1.0)
            out[..., i:j, :] = sums.wv / total
            uv[..., i:j, :] = sums.uv
            su[..., i:j, :] = sums.su.masked_fill(rows.empty, 1.0)
            sw[..., i:j, :] = total
            if entropy:     # w / W: sum w log w / W - log W, and the same times v
                log_total = total.log()
                neg_entropy[..., i:j, :] = sums.wlogw / total - log_total
                wlogw_v[..., i:j, :] = sums.wlogw_v / total - log_total * out[..., i:j, :]
            thresholds[..., i:j, :] = (rows.m + tau).masked_fill_(rows.empty, math.inf)
        ctx.tiling, ctx.kept = tiling, kept
        ctx.save_for_backward(q, k, v, zscale, alpha, thresholds, uv, su, sw, out,
                              neg_entropy, wlogw_v)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v, zscale, alpha, thresholds, uv, su, sw, out, neg_entropy, wlogw_v = \
            ctx.saved_tensors
        kept, ctx.kept = drain(ctx.kept), None
        tiling = ctx.tiling
        need_q, need_k, need_v, _, need_alpha = ctx.needs_input_grad[:5]
        r = _root(alpha)
        linear = _linear(r)
        d_out = d_out.contiguous()
        centre = (d_out * uv).sum(-1, keepdim=True) / su        # sum_j u_j g_j / sum_j u_j
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for i, j, e in tiling.blocks:
            dob, tau = d_out[..., i:j, :], thresholds[..., i:j, :]
            dob_w = dob / sw[..., i:j, :]                           # w / sum w, on the rows
            dob_r, centre_r = dob * r, centre[..., i:j, :] * r      # dL/dz = r u (g - c)
            qb = q[..., i:j, :] * scale_rows(zscale, i, j)
            for a, b, hidden in tiling.tiles(i, j, e):
                if not tiling.keeps(i):
                    d = hide(tile_logits(qb, k, a, b).sub_(tau).clamp_(min=0), hidden, 0.0)
                    u = d if linear else power_on_support(d, r - 1)
                    w = None if linear else d.mul_(u)
                else:
                    u, w = next(kept)
                if need_v:
                    w = u * u if w is None else w
                    dv[..., a:b, :] += torch.matmul(w.transpose(-1, -2), dob_w)
                del w
                g = torch.matmul(dob_r, v[..., a:b, :].transpose(-1, -2))
                ds = g.sub_(centre_r).mul_(u)                           # dL/dz
                logit_grads(ds, qb, k, dq, dk, (i, j), (a, b), need_q, need_k)
            if need_q:
                scale_grads(dq, q, zscale, i, j, False, None)
        d_alpha = None
        if need_alpha:      # per row: sum_j g_j w_j = dO . O, sum_j g_j w_j log w_j = dO . wlogw_v
            lift = alpha - 1
            served = (d_out * out).sum(-1, keepdim=True)
            g_wlogw = (d_out * wlogw_v).sum(-1, keepdim=True)
            d_alpha = ((served - centre) / lift ** 2
                       - (g_wlogw - centre * neg_entropy) / lift).sum_to_size(alpha.shape)
        return (dq if need_q else None, dk if need_k else None, dv if need_v else None,
                None, d_alpha, None)


def sparse_attend(q, k, v, mask=None, *, kind: str, query_scale=None, alpha=None,
                  block_size: int | None = None, key_block: int | None = None,
                  recompute: bool | None = None) -> torch.Tensor:
    """sparsemax (``kind="sparsemax"``), 1.5-entmax (``"entmax15"``) or alpha-entmax
    (``"entmax_alpha"``, ``alpha`` in (1, 2]: a float, or a tensor broadcastable to (B, H, 1, 1)
    such as a learned alpha per head, which gets its gradient) over the visible keys of
    ``s = (q * query_scale) k^T`` (default scale 1/sqrt(d)), times v, blocked with recompute.
    Inputs in bf16/fp16 run in fp32 and come back in their dtype."""
    if kind not in SPARSE_KINDS:
        raise ValueError(f"kind must be one of {sorted(SPARSE_KINDS)}, got {kind!r}")
    if (alpha is None) != (kind != "entmax_alpha"):
        raise ValueError(f"kind {kind!r} {'needs' if alpha is None else 'takes no'} alpha")
    power = SPARSE_KINDS[kind]
    dtype = compute_dtype(q, k, v)
    if query_scale is None:
        query_scale = 1.0 / ((power or 1) * math.sqrt(q.shape[-1]))     # entmax15: z = s / 2
    elif power == 2:
        query_scale = query_scale / 2
    scale = as_scale(query_scale, q, dtype)
    if scale.requires_grad:
        raise ValueError("the blocked sparse forms take a constant query_scale")
    args = q.to(dtype), k.to(dtype), v.to(dtype), scale
    options = dict(block_size=block_size, key_block=key_block, recompute=recompute)
    if power is not None:
        return BlockedSparse.apply(*args, plan_tiles(q, k, mask, **options), power).to(v.dtype)
    alpha = torch.as_tensor(alpha, device=q.device).to(dtype)
    if not (alpha.numel() == 1 or alpha.dim() == 4 and alpha.shape[-2:] == (1, 1)):
        raise BlockedError(f"alpha must be a float or a tensor shaped (B, H, 1, 1), got "
                           f"{tuple(alpha.shape)}")
    if not bool(((alpha > 1) & (alpha <= 2)).all()):
        raise ValueError(f"the blocked alpha-entmax needs alpha in (1, 2], got {alpha.tolist()}")
    tiling = plan_tiles(q, k, mask, **options, state=1 if _linear(_root(alpha)) else 2)
    return BlockedEntmaxAlpha.apply(*args, alpha, tiling).to(v.dtype)
