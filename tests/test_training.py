"""The shared training contract (tasks/training.py): the optimizer without bias correction, the
accumulated step, the divergence rule, scorer parameters and the fast-path call."""
from __future__ import annotations

import math

import pytest
import torch

from tasks import RunContext, TaskError, TrainingFailure
from tasks.models.decoder import Decoder, DecoderConfig
from tasks.training import (AdamW, Divergence, accumulated_backward, derive_seed, prepare_model,
                            row_share, scorer_parameter_values)

TINY = dict(vocab_size=32, max_len=16, n_layer=2, dim=16, n_head=2, n_kv_head=1, ffn_dim=32)


def hand_adamw(p0, grads, lr, beta1, beta2, eps, wd):
    """transformers.AdamW(correct_bias=False), float64 scalars, step by step."""
    p, m, v, out = list(p0), [0.0] * len(p0), [0.0] * len(p0), []
    for g in grads:
        for i in range(len(p)):
            m[i] = beta1 * m[i] + (1 - beta1) * g[i]
            v[i] = beta2 * v[i] + (1 - beta2) * g[i] ** 2
            p[i] = p[i] - lr * m[i] / (math.sqrt(v[i]) + eps)
            p[i] = p[i] - lr * wd * p[i]
        out.append(list(p))
    return out


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adamw_without_bias_correction_matches_a_hand_computation(wd):
    p0, grads = [0.5, -1.25, 2.0], [[0.3, -0.2, 1.5], [-0.7, 0.05, 0.4], [0.1, 0.9, -2.0]]
    lr, betas, eps = 0.01, (0.9, 0.999), 1e-6
    param = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float64))
    opt = AdamW([param], lr=lr, betas=betas, eps=eps, weight_decay=wd)
    want = hand_adamw(p0, grads, lr, *betas, eps, wd)
    for g, expected in zip(grads, want):
        param.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        assert param.detach().tolist() == pytest.approx(expected, rel=1e-12, abs=1e-15)
    # the first step moves each weight by about lr (m / sqrt(v) = g / |g| without correction
    # times (1 - beta1) / sqrt(1 - beta2) = 0.1 / 0.0316): not torch's bias-corrected lr * sign(g)
    torch_param = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float64))
    corrected = torch.optim.AdamW([torch_param], lr=lr, betas=betas, eps=eps, weight_decay=wd)
    torch_param.grad = torch.tensor(grads[0], dtype=torch.float64)
    corrected.step()
    assert torch_param.detach().tolist() != pytest.approx(want[0], rel=1e-6)


def test_adamw_rejects_bad_settings():
    p = [torch.nn.Parameter(torch.zeros(2))]
    with pytest.raises(ValueError, match="betas"):
        AdamW(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="lr > 0"):
        AdamW(p, lr=0.0)


def test_accumulated_backward_gives_the_whole_batch_gradient():
    torch.manual_seed(0)
    x, w = torch.randn(7, 3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    whole = torch.nn.Parameter(w.clone())
    ((x @ whole) ** 2).mean().backward()
    split = torch.nn.Parameter(w.clone())
    loss = accumulated_backward(7, 3, lambda part: ((x[part] @ split) ** 2).mean()
                                * row_share(part, 7))
    assert torch.allclose(split.grad, whole.grad, rtol=1e-12)
    assert float(loss) == pytest.approx(float(((x @ w) ** 2).mean()), rel=1e-12)


def test_divergence_rule_on_a_reference_level():
    rule = Divergence(1.5, math.log(100), context="lr=1")
    for step in range(20):
        rule.check(step, math.log(100))             # the uniform predictor's loss: fine
    with pytest.raises(TrainingFailure, match=r"exceeds 1.5 x ln V .*\(lr=1\)") as info:
        for step in range(20, 200):
            rule.check(step, 100.0)
    # after k losses of 100: m = 0.98^k ln 100 + (1 - 0.98^k) 100
    expected = next(k for k in range(1, 200)
                    if 0.98 ** k * math.log(100) + (1 - 0.98 ** k) * 100 > 1.5 * math.log(100))
    assert (info.value.status, info.value.step) == ("diverged", 20 + expected - 1)
    with pytest.raises(TaskError, match="diverge_factor"):
        Divergence(0.0)


def test_seeds_depend_on_labels_only():
    assert derive_seed(3, "init") == derive_seed(3, "init")
    assert derive_seed(3, "init") != derive_seed(4, "init") != derive_seed(3, "order")
    assert 0 <= derive_seed(3, "x") < 2**63


def test_scorer_parameters_in_one_format():
    model = Decoder(DecoderConfig(**TINY, scorer="ssa"), seed=0)
    values = scorer_parameter_values(model, prefix="m.")
    # the raw parameter rho, and n = softplus(rho) and the fixed b from n_value() / b_value()
    assert set(values) == {f"m.layer{i}.{k}" for i in range(2) for k in ("rho", "n", "b")}
    assert values["m.layer0.b"] == pytest.approx([float(model.blocks[0].attn.scorer.b_fixed)])
    n = torch.nn.functional.softplus(model.blocks[1].attn.scorer.rho).item()
    assert values["m.layer1.n"] == pytest.approx([n])
    assert scorer_parameter_values(Decoder(DecoderConfig(**TINY, scorer="softmax"), seed=0)) == {}


def test_prepare_model_off_names_each_scorers_own_path():
    ctx = RunContext(fast="off")
    model = Decoder(DecoderConfig(**TINY, scorer="softmax"), seed=0)
    assert prepare_model(model, ctx) == {"softmax": "sdpa"}
    assert prepare_model(Decoder(DecoderConfig(**TINY, scorer="ssa"), seed=0), ctx) == \
        {"ssa": "reference"}
    assert ctx.fast_paths == {"softmax": "sdpa", "ssa": "reference"}
    with pytest.raises(TaskError, match="fast"):
        prepare_model(model, RunContext(fast="fused"))


@pytest.mark.slow
def test_prepare_model_auto_keeps_the_numbers():
    torch.manual_seed(0)
    ids = torch.randint(0, 32, (2, 16))
    plain = Decoder(DecoderConfig(**TINY, scorer="ssa"), seed=0)
    fast = Decoder(DecoderConfig(**TINY, scorer="ssa"), seed=0)
    ctx = RunContext(fast="auto")
    paths = prepare_model(fast, ctx)
    assert set(paths) == {"ssa"} and paths["ssa"] not in ("", None)
    assert ctx.fast_paths == paths
    torch.testing.assert_close(fast.loss(ids[:, :-1], ids[:, 1:]),
                               plain.loss(ids[:, :-1], ids[:, 1:]), rtol=1e-4, atol=1e-5)
