"""Sparsemax and 1.5-entmax without sorting: the threshold tau by pivoting on the support.

Both are w = [z - tau]_+^{1/(alpha-1)} with sum w = 1 over each row of the last dimension
(sparsemax: alpha = 2, z = s; 1.5-entmax: alpha = 1.5, z = s/2, w = [z - tau]_+^2). The ``entmax``
package finds tau by a full sort of every row; on a CPU the sort dominates a training step. Here
rows are shifted by their maximum (so z <= 0, the maximum at 0, and tau in [-1, 0)) and tau is
found by iterations of whole-tensor reductions that start below tau* and stop at the exact value:

- sparsemax, Michelot's algorithm (Michelot 1986; Condat 2016, Algorithm 2): with the support
  S_t = {z > tau_t},  tau_{t+1} = (sum_{S_t} z - 1) / |S_t|,  from tau_0 = -1. tau increases,
  S shrinks, and it stops when S repeats (at most one step per element; about 4 on attention
  logits).
- 1.5-entmax, Newton on f(tau) = sum (z - tau)_+^2 - 1 (convex and decreasing, so from tau_0 = -1,
  where f >= 0, the iterates increase to tau* without passing it): tau += f / (2 sum (z - tau)_+).
  When the support stops changing over a step, the exact tau of that support,

      tau_S = mean_S - sqrt((1 - |S| var_S) / |S|),

  (the root of sum_S (z - tau)^2 = 1 below mean_S; the formula of the sort-based solver) is
  accepted if it keeps S as its own support, |{z > tau_S}| = |S|, for every row (or, where a key
  lies within rounding of tau*, if sum [z - tau_S]_+^2 = 1 to the rounding of the row's sum).

Supports are counted as sums of sign(d) for d = [z - tau]_+ (one pass; a boolean tensor and its
sum cost several), and supports are nested, so equal counts are equal sets.

For 1.5-entmax, a tensor with a row that has not settled after ``max_iter`` steps (NaN logits) is
solved by the package's sort instead. Masked keys are -inf (every row needs one finite entry). The
backward passes are those of the ``entmax`` package: sparsemax dL/ds = g - mean_S(g) on S;
1.5-entmax with r = sqrt(w), dL/ds = r g - r sum(r g) / sum(r).
"""
from __future__ import annotations

import entmax
import torch


def support_size_(d: torch.Tensor) -> torch.Tensor:
    """|{d > 0}| per row as floats, for d >= 0 (sign: one pass, no boolean tensor); overwrites d
    (in place: no second tensor to allocate)."""
    return d.sign_().sum(-1, keepdim=True)


def sum_of_squares(d: torch.Tensor) -> torch.Tensor:
    """sum d^2 per row (a norm: one pass, several times faster than vecdot on a CPU)."""
    return torch.linalg.vector_norm(d, dim=-1, keepdim=True).square_()


def sparsemax_threshold(z: torch.Tensor) -> torch.Tensor:
    """tau (..., 1) with sum [z - tau]_+ = 1 over the last dimension, for rows with max(z) = 0."""
    tau = torch.full_like(z[..., :1], -1.0)
    k = None
    for _ in range(z.shape[-1] + 1):
        d = (z - tau).clamp_(min=0)
        s1 = d.sum(-1, keepdim=True)
        k_new = support_size_(d)
        tau = tau + (s1 - 1) / k_new  # (sum_S z - 1) / |S|
        if k is not None and torch.equal(k_new, k):
            break  # S_{t+1} = S_t (supports only shrink): tau is the fixed point
        k = k_new
    return tau


def entmax15_threshold(z: torch.Tensor, max_iter: int = 50) -> torch.Tensor | None:
    """tau (..., 1) with sum [z - tau]_+^2 = 1 over the last dimension, for rows with max(z) = 0;
    None if some row did not settle in ``max_iter`` steps (the caller then sorts)."""
    tau = torch.full_like(z[..., :1], -1.0)
    k = None
    for _ in range(max_iter):
        d = (z - tau).clamp_(min=0)
        s1 = d.sum(-1, keepdim=True)
        s2 = sum_of_squares(d)
        k_new = support_size_(d)
        if k is not None and torch.equal(k_new, k):
            # the exact tau of S = {z > tau}, from d = z - tau on S: mean_S z = tau + s1/k
            mean = s1 / k
            var = s2 / k - mean * mean
            exact = tau + mean - ((1 - k * var) / k).clamp(min=0).sqrt()
            d = (z - exact).clamp_(min=0)
            residual = (sum_of_squares(d) - 1).abs()
            if torch.equal(support_size_(d), k):
                return exact  # {z > exact} = S: exact solves sum (z - tau)_+^2 = 1
            # a key within rounding of tau* may fall on either side: accept a residual at the
            # rounding level of the row's sum (its weight is ~0 either way)
            if bool((residual <= 4 * k * torch.finfo(z.dtype).eps).all()):
                return exact
        k = k_new
        tau = tau + (s2 - 1) / (2 * s1)
    return None


class _Sparsemax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, dim):
        z = s.transpose(dim, -1)
        z = z - z.amax(-1, keepdim=True)
        w = (z - sparsemax_threshold(z)).clamp_(min=0).transpose(dim, -1)
        ctx.dim = dim
        ctx.save_for_backward(w)
        return w

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        w, = ctx.saved_tensors
        on = torch.sign(w)  # 1 on the support, 0 off it
        g = g * on
        mean = g.sum(ctx.dim, keepdim=True) / on.sum(ctx.dim, keepdim=True)
        return g.sub_(on * mean), None


class _Entmax15(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, dim):
        z = s.transpose(dim, -1) / 2
        z = z - z.amax(-1, keepdim=True)
        tau = entmax15_threshold(z)
        if tau is None:  # NaN logits, or a row that did not settle: the sort-based solver
            w = entmax.entmax15(s, dim=dim)
        else:
            w = (z - tau).clamp_(min=0).square_().transpose(dim, -1)
        ctx.dim = dim
        ctx.save_for_backward(w)
        return w

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        w, = ctx.saved_tensors
        r = w.sqrt()
        rg = r * g
        return rg - r * (rg.sum(ctx.dim, keepdim=True) / r.sum(ctx.dim, keepdim=True)), None


def sparsemax(s: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """w = [s - tau]_+, sum w = 1 along ``dim`` (equal to ``entmax.sparsemax``)."""
    return _Sparsemax.apply(s, dim)


def entmax15(s: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """w = [s/2 - tau]_+^2, sum w = 1 along ``dim`` (equal to ``entmax.entmax15``)."""
    return _Entmax15.apply(s, dim)
