"""The scorer checks of docs/scorers.md#scorer-checks, items 1-10, on any registered scorer,
a plugin's included. Each ``check_*(name, kwargs=None, reference=None)`` raises AssertionError
saying what failed; ``reference`` is a callable ``(scorer, q, k, mask) -> float64 numpy
weights``, the formula written independently (check 8 needs one). :func:`run_checks` runs each
check that applies and says how it went (``scorebench check``); the tests run the same
functions."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .attention import Attention
from .base import LogitsScorer, Scorer, causal_mask
from .plugins import one_line
from .registry import create_scorer

B, H, L, D = 2, 3, 17, 16
MAX_LEN = 64

# Documented bounds of unnormalized scorers (docs/scorers.md#scorer-checks, item 3): (min, max) of each weight.
WEIGHT_BOUNDS = {"sigmoid": (0.0, 1.0), "relu": (0.0, math.inf), "relu2": (0.0, math.inf)}

# bisection with n_iter steps is accurate to about 2^-n_iter, not to fp64 round-off.
FP64_TOLERANCE = {"entmax_bisect": 1e-7}


def make_scorer(name: str, kwargs: dict | None = None, *, num_heads: int = H) -> Scorer:
    """The scorer with its parameters moved off their initial values, deterministically."""
    scorer = create_scorer(name, num_heads=num_heads, max_len=MAX_LEN, **(kwargs or {}))
    with torch.no_grad():
        for _, p in sorted(scorer.named_parameters()):
            p.add_(0.25 * torch.linspace(-1.0, 1.0, p.numel()).view_as(p))
    return scorer


def inputs(dtype=torch.float32, requires_grad=False):
    g = torch.Generator().manual_seed(1234)
    q, k, v = (torch.randn(B, H, L, D, generator=g, dtype=torch.float64) for _ in range(3))
    q = q * 1.5
    return tuple(t.to(dtype).requires_grad_(requires_grad) for t in (q, k, v))


def pad_length() -> int:
    """A random right-padding length for batch element 1 (element 0 is unpadded)."""
    return int(torch.randint(4, L - 3, (1,), generator=torch.Generator().manual_seed(7)))


def valid_tokens() -> torch.Tensor:
    lengths = torch.tensor([L, pad_length()])
    return torch.arange(L)[None, :] < lengths[:, None]


def masks(causal_only: bool) -> dict[str, torch.Tensor]:
    """Boolean masks (True = visible); every one has fully-masked rows (padded queries)."""
    valid = valid_tokens()
    pad = valid[:, None, None, :] & valid[:, None, :, None]
    tril = causal_mask(L)
    g = torch.Generator().manual_seed(99)
    scattered = torch.rand(B, H, L, L, generator=g) < 0.6
    scattered[0, 1, 5] = False
    out = {"causal": tril & pad, "causal_scattered": tril & scattered}
    if not causal_only:
        out.update(padding=pad, scattered=scattered)
    return out


def both_paths(scorer):
    return (False, True) if scorer.kernels().native is not None else (False,)


def set_fast(scorer, fast: bool) -> None:
    """``fast``: the scorer runs as shipped (its own fast path when it has one); else its
    reference (the reference form of scorers.forms)."""
    from .fast import restore, use_reference

    restore(scorer) if fast else use_reference(scorer)


def run_attend(scorer, q, k, v, mask, fast):
    set_fast(scorer, fast)
    try:
        return scorer.attend(q, k, v, mask)
    finally:
        set_fast(scorer, True)


def empty_rows(mask):
    return ~mask.expand(B, H, L, L).any(-1)


# 1. Exact zeros on masked keys, fp32 and under bf16 autocast.
def check_exact_zeros(name, kwargs=None, reference=None):
    scorer = make_scorer(name, kwargs)
    q, k, v = inputs()
    for kind, mask in masks(scorer.causal_only).items():
        full = mask.expand(B, H, L, L)
        for autocast in (False, True):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                w = scorer.weights_from_qk(q, k, mask)
                out = scorer.attend(q, k, v, mask)
            assert w.dtype in (torch.float32, torch.float64), \
                f"{name}: weights in {w.dtype} (autocast={autocast}); scores must be fp32"
            hidden = w[~full]
            assert bool((hidden == 0).all()) and not bool(torch.signbit(hidden).any()), \
                f"{name} [{kind}, autocast={autocast}]: nonzero weight on masked keys"
            assert bool(torch.isfinite(out).all()), f"{name} [{kind}]: non-finite output"


# 2. Masked-key invariance: masked logits, keys and values do not matter.
def check_masked_key_invariance(name, kwargs=None, reference=None):
    scorer = make_scorer(name, kwargs)
    q, k, v = inputs()
    g = torch.Generator().manual_seed(5)
    for kind, mask in masks(scorer.causal_only).items():
        full = mask.expand(B, H, L, L)
        if isinstance(scorer, LogitsScorer):
            s = scorer.logits(q, k)
            junk = 30.0 * torch.randn(s.shape, generator=g)
            junk[..., ::3] = 1e4
            junk[..., 1::3] = -1e4
            s2 = torch.where(full, s, junk)
            diff = (scorer.weights_from_logits(s, mask) - scorer.weights_from_logits(s2, mask))
            assert diff.abs().max() <= 1e-7, \
                f"{name} [{kind}]: masked logits change the weights by {diff.abs().max():.3g}"
    valid = valid_tokens()
    hidden_keys = ~valid[:, None, :, None]
    k2 = torch.where(hidden_keys, 50.0 * torch.randn(k.shape, generator=g), k)
    v2 = torch.where(hidden_keys, 1e3 * torch.randn(v.shape, generator=g), v)
    for kind, mask in masks(scorer.causal_only).items():
        if kind not in ("causal", "padding"):
            continue
        for fast in both_paths(scorer):
            a = run_attend(scorer, q, k, v, mask, fast)
            b = run_attend(scorer, q, k2, v2, mask, fast)
            assert (a - b).abs().max() <= 1e-7, \
                f"{name} [{kind}, fast={fast}]: padded keys change the output by {(a - b).abs().max():.3g}"


# 3. Row sums and bounds per normalization.
def check_bounds(name, kwargs=None, reference=None):
    scorer = make_scorer(name, kwargs)
    q, k, _ = inputs()
    norm = scorer.normalization
    for kind, mask in masks(scorer.causal_only).items():
        w = scorer.weights_from_qk(q, k, mask)
        rows = ~empty_rows(mask)
        total = w.sum(-1)[rows]
        assert bool(torch.isfinite(w).all()), f"{name} [{kind}]: non-finite weights"
        if norm == "normalized":
            assert w.min() >= 0, f"{name} [{kind}]: negative weight {w.min():.3g}"
            err = (total - 1).abs().max()
            assert err <= 1e-6, f"{name} [{kind}]: rows sum to 1 +- {err:.3g}"
        elif norm == "subnormalized":
            assert w.min() >= 0, f"{name} [{kind}]: negative weight {w.min():.3g}"
            assert total.max() <= 1 + 1e-6, f"{name} [{kind}]: row sum {total.max():.8f} > 1"
        elif norm == "signed":
            assert w.abs().sum(-1).max() <= 1 + 1e-6, f"{name} [{kind}]: sum |w| > 1"
        if name in WEIGHT_BOUNDS and norm == "unnormalized":
            lo, hi = WEIGHT_BOUNDS[name]
            assert lo <= w.min() and w.max() <= hi, \
                f"{name} [{kind}]: weights outside [{lo}, {hi}]: [{w.min():.3g}, {w.max():.3g}]"


# 4. Finite gradients for q, k, v and the scorer's parameters; none into masked logits.
def check_gradients(name, kwargs=None, reference=None):
    scorer = make_scorer(name, kwargs)
    g = torch.Generator().manual_seed(11)
    upstream = torch.randn(B, H, L, D, generator=g)
    for kind, mask in masks(scorer.causal_only).items():
        for fast in both_paths(scorer):
            q, k, v = inputs(requires_grad=True)
            scorer.zero_grad(set_to_none=True)
            (run_attend(scorer, q, k, v, mask, fast) * upstream).sum().backward()
            for label, t in (("q", q), ("k", k), ("v", v)):
                assert t.grad is not None and bool(torch.isfinite(t.grad).all()), \
                    f"{name} [{kind}, fast={fast}]: non-finite grad for {label}"
            for pname, p in scorer.named_parameters():
                assert p.grad is not None, f"{name}: parameter {pname} gets no gradient"
                assert bool(torch.isfinite(p.grad).all()), f"{name}: non-finite grad for {pname}"
                assert p.grad.abs().sum() > 0, f"{name}: parameter {pname} has zero gradient"
        if isinstance(scorer, LogitsScorer):
            q, k, _ = inputs()
            s = scorer.logits(q, k).requires_grad_(True)
            w = scorer.weights_from_logits(s, mask)
            (w * torch.randn(w.shape, generator=g)).sum().backward()
            full = mask.expand(B, H, L, L)
            assert bool(torch.isfinite(s.grad).all()), f"{name} [{kind}]: non-finite logit grads"
            assert bool((s.grad[~full] == 0).all()), f"{name} [{kind}]: gradient into masked logits"


# 5. Fully-masked rows give an exactly zero output and no NaN anywhere.
def check_fully_masked_rows(name, kwargs=None, reference=None):
    scorer = make_scorer(name, kwargs)
    q, k, v = inputs()
    for kind, mask in masks(scorer.causal_only).items():
        empty = empty_rows(mask)
        assert bool(empty.any())
        w = scorer.weights_from_qk(q, k, mask)
        assert bool((w[empty] == 0).all()), f"{name} [{kind}]: weights on a fully-masked row"
        for fast in both_paths(scorer):
            out = run_attend(scorer, q, k, v, mask, fast)
            assert not bool(torch.isnan(out).any()), f"{name} [{kind}, fast={fast}]: NaN output"
            assert bool((out[empty] == 0).all()), \
                f"{name} [{kind}, fast={fast}]: fully-masked rows have a nonzero output"


# 6. fp32 vs fp64 weights.
def check_fp32_vs_fp64(name, kwargs=None, reference=None):
    scorer = make_scorer(name, kwargs)
    q32, k32, _ = inputs(torch.float32)
    q64, k64, _ = inputs(torch.float64)
    for kind, mask in masks(scorer.causal_only).items():
        w32 = scorer.weights_from_qk(q32, k32, mask)
        w64 = scorer.weights_from_qk(q64, k64, mask)
        assert w64.dtype == torch.float64
        err = (w32.double() - w64).abs().max()
        assert err <= 1e-5, f"{name} [{kind}]: fp32 and fp64 weights differ by {err:.3g}"


# 7. Fast path equals the reference path (outputs and gradients).
def check_fast_path(name, kwargs=None, reference=None):
    scorer = make_scorer(name, kwargs)
    assert scorer.kernels().native is not None, f"{name} has no fast path"
    upstream = torch.randn(B, H, L, D, generator=torch.Generator().manual_seed(3))
    for kind, mask in {**masks(scorer.causal_only), "none": None}.items():
        if mask is None and scorer.causal_only:
            continue
        results = []
        for fast in (False, True):
            q, k, v = inputs(requires_grad=True)
            scorer.zero_grad(set_to_none=True)
            out = run_attend(scorer, q, k, v, mask, fast)
            (out * upstream).sum().backward()
            grads = [q.grad, k.grad, v.grad] + [p.grad for _, p in sorted(scorer.named_parameters())]
            results.append((out.detach(), grads))
        (ref_out, ref_grads), (fast_out, fast_grads) = results
        err = (ref_out - fast_out).abs().max()
        assert err <= 1e-5, f"{name} [{kind}]: fast path differs from the reference by {err:.3g}"
        for a, b in zip(ref_grads, fast_grads):
            gerr = (a - b).abs().max() / max(1.0, a.abs().max())
            assert gerr <= 1e-4, f"{name} [{kind}]: fast-path gradient differs by {gerr:.3g}"


# 8. Output equals an independent float64 reference of the formula.
def check_reference(name, kwargs=None, reference=None):
    assert reference is not None, f"no float64 reference for {name}"
    scorer = make_scorer(name, kwargs)
    q, k, v = inputs(torch.float64)
    tol64 = FP64_TOLERANCE.get(name, 1e-10)
    for kind, mask in masks(scorer.causal_only).items():
        w_ref = reference(scorer, q, k, mask)
        with torch.no_grad():
            w64 = scorer.weights_from_qk(q, k, mask).numpy()
        err64 = np.abs(w64 - w_ref).max()
        assert err64 <= tol64, f"{name} [{kind}]: fp64 weights differ from the formula by {err64:.3g}"
        out_ref = w_ref @ v.numpy()
        with torch.no_grad():
            out32 = scorer.attend(q.float(), k.float(), v.float(), mask).double().numpy()
            w32 = scorer.weights_from_qk(q.float(), k.float(), mask).double().numpy()
        err_w = np.abs(w32 - w_ref).max()
        err_o = np.abs(out32 - out_ref).max()
        bound = 1e-6 * max(1.0, np.abs(w_ref).max())
        assert err_w <= bound, f"{name} [{kind}]: fp32 weights differ from the formula by {err_w:.3g}"
        bound = 1e-6 * max(1.0, np.abs(out_ref).max())
        assert err_o <= bound, f"{name} [{kind}]: fp32 output differs from the formula by {err_o:.3g}"


# 9. Padding and prefix consistency (fp64 to 1e-10; fp32 to 1e-6 of the output scale).
def check_padding_and_prefix(name, kwargs=None, reference=None):
    scorer = make_scorer(name, kwargs)
    t = pad_length()
    valid = valid_tokens()[:, None, None, :]
    for dtype, tol in ((torch.float64, FP64_TOLERANCE.get(name, 1e-10)), (torch.float32, 1e-6)):
        q, k, v = inputs(dtype)
        with torch.no_grad():
            pairs = []
            for causal in (True, False) if not scorer.causal_only else (True,):
                alone_mask = causal_mask(t) if causal else None
                alone = scorer.attend(q[1:, :, :t], k[1:, :, :t], v[1:, :, :t], alone_mask)
                batch_mask = valid & causal_mask(L) if causal else valid
                padded = scorer.attend(q, k, v, batch_mask)[1:, :, :t]
                pairs.append((f"padded sequence vs alone (causal={causal})", alone, padded))
            full = scorer.attend(q, k, v, causal_mask(L))[:, :, :t]
            prefix = scorer.attend(q[:, :, :t], k[:, :, :t], v[:, :, :t], causal_mask(t))
            pairs.append((f"first {t} causal outputs vs a length-{t} run", full, prefix))
        for what, a, b in pairs:
            err = (a - b).abs().max()
            bound = tol * max(1.0, float(a.abs().max()))
            assert err <= bound, f"{name} [{dtype}]: {what} differ by {err:.3g} (> {bound:.3g})"


# 10. The scorer is actually called in every layer.
def check_call_counter(name, kwargs=None, reference=None):
    torch.manual_seed(0)
    layers = [Attention(8 * H, H, scorer=name, max_len=MAX_LEN, scorer_kwargs=kwargs or None)
              for _ in range(2)]
    x = torch.randn(B, L, 8 * H)
    for step in (1, 2):
        h = x
        for layer in layers:
            h = h + layer(h, causal_mask(L))
        assert [layer.scorer.calls for layer in layers] == [step, step], \
            f"{name}: call counters {[layer.scorer.calls for layer in layers]} after {step} forward(s)"
    assert layers[0].scorer is not layers[1].scorer


ALL_CHECKS = (check_exact_zeros, check_masked_key_invariance, check_bounds, check_gradients,
              check_fully_masked_rows, check_fp32_vs_fp64, check_fast_path, check_reference,
              check_padding_and_prefix, check_call_counter)


def has_fast_path(name: str) -> bool:
    """The scorer's default instance declares a native kernel (its own fast path)."""
    return create_scorer(name, num_heads=H, max_len=MAX_LEN).kernels().native is not None


