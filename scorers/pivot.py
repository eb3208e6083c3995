"""Sparse normalizers without sorting or bisection: the threshold tau by whole-tensor iterations.

Each is w = [z - tau]_+^{1/(alpha-1)} with sum w = 1 over each row of the last dimension
(sparsemax: alpha = 2, z = s; 1.5-entmax: alpha = 1.5, z = s/2, w = [z - tau]_+^2; alpha-entmax:
z = (alpha - 1) s). The ``entmax`` package finds tau by a full sort of every row (sparsemax,
1.5-entmax) or by ``n_iter`` bisection steps (alpha-entmax); on a CPU either dominates a training
step. Here rows are shifted by their maximum (so z <= 0, the maximum at 0, and tau in [-1, 0)) and
tau is found by iterations of whole-tensor reductions that start below tau* and stop at it:

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
- alpha-entmax for alpha in (1, 2] (a float, or a tensor such as a learned alpha per head), with
  r = 1/(alpha - 1) >= 1: Newton on f(tau) = sum (z - tau)_+^r - 1, convex and decreasing as
  above, so again from tau_0 = -1 the iterates increase to tau*:
  tau += f / (r sum (z - tau)_+^(r-1)).
  It stops when no row's step exceeds the rounding of tau (2 to 11 steps on Gaussian logits,
  where the package bisects 50 times), and the weights are divided by their sum, as the package's
  ``ensure_sum_one`` does.

Supports are counted as sums of sign(d) for d = [z - tau]_+ (one pass; a boolean tensor and its
sum cost several), and supports are nested, so equal counts are equal sets.

A tensor with a row that has not settled after ``max_iter`` steps (NaN logits) is solved by the
package instead. Masked keys are -inf (every row needs one finite entry). The backward passes are
those of the ``entmax`` package: sparsemax dL/ds = g - mean_S(g) on S; 1.5-entmax with
r = sqrt(w), dL/ds = r g - r sum(r g) / sum(r); alpha-entmax with u = (z - tau)_+^(r-1)
= w^(2 - alpha) (kept from the forward, so the backward takes no power),
dL/ds = u g - u sum(u g) / sum(u), and dL/dalpha by the package's formula (Correia et al.,
arXiv 1909.00015).
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


def power_on_support(d: torch.Tensor, e) -> torch.Tensor:
    """d^e where d > 0 and 0 where d = 0, for d >= 0 and an exponent e >= 0 (a float, or a tensor
    broadcastable to d); e = 0 gives the support's indicator, where torch's 0^0 is 1."""
    if torch.is_tensor(e):
        return d.pow(e.clamp(min=1e-12))  # d^1e-12 rounds to 1 for every d > 0, 0^1e-12 = 0
    return d.sign() if e == 0 else d.pow(e)


def entmax_threshold(z: torch.Tensor, r, max_iter: int = 100) -> torch.Tensor | None:
    """tau (..., 1) with sum [z - tau]_+^r = 1 over the last dimension, for rows with max(z) = 0
    and r >= 1 (a float, or a tensor broadcastable to z with size 1 in the last dimension); None
    if some row did not settle in ``max_iter`` steps (the caller then bisects)."""
    tau = torch.full_like(z[..., :1], -1.0)
    tol = 4 * torch.finfo(z.dtype).eps
    for _ in range(max_iter):
        d = (z - tau).clamp_(min=0)
        u = power_on_support(d, r - 1)
        step = (torch.linalg.vecdot(u, d).unsqueeze(-1) - 1) / (r * u.sum(-1, keepdim=True))
        new = tau + step
        if bool(step.max() <= tol) or torch.equal(new, tau):
            return new
        tau = new
    return None


def _last_dim(alpha, s: torch.Tensor, dim: int):
    """alpha (a float, or a tensor broadcastable to s with size 1 along ``dim``) laid out as
    ``s.transpose(dim, -1)``."""
    if not torch.is_tensor(alpha):
        return float(alpha)
    alpha = alpha.to(s.dtype)
    return alpha.reshape((1,) * (s.dim() - alpha.dim()) + alpha.shape).transpose(dim, -1)


class _EntmaxAlpha(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, alpha, dim):
        x = s.transpose(dim, -1)
        a = _last_dim(alpha, s, dim)
        in_range = bool(((a > 1) & (a <= 2)).all()) if torch.is_tensor(a) else 1 < a <= 2
        if not in_range:
            raise ValueError(f"alpha-entmax by Newton's method needs alpha in (1, 2], got {alpha} "
                             f"(entmax.entmax_bisect takes any alpha > 1)")
        z = (x - x.amax(-1, keepdim=True)) * (a - 1)
        r = 1 / (a - 1)
        tau = entmax_threshold(z, r)
        if tau is None:  # NaN logits, or a row that did not settle: the package's bisection
            w = entmax.entmax_bisect(x, a, dim=-1)
            u = power_on_support(w, 2 - a)
        else:
            d = (z - tau).clamp_(min=0)
            u = power_on_support(d, r - 1)
            w = u * d
            w /= w.sum(-1, keepdim=True)
        ctx.dim = dim
        ctx.alpha_shape = alpha.shape if torch.is_tensor(alpha) else None
        ctx.save_for_backward(w, u, a if torch.is_tensor(a) else torch.tensor(a))
        return w.transpose(dim, -1)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        w, u, a = ctx.saved_tensors
        g = g.transpose(ctx.dim, -1)
        u_sum = u.sum(-1, keepdim=True)
        ug = u * g
        ds = ug.sub_(u * (ug.sum(-1, keepdim=True) / u_sum))
        d_alpha = None
        if ctx.needs_input_grad[1]:
            skewed = u / u_sum
            wlogw = torch.xlogy(w, w)
            entropy = wlogw.sum(-1, keepdim=True)
            lift = a - 1
            d_alpha = (g * ((w - skewed) / lift ** 2 - (wlogw - skewed * entropy) / lift)
                       ).sum(-1, keepdim=True).transpose(ctx.dim, -1)
            d_alpha = d_alpha.sum_to_size(ctx.alpha_shape)
        return ds.transpose(ctx.dim, -1), d_alpha, None


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


def entmax_alpha(s: torch.Tensor, alpha=1.5, dim: int = -1) -> torch.Tensor:
    """alpha-entmax, w = [(alpha - 1) s - tau]_+^{1/(alpha - 1)}, sum w = 1 along ``dim``, for
    alpha in (1, 2]: a float, or a tensor broadcastable to s with size 1 along ``dim`` (e.g. a
    learned alpha per head, (1, H, 1, 1)), differentiable in s and alpha (equal to
    ``entmax.entmax_bisect``)."""
    return _EntmaxAlpha.apply(s, alpha, dim)
