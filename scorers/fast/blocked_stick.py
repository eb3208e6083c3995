"""Sigmoid stick-breaking attention, blocked with recompute (tiles.py's tiles).

Query i sits at key position I = i + Lk - Lq (queries aligned to the last keys) and sees the
visible keys j < I, its past P_i. With beta = sigmoid(s), lr = logsigmoid(-s) = log(1 - beta):

    log A_ij = logsigmoid(s_ij) + R_ij,   R_ij = sum_{k in P_i, k > j} lr_ik,

and (``current=True``) the remainder rho_i = exp(sum_{k in P_i} lr_ik) goes to key I when it is
visible. R is a reverse cumulative sum, so each row's key tiles are taken from the last one
backwards, carrying the sum over the tiles already seen (the debt, -sum lr), in log space as the
reference sums it (scorers/gates.py); the remainder is e^{-debt} at the end. Within a tile the
keys run backwards too: its logits are made against k flipped along the keys (v, and the
gradients of k and v, flipped likewise), so that a tile's sums over the later keys are one
cumulative sum, with no flip of a tile. logsigmoid(s) and logsigmoid(-s) share
log(1 + e^{-|s|}), and the exponentials run in base 2 (on a CPU ``exp`` of the very negative
logs that stick-breaking makes is several times slower than ``exp2``). Saved: each row's
remainder (0 where key I is hidden), and below ``RECOMPUTE_FROM_KEYS`` keys (tiles.py) the
tiles' -lr and weights, which the backward would otherwise make again.

Backward, with dP = dO V^T, delta_i = dO_i . O_i and Q_ij = sum_{k in P_i, k >= j} dP_ik A_ik
(carried backwards over the tiles the same way): A_ij depends on s_ij through logsigmoid(s_ij)
(slope 1 - beta_ij), every A_ij' with j' < j and rho_i through lr_ij (slope -beta_ij), so

    ds_ij = dP_ij A_ij (1 - beta_ij) - beta_ij (delta_i - Q_ij),

one lerp from Q_ij - delta_i to dP_ij A_ij by 1 - beta_ij = e^{lr_ij}; delta_i - Q_ij is the
weighted sum over the keys before j and the remainder's term. The
remainder's value gradient goes to row I of dV. Rows that see no key get zero output and zero
gradients (docs/scorers.md#fully-masked-rows).
"""
from __future__ import annotations

import torch

from ..base import compute_dtype
from ..forms import LOG2E
from .planning import NEG_INF
from .tiles import (Hidden, Tiling, as_scale, drain, hide, logit_grads, plan_tiles, scale_grads,
                    scale_rows, tile_logits)

STICK_KINDS = ("stick_breaking", "stick_breaking_past")


def _not_past(tiling: Tiling, hidden: Hidden | None, i: int, j: int, a: int, b: int,
              offset: int, device) -> Hidden | None:
    """The entries of tile rows [i, j) x keys b - 1 down to a (the tile's keys reversed) outside
    the rows' past (a key at or after the query's position, or masked), or None where every
    entry is in it."""
    outside = None
    if b - 1 >= i + offset:
        rows = torch.arange(i + offset, j + offset, device=device)[:, None]
        outside = torch.arange(b - 1, a - 1, -1, device=device)[None, :] >= rows
    if not tiling.causal and hidden is not None:
        tile = hidden.tile.flip(-1)
        outside = tile if outside is None else tile | outside
    return None if outside is None else Hidden(0, outside)


def _tile_weights(s, outside, debt):
    """A over one tile from its logits s (its keys reversed; overwritten) and the rows' debt
    (-sum lr over the keys after the tile's), -lr over the tile, and its sum over the tile."""
    soft = s.abs().mul_(-LOG2E).exp2_().log1p_()                  # log(1 + e^{-|s|})
    owed = hide(s.clamp(min=0.0).add_(soft), outside, 0.0)         # -logsigmoid(-s) = -lr
    log_a = hide(s.clamp_(max=0.0).sub_(soft), outside, NEG_INF)   # logsigmoid(s)
    del soft
    owed_sums = owed.cumsum(-1)                                    # over the key and later ones
    log_a[..., 1:] -= owed_sums[..., :-1]
    weights = torch.add(debt * -LOG2E, log_a, alpha=LOG2E, out=log_a).exp2_()
    return weights, owed, owed_sums[..., -1:]


def _rows_with_current(i: int, j: int, offset: int, lk: int) -> tuple[int, int]:
    """The rows of [i, j) whose own position lies among the keys."""
    return max(i, -offset), min(j, lk - offset)


def _tiles_backwards(tiling: Tiling, i: int, j: int, e: int, offset: int, lk: int):
    """``(a, b, ra, rb, hidden)``: rows [i, j)'s key tiles [a, b) from the last one backwards,
    with [ra, rb), where their keys sit in the flipped k and v."""
    for a, b, hidden in reversed(list(tiling.tiles(i, j, min(e, j + offset)))):
        yield a, b, lk - b, lk - a, hidden


