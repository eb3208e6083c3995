"""Scaled Signed Averaging (arXiv 2508.14685) and stablemax, in the log domain.

Direct form w_ij ∝ (1 + b|s_ij|)^(n sgn s_ij) over V_i; computed only as
SSA(s) = softmax(t), t = n sgn(s) log1p(b|s|), masked t = -inf. t is C^1 at s = 0 (slope n b).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .base import LogitsScorer, compute_dtype, masked_fill_neg_inf
from .forms import BlockedSpec, FlexSpec, Kernels, LogitTransform
from .params import constant, inverse_softplus, positive
from .registry import register_scorer

LN2 = math.log(2.0)


def ssa_transform(s: torch.Tensor, n=None, b=None) -> tuple[torch.Tensor, torch.Tensor]:
    """t = n sgn(s) log1p(b|s|) and a = b|s| (so dt/ds = n b / (1 + a)), as new tensors; n or b
    None stands for 1 (no pass). The reference's :class:`SSATransform` and the SSA forms of
    scorers/fast/ssa.py call it; the blocked form takes t in base 2 (:class:`SSALogits`)."""
    a = s.abs() if b is None else s.abs().mul_(b)
    t = torch.log1p(a).copysign_(s)
    return (t if n is None else t.mul_(n)), a


def ssa_grad(dt: torch.Tensor, w: torch.Tensor, *, t: torch.Tensor | None = None,
             s: torch.Tensor | None = None, out: torch.Tensor | None = None):
    """SSA's derivative, written once: for t = n sgn(s) log1p(b|s|) and w = 1 + b|s|,

        dt/ds = n b / w  (n b at s = 0),    dt/dn = t / n,    dt/db = n s / w.

    From dt = dL/dt and the forward's w: ``(g, sum dt t, sum g s)`` with g = dt / w, so that
    dL/ds = n b g, dL/dn = (sum dt t) / n and dL/db = n sum g s; a sum is None without its
    ``t`` or ``s``. The reference's backward and every SSA kernel (blocked, dense, fused) take
    their gradients from it, applying the scalars where they cost least (a kernel scales the
    (L, d) gradients of q and k by n b rather than the (L, L) g); a kernel that folds b into the
    queries passes w, t and s in its own variable b s. ``out``: where g goes (dt itself, to
    overwrite it)."""
    dn = None if t is None else torch.dot(dt.reshape(-1), t.reshape(-1))
    g = torch.div(dt, w, out=out)
    db = None if s is None else torch.dot(g.reshape(-1), s.reshape(-1))
    return g, dn, db


def signed_log1p(s: torch.Tensor, b: torch.Tensor | float) -> torch.Tensor:
    """sgn(s) log1p(b|s|), with derivative b at s = 0 when autograd traces it (torch.sign would
    give 0 there): the transform inside a FlexAttention score_mod, which is differentiated by
    tracing rather than through :class:`SSATransform`'s backward."""
    return torch.where(s >= 0, torch.log1p(b * s.clamp(min=0)), -torch.log1p(b * (-s).clamp(min=0)))


class SSATransform(torch.autograd.Function):
    """t = n sgn(s) log1p(b|s|) in one node, its backward :func:`ssa_grad`. Saves s only (the
    backward recomputes |s|); a third of the elementwise passes of the same formula through
    ``signed_log1p``."""

    @staticmethod
    def forward(ctx, s, n, b):
        ctx.save_for_backward(s, *(x for x in (n, b) if isinstance(x, torch.Tensor)))
        ctx.n_b = tuple(x if not isinstance(x, torch.Tensor) else None for x in (n, b))
        return ssa_transform(s, n, b)[0]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        s, *tensors = ctx.saved_tensors
        n, b = (x if x is not None else tensors.pop(0) for x in ctx.n_b)
        need_s, need_n, need_b = ctx.needs_input_grad
        t = ssa_transform(s, n, b)[0] if need_n else None
        g, dn, db = ssa_grad(grad, (s.abs() * b).add_(1.0), t=t,
                             s=s if need_b else None)
        return (g.mul_(n * b) if need_s else None,
                None if dn is None else (dn / n).reshape(n.shape),
                None if db is None else (db * n).reshape(b.shape))


