"""The dense SSA path (scorers.fast.DenseSSA) equals each SSA-family scorer's reference
(cross-attention, bf16 and bad parameters: tests/test_fast_fused.py, for both forms)."""
from __future__ import annotations

import pytest
import torch

from scorers.fast import accelerate, dense_ssa_attend
from scorer_checks import make_scorer

from fast_support import SSA_FAMILY as FAMILY, assert_close, inputs, masks, run, ssa_form


def dense(scorer, block_size):
    return ssa_form(scorer, "dense", block_size)


@pytest.mark.parametrize("name,kwargs", FAMILY, ids=lambda x: str(x))
@pytest.mark.parametrize("mask_name", list(masks()))
@pytest.mark.parametrize("block", [4, 64])
def test_dense_equals_reference_fp32(name, kwargs, mask_name, block):
    scorer = make_scorer(name, kwargs)
    q, k, v, g = inputs()
    mask = masks()[mask_name]
    ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
    got = run(dense(scorer, block), scorer, q, k, v, g, mask)
    assert_close(ref, got, f"{name}{kwargs} {mask_name} block {block}")


@pytest.mark.parametrize("name,kwargs", FAMILY, ids=lambda x: str(x))
@pytest.mark.parametrize("mask_name", ["causal", "padded_causal", "random_empty_rows"])
def test_dense_equals_reference_fp64(name, kwargs, mask_name):
    scorer = make_scorer(name, kwargs).double()
    q, k, v, g = inputs(torch.float64)
    mask = masks()[mask_name]
    ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
    got = run(dense(scorer, 5), scorer, q, k, v, g, mask)
    assert_close(ref, got, f"{name}{kwargs} {mask_name} fp64", tol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("name,kwargs", FAMILY, ids=lambda x: str(x))
def test_dense_equals_reference_at_2048_keys(name, kwargs):
    """Causal and padded causal, 2,048 keys in query blocks of 64 rows, fp64: P and 1 + |s'|
    made again from the kept t give the reference's outputs and gradients."""
    scorer = make_scorer(name, kwargs).double()
    length = 2048
    gen = torch.Generator().manual_seed(3)
    q, k, v, g = (torch.randn(1, 2, length, 16, generator=gen, dtype=torch.float64)
                  for _ in range(4))
    causal = torch.ones(length, length, dtype=torch.bool).tril()[None, None]
    valid = torch.arange(length) < 1500
    for mask in (causal, causal & valid):
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        got = run(dense(scorer, 64), scorer, q, k, v, g, mask)
        assert_close(ref, got, f"{name}{kwargs} 2048", tol=1e-10)


def test_dense_at_large_logits_and_one_key_rows():
    """Logits of |s| ~ 1e3 (t ~ n log 800) and a causal first row that sees one key."""
    scorer = make_scorer("ssa_gpt2").double()
    q, k, v, g = inputs(torch.float64)
    q = q * 40.0
    mask = masks()["causal"]
    ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
    got = run(dense(scorer, 3), scorer, q, k, v, g, mask)
    assert_close(ref, got, "large logits", tol=1e-10)
    assert torch.equal(got[0][..., 0, :], v[..., 0, :])


def test_dense_is_what_accelerate_runs_and_trains_n_like_the_reference():
    q, k, v, g = inputs()
    mask = masks()["padded_causal"]
    moved = []
    for form in ("off", "dense"):
        scorer = make_scorer("ssa")
        assert accelerate(scorer, form) == {"ssa": "reference" if form == "off" else "dense"}
        opt = torch.optim.SGD(scorer.parameters(), lr=0.1)
        (scorer.attend(q, k, v, mask) * g).sum().backward()
        opt.step()
        moved.append(scorer.rho.detach().clone())
    assert (moved[0] - moved[1]).abs().max().item() <= 1e-6
    assert (moved[0] - make_scorer("ssa").rho).abs().max().item() > 1e-4


def test_dense_rejects_a_mask_that_is_not_boolean():
    q, k, v, _ = inputs()
    with pytest.raises(TypeError, match="boolean"):
        dense_ssa_attend(q, k, v, torch.ones(17, 17), torch.ones(1), torch.ones(1))
