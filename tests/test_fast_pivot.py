"""The pivot path: sparsemax and entmax15 with the sort-free thresholds of scorers/pivot.py equal
the float64 sort-based solutions of the ``entmax`` package (values and gradients) on logits of
every scale, ties, single-key rows and fully-masked rows; alpha-entmax by Newton's method equals
the package's float64 bisection (values, gradients in the logits and in a per-head alpha); and
each equals its scorer's reference through attention."""
from __future__ import annotations

import entmax
import pytest
import torch

from scorers import pivot
from scorers.fast import FastPathError, pivot_attend
from scorer_checks import make_scorer

from fast_support import assert_close, inputs, masks, run

SOLVERS = {"sparsemax": (pivot.sparsemax, entmax.sparsemax),
           "entmax15": (pivot.entmax15, entmax.entmax15)}


def logits(scale: float, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    s = torch.randn(3, 4, 33, 33, generator=gen, dtype=torch.float64) * scale
    return s.masked_fill(~torch.ones(33, 33, dtype=torch.bool).tril(), float("-inf"))


@pytest.mark.parametrize("name", SOLVERS)
@pytest.mark.parametrize("scale", [1e-3, 0.1, 1.0, 5.0, 30.0, 1e3])
def test_equals_the_sort_based_solver_in_float64(name, scale):
    ours, theirs = SOLVERS[name]
    s = logits(scale)
    g = torch.randn(s.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 2e-6)):
        x = s.to(dtype).clone().requires_grad_()
        ref_s = x.detach().double().requires_grad_()  # the same (rounded) logits, solved by sort
        ref = theirs(ref_s, dim=-1)
        (ref * g).sum().backward()
        w = ours(x, dim=-1)
        (w * g.to(dtype)).sum().backward()
        assert (w.double() - ref).abs().max().item() <= tol, (dtype, "weights")
        assert (w.double().sum(-1) - 1).abs().max().item() <= tol * 10
        if dtype == torch.float64:
            assert torch.equal(w == 0, ref == 0)
        assert (x.grad.double() - ref_s.grad).abs().max().item() <= tol * 10, (dtype, "gradient")


@pytest.mark.parametrize("name", SOLVERS)
def test_ties_single_keys_and_other_dims(name):
    ours, theirs = SOLVERS[name]
    s = torch.tensor([[0.0, 0.0, 0.0, 0.0], [2.0, 2.0, -1.0, 5.0], [1.0] + [float("-inf")] * 3],
                     dtype=torch.float64)
    assert torch.allclose(ours(s), theirs(s), atol=1e-12)
    assert torch.allclose(ours(s)[0], torch.full((4,), 0.25, dtype=torch.float64))
    assert ours(s)[2].tolist() == [1.0, 0.0, 0.0, 0.0]
    u = torch.randn(5, 7, 6, dtype=torch.float64)
    assert torch.allclose(ours(u, dim=1), theirs(u, dim=1), atol=1e-12)


@pytest.mark.parametrize("name", SOLVERS)
def test_hand_worked_values(name):
    # sparsemax([1, 0.5, -1]): tau = 0.25 on the support {1, 0.5} -> [0.75, 0.25, 0]
    # entmax15([2, 1, -2]) = [z - tau]_+^2 with z = [1, 0.5, -1]: on {1, 0.5},
    # (1 - tau)^2 + (0.5 - tau)^2 = 1 -> tau = (1.5 - sqrt(1.75)) / 2
    ours, _ = SOLVERS[name]
    if name == "sparsemax":
        got, want = ours(torch.tensor([1.0, 0.5, -1.0], dtype=torch.float64)), [0.75, 0.25, 0.0]
    else:
        tau = (1.5 - 1.75 ** 0.5) / 2
        got = ours(torch.tensor([2.0, 1.0, -2.0], dtype=torch.float64))
        want = [(1 - tau) ** 2, (0.5 - tau) ** 2, 0.0]
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float64), atol=1e-14)


def test_a_key_at_the_threshold():
    """A key equal (in float32) to tau* sits on the support's edge: either side of it is right."""
    tau = float(-(1 + 7 ** 0.5) / 4)  # (0 - t)^2 + (-0.5 - t)^2 = 1
    z = torch.tensor([[0.0, -0.5, tau, tau - 1e-3, -3.0]])
    for s in (2 * z, 2 * z.expand(64, -1)):
        w = pivot.entmax15(s)
        assert (w.double() - entmax.entmax15(s.double())).abs().max().item() <= 2e-6
        assert pivot.entmax15_threshold(s / 2) is not None


