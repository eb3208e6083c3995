"""The pivot path: sparsemax and entmax15 with the sort-free thresholds of scorers/pivot.py equal
the float64 sort-based solutions of the ``entmax`` package (values and gradients) on logits of
every scale, ties, single-key rows and fully-masked rows, and equal the scorers' references
through attention."""
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


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_pivot_attend_equals_reference(name):
    scorer = make_scorer(name)
    q, k, v, g = inputs()
    for mask_name, mask in masks().items():
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        got = run(lambda a, b, c, m: pivot_attend(scorer, a, b, c, m), scorer, q, k, v, g, mask)
        assert_close(ref, got, f"{name} {mask_name}")


def test_other_scorers_are_refused():
    with pytest.raises(FastPathError, match="pivot path"):
        pivot_attend(make_scorer("softmax"), *inputs()[:3])