class BlockedStickBreaking(torch.autograd.Function):
    """See the module doc. Inputs: q, k, v, the query scale, the tiling, and whether the
    remainder goes to the current key; saves each row's remainder (and, below the recompute
    length, the tiles' -lr and weights)."""

    @staticmethod
    def forward(ctx, q, k, v, scale, tiling: Tiling, current: bool):
        bsz, heads, lq = q.shape[:3]
        lk = k.shape[-2]
        offset = lk - lq
        out = q.new_zeros(bsz, heads, lq, v.shape[-1])
        remainder = q.new_zeros(bsz, heads, lq, 1)
        diagonal = _current_visible(tiling, q, offset)
        flipped_k, flipped_v = k.flip(-2), v.flip(-2)
        kept = []
        for i, j, e in tiling.blocks:
            qb = q[..., i:j, :] * scale_rows(scale, i, j)
            debt = q.new_zeros(bsz, heads, j - i, 1)
            acc = out[..., i:j, :]
            for a, b, ra, rb, hidden in _tiles_backwards(tiling, i, j, e, offset, lk):
                outside = _not_past(tiling, hidden, i, j, a, b, offset, q.device)
                w, owed, total = _tile_weights(tile_logits(qb, flipped_k, ra, rb), outside, debt)
                acc += torch.matmul(w, flipped_v[..., ra:rb, :])
                debt = debt + total
                if tiling.keeps(i):
                    kept.append((owed, w))
            if current:
                r0, r1 = _rows_with_current(i, j, offset, lk)
                if r1 > r0:
                    rho = debt[..., r0 - i:r1 - i, :].neg().exp_()
                    if diagonal is not None:
                        rho = rho * diagonal[..., r0:r1, :]
                    remainder[..., r0:r1, :] = rho
                    out[..., r0:r1, :] += rho * v[..., r0 + offset:r1 + offset, :]
        ctx.tiling, ctx.offset, ctx.kept = tiling, offset, kept
        ctx.save_for_backward(q, k, v, scale, out, remainder)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v, scale, out, remainder = ctx.saved_tensors
        tiling, offset = ctx.tiling, ctx.offset
        kept, ctx.kept = drain(ctx.kept), None
        need_q, need_k, need_v, need_scale = ctx.needs_input_grad[:4]
        need_qs = need_q or need_scale
        lk = k.shape[-2]
        d_out = d_out.contiguous()
        delta = (d_out * out).sum(-1, keepdim=True)
        flipped_k, flipped_v = k.flip(-2), v.flip(-2)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dscale = torch.zeros_like(scale) if need_scale else None
        for i, j, e in tiling.blocks:
            qb = q[..., i:j, :] * scale_rows(scale, i, j)
            dob, delta_b = d_out[..., i:j, :], delta[..., i:j, :]
            debt = q.new_zeros(*qb.shape[:-1], 1)
            later = torch.zeros_like(debt)                        # Q over the later tiles
            for a, b, ra, rb, hidden in _tiles_backwards(tiling, i, j, e, offset, lk):
                if not tiling.keeps(i):
                    outside = _not_past(tiling, hidden, i, j, a, b, offset, q.device)
                    w, owed, total = _tile_weights(tile_logits(qb, flipped_k, ra, rb), outside,
                                                   debt)
                    debt = debt + total
                else:
                    owed, w = next(kept)
                if need_v:
                    dv[..., ra:rb, :] += torch.matmul(w.transpose(-1, -2), dob)
                pa = torch.matmul(dob, flipped_v[..., ra:rb, :].transpose(-1, -2)).mul_(w)
                del w
                q_less = pa.cumsum(-1).add_(later - delta_b)              # Q - delta
                later = q_less[..., -1:] + delta_b
                # ds = dP A (1 - beta) + beta (Q - delta), 1 - beta = e^{lr}
                ds = torch.lerp(q_less, pa, owed.mul_(-LOG2E).exp2_(), out=pa)
                logit_grads(ds, qb, flipped_k, dq, dk, (i, j), (ra, rb), need_qs, need_k)
            if need_qs:
                scale_grads(dq, q, scale, i, j, need_scale, dscale)
        del flipped_k, flipped_v
        dk, dv = dk.flip(-2), dv.flip(-2)
        if need_v:
            r0, r1 = _rows_with_current(0, q.shape[-2], offset, lk)
            if r1 > r0:
                dv[..., r0 + offset:r1 + offset, :] += (remainder[..., r0:r1, :]
                                                         * d_out[..., r0:r1, :])
        return (dq if need_q else None, dk if need_k else None, dv if need_v else None, dscale,
                None, None)


def _current_visible(tiling: Tiling, q, offset: int):
    """1 where query i's own key I is visible, 0 where masked, as (B, H, Lq, 1) in q's dtype
    (rows whose I lies outside the keys read 0); None when no mask hides any."""
    if tiling.mask is None or tiling.causal:
        return None
    return _diagonal(tiling.mask, offset).to(q.dtype)


def _diagonal(mask: torch.Tensor, offset: int) -> torch.Tensor:
    lq = mask.shape[-2]
    rows = torch.arange(lq, device=mask.device)
    cols = (rows + offset).clamp(0, mask.shape[-1] - 1)
    inside = ((rows + offset >= 0) & (rows + offset < mask.shape[-1]))[:, None]
    return mask[..., rows, cols].unsqueeze(-1) & inside


def stick_breaking_attend(q, k, v, mask=None, *, current: bool = True, query_scale=None,
                          block_size: int | None = None, key_block: int | None = None,
                          recompute: bool | None = None) -> torch.Tensor:
    """Stick-breaking attention (the module doc) over ``s = (q * query_scale) k^T``, queries
    aligned to the last keys, times v, blocked with recompute (below the recompute length the
    tiles' logits and weights are kept instead). ``current``: the remainder goes to each query's
    own key. ``query_scale`` as in blocked.py's ``softmax_attend``; inputs in bf16/fp16 run in
    fp32 and come back in their dtype."""
    dtype = compute_dtype(q, k, v)
    scale = as_scale(query_scale, q, dtype)
    tiling = plan_tiles(q, k, mask, block_size=block_size, key_block=key_block,
                        recompute=recompute, state=2)
    out = BlockedStickBreaking.apply(q.to(dtype), k.to(dtype), v.to(dtype), scale, tiling,
                                     bool(current))
    return out.to(v.dtype)
