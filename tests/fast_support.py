"""Shared inputs and comparisons of the fast-path tests (``tests/test_fast_*.py``)."""
from __future__ import annotations

import torch

B, H, L, D = 2, 3, 17, 16
TOL = 1e-5
# The SSA family and the variants its fused and dense forms must match (learnable b, fixed n).
SSA_FAMILY = [("ssa", {}), ("ssa", {"learn_b": True}), ("ssa", {"learn_n": False, "n": 2.0}),
              ("ssa_gpt2", {}), ("stablemax", {})]


def ssa_form(scorer, form: str, block_size: int):
    """``attend(q, k, v, mask)`` of the SSA-family ``scorer`` through its ``fused`` form (eager
    kernels) or its ``dense`` form, with query blocks of ``block_size`` rows."""
    from scorers.fast import dense_ssa_attend, ssa_parameters
    from scorers.fast.extra import fused_ssa_attend

    def fn(q, k, v, mask):
        n, b = ssa_parameters(scorer, torch.float64 if q.dtype == torch.float64 else torch.float32)
        if form == "dense":
            return dense_ssa_attend(q, k, v, mask, n, b, block_size=block_size)
        return fused_ssa_attend(q, k, v, mask, n, b, block_size=block_size, compiled=False)
    return fn


def inputs(dtype=torch.float32, lq: int = L, lk: int = L, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, lq, D, generator=gen, dtype=torch.float64).to(dtype)
    k = torch.randn(B, H, lk, D, generator=gen, dtype=torch.float64).to(dtype)
    v = torch.randn(B, H, lk, D, generator=gen, dtype=torch.float64).to(dtype)
    g = torch.randn(B, H, lq, D, generator=gen, dtype=torch.float64).to(dtype)
    return q, k, v, g


def masks(lq: int = L, lk: int = L) -> dict:
    """No mask, causal, causal with right padding, and a random mask with fully-masked rows."""
    causal = torch.ones(lq, lk, dtype=torch.bool).tril(lk - lq)[None, None]
    valid = torch.ones(B, lk, dtype=torch.bool)
    valid[1, (2 * lk) // 3:] = False
    gen = torch.Generator().manual_seed(1)
    random = torch.rand(B, H, lq, lk, generator=gen) > 0.5
    random[0, 1, min(3, lq - 1)] = False
    random[1, :, min(5, lq - 1)] = False
    return {"none": None, "causal": causal, "padded_causal": causal & valid[:, None, None, :],
            "random_empty_rows": random}


def run(fn, scorer, q, k, v, g, mask):
    """Output and gradients (q, k, v, then the scorer's parameters in order) of fn's attention."""
    qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
    scorer.zero_grad(set_to_none=True)
    out = fn(qq, kk, vv, mask)
    (out * g).sum().backward()
    grads = [qq.grad, kk.grad, vv.grad]
    grads += [p.grad if p.grad is not None else torch.zeros_like(p) for p in scorer.parameters()]
    return out.detach(), grads


def assert_close(ref, got, what: str, tol: float = TOL) -> None:
    """abs error <= tol on outputs and q/k/v gradients; on scorer parameters (sums over every
    entry) relative to max(1, |reference|)."""
    out_r, grads_r = ref
    out_g, grads_g = got
    err = (out_r - out_g).abs().max().item()
    assert err <= tol, f"{what}: output differs by {err:.3g} > {tol}"
    for i, (a, b) in enumerate(zip(grads_r, grads_g)):
        assert a is not None and b is not None, f"{what}: gradient {i} missing"
        scale = 1.0 if i < 3 else max(1.0, a.abs().max().item())
        err = (a - b).abs().max().item() / scale
        assert err <= tol, f"{what}: gradient {i} differs by {err:.3g} (relative {scale:g})"
