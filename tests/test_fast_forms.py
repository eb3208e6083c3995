"""Fast forms are declared by the scorers: a plugin-style scorer declares its own and
``accelerate`` runs them; the cheaper reference (one-node SSA transform, the fully-masked-row
guard only where a row is empty) equals the formula."""
from __future__ import annotations

import math

import torch

from scorers import LogitsScorer
from scorers.base import has_empty_rows
from scorers.fast import accelerate, fast_paths, flex_attend, use_reference
from scorers.fast.policy import load_opt_in
from scorers.forms import BlockedSpec, FlexSpec, Kernels, forms_of
from scorers.ssa import SSATransform, signed_log1p

from fast_support import TOL, assert_close, inputs, masks, run


class HalfSSA(LogitsScorer):
    """A plugin's scorer: softmax(2 sgn(s) log1p(|s|/2)), written out, with two fast forms."""

    name = "plugin_half_ssa"

    def weights(self, s, mask):
        t = 2.0 * torch.sign(s) * torch.log1p(0.5 * s.abs())
        return torch.softmax(t.masked_fill(~mask, float("-inf")), dim=-1)

    def kernels(self):
        return Kernels(ssa=self.ssa_parameters,
                       flex=FlexSpec(lambda score, b, h, qi, ki: 2.0 * signed_log1p(score, 0.5)))

    def ssa_parameters(self, dtype, device):
        return (torch.full((1,), 2.0, dtype=dtype, device=device),
                torch.full((1,), 0.5, dtype=dtype, device=device))


def test_a_plugin_scorer_declares_fast_forms_and_accelerate_runs_them():
    scorer = HalfSSA()
    load_opt_in()
    assert forms_of(scorer) == ("dense", "flex")
    assert forms_of(scorer, opt_in=True) == ("dense", "flex", "compile", "fused")
    assert accelerate(scorer, "auto", block_size=4) == {"plugin_half_ssa": "dense"}
    assert scorer.form.name == "dense" and type(scorer) is HalfSSA
    q, k, v, g = inputs()
    for mask_name, mask in masks().items():
        scorer.form = None
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        for form in ("fused", "dense"):
            accelerate(scorer, form, block_size=4, compiled=False)
            got = run(scorer.attend, scorer, q, k, v, g, mask)
            assert_close(ref, got, f"plugin {form} {mask_name}")
    with torch.no_grad():
        ref = scorer.reference_attend(q, k, v, masks()["causal"])
        got = flex_attend(scorer, q, k, v, masks()["causal"], compiled=False)
    assert (ref - got).abs().max().item() <= TOL


def test_a_plugin_scorer_without_forms_stays_on_the_reference():
    class Bare(LogitsScorer):
        name = "plugin_bare"

        def weights(self, s, mask):
            return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)

    load_opt_in()
    assert forms_of(Bare()) == ()
    assert forms_of(Bare(), opt_in=True) == ("compile",)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), Bare())
    for mode in ("auto", "off", "blocked", "fused", "pivot"):
        assert accelerate(model, mode) == {"plugin_bare": "reference"}
    assert fast_paths(model) == {"1": "reference"}


