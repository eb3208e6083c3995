"""Blocked attention with recompute: memory that grows like softmax's, in eager PyTorch.

The logits ``s = q k^T`` are made one tile at a time, query rows ``[i, j)`` by keys ``[a, b)``
(:class:`Tiling`), never as a whole (Lq, Lk) matrix. The forward keeps only per-row statistics;
the backward makes each tile again and its gradients from them (FlashAttention's scheme, Dao et
al. 2022, on a CPU: tiles of about :data:`TILE_ELEMENTS` entries, so each is one large matmul and
a few elementwise passes). Below :data:`RECOMPUTE_FROM_KEYS` keys the weights are few: they are
kept from the forward instead (same numbers, no second matmul).

Two kinds of weights run here (scorers/blocked_sparse.py has sparsemax and 1.5-entmax):

- :func:`softmax_attend`, a softmax of transformed logits with an optional sink logit sigma,

      w_ij = exp(t_ij) / (exp(sigma) + sum_{k in V_i} exp(t_ik)),   t = f(s),

  by online normalization over key blocks (running max m_i and sum l_i, rescaled as m grows).
  Saved: lse_i = log(exp(sigma) + sum exp(t)). Backward, with delta_i = sum_j dO_ij O_ij:
  dt = w (dP - delta), ds = dt f'(s), dsigma = -sum_i exp(sigma - lse_i) delta_i.
  ``f`` is a :class:`LogitTransform` the scorer declares beside its formula (identity for the
  softmaxes, n sgn(s) log1p(|s|) for the SSA family).
- :func:`gate_attend`, pointwise weights ``w = g(s)`` (sigmoid(s + beta), relu(s), relu(s)^2)
  with no row statistics: out = sum_j g(s_ij) v_j, ds = (dO V^T) g'(s).

A per-row normalizer that multiplies the logits (1/tau, sigma ln n_i, relu's 1/n_i) is folded
into the queries before the call, so autograd gives its gradient. Masked keys get exact zeros;
a query that sees no key gives a zero output and zero gradients (SCORERS.md section 0).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .base import compute_dtype

NEG_INF = float("-inf")
# Entries of one (B, H, rows, keys) tile: 4 MiB in fp32. The query block's keys are cut into
# blocks so that a tile stays below it.
TILE_ELEMENTS = 1 << 20
# Keys from which the weights are recomputed in the backward instead of kept, per device type.
# Measured on the 2-core CPU (forward + backward, causal, fp32, one thread, best of 5, ratio to
# SDPA): at (4, 8, 512, 64) recomputing cost ssa 1.28 against 0.99 kept and stablemax 1.21
# against 0.90 (the kept weights: 3.6x SDPA's memory); at (1, 8, 2048, 64) it cost ssa 1.02
# and stablemax 0.86, where kept weights would take 6x SDPA's memory. So short rows keep them.
RECOMPUTE_FROM_KEYS: dict[str, int] = {"cpu": 1024, "cuda": 0}


class BlockedError(ValueError):
    """The blocked form cannot run these inputs; the message says why."""


# ---------------------------------------------------------------------------------------------
# Tiles

@dataclass(frozen=True)
class Tiling:
    """Query blocks ``(i, j, e)``: rows ``[i, j)`` that see keys ``[0, e)``, cut into key blocks
    of ``key_block``. ``causal``: the mask is the plain lower triangle (tiles below the diagonal
    need none). ``mask``: the boolean mask as a (B, H, Lq, Lk) view, or None. ``empty_rows``:
    some query sees no key. ``recompute``: the backward makes the weights again."""

    blocks: tuple[tuple[int, int, int], ...]
    key_block: int
    causal: bool
    mask: torch.Tensor | None
    empty_rows: bool
    recompute: bool

    def tiles(self, i: int, j: int, e: int):
        """``(a, b, hidden)`` key blocks of query rows ``[i, j)``; ``hidden`` is ``(c, tile)``:
        the boolean (…, rows, keys - c) tile of masked entries among the block's keys from
        ``a + c`` on (:func:`hide`), or None where every entry is visible. Under a plain causal
        mask only the keys from row i on can be masked."""
        for a in range(0, e, self.key_block):
            b = min(a + self.key_block, e)
            if self.causal:
                hidden = None
                if b - 1 > i:
                    c = max(a, i + 1)
                    qi = torch.arange(i, j, device=self.device)[:, None]
                    hidden = (c - a, torch.arange(c, b, device=self.device)[None, :] > qi)
            elif self.mask is not None:
                hidden = (0, ~self.mask[..., i:j, a:b])
            else:
                hidden = None
            yield a, b, hidden

    @property
    def device(self):
        return self.mask.device if self.mask is not None else torch.device("cpu")


def _is_plain_causal(mask, lq: int, lk: int) -> bool:
    if mask is None or lq != lk or mask.shape[-2:] != (lq, lk) or mask.numel() != lq * lk:
        return False
    return bool(torch.equal(mask.reshape(lq, lk), torch.ones(lq, lk, dtype=torch.bool,
                                                            device=mask.device).tril()))


def plan_tiles(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, *,
               block_size: int = 64, key_block: int | None = None,
               recompute: bool | None = None) -> Tiling:
    """The tiles of an attention of ``q`` (B, H, Lq, D) over ``k`` (B, H, Lk, D) under ``mask``.

    Query blocks have ``block_size`` rows and stop at the last key some row of theirs sees (masked
    keys weigh exactly zero in every scorer here); ``key_block`` (default: the most keys that keep
    a tile under :data:`TILE_ELEMENTS`, a multiple of 64) cuts their keys. ``recompute`` (default:
    from :data:`RECOMPUTE_FROM_KEYS` for the device and Lk)."""
    if block_size < 1:
        raise BlockedError(f"block_size must be >= 1, got {block_size}")
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"attention mask must be boolean (True = visible), got {mask.dtype}")
    bsz, heads, lq = q.shape[:3]
    lk = k.shape[-2]
    if key_block is None:
        fit = TILE_ELEMENTS // max(1, bsz * heads * min(block_size, lq))
        key_block = max(64, fit // 64 * 64)
    if key_block < 1:
        raise BlockedError(f"key_block must be >= 1, got {key_block}")
    if recompute is None:
        recompute = lk >= RECOMPUTE_FROM_KEYS.get(q.device.type, 0)
    bounds = [(i, min(i + block_size, lq)) for i in range(0, lq, block_size)]
    if mask is None:
        return Tiling(tuple((i, j, lk) for i, j in bounds), key_block, False, None, False,
                      recompute)
    if _is_plain_causal(mask, lq, lk):
        return Tiling(tuple((i, j, j) for i, j in bounds), key_block, True,
                      mask.reshape(1, 1, lq, lk), False, recompute)
    full = mask.expand(bsz, heads, lq, lk)
    seen = mask.reshape(-1, *mask.shape[-2:]).any(0).expand(lq, lk)         # (Lq, Lk)
    ends = (seen * torch.arange(1, lk + 1, device=mask.device)).amax(-1).tolist()
    empty = not bool(mask.any(-1).all())
    blocks = tuple((i, j, max(1, max(ends[i:j]))) for i, j in bounds)
    return Tiling(blocks, key_block, False, full, empty, recompute)


def hide(t: torch.Tensor, hidden, value: float) -> torch.Tensor:
    """Fill the masked entries ``hidden`` (from :meth:`Tiling.tiles`) of tile ``t`` in place."""
    if hidden is not None:
        c, tile = hidden
        (t[..., c:] if c else t).masked_fill_(tile, value)
    return t


def visible_keys(q, k, mask, dtype=torch.float64) -> torch.Tensor:
    """n_i, the keys query i sees, as a (B, H, Lq, 1) view (1 where it sees none), counted on
    the mask as given (no (B, H, Lq, Lk) copy)."""
    b, h, lq = q.shape[:3]
    if mask is None:
        return torch.full((1, 1, 1, 1), float(k.shape[-2]), dtype=dtype,
                          device=q.device).expand(b, h, lq, 1)
    n = mask.sum(-1, keepdim=True, dtype=dtype).clamp_(min=1)
    return n.expand(b, h, lq, 1)


def _logits(qb, k, a, b):
    return torch.matmul(qb, k[..., a:b, :].transpose(-1, -2))


def _rows(scale: torch.Tensor, i: int, j: int) -> torch.Tensor:
    """Rows ``[i, j)`` of a query scale broadcastable to (B, H, Lq, 1)."""
    return scale[..., i:j, :] if scale.dim() >= 2 and scale.shape[-2] > 1 else scale


def _scale_grads(dq, q, scale, i, j, need_scale, dscale):
    """Turn dq rows [i, j), the gradient of q * scale, into q's; add scale's gradient."""
    sc = _rows(scale, i, j)
    if need_scale:
        g = (dq[..., i:j, :] * q[..., i:j, :]).sum(-1, keepdim=True)
        if scale.dim() >= 2 and scale.shape[-2] > 1:
            g = g.sum_to_size(*scale.shape[:-2], j - i, 1)
            dscale[..., i:j, :] += g
        else:
            dscale += g.sum_to_size(scale.shape)
    dq[..., i:j, :] *= sc


def _as_scale(scale, q, dtype) -> torch.Tensor:
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    if not isinstance(scale, torch.Tensor):
        return torch.tensor(float(scale), dtype=dtype, device=q.device)
    if scale.dim() > 4 or (scale.dim() >= 1 and scale.shape[-1] != 1):
        raise BlockedError(f"query_scale must broadcast to (B, H, Lq, 1), got "
                           f"{tuple(scale.shape)}")
    return scale.to(dtype)


# ---------------------------------------------------------------------------------------------
# Logit transforms

class LogitTransform:
    """An elementwise t = f(s; params) declared by a scorer beside its formula.

    ``params``: the tensors f depends on (autograd inputs of the blocked node).
    ``forward(s, *params)``: t (it may overwrite s). ``keep(s, t, *params)``: what ``grad``
    needs of the tile besides t (overwriting s is allowed). ``grad(kept, t, dt, *params)``:
    (ds, then one gradient per param; None where it is not needed), t with masked entries at the
    dtype's lowest value and dt zero there."""

    params: tuple[torch.Tensor, ...] = ()

    def forward(self, s, *params):
        return s

    def keep(self, s, t, *params):
        return None

    def grad(self, kept, t, dt, *params, needs=()):
        return (dt,)

    def needs_t(self, needs) -> bool:
        """Whether ``grad`` reads t when the params' ``needs`` (requires-grad flags) hold."""
        return False


