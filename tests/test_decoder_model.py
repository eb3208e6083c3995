"""The Nemotron-style decoder: parameter count of the paper configuration, an independent float64
forward, rotary embeddings, causality, grouped-query attention and seed pairing."""
from __future__ import annotations

import math
import sys

import pytest
import torch
import torch.nn.functional as F

from scorers import causal_mask
from scorers.fast import use_reference
from tasks.models.decoder import Decoder, DecoderConfig, Rotary, parameter_counts
from tasks.training import scorer_parameter_values

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

TINY = dict(vocab_size=50, max_len=16, n_layer=2, dim=24, n_head=6, n_kv_head=2, ffn_dim=40)


def test_paper_configuration_has_the_papers_parameter_count():
    from suite.profiles import PROFILE_DIR
    from tasks import create_task

    task = create_task("decoder_lm")
    section = tomllib.loads((PROFILE_DIR / "paper.toml").read_text())["tasks"]["decoder_lm"]
    cfg = task.config(section).model_config(50256, "softmax", {})
    assert (cfg.n_layer, cfg.dim, cfg.n_head, cfg.n_kv_head, cfg.ffn_dim, cfg.max_len) == \
        (12, 768, 24, 8, 3072, 1024)
    assert cfg.rotary_dim == 16 and cfg.zero_centered_gamma
    counts = parameter_counts(Decoder(cfg, seed=None))
    assert counts["embedding"] == 50256 * 768 == 38_596_608              # 38.60M
    linear = 768 * 768 * 2 + 768 * 256 * 2 + 768 * 3072 * 2                 # q, o; k, v; fc1, fc2
    assert linear == 6_291_456                                              # 6.29M per layer
    assert counts["per_layer"] == linear + 2 * 2 * 768                      # + two LayerNorms
    # 38.60M + 12 x 6.29M = 114.09M; the paper's 114.13M also counts the 25 LayerNorms (38,400)
    assert counts["total"] == 38_596_608 + 12 * (linear + 3072) + 1536 == 114_132_480
    assert round(counts["total"] / 1e6, 2) == 114.13