def test_ssa_transform_matches_the_formula_and_its_gradients():
    gen = torch.Generator().manual_seed(0)
    s = torch.randn(3, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    n = torch.tensor(1.3, dtype=torch.float64, requires_grad=True)
    b = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(SSATransform.apply, (s, n, b))
    formula = n * torch.sign(s) * torch.log1p(b * s.abs())
    assert (SSATransform.apply(s, n, b) - formula).abs().max().item() <= 1e-15
    zero = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    SSATransform.apply(zero, 1.5, 0.8).sum().backward()
    assert torch.allclose(zero.grad, torch.full((2,), 1.2, dtype=torch.float64))


def test_empty_rows_are_detected_on_the_mask_as_given():
    causal = torch.ones(5, 5, dtype=torch.bool).tril()[None, None]
    assert not has_empty_rows(causal)
    padded = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    assert not has_empty_rows(padded)
    padded[1] = False
    assert has_empty_rows(padded)
    assert has_empty_rows(masks()["random_empty_rows"])


def test_reference_with_and_without_the_guard_agree():
    """A mask with no empty row skips the guard; adding one empty row takes it: the other rows'
    weights and gradients are the same either way, the empty row is zero."""
    from scorer_checks import make_scorer

    q, k, v, g = inputs()
    mask = masks()["padded_causal"].clone().expand(2, 3, 17, 17).clone()
    empty = mask.clone()
    empty[0, 0, 4] = False
    for name in ("ssa", "sigmoid", "sparsemax", "ssmax"):
        scorer = make_scorer(name)
        use_reference(scorer)
        g2 = g.clone()
        g2[0, 0, 4] = 0.0                  # the emptied row's output carries no gradient
        a = run(scorer.attend, scorer, q, k, v, g2, mask)
        b = run(scorer.attend, scorer, q, k, v, g2, empty)
        keep = torch.ones_like(a[0], dtype=torch.bool)
        keep[0, 0, 4] = False
        assert b[0][0, 0, 4].abs().max().item() == 0.0, name
        assert (a[0] - b[0])[keep].abs().max().item() <= TOL, name
        for ga, gb in zip(a[1][1:3], b[1][1:3]):   # k and v (q's row 4 differs: zero in b)
            assert (ga - gb).abs().max().item() <= TOL, name


PLUGIN = '''
"""A plugin file: a scorer, softmax(2 s), and a fast form of its own that auto gives it."""
import math

import torch
import torch.nn.functional as F

from scorers import LogitsScorer, register_scorer
from scorers.forms import FastForm, register_form


@register_scorer("plugin_doubled", family="test")
class Doubled(LogitsScorer):
    doubled_logits = True

    def weights(self, s, mask):
        return torch.softmax((2.0 * s).masked_fill(~mask, float("-inf")), dim=-1)


@register_form("plugin_doubled_sdpa")
class DoubledSDPA(FastForm):
    auto = ("cpu",)

    @classmethod
    def applies_to(cls, scorer):
        return getattr(scorer, "doubled_logits", False)

    def attend(self, scorer, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                              scale=2.0 / math.sqrt(q.shape[-1]))
'''


def test_a_plugin_declares_a_fast_form_in_its_own_file_and_auto_picks_it(tmp_path):
    import scorers
    from scorers import forms, registry

    path = tmp_path / "doubled.py"
    path.write_text(PLUGIN)
    load_opt_in()
    with registry.scoped(), forms.scoped():
        assert scorers.load_plugin(path, report=False)
        assert "plugin_doubled_sdpa" in scorers.fast.modes()
        assert forms_of(scorers.create_scorer("plugin_doubled")) == ("plugin_doubled_sdpa",)
        assert forms_of(scorers.create_scorer("softmax")) == ("sdpa", "flex")
        model = torch.nn.ModuleList([scorers.Attention(16, 2, "plugin_doubled"),
                                     scorers.Attention(16, 2, "ssa")])
        assert accelerate(model, "auto") == {"plugin_doubled": "plugin_doubled_sdpa",
                                             "ssa": "dense<1024|blocked"}
        scorer = model[0].scorer
        q, k, v, g = inputs()
        for mask_name in ("none", "causal"):
            mask = masks().get(mask_name)
            got = run(scorer.attend, scorer, q, k, v, g, mask)
            ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
            assert_close(ref, got, f"plugin form {mask_name}")
    assert "plugin_doubled_sdpa" not in scorers.fast.modes()


class HalfTemperature(LogitsScorer):
    """A scorer that declares only its reference and a blocked spec: softmax(s / 2)."""

    name = "plugin_half_temperature"

    def weights(self, s, mask):
        return torch.softmax((s / 2).masked_fill(~mask, float("-inf")), dim=-1)

    def kernels(self):
        return Kernels(blocked=lambda q, k, mask: BlockedSpec(
            "softmax", query_scale=0.5 / math.sqrt(q.shape[-1])))


def test_a_scorer_with_only_a_blocked_spec_runs_blocked_under_auto_and_equals_its_reference():
    scorer = HalfTemperature()
    assert forms_of(scorer) == ("blocked",)
    assert accelerate(scorer, "auto") == {"plugin_half_temperature": "blocked"}
    q, k, v, g = inputs()
    for mask_name, mask in masks().items():
        got = run(scorer.attend, scorer, q, k, v, g, mask)
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        assert_close(ref, got, f"blocked-only plugin {mask_name}")
