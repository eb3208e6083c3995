"""The fused SSA path (scorers.fast.extra.FusedSSA) equals each SSA-family scorer's reference; the
checks both SSA forms share (fused and dense) run here for both."""
from __future__ import annotations

import pytest
import torch

from scorers.fast import (FastPathError, block_bounds, dense_ssa_attend, plan_blocks,
                          ssa_parameters)
from scorers.fast.extra import fused_ssa_attend
from scorer_checks import make_scorer

from fast_support import L, SSA_FAMILY as FAMILY, assert_close, inputs, masks, run, ssa_form

FORMS = ["fused", "dense"]


def fused(scorer, block_size, compiled=False):
    def fn(q, k, v, mask):
        n, b = ssa_parameters(scorer, q.dtype if q.dtype == torch.float64 else torch.float32)
        return fused_ssa_attend(q, k, v, mask, n, b, block_size=block_size, compiled=compiled)
    return fn


@pytest.mark.parametrize("name,kwargs", FAMILY, ids=lambda x: str(x))
@pytest.mark.parametrize("mask_name", list(masks()))
@pytest.mark.parametrize("block", [4, 64])
def test_fused_equals_reference_fp32(name, kwargs, mask_name, block):
    scorer = make_scorer(name, kwargs)
    q, k, v, g = inputs()
    mask = masks()[mask_name]
    ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
    got = run(fused(scorer, block), scorer, q, k, v, g, mask)
    assert_close(ref, got, f"{name}{kwargs} {mask_name} block {block}")


@pytest.mark.parametrize("name,kwargs", FAMILY[:1] + FAMILY[3:], ids=lambda x: str(x))
def test_fused_equals_reference_fp64(name, kwargs):
    scorer = make_scorer(name, kwargs).double()
    q, k, v, g = inputs(torch.float64)
    mask = masks()["padded_causal"]
    ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
    got = run(fused(scorer, 4), scorer, q, k, v, g, mask)
    assert_close(ref, got, f"{name} fp64", tol=1e-12)


def test_fused_one_row_blocks():
    scorer = make_scorer("ssa_gpt2")
    q, k, v, g = inputs()
    mask = masks()["random_empty_rows"]
    assert_close(run(scorer.reference_attend, scorer, q, k, v, g, mask),
                 run(fused(scorer, 1), scorer, q, k, v, g, mask), "block 1")


@pytest.mark.parametrize("form", FORMS)
def test_cross_attention_and_empty_rows_are_zero(form):
    scorer = make_scorer("ssa")
    q, k, v, g = inputs(lq=7, lk=19)
    mask = masks(7, 19)["random_empty_rows"]
    ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
    got = run(ssa_form(scorer, form, 3), scorer, q, k, v, g, mask)
    assert_close(ref, got, f"{form} cross attention")
    empty = ~mask.any(-1)
    assert empty.any()
    assert got[0][empty].abs().max().item() == 0.0
    assert all(torch.isfinite(x).all() for x in got[1])


@pytest.mark.parametrize("form", FORMS)
def test_keeps_half_precision_dtype(form):
    scorer = make_scorer("ssa")
    q, k, v, g = inputs()
    out = ssa_form(scorer, form, 8)(q.bfloat16(), k.bfloat16(), v.bfloat16(), masks()["causal"])
    assert out.dtype == torch.bfloat16
    ref = scorer.reference_attend(q, k, v, masks()["causal"])
    assert (out.float() - ref).abs().max().item() < 2e-2


@pytest.mark.parametrize("attend", [fused_ssa_attend, dense_ssa_attend])
def test_rejects_tensor_shaped_parameters(attend):
    q, k, v, _ = inputs()
    with pytest.raises(FastPathError, match="1-element"):
        attend(q, k, v, None, torch.ones(3), torch.ones(1))


def test_causal_blocks_skip_keys_no_row_sees():
    q, k, _, _ = inputs()
    plan = plan_blocks(q, k, masks()["causal"], 5)
    assert plan.causal and plan.mask is None
    assert plan.blocks == ((0, 5, 5), (5, 10, 10), (10, 15, 15), (15, L, L))
    padded = plan_blocks(q, k, masks()["padded_causal"], 8)
    assert not padded.causal and not padded.empty_rows
    assert padded.blocks == ((0, 8, 8), (8, 17, 17))   # a last one-row block joins the one before
    assert block_bounds(17, 8) == [(0, 8), (8, 17)]
    assert block_bounds(16, 8) == [(0, 8), (8, 16)]


@pytest.mark.slow
@pytest.mark.parametrize("name,kwargs", FAMILY, ids=lambda x: str(x))
def test_fused_compiled_equals_reference(name, kwargs):
    scorer = make_scorer(name, kwargs)
    q, k, v, g = inputs()
    for mask_name, mask in masks().items():
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        got = run(fused(scorer, 8, compiled=True), scorer, q, k, v, g, mask)
        assert_close(ref, got, f"{name}{kwargs} compiled {mask_name}")


def test_ssa_parameters_follow_the_inputs_device():
    """stablemax has no parameters of its own, so its constants must be made on the inputs'
    device (a CPU constant in a CUDA kernel fails on a GPU)."""
    for name in ("stablemax", "ssa"):
        n, b = ssa_parameters(make_scorer(name), torch.float32, torch.device("meta"))
        assert n.device.type == b.device.type == "meta" and n.shape == b.shape == (1,)