def test_an_unsettled_threshold_falls_back_to_the_sort():
    z = logits(1.0)[0].float()
    z = z - z.amax(-1, keepdim=True)
    assert pivot.entmax15_threshold(z, max_iter=1) is None
    assert pivot.entmax15_threshold(z) is not None


def test_nan_logits_give_nan_rows():
    s = torch.tensor([[0.0, float("nan"), 1.0], [0.0, 1.0, 2.0]])
    for ours, _ in SOLVERS.values():
        w = ours(s)
        assert torch.isnan(w[0]).all() and torch.isfinite(w[1]).all()


ALPHAS = [1.01, 1.1, 1.33, 1.5, 1.8, 2.0]


def bisection(s: torch.Tensor, alpha) -> torch.Tensor:
    """The package's alpha-entmax, bisected to the rounding of float64."""
    return entmax.entmax_bisect(s, alpha, dim=-1, n_iter=100)


def package_errors(s: torch.Tensor, alpha, g: torch.Tensor, want_ds: torch.Tensor,
                   want_da: torch.Tensor | None) -> tuple[float, float]:
    """How far the package's own bisection, in the dtype of ``s``, is from the float64 gradients
    in s and alpha (near the edge of the support a float32 gradient is ill-conditioned)."""
    if s.dtype == torch.float64:
        return 0.0, 0.0
    x = s.clone().requires_grad_()
    a = alpha.to(s.dtype).requires_grad_() if torch.is_tensor(alpha) else alpha
    (entmax.entmax_bisect(x, a) * g.to(s.dtype)).sum().backward()
    da = 0.0 if want_da is None else (a.grad.double() - want_da).abs().max().item()
    return (x.grad.double() - want_ds).abs().max().item(), da


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("scale", [1e-3, 0.1, 1.0, 5.0, 30.0, 1e3])
def test_alpha_entmax_equals_the_bisection_in_float64(alpha, scale):
    s = logits(scale)
    g = torch.randn(s.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    heads = torch.tensor([alpha, 1.0 + (alpha - 1.0) / 2, 1.25, alpha],
                         dtype=torch.float64).view(1, 4, 1, 1)
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 4e-6)):
        for a in (alpha, heads):
            x = s.to(dtype).clone().requires_grad_()
            ours_alpha = a.clone().requires_grad_() if torch.is_tensor(a) else a
            ref_s = x.detach().double().requires_grad_()
            ref_alpha = a.clone().requires_grad_() if torch.is_tensor(a) else a
            ref = bisection(ref_s, ref_alpha)
            (ref * g).sum().backward()
            w = pivot.entmax_alpha(x, ours_alpha)
            (w * g.to(dtype)).sum().backward()
            what = (dtype, "per head" if torch.is_tensor(a) else "float")
            assert (w.double() - ref).abs().max().item() <= tol, (*what, "weights")
            assert (w.double().sum(-1) - 1).abs().max().item() <= tol
            ds_package, da_package = package_errors(
                s.to(dtype), a, g, ref_s.grad, ref_alpha.grad if torch.is_tensor(a) else None)
            err = (x.grad.double() - ref_s.grad).abs().max().item()
            assert err <= max(tol * 10, 2 * ds_package), (*what, "ds")
            if torch.is_tensor(a):
                # dL/dalpha divides by (alpha - 1)^2: in float32 the package's own bisection
                # errs by up to 1e-2 at alpha = 1.005 (measured against float64)
                da_tol = tol * 10 if dtype == torch.float64 else 2e-6 / (a.min().item() - 1) ** 2
                assert ours_alpha.grad.shape == a.shape
                err = (ours_alpha.grad.double() - ref_alpha.grad).abs().max().item()
                scale = max(1.0, ref_alpha.grad.abs().max().item())
                assert err <= max(da_tol * scale, 2 * da_package), (*what, "da")


@pytest.mark.parametrize("alpha", [1.05, 1.5, 1.95])
def test_alpha_entmax_gradients_by_finite_differences(alpha):
    s = logits(2.0)[:1, :, :6, :9].contiguous()
    a = torch.tensor([alpha, 1.3, 1.7, 1.2], dtype=torch.float64).view(1, 4, 1, 1)
    assert torch.autograd.gradcheck(pivot.entmax_alpha, (s.requires_grad_(), a.requires_grad_()))