def reference_forward(model: Decoder, ids: torch.Tensor) -> torch.Tensor:
    """The decoder written out in float64 with explicit loops for RoPE and GQA."""
    cfg = model.cfg
    p = {n: t.detach().double() for n, t in model.named_parameters()}
    hd, r = cfg.head_dim, cfg.rotary_dim
    T = ids.shape[1]

    def ln(x, w, b):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + cfg.norm_eps) * (1 + w) + b

    def rope(x):  # x (B, H, T, hd): rotate pairs (i, i + r/2) of the first r dims by t * theta_i
        out = x.clone()
        for t in range(T):
            for i in range(r // 2):
                theta = t * cfg.rope_base ** (-2 * i / r)
                a, b = x[:, :, t, i], x[:, :, t, i + r // 2]
                out[:, :, t, i] = a * math.cos(theta) - b * math.sin(theta)
                out[:, :, t, i + r // 2] = b * math.cos(theta) + a * math.sin(theta)
        return out

    h = p["embed.weight"][ids]
    B = ids.shape[0]
    for layer in range(cfg.n_layer):
        q_ = f"blocks.{layer}."
        x = ln(h, p[q_ + "ln1.weight"], p[q_ + "ln1.bias"])
        q = (x @ p[q_ + "attn.q_proj.weight"].T).view(B, T, cfg.n_head, hd).transpose(1, 2)
        k = (x @ p[q_ + "attn.k_proj.weight"].T).view(B, T, cfg.n_kv_head, hd).transpose(1, 2)
        v = (x @ p[q_ + "attn.v_proj.weight"].T).view(B, T, cfg.n_kv_head, hd).transpose(1, 2)
        q, k = rope(q), rope(k)
        group = cfg.n_head // cfg.n_kv_head
        heads = []
        for hq in range(cfg.n_head):
            s = q[:, hq] @ k[:, hq // group].transpose(-1, -2) / math.sqrt(hd)
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            heads.append(torch.softmax(s, -1) @ v[:, hq // group])
        att = torch.stack(heads, 1).transpose(1, 2).reshape(B, T, -1)
        h = h + att @ p[q_ + "attn.o_proj.weight"].T
        x = ln(h, p[q_ + "ln2.weight"], p[q_ + "ln2.bias"])
        h = h + torch.relu(x @ p[q_ + "fc1.weight"].T) ** 2 @ p[q_ + "fc2.weight"].T
    h = ln(h, p["ln_f.weight"], p["ln_f.bias"])
    return h @ p["embed.weight"].T


def test_forward_matches_an_independent_float64_reference():
    model = Decoder(DecoderConfig(**TINY), seed=3).double()
    with torch.no_grad():  # give the norms non-trivial values so that layernorm1p is exercised
        for n, t in model.named_parameters():
            if t.dim() == 1:
                t.normal_(0, 0.3, generator=torch.Generator().manual_seed(len(n)))
    use_reference(model)
    ids = torch.randint(0, 50, (2, 11), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got = model(ids)
    assert torch.allclose(got, reference_forward(model, ids), atol=1e-10, rtol=1e-9)


def test_rotary_leaves_the_other_dims_and_depends_only_on_relative_position():
    rot = Rotary(rotary_dim=4, max_len=32, base=10000.0)
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 1, 1, 8, generator=g), torch.randn(1, 1, 1, 8, generator=g)

    def at(x, t):  # x placed at position t of a length-32 sequence
        seq = torch.zeros(1, 1, 32, 8)
        seq[:, :, t] = x[:, :, 0]
        return rot.rotate(seq)[:, :, t]

    assert torch.equal(at(q, 9)[..., 4:], q[:, :, 0, 4:])
    assert torch.allclose(at(q, 0), q[:, :, 0])
    dots = [float((at(q, m) * at(k, m - 3)).sum()) for m in (3, 10, 25)]
    assert dots == pytest.approx([dots[0]] * 3, abs=1e-5)
    assert float((at(q, 10) * at(k, 3)).sum()) != pytest.approx(dots[0], abs=1e-3)


@pytest.mark.parametrize("scorer", ["softmax", "ssa"])
def test_causal_mask_reaches_every_layer_and_the_future_is_invisible(scorer):
    model = Decoder(DecoderConfig(**TINY, scorer=scorer), seed=0)
    seen = []
    for block in model.blocks:
        original = block.attn.scorer.attend

        def spy(q, k, v, mask=None, _orig=original):
            seen.append(mask)
            return _orig(q, k, v, mask)

        block.attn.scorer.attend = spy
    ids = torch.randint(0, 50, (1, 12), generator=torch.Generator().manual_seed(0))
    changed = ids.clone()
    changed[0, 7:] = (changed[0, 7:] + 1) % 50
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert len(seen) == 2 * TINY["n_layer"]
    assert all(torch.equal(m.expand(1, 1, 12, 12), causal_mask(12)) for m in seen)
    assert torch.allclose(a[0, :7], b[0, :7], atol=1e-6)
    assert not torch.allclose(a[0, 7:], b[0, 7:], atol=1e-3)


def test_scorer_is_called_in_every_layer_with_grouped_query_shapes():
    model = Decoder(DecoderConfig(**TINY, scorer="ssa"), seed=0)
    with torch.no_grad():
        model(torch.zeros(1, 5, dtype=torch.long))
    assert [b.attn.scorer.calls for b in model.blocks] == [1, 1]
    attn = model.blocks[0].attn
    assert attn.k_proj.weight.shape == (2 * 4, 24) and attn.q_proj.weight.shape == (6 * 4, 24)
    assert all(getattr(attn, n).bias is None for n in ("q_proj", "k_proj", "v_proj", "o_proj"))


def test_one_seed_gives_every_scorer_the_same_shared_initial_values():
    a = Decoder(DecoderConfig(**TINY, scorer="softmax"), seed=5)
    b = Decoder(DecoderConfig(**TINY, scorer="ssa"), seed=5)
    c = Decoder(DecoderConfig(**TINY, scorer="softmax"), seed=6)
    sa, sb = a.state_dict(), b.state_dict()
    shared = [k for k in sa if ".scorer." not in k]
    assert all(torch.equal(sa[k], sb[k]) for k in shared)
    assert not torch.equal(sa["embed.weight"], c.state_dict()["embed.weight"])
    values = scorer_parameter_values(b)
    assert values["layer0.rho"] == pytest.approx([math.log(math.expm1(1.5))], abs=1e-6)
    assert values["layer0.n"] == pytest.approx([1.5], abs=1e-6)   # n = softplus(rho)
    std = 0.0134
    assert float(a.embed.weight.detach().std()) == pytest.approx(std, rel=0.05)
    fc2 = torch.cat([blk.fc2.weight.detach().flatten() for blk in a.blocks])
    assert float(fc2.std()) == pytest.approx(std / math.sqrt(2 * TINY["n_layer"]), rel=0.1)
    assert all(not blk.ln1.weight.detach().any() for blk in a.blocks)  # zero-centred gamma


def test_loss_is_cross_entropy_of_tied_logits():
    model = Decoder(DecoderConfig(**TINY), seed=0)
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(2))
    logits = F.linear(model.hidden(ids[:, :-1]), model.embed.weight)
    ref = F.cross_entropy(logits.reshape(-1, 50), ids[:, 1:].reshape(-1))
    assert model.loss(ids[:, :-1], ids[:, 1:]).item() == pytest.approx(ref.item(), rel=1e-6)
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 17, dtype=torch.long))