# What each check verifies, in the words of docs/scorers.md#scorer-checks.
TITLES = {
    check_exact_zeros: "exact zeros on masked keys (fp32 and bf16 autocast)",
    check_masked_key_invariance: "masked logits, keys and values change no output",
    check_bounds: "row sums and bounds of its normalization",
    check_gradients: "finite gradients, none into masked logits",
    check_fully_masked_rows: "fully-masked rows give a zero output, no NaN",
    check_fp32_vs_fp64: "fp32 weights within 1e-5 of fp64",
    check_fast_path: "its fast path equals its reference (outputs and gradients)",
    check_reference: "weights equal a float64 reference of the formula",
    check_padding_and_prefix: "padding and prefix consistency",
    check_call_counter: "it runs in every layer (call counter)",
}

PASS, FAIL, NOT_APPLICABLE = "pass", "FAIL", "n/a"


@dataclass(frozen=True)
class CheckResult:
    number: int
    check: str
    title: str
    outcome: str
    detail: str = ""


def run_checks(name: str, kwargs: dict | None = None, reference=None) -> list[CheckResult]:
    """Every check on the scorer ``name``, in order, on one torch thread: passed, failed with
    the reason, or not applicable (no fast path of its own; no ``reference`` for check 8)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return [_run(number, check, name, kwargs, reference)
                for number, check in enumerate(ALL_CHECKS, start=1)]
    finally:
        torch.set_num_threads(threads)


def _run(number: int, check, name: str, kwargs, reference) -> CheckResult:
    def result(outcome: str, detail: str = "") -> CheckResult:
        return CheckResult(number, check.__name__, TITLES[check], outcome, detail)

    if check is check_fast_path and not has_fast_path(name):
        return result(NOT_APPLICABLE, "it has no fast path of its own")
    if check is check_reference and reference is None:
        return result(NOT_APPLICABLE, "no float64 reference of the formula given (a test "
                                      "passes one to scorers.checks.check_reference)")
    try:
        check(name, kwargs, reference)
    except AssertionError as e:
        return result(FAIL, str(e).strip().splitlines()[0] if str(e).strip() else "failed")
    except Exception as e:  # noqa: BLE001 - a check that raises is a failed check, reported
        return result(FAIL, one_line(e))
    return result(PASS)