IDENTITY = LogitTransform()


# ---------------------------------------------------------------------------------------------
# Softmax of transformed logits

def _row_max(t: torch.Tensor) -> torch.Tensor:
    return t.amax(-1, keepdim=True)


class BlockedSoftmax(torch.autograd.Function):
    """See :func:`softmax_attend`. Inputs: q, k, v, the query scale, the sink logit (or None),
    the tiling, the transform, then the transform's params. Saves lse per row (and, below the
    recompute length, the tiles' weights)."""

    @staticmethod
    def forward(ctx, q, k, v, scale, sink, tiling: Tiling, transform: LogitTransform, *params):
        bsz, heads, lq = q.shape[:3]
        out = q.new_empty(bsz, heads, lq, v.shape[-1])
        lse = q.new_empty(bsz, heads, lq, 1)
        keep_t = not tiling.recompute and transform.needs_t(ctx.needs_input_grad[7:])
        kept = []
        for i, j, e in tiling.blocks:
            m = l = acc = None                     # running max (-inf: no key yet), sum, P V
            if sink is not None:
                m = sink.expand(bsz, heads, j - i, 1)
                l = torch.ones_like(m)
            block_kept = []
            qb = q[..., i:j, :] * _rows(scale, i, j)
            for a, b, hidden in tiling.tiles(i, j, e):
                s = _logits(qb, k, a, b)
                t = transform.forward(s, *params)
                hide(t, hidden, NEG_INF)
                if not tiling.recompute:
                    saved = transform.keep(s, t, *params)
                    t_copy = t.clamp(min=torch.finfo(t.dtype).min) if keep_t else None
                del s
                m_new = _row_max(t) if m is None else torch.maximum(m, _row_max(t))
                m_safe = m_new.masked_fill(m_new == NEG_INF, 0.0)
                p = t.sub_(m_safe).exp_()
                pv = torch.matmul(p, v[..., a:b, :])
                if m is None:
                    l, acc = p.sum(-1, keepdim=True), pv
                else:
                    alpha = (m - m_safe).exp_()
                    l = l * alpha + p.sum(-1, keepdim=True)
                    acc = pv if acc is None else acc.mul_(alpha).add_(pv)
                m = m_new
                if not tiling.recompute:
                    block_kept.append((p, m_safe, saved, t_copy))
            empty = l == 0
            if acc is None:                        # a sink and no key
                acc = out.new_zeros(bsz, heads, j - i, v.shape[-1])
            out[..., i:j, :] = acc / l.masked_fill(empty, 1.0)
            block_lse = (m.masked_fill(m == NEG_INF, 0.0) + l.log()).masked_fill_(empty, math.inf)
            lse[..., i:j, :] = block_lse
            for p, m_safe, saved, t_copy in block_kept:   # exp(t - m) -> exp(t - lse)
                p.mul_((m_safe - block_lse).exp_())
                kept.append((p, saved, t_copy))
        ctx.tiling, ctx.transform, ctx.n_params = tiling, transform, len(params)
        ctx.has_sink = sink is not None
        ctx.kept = kept
        ctx.save_for_backward(q, k, v, scale, out, lse, *([sink] if sink is not None else []),
                              *params)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v, scale, out, lse, *rest = ctx.saved_tensors
        sink = rest.pop(0) if ctx.has_sink else None
        params = rest[:ctx.n_params]
        kept = iter(ctx.kept)
        tiling, transform = ctx.tiling, ctx.transform
        need_q, need_k, need_v, need_scale, need_sink = ctx.needs_input_grad[:5]
        needs = ctx.needs_input_grad[7:]
        dscale = torch.zeros_like(scale) if need_scale else None
        d_out = d_out.contiguous()
        delta = (d_out * out).sum(-1, keepdim=True)
        dq = torch.zeros_like(q)
        dk, dv = torch.zeros_like(k), torch.zeros_like(v)
        dparams = [None] * len(params)
        lowest = torch.finfo(q.dtype).min
        keep_t = transform.needs_t(needs)
        for i, j, e in tiling.blocks:
            dob, lse_b, delta_b = d_out[..., i:j, :], lse[..., i:j, :], delta[..., i:j, :]
            qb = q[..., i:j, :] * _rows(scale, i, j)
            for a, b, hidden in tiling.tiles(i, j, e):
                if tiling.recompute:
                    s = _logits(qb, k, a, b)
                    t = transform.forward(s, *params)
                    saved = transform.keep(s, t, *params)
                    hide(t, hidden, lowest)
                    p = (t - lse_b if keep_t else t.sub_(lse_b)).exp_()
                else:
                    p, saved, t = next(kept)
                if need_v:
                    dv[..., a:b, :] += torch.matmul(p.transpose(-1, -2), dob)
                dt = torch.matmul(dob, v[..., a:b, :].transpose(-1, -2)).sub_(delta_b).mul_(p)
                del p
                ds, *grads = transform.grad(saved, t, dt, *params, needs=needs)
                for n_, g_ in enumerate(grads):
                    if g_ is not None:
                        dparams[n_] = g_ if dparams[n_] is None else dparams[n_] + g_
                if need_q or need_scale:
                    dq[..., i:j, :] += torch.matmul(ds, k[..., a:b, :])
                if need_k:
                    dk[..., a:b, :] += torch.matmul(ds.transpose(-1, -2), qb)
            if need_q or need_scale:
                _scale_grads(dq, q, scale, i, j, need_scale, dscale)
        ctx.kept = None
        dsink = None
        if need_sink:
            w_sink = (sink - lse).exp_()                   # exp(sigma - lse); 0 on empty rows
            dsink = -(w_sink * delta).sum_to_size(sink.shape)
        return (dq if need_q else None, dk if need_k else None, dv if need_v else None, dscale,
                dsink, None, None, *[g if g is None else g.reshape(x.shape)
                              for g, x in zip(dparams, params)])