def test_alpha_entmax_hand_worked_and_limits():
    # alpha = 1.5 is 1.5-entmax: the hand-worked value of test_hand_worked_values
    tau = (1.5 - 1.75 ** 0.5) / 2
    got = pivot.entmax_alpha(torch.tensor([2.0, 1.0, -2.0], dtype=torch.float64), 1.5)
    want = torch.tensor([(1 - tau) ** 2, (0.5 - tau) ** 2, 0.0], dtype=torch.float64)
    assert torch.allclose(got, want, atol=1e-14)
    u = torch.randn(5, 7, 6, dtype=torch.float64)
    assert torch.allclose(pivot.entmax_alpha(u, 2.0), entmax.sparsemax(u), atol=1e-12)
    assert torch.allclose(pivot.entmax_alpha(u, 1.5, dim=1), entmax.entmax15(u, dim=1), atol=1e-12)
    a = torch.tensor([1.2, 1.6, 1.9, 1.4, 1.1, 1.3], dtype=torch.float64).view(1, 1, 6)
    assert torch.allclose(pivot.entmax_alpha(u, a, dim=1),
                          entmax.entmax_bisect(u, a, dim=1, n_iter=100), atol=1e-12)
    # alpha -> 1 approaches softmax (docs/scorers.md: uniform at alpha = 1, softmax as alpha -> 1)
    assert (pivot.entmax_alpha(u, 1.001) - torch.softmax(u, -1)).abs().max().item() < 2e-3
    ties = torch.zeros(2, 4096, dtype=torch.float64)
    assert torch.allclose(pivot.entmax_alpha(ties, 1.01), torch.full_like(ties, 1 / 4096))


def test_alpha_entmax_refuses_alpha_outside_its_range():
    s = torch.randn(3, 5)
    for alpha in (1.0, 2.5, torch.tensor([1.5, 2.2]).view(2, 1)):
        with pytest.raises(ValueError, match=r"alpha in \(1, 2\]"):
            pivot.entmax_alpha(s[:2] if torch.is_tensor(alpha) else s, alpha)


def test_alpha_entmax_unsettled_and_nan_rows_fall_back_to_the_bisection():
    z = logits(1.0)[0]
    z = (z - z.amax(-1, keepdim=True)) * 0.2
    assert pivot.entmax_threshold(z, 5.0, max_iter=1) is None
    assert pivot.entmax_threshold(z, 5.0) is not None
    s = torch.tensor([[0.0, float("nan"), 1.0], [0.0, 1.0, 2.0]], requires_grad=True)
    w = pivot.entmax_alpha(s, torch.tensor([1.2, 1.7]).view(2, 1))
    assert torch.isnan(w[0]).all() and torch.isfinite(w[1]).all()
    assert torch.allclose(w[1], entmax.entmax_bisect(s[1].detach(), 1.7), atol=1e-6)


@pytest.mark.parametrize("name,kwargs", [("sparsemax", {}), ("entmax15", {}),
                                         ("entmax_bisect", {}),
                                         ("entmax_bisect", {"alpha": 1.3}),
                                         ("entmax_bisect", {"learn_alpha": True})])
def test_pivot_attend_equals_reference(name, kwargs):
    scorer = make_scorer(name, kwargs)
    q, k, v, g = inputs()
    for mask_name, mask in masks().items():
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        got = run(lambda a, b, c, m: pivot_attend(scorer, a, b, c, m), scorer, q, k, v, g, mask)
        assert_close(ref, got, f"{name} {kwargs} {mask_name}")


def test_entmax_bisect_above_alpha_2_keeps_the_bisection():
    scorer = make_scorer("entmax_bisect", {"alpha": 3.0})
    q, k, v, g = inputs()
    mask = masks()["causal"]
    assert_close(run(scorer.reference_attend, scorer, q, k, v, g, mask),
                 run(lambda a, b, c, m: pivot_attend(scorer, a, b, c, m), scorer, q, k, v, g, mask),
                 "entmax_bisect alpha = 3")


def test_other_scorers_are_refused():
    with pytest.raises(FastPathError, match="pivot path"):
        pivot_attend(make_scorer("softmax"), *inputs()[:3])
