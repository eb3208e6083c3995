"""FlexAttention score_mods (each scorer's ``flex`` kernel) equal each scorer's reference.

On CPU FlexAttention runs forward only (torch 2.13): the uncompiled flex_attention runs the same
score_mod through its reference implementation, so these tests check the score_mods and the
log-sum-exp rescaling; scripts/gpu_check.py checks forward and backward of the compiled kernels
on CUDA."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from scorers.fast import FastPathError, FlexSpec, accelerate, flex_attend, scorers_with
from scorer_checks import make_scorer

from fast_support import TOL, inputs, masks

VARIANTS = {"temperature_softmax": [{"tau": 0.5}, {"learnable": True}]}
REQUIRED = {"softmax", "ssa", "ssa_gpt2", "stablemax", "temperature_softmax", "ssmax", "sigmoid",
            "softmax_plus_one", "learned_sink"}


def configs():
    return [(n, kw) for n in scorers_with("flex") for kw in VARIANTS.get(n, [{}])]


def test_every_required_scorer_has_a_score_mod():
    assert REQUIRED <= set(scorers_with("flex"))


# Every score_mod under the general mask with fully-masked rows; the mask kinds that take other
# code paths (no mask, the causal index mask, padding) for a normalized, an unnormalized and a
# count-dependent scorer. (Each uncompiled FlexAttention call takes about a second on a CPU.)
CASES = ([(n, kw, "random_empty_rows") for n, kw in configs()]
         + [(n, {}, m) for n in ("ssa", "sigmoid", "ssmax") for m in ("none", "causal",
                                                                       "padded_causal")])


@pytest.mark.parametrize("name,kwargs,mask_name", CASES, ids=lambda x: str(x))
def test_flex_forward_equals_reference(name, kwargs, mask_name):
    scorer = make_scorer(name, kwargs)
    q, k, v, _ = inputs()
    mask = masks()[mask_name]
    with torch.no_grad():
        ref = scorer.reference_attend(q, k, v, mask)
        got = flex_attend(scorer, q, k, v, mask, compiled=False)
    err = (ref - got).abs().max().item()
    assert err <= TOL, f"{name}{kwargs} {mask_name}: {err:.3g}"
    if mask_name == "random_empty_rows":
        assert got[~mask.any(-1)].abs().max().item() == 0.0


def test_a_wrong_score_mod_is_caught():
    """The comparison above can fail: SSA with n off by 1% is detected."""
    scorer = make_scorer("ssa")
    q, k, v, _ = inputs()
    kernels = scorer.kernels()

    def off(q, k, mask):
        spec = kernels.flex(q, k, mask)
        return FlexSpec(lambda score, b, h, qi, ki: 1.01 * spec.score_mod(score, b, h, qi, ki))

    scorer.kernels = lambda: dataclasses.replace(kernels, flex=off)
    with torch.no_grad():
        got = flex_attend(scorer, q, k, v, masks()["causal"], compiled=False)
    ref = scorer.reference_attend(q, k, v, masks()["causal"]).detach()
    assert (ref - got).abs().max().item() > 10 * TOL


def test_flex_lse_rescaling_gives_unnormalized_rows():
    """sigmoid rows do not sum to 1: the output is softmax(logsigmoid) scaled by exp(lse)."""
    scorer = make_scorer("sigmoid")
    q, k, _, _ = inputs()
    v = torch.ones_like(q)
    with torch.no_grad():
        got = flex_attend(scorer, q, k, v, masks()["causal"], compiled=False)
        ref = scorer.weights_from_qk(q, k, masks()["causal"]).sum(-1)
    assert (got[..., 0] - ref).abs().max().item() <= TOL
    assert (ref - 1).abs().max().item() > 0.1


def test_flex_backward_on_cpu_is_refused_with_a_clear_error():
    scorer = make_scorer("ssa")
    q, k, v, _ = inputs()
    with pytest.raises(FastPathError, match="no backward on CPU"):
        flex_attend(scorer, q.requires_grad_(), k, v, masks()["causal"], compiled=False)


def test_unknown_scorer_has_no_score_mod():
    with pytest.raises(FastPathError, match="no FlexAttention score_mod"):
        flex_attend(make_scorer("entmax15"), *inputs()[:3], None, compiled=False)


def test_accelerated_flex_mode_uses_flex_in_inference():
    scorer = make_scorer("stablemax")
    assert accelerate(scorer, "flex") == {"stablemax": "flex"}
    q, k, v, _ = inputs()
    with torch.no_grad():
        got = scorer.attend(q, k, v, masks()["causal"])   # CPU: uncompiled flex, forward only
        ref = scorer.reference_attend(q, k, v, masks()["causal"])
    assert (got - ref).abs().max().item() <= TOL


def test_compiled_is_not_used_on_cpu_where_inductor_gets_some_lengths_wrong():
    """torch 2.13's compiled CPU flex_attention gives wrong values (or NaN) at L = 40."""
    scorer = make_scorer("softmax")
    q, k, v, _ = inputs(lq=40, lk=40)
    with torch.no_grad():
        got = flex_attend(scorer, q, k, v, None, compiled=True)
        ref = scorer.reference_attend(q, k, v, None)
    assert (got - ref).abs().max().item() <= TOL


def test_flex_calls_run_under_a_raised_recompile_limit(monkeypatch):
    """Every scorer, shape and mask kind is a compiled variant; past dynamo's default limit (8)
    a compiled call silently falls back to the unfused kernel (on an H200, 70x slower)."""
    import torch._dynamo as dynamo

    import scorers.fast.flex as fast

    seen = []

    def fake_flex(q, k, v, **kwargs):
        seen.append(dynamo.config.recompile_limit)
        return v

    monkeypatch.setattr(fast, "_flex_function", lambda compiled: fake_flex)
    q, k, v, _ = inputs()
    with torch.no_grad():
        flex_attend(make_scorer("ssa"), q, k, v, None)
    assert seen == [fast.FLEX_RECOMPILE_LIMIT] and seen[0] > 8
    assert dynamo.config.recompile_limit == 8
