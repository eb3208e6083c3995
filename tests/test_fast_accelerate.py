"""accelerate(): which path each scorer takes, and that a whole model keeps its parameters and
computes the same thing."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import scorers
from scorers.fast import (FastPathError, accelerate, choose_form, choose_path, fast_paths,
                          is_plain_causal, restore, use_reference)
from scorers.fast.policy import load_opt_in
from scorers.forms import forms_of
from scorers.fast.tiles import RECOMPUTE_FROM_KEYS
from scorer_checks import make_scorer

from fast_support import inputs, masks

ROOT = Path(__file__).resolve().parents[1]
CPU, CUDA = torch.device("cpu"), torch.device("cuda")
# auto on a CPU: the SSA family runs dense below the recompute length, blocked from there.
BY_LENGTH = f"dense<{RECOMPUTE_FROM_KEYS['cpu']}|blocked"


@pytest.mark.parametrize("name,mode,device,path", [
    ("ssa", "auto", CPU, BY_LENGTH), ("ssa", "auto", CUDA, "flex"),
    ("stablemax", "auto", CPU, BY_LENGTH), ("sigmoid", "auto", CUDA, "flex"),
    ("sigmoid", "auto", CPU, "blocked"), ("entmax15", "auto", CPU, "blocked"),
    ("sparsemax", "auto", CPU, "blocked"), ("entmax15", "pivot", CPU, "pivot"),
    ("entmax_bisect", "auto", CPU, "blocked"), ("entmax_bisect", "auto", CUDA, "reference"),
    ("entmax_bisect", "pivot", CPU, "pivot"),
    ("relu2", "auto", CPU, "blocked"), ("ssmax", "auto", CPU, "blocked"),
    ("learned_sink", "auto", CPU, "blocked"), ("learned_sink", "off", CPU, "sdpa"),
    ("temperature_softmax", "auto", CPU, "blocked"), ("softmax_plus_one", "auto", CUDA, "sdpa"),
    ("learned_sink", "blocked", CPU, "blocked"), ("softpick", "blocked", CPU, "blocked"),
    ("softmax", "blocked", CPU, "sdpa"), ("ssa", "dense", CPU, "dense"),
    ("sparsemax", "auto", CUDA, "reference"), ("sa_softmax", "auto", CPU, "blocked"),
    ("sa_softmax", "auto", CUDA, "reference"), ("softpick", "auto", CPU, "blocked"),
    ("cog_signed", "auto", CPU, "blocked"), ("adaptive_temperature", "auto", CPU, "blocked"),
    ("stick_breaking", "auto", CPU, "blocked"),
    ("relu", "auto", CUDA, "reference"),
    ("softmax", "auto", CPU, "sdpa"), ("softmax", "auto", CUDA, "sdpa"),
    ("ssmax", "auto", CUDA, "sdpa"), ("cosformer", "auto", CPU, "linear"),
    ("softmax", "compile", CPU, "compile"), ("cosformer", "compile", CPU, "linear"),
    ("ssa", "flex", CPU, "flex"), ("entmax15", "flex", CPU, "reference"),
    ("entmax15", "topk", CPU, "topk"), ("sigmoid", "compile", CPU, "compile"),
    ("sigmoid", "fused", CPU, "reference"), ("ssa_gpt2", "fused", CUDA, "fused"),
    ("ssa", "fused", CPU, "fused"), ("sigmoid", "dense", CPU, "reference"),
    ("ssa", "off", CPU, "reference"), ("softmax", "off", CPU, "sdpa"),
])
def test_paths(name, mode, device, path):
    scorer = make_scorer(name)
    assert choose_path(scorer, device, mode) == path
    if device == CPU:
        assert accelerate(scorer, mode) == {name: path}
        assert fast_paths(scorer) == {"<root>": path}


def test_forms_are_declared_by_the_scorers():
    assert forms_of(make_scorer("ssa")) == ("blocked", "dense", "flex")
    assert forms_of(make_scorer("softmax")) == ("sdpa", "flex")
    assert forms_of(make_scorer("entmax15")) == ("blocked", "pivot")
    assert forms_of(make_scorer("entmax_bisect")) == ("blocked", "pivot")
    assert forms_of(make_scorer("entmax_bisect", {"alpha": 3.0})) == ("pivot",)
    assert forms_of(make_scorer("cosformer")) == ("linear",)
    assert forms_of(make_scorer("relu")) == ("blocked",)
    load_opt_in()
    assert forms_of(make_scorer("ssa"), opt_in=True) == ("blocked", "dense", "flex", "compile",
                                                         "fused")
    assert forms_of(make_scorer("entmax15"), opt_in=True) == ("blocked", "pivot", "compile",
                                                              "topk")
    assert forms_of(make_scorer("softpick"), opt_in=True) == ("blocked", "compile")


def test_training_under_auto_never_imports_the_opt_in_forms():
    """auto and off choose from the default forms alone; scorers.fast.extra stays unimported
    (a fresh interpreter: another test may have imported it here)."""
    code = ("import sys, scorers; from scorers.fast import accelerate\n"
            "m = scorers.Attention(16, 2, 'ssa'); accelerate(m, 'auto'); accelerate(m, 'off')\n"
            "assert 'scorers.fast.extra' not in sys.modules\n"
            "from scorers.fast import modes; assert {'fused', 'topk', 'compile'} <= set(modes())")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_a_setting_a_form_cannot_run_goes_to_the_next_form():
    """entmax_bisect at a fixed alpha > 2: the blocked form's Newton needs alpha <= 2, so auto
    gives it the pivot form (which bisects there), and mode "blocked" leaves it as shipped."""
    scorer = make_scorer("entmax_bisect", {"alpha": 3.0})
    assert accelerate(scorer, "auto") == {"entmax_bisect": "pivot"}
    assert accelerate(scorer, "blocked") == {"entmax_bisect": "reference"}
    assert accelerate(make_scorer("entmax_bisect", {"alpha": 2.0}), "auto") == {
        "entmax_bisect": "blocked"}


def test_unknown_mode_is_an_error():
    with pytest.raises(FastPathError, match="unknown fast-path mode"):
        accelerate(make_scorer("ssa"), "turbo")
    with pytest.raises(FastPathError, match="block_size"):
        accelerate(make_scorer("ssa"), "auto", block_size=0)


def test_model_keeps_parameters_class_and_output_and_restores():
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(scorers.Attention(16, 2, s) for s in ("ssa", "sigmoid",
                                                                      "softmax"))
    x = torch.randn(2, 9, 16)
    mask = masks(9, 9)["causal"]
    before = {k: v.clone() for k, v in layers.state_dict().items()}
    params = [id(p) for p in layers.parameters()]
    classes = [type(layer.scorer) for layer in layers]
    ref = [layer(x, mask) for layer in layers]
    assert accelerate(layers, "auto", block_size=4, compiled=False) == {
        "ssa": BY_LENGTH, "sigmoid": "blocked", "softmax": "sdpa"}
    assert accelerate(layers[1], "compile", block_size=4, compiled=False) == {
        "sigmoid": "compile"}
    assert fast_paths(layers) == {"0.scorer": BY_LENGTH, "1.scorer": "compile",
                                  "2.scorer": "sdpa"}
    assert [id(p) for p in layers.parameters()] == params
    assert [type(layer.scorer) for layer in layers] == classes
    assert layers.state_dict().keys() == before.keys()
    calls = layers[0].scorer.calls
    for layer, r in zip(layers, ref):
        assert (layer(x, mask) - r).abs().max().item() <= 1e-5
    assert layers[0].scorer.calls == calls + 1
    restore(layers)
    assert fast_paths(layers) == {"0.scorer": "reference", "1.scorer": "reference",
                                  "2.scorer": "sdpa"}
    assert layers[0].scorer.form.name == "reference"


def test_a_mixed_model_reports_every_path_of_a_scorer_name():
    layers = torch.nn.ModuleList(scorers.Attention(16, 2, "ssa") for _ in range(2))
    accelerate(layers, "auto")
    assert accelerate(layers[1], "topk") == {"ssa": "reference"}
    assert fast_paths(layers) == {"0.scorer": BY_LENGTH, "1.scorer": "reference"}
    assert accelerate(layers, "auto") == {"ssa": BY_LENGTH}
    assert accelerate(layers, "fused", compiled=False) == {"ssa": "fused"}


def test_accelerated_ssa_trains_like_the_reference():
    """Gradients reach n through the fused path: one Adam step moves it identically."""
    q, k, v, g = inputs()
    mask = masks()["causal"]
    results = []
    for fast in (False, True):
        scorer = make_scorer("ssa")
        if fast:
            assert accelerate(scorer, "fused", block_size=4, compiled=False) == {"ssa": "fused"}
        opt = torch.optim.SGD(scorer.parameters(), lr=0.1)
        (scorer.attend(q, k, v, mask) * g).sum().backward()
        opt.step()
        results.append(scorer.rho.detach().clone())
    assert (results[0] - results[1]).abs().max().item() <= 1e-6
    assert (results[0] - make_scorer("ssa").rho).abs().max().item() > 1e-4


def test_plain_causal_detection():
    assert is_plain_causal(torch.ones(5, 5, dtype=torch.bool).tril()[None, None], 5, 5)
    assert not is_plain_causal(torch.ones(5, 5, dtype=torch.bool).tril(1)[None, None], 5, 5)
    assert not is_plain_causal(masks(5, 5)["padded_causal"], 5, 5)
    assert not is_plain_causal(None, 5, 5)
    assert not is_plain_causal(torch.ones(4, 5, dtype=torch.bool).tril(), 4, 5)


def test_plain_causal_detection_sees_a_mask_changed_in_place():
    """The answer is remembered per mask object, and forgotten when the mask (or a view of it)
    is written to."""
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    view = mask[None, None]
    assert is_plain_causal(mask, 5, 5) and is_plain_causal(view, 5, 5)
    mask[0, 3] = True
    assert not is_plain_causal(mask, 5, 5) and not is_plain_causal(view, 5, 5)
    view[0, 0, 0, 3] = False
    assert is_plain_causal(mask, 5, 5) and is_plain_causal(view, 5, 5)


def test_reference_form_is_the_one_switch_to_the_reference():
    """use_reference sets every scorer's form to its reference, even one that ships SDPA;
    restore gives the shipped paths back."""
    layers = torch.nn.ModuleList(scorers.Attention(16, 2, s) for s in ("softmax", "ssa"))
    accelerate(layers, "auto")
    use_reference(layers)
    assert fast_paths(layers) == {"0.scorer": "reference", "1.scorer": "reference"}
    q, k, v, _ = inputs()
    softmax = layers[0].scorer
    mask = masks()["causal"]
    assert torch.equal(softmax.attend(q, k, v, mask), softmax.reference_attend(q, k, v, mask))
    restore(layers)
    assert fast_paths(layers) == {"0.scorer": "sdpa", "1.scorer": "reference"}


def test_auto_on_cpu_compiles_nothing():
    """The CPU's auto forms are the eager ones, whatever the run's length."""
    for name in scorers.list_scorers():
        scorer = make_scorer(name)
        form = choose_form(scorer, CPU, "auto")
        assert form is None or not form.compiles, (name, form)


@pytest.mark.parametrize("keys,runs", [(8, "dense"), (RECOMPUTE_FROM_KEYS["cpu"] - 1, "dense"),
                                       (RECOMPUTE_FROM_KEYS["cpu"], "blocked")])
def test_auto_picks_the_form_by_the_number_of_keys(monkeypatch, keys, runs):
    """dense below the recompute length (where blocked would keep the weights too), blocked from
    it; both give the reference's output."""
    scorer = make_scorer("ssa", num_heads=1)
    accelerate(scorer, "auto")
    ran = []
    for form in (scorer.form.short, scorer.form.long):
        monkeypatch.setattr(form, "attend", lambda *a, f=form, inner=form.attend: (
            ran.append(f.name), inner(*a))[1])
    q, k, v = (torch.randn(1, 1, n, 4, dtype=torch.float64) for n in (3, keys, keys))
    out = scorer.attend(q, k, v, None)
    assert ran == [runs]
    torch.testing.assert_close(out, scorer.reference_attend(q, k, v, None))