def ssa_weights(s: torch.Tensor, mask: torch.Tensor, n, b) -> torch.Tensor:
    """softmax over V_i of t = n sgn(s) log1p(b|s|)."""
    return torch.softmax(masked_fill_neg_inf(SSATransform.apply(s, n, b), mask), dim=-1)


class SSALogits(LogitTransform):
    """t log2 e = n u, u = sgn(s') log2(1 + |s'|), of s' = b s (b folded into the queries), for
    the blocked form (scorers/fast/blocked.py), its gradient :func:`ssa_grad` in s'. Base 2
    leaves no factor log2 e to apply, the sign is copied, and the scale and the shift are one
    pass. On an Intel Xeon (2 threads, a (1, 8, 128, 1024) tile) log2 took 0.15 ms against
    log1p's 0.36 and copysign 0.14 against sign then multiply's 0.30, and ssa at (1, 8, 2048, 64)
    went from 1.09-1.14x SDPA to 0.99-1.03x. A 2-core AMD EPYC measured the other way (one
    thread: log1p 0.94 ms against log2 1.34, sign then multiply 0.21 against copysign 0.37).
    Rounding 1 + |s'| first moves t by at most n 2^-24 / ln 2, about the float32 rounding of t
    itself near 1."""

    kept_tiles = 2

    def __init__(self, n: torch.Tensor):
        self.params = (n,)

    def exponent(self, s, shift, n, keep=False):
        a1 = s.abs().add_(1.0)
        u = torch.log2(a1) if keep else a1.log2_()
        u.copysign_(s)
        out = s if keep else u
        e = (torch.mul(u, float(n), out=out) if shift is None
             else torch.add(-shift, u, alpha=float(n), out=out))
        return e, ((a1, u) if keep else None)

    def grad(self, kept, dt, n, needs=()):
        a1, u = kept
        g, dn, _ = ssa_grad(dt, a1, t=u if needs and needs[0] else None, out=dt)
        return g.mul_(float(n)), (None if dn is None else dn * LN2)


def ssa_kernels(parameters) -> Kernels:
    """The kernels of a scorer whose weights are softmax(n sgn(s) log1p(b|s|)), from
    ``parameters(dtype, device) -> (n, b)`` (1-element tensors): the SSA kernels themselves
    (scorers/fast/ssa.py), the blocked form (b folded into the queries' scale, the transform
    :class:`SSALogits`; scorers/fast/blocked.py) and the FlexAttention score_mod."""

    def flex(q, k, mask):
        n, b_ = parameters(torch.float32, q.device)
        return FlexSpec(lambda score, b, h, qi, ki: n[0] * signed_log1p(score, b_[0]))

    def blocked(q, k, mask):
        n, b = parameters(compute_dtype(q, k), q.device)
        return BlockedSpec("softmax", query_scale=b / math.sqrt(q.shape[-1]),
                           transform=SSALogits(n))

    return Kernels(ssa=parameters, blocked=blocked, flex=flex)


class SSAForms:
    """An SSA-family scorer's kernels, from its ``ssa_parameters(dtype, device) -> (n, b)``."""

    def kernels(self):
        return ssa_kernels(self.ssa_parameters)