def softmax_attend(q, k, v, mask=None, *, transform: LogitTransform = IDENTITY,
                   query_scale=None, sink=None, block_size: int = 64,
                   key_block: int | None = None, recompute: bool | None = None) -> torch.Tensor:
    """softmax over visible keys (and the sink logit ``sink``, whose weight is dropped) of
    ``t = transform(s)``, ``s = (q * query_scale) k^T``, times v, blocked with recompute.

    ``query_scale``: a float or a tensor broadcastable to (B, H, Lq, 1) (default 1/sqrt(d));
    ``sink``: None or a tensor broadcastable to (B, H, 1, 1). Both may require gradients. Inputs
    in bf16/fp16 run in fp32 and come back in their dtype."""
    dtype = compute_dtype(q, k, v)
    scale = _as_scale(query_scale, q, dtype)
    tiling = plan_tiles(q, k, mask, block_size=block_size, key_block=key_block,
                        recompute=recompute)
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
            qb = q[..., i:j, :] * _rows(scale, i, j)
            for a, b, hidden in tiling.tiles(i, j, e):
                w = _gate(kind, _logits(qb, k, a, b), bias)
                hide(w, hidden, 0.0)
                out[..., i:j, :] += torch.matmul(w, v[..., a:b, :])
                if not tiling.recompute:
                    kept.append(w)
        ctx.tiling, ctx.kind, ctx.bias, ctx.kept = tiling, kind, bias, kept
        ctx.save_for_backward(q, k, v, scale)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v, scale = ctx.saved_tensors
        kept, ctx.kept = ctx.kept, None
        tiling, kind = ctx.tiling, ctx.kind
        need_q, need_k, need_v, need_scale = ctx.needs_input_grad[:4]
        d_out = d_out.contiguous()
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dscale = torch.zeros_like(scale) if need_scale else None
        index = 0
        for i, j, e in tiling.blocks:
            dob = d_out[..., i:j, :]
            qb = q[..., i:j, :] * _rows(scale, i, j)
            for a, b, hidden in tiling.tiles(i, j, e):
                if tiling.recompute:
                    w = _gate(kind, _logits(qb, k, a, b), ctx.bias)
                    hide(w, hidden, 0.0)
                else:
                    w = kept[index]
                    index += 1
                if need_v:
                    dv[..., a:b, :] += torch.matmul(w.transpose(-1, -2), dob)
                ds = torch.matmul(dob, v[..., a:b, :].transpose(-1, -2)).mul_(
                    _gate_slope(kind, w))
                if need_q or need_scale:
                    dq[..., i:j, :] += torch.matmul(ds, k[..., a:b, :])
                if need_k:
                    dk[..., a:b, :] += torch.matmul(ds.transpose(-1, -2), qb)
            if need_q or need_scale:
                _scale_grads(dq, q, scale, i, j, need_scale, dscale)
        return (dq if need_q else None, dk if need_k else None, dv if need_v else None,
                dscale, None, None, None)


