"""The ICL backbone: size, seeding across scorers, causality, the scorer in every layer, weights."""
import math

import pytest
import torch

import scorers
from tasks.icl_training import ICLTaskConfig, build_model
from tasks.models.icl import ICLModel, ICLModelConfig

TINY = {"n_layer": 2, "n_head": 2, "n_embd": 16, "n_positions": 12}


pytestmark = pytest.mark.usefixtures("one_thread")


def test_paper_size_matches_the_paper_parameter_count():
    # docs/tasks.md#paper-sizes: 12 layers, 8 heads, d = 256, 512 position slots -> 9.61M used parameters
    assert ICLModel(ICLModelConfig()).num_parameters() == 9_609_473


@pytest.mark.parametrize("scorer", scorers.list_scorers())
def test_same_seed_gives_every_scorer_the_same_shared_parameters(scorer):
    cfg = ICLTaskConfig(**TINY, curriculum_end=11)
    reference = build_model(cfg, "softmax", {}, 7, torch.device("cpu"))
    model = build_model(cfg, scorer, {}, 7, torch.device("cpu"))
    ours = dict(model.shared_parameters())
    theirs = dict(reference.shared_parameters())
    assert ours.keys() == theirs.keys()
    for name, value in ours.items():
        assert torch.equal(value, theirs[name]), name
    other_seed = build_model(cfg, scorer, {}, 8, torch.device("cpu"))
    assert not torch.equal(dict(other_seed.shared_parameters())["wpe.weight"], ours["wpe.weight"])


def test_initialization_follows_gpt2():
    model = ICLModel(ICLModelConfig(n_layer=4, n_head=2, n_embd=64, n_positions=256), seed=0)
    p = dict(model.named_parameters())
    assert abs(p["wpe.weight"].std().item() - 0.02) < 0.001
    assert abs(p["blocks.0.attn.q_proj.weight"].std().item() - 0.02) < 0.002
    assert abs(p["blocks.0.mlp.c_proj.weight"].std().item() - 0.02 / math.sqrt(8)) < 0.001
    assert torch.equal(p["blocks.0.ln_1.weight"], torch.ones(64))
    assert torch.equal(p["blocks.0.attn.o_proj.bias"], torch.zeros(64))


def test_interleaving_and_causality():
    model = ICLModel(ICLModelConfig(**TINY), seed=1)
    xs, ys = torch.randn(3, 6), torch.randn(3, 6)
    out = model(xs, ys)
    assert out.shape == (3, 6)
    # the prediction for y_t sees x_1, y_1, ..., x_t: changing y_t or anything later leaves it alone
    t = 3
    ys2, xs2 = ys.clone(), xs.clone()
    ys2[:, t:] += 5.0
    xs2[:, t + 1:] -= 3.0
    out2 = model(xs2, ys2)
    assert torch.allclose(out2[:, :t + 1], out[:, :t + 1], atol=1e-6)
    xs3 = xs.clone()
    xs3[:, t] += 1.0
    assert not torch.allclose(model(xs3, ys)[:, t], out[:, t])


def test_scorer_runs_once_per_layer():
    model = ICLModel(ICLModelConfig(**TINY, scorer="ssa"), seed=0)
    model(torch.randn(2, 5), torch.randn(2, 5))
    assert [s.calls for s in model.scorer_modules()] == [1, 1]


def test_first_layer_attention_weights_match_a_direct_softmax():
    model = ICLModel(ICLModelConfig(**TINY), seed=2)
    xs, ys = torch.randn(2, 5), torch.randn(2, 5)
    w = model.attention_weights(xs, ys, layer=0)
    attn = model.blocks[0].attn
    h = model.blocks[0].ln_1(model.embed(xs, ys))
    q = attn.q_proj(h).view(2, 10, 2, 8).transpose(1, 2).double()
    k = attn.k_proj(h).view(2, 10, 2, 8).transpose(1, 2).double()
    s = q @ k.transpose(-1, -2) / math.sqrt(8)
    s = s.masked_fill(~torch.ones(10, 10, dtype=torch.bool).tril(), float("-inf"))
    assert torch.allclose(w.double(), torch.softmax(s, -1), atol=1e-6)
    last = model.attention_weights(xs, ys)
    assert last.shape == (2, 2, 10, 10)
    assert torch.equal(last.triu(1), torch.zeros_like(last))


def test_too_long_sequence_is_a_clear_error():
    model = ICLModel(ICLModelConfig(**TINY), seed=0)
    with pytest.raises(ValueError, match="n_positions"):
        model(torch.randn(1, 13), torch.randn(1, 13))


def test_mlp_off_has_no_mlp_parameters():
    model = ICLModel(ICLModelConfig(**TINY, mlp=False), seed=0)
    assert not any("mlp" in n or "ln_2" in n for n, _ in model.named_parameters())
    assert model(torch.randn(1, 4), torch.randn(1, 4)).shape == (1, 4)


@pytest.mark.parametrize("scorer", scorers.list_scorers())
def test_every_scorer_trains_a_step_with_finite_gradients(scorer):
    model = ICLModel(ICLModelConfig(**TINY, scorer=scorer), seed=0)
    xs = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    loss = (model(xs, xs.sign()) - xs.sign()).pow(2).mean()
    loss.backward()
    assert torch.isfinite(loss)
    for name, p in model.named_parameters():
        assert p.grad is None or torch.isfinite(p.grad).all(), name
    assert model.read_in.weight.grad.abs().sum() > 0