@register_scorer("ssa", family="ssa", normalization="normalized", paper="arXiv:2508.14685")
class SSA(SSAForms, LogitsScorer):
    """w = softmax(n sgn(s) log1p(b|s|)). n = softplus(rho), one scalar per layer shared by heads,
    n0 = 1.5 (rho0 = 1.2475), learnable unless ``learn_n=False``; b = 0.8 fixed buffer unless
    ``learn_b=True`` (then b = softplus(beta), b0 = ``b``). Both are 1-element tensors."""

    def __init__(self, *, n: float = 1.5, b: float = 0.8, learn_n: bool = True,
                 learn_b: bool = False, **context):
        super().__init__(**context)
        n = positive("n", n, "ssa")
        b = positive("b", b, "ssa")
        self.learn_n = bool(learn_n)
        self.learn_b = bool(learn_b)
        if self.learn_n:
            self.rho = constant(inverse_softplus(n))
        else:
            self.register_buffer("n_fixed", torch.tensor([n]))
        if self.learn_b:
            self.beta = constant(inverse_softplus(b))
        else:
            self.register_buffer("b_fixed", torch.tensor([b]))

    def n_value(self, dtype=torch.float32) -> torch.Tensor:
        return F.softplus(self.rho.to(dtype))[0] if self.learn_n else self.n_fixed.to(dtype)[0]

    def b_value(self, dtype=torch.float32) -> torch.Tensor:
        return F.softplus(self.beta.to(dtype))[0] if self.learn_b else self.b_fixed.to(dtype)[0]

    def weights(self, s, mask):
        return ssa_weights(s, mask, self.n_value(s.dtype), self.b_value(s.dtype))

    def ssa_parameters(self, dtype, device):
        return (self.n_value(dtype).reshape(1).to(device),
                self.b_value(dtype).reshape(1).to(device))


@register_scorer("ssa_n2", aliases=("ssa-2",), family="ssa", normalization="normalized",
                 paper="arXiv:2508.14685")
class SSAFixedN2(SSA):
    """SSA-2 of the paper's Zorro table: :class:`SSA` with n = 2 fixed (b = 0.8 fixed). Runs on
    the encoder track only."""

    tracks = ("encoder",)

    def __init__(self, *, n: float = 2.0, learn_n: bool = False, **kwargs):
        super().__init__(n=n, learn_n=learn_n, **kwargs)


@register_scorer("ssa_n1_5", aliases=("ssa-1.5",), family="ssa", normalization="normalized",
                 paper="arXiv:2508.14685")
class SSAFixedN15(SSA):
    """SSA-1.5 of the paper's Zorro table: :class:`SSA` with n = 1.5 fixed (b = 0.8 fixed). Runs
    on the encoder track only."""

    tracks = ("encoder",)

    def __init__(self, *, n: float = 1.5, learn_n: bool = False, **kwargs):
        super().__init__(n=n, learn_n=learn_n, **kwargs)


@register_scorer("ssa_gpt2", family="ssa", normalization="normalized", paper="arXiv:2508.14685")
class SSAGPT2(SSAForms, LogitsScorer):
    """SSA of the nanoGPT code: b = e^a, n = e^nu, 1-element parameters per layer,
    a0 = 1, nu0 = 0.4 (b0 = 2.71828, n0 = 1.49182), both learnable."""

    def __init__(self, *, a: float = 1.0, nu: float = 0.4, **context):
        super().__init__(**context)
        self.a = constant(a)
        self.nu = constant(nu)

    def n_value(self, dtype=torch.float32) -> torch.Tensor:
        return torch.exp(self.nu.to(dtype))[0]

    def b_value(self, dtype=torch.float32) -> torch.Tensor:
        return torch.exp(self.a.to(dtype))[0]

    def weights(self, s, mask):
        return ssa_weights(s, mask, self.n_value(s.dtype), self.b_value(s.dtype))

    def ssa_parameters(self, dtype, device):
        return (self.n_value(dtype).reshape(1).to(device),
                self.b_value(dtype).reshape(1).to(device))


@register_scorer("stablemax", family="ssa", normalization="normalized", paper="arXiv:2501.04697")
class Stablemax(SSAForms, LogitsScorer):
    """w ∝ s + 1 for s >= 0 and 1/(1 - s) for s < 0: SSA with b = n = 1."""

    def weights(self, s, mask):
        return ssa_weights(s, mask, 1.0, 1.0)

    def ssa_parameters(self, dtype, device):
        return (torch.ones(1, dtype=dtype, device=device),
                torch.ones(1, dtype=dtype, device=device))