def gate_attend(q, k, v, mask=None, *, gate: str, bias: float = 0.0, query_scale=None,
                block_size: int = 64, key_block: int | None = None,
                recompute: bool | None = None) -> torch.Tensor:
    """sum over visible keys of g(s_ij) v_j, ``s = (q * query_scale) k^T``, ``g`` one of
    :data:`GATES` (sigmoid(s + bias), relu(s), relu(s)^2), blocked with recompute.
    ``query_scale`` as in :func:`softmax_attend` (relu's 1/n_i folds in: relu(s)/n = relu(s/n))."""
    if gate not in GATES:
        raise BlockedError(f"gate must be one of {GATES}, got {gate!r}")
    dtype = compute_dtype(q, k, v)
    scale = _as_scale(query_scale, q, dtype)
    tiling = plan_tiles(q, k, mask, block_size=block_size, key_block=key_block,
                        recompute=recompute)
    out = BlockedGate.apply(q.to(dtype), k.to(dtype), v.to(dtype), scale, tiling, gate,
                            float(bias))
    return out.to(v.dtype)


# ---------------------------------------------------------------------------------------------
# What a scorer declares

@dataclass
class BlockedSpec:
    """A scorer's blocked form for given inputs (``Scorer.blocked_spec(q, k, mask)``).

    ``kind``: "softmax" (:func:`softmax_attend`: ``transform``, ``sink``), a gate of
    :data:`GATES` (:func:`gate_attend`: ``bias``), or "sparsemax"/"entmax15"
    (scorers/blocked_sparse.py). ``query_scale``: multiplies q before ``q k^T`` (default
    1/sqrt(d))."""

    kind: str
    query_scale: object = None
    transform: LogitTransform = IDENTITY
    sink: torch.Tensor | None = None
    bias: float = 0.0


def blocked_attend(spec: BlockedSpec, q, k, v, mask=None, *, block_size: int = 64,
                   key_block: int | None = None, recompute: bool | None = None):
    """Run the blocked form ``spec`` (what ``scorers.fast`` calls for the form ``blocked``)."""
    options = dict(block_size=block_size, key_block=key_block, recompute=recompute)
    if spec.kind == "softmax":
        return softmax_attend(q, k, v, mask, transform=spec.transform,
                              query_scale=spec.query_scale, sink=spec.sink, **options)
    if spec.kind in GATES:
        return gate_attend(q, k, v, mask, gate=spec.kind, bias=spec.bias,
                           query_scale=spec.query_scale, **options)
    if spec.kind in ("sparsemax", "entmax15"):
        from .blocked_sparse import sparse_attend

        return sparse_attend(q, k, v, mask, kind=spec.kind, query_scale=spec.query_scale,
                             **options)
    raise BlockedError(f"unknown blocked kind {spec.kind!r}; choose softmax, {', '.join(GATES)}, "
                       f"sparsemax or entmax15")
