"""accelerate(): which path each scorer takes, and that a whole model keeps its parameters and
computes the same thing."""
from __future__ import annotations

import pytest
import torch

import scorers
from scorers.fast import (FastAttend, FastPathError, accelerate, choose_path, fast_paths,
                          is_plain_causal, restore)
from scorer_checks import make_scorer

from fast_support import inputs, masks

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


@pytest.mark.parametrize("name,mode,device,path", [
    ("ssa", "auto", CPU, "fused"), ("ssa", "auto", CUDA, "flex"),
    ("stablemax", "auto", CPU, "fused"), ("sigmoid", "auto", CUDA, "flex"),
    ("sigmoid", "auto", CPU, "compile"), ("entmax15", "auto", CPU, "topk"),
    ("sparsemax", "auto", CUDA, "reference"), ("sa_softmax", "auto", CPU, "compile"),
    ("relu", "auto", CUDA, "reference"),
    ("softmax", "auto", CPU, "native"), ("softmax", "auto", CUDA, "native"),
    ("ssmax", "auto", CUDA, "native"), ("cosformer", "auto", CPU, "native"),
    ("softmax", "compile", CPU, "compile"), ("cosformer", "compile", CPU, "native"),
    ("ssa", "flex", CPU, "flex"), ("entmax15", "flex", CPU, "reference"),
    ("sigmoid", "fused", CPU, "reference"), ("ssa_gpt2", "fused", CUDA, "fused"),
])
def test_paths(name, mode, device, path):
    scorer = accelerate(make_scorer(name), mode)
    assert choose_path(scorer, device, mode) == path


def test_unknown_mode_is_an_error():
    with pytest.raises(FastPathError, match="unknown fast-path mode"):
        accelerate(make_scorer("ssa"), "turbo")
    with pytest.raises(FastPathError, match="block_size"):
        accelerate(make_scorer("ssa"), "auto", block_size=0)


def test_model_keeps_parameters_and_output_and_restores():
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(scorers.Attention(16, 2, s) for s in ("ssa", "sigmoid",
                                                                      "softmax"))
    x = torch.randn(2, 9, 16)
    mask = masks(9, 9)["causal"]
    before = {k: v.clone() for k, v in layers.state_dict().items()}
    params = [id(p) for p in layers.parameters()]
    ref = [layer(x, mask) for layer in layers]
    accelerate(layers, "auto", block_size=4, compiled=False)
    assert fast_paths(layers) == {"0.scorer": "fused", "1.scorer": "compile",
                                  "2.scorer": "native"}
    assert [id(p) for p in layers.parameters()] == params
    assert layers.state_dict().keys() == before.keys()
    calls = layers[0].scorer.calls
    for layer, r in zip(layers, ref):
        assert (layer(x, mask) - r).abs().max().item() <= 1e-5
    assert layers[0].scorer.calls == calls + 1
    assert layers[0].scorer.name == "ssa" and isinstance(layers[0].scorer, FastAttend)
    restore(layers)
    assert type(layers[0].scorer) is scorers.get_scorer_class("ssa")
    assert not hasattr(layers[0].scorer, "fast_compiled") or \
        layers[0].scorer.__dict__.get("fast_compiled") is None


def test_accelerated_ssa_trains_like_the_reference():
    """Gradients reach n through the fused path: one Adam step moves it identically."""
    q, k, v, g = inputs()
    mask = masks()["causal"]
    results = []
    for fast in (False, True):
        scorer = make_scorer("ssa")
        if fast:
            accelerate(scorer, "fused", block_size=4, compiled=False)
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
