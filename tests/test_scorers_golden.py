"""Golden values, theorems and pitfalls of docs/scorers.md (formulas, SSA limits), per scorer."""
import math

import entmax
import numpy as np
import pytest
import torch

from scorer_checks import set_fast, single_thread  # noqa: F401  (autouse fixture)
from scorers import ScorerError, causal_mask, create_scorer
from scorers.softmax import adaptive_beta

X = [1.0, 0.5, -0.3, 0.2]


def row_weights(name, x=X, dtype=torch.float64, **kwargs):
    scorer = create_scorer(name, num_heads=1, **kwargs)
    s = torch.as_tensor(x, dtype=dtype).view(1, 1, 1, -1)
    with torch.no_grad():
        return scorer.weights_from_logits(s).view(-1).double().numpy()


def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# sparsemax / entmax ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sparsemax_and_entmax15_golden(dtype):
    np.testing.assert_allclose(row_weights("sparsemax", dtype=dtype), [0.75, 0.25, 0, 0], atol=5e-5)
    np.testing.assert_allclose(row_weights("entmax15", dtype=dtype),
                               [0.5866, 0.2661, 0.0134, 0.1339], atol=5e-5)


def test_entmax_bisect_matches_exact_solvers():
    s = rand(2, 3, 17, 17, dtype=torch.float32)
    mask = causal_mask(17)
    pairs = [("entmax15", {}, {"alpha": 1.5}), ("sparsemax", {}, {"alpha": 2.0})]
    for exact, kw, bisect_kw in pairs:
        a = create_scorer(exact, **kw).weights_from_logits(s, mask)
        b = create_scorer("entmax_bisect", **bisect_kw).weights_from_logits(s, mask)
        assert (a - b).abs().max() <= 5e-7, exact
    assert np.abs(row_weights("entmax_bisect", dtype=torch.float32) -
                  row_weights("entmax15", dtype=torch.float32)).max() <= 2e-7


def test_entmax_bisect_brackets_tau_over_the_whole_row_masked_keys_included():
    """A row's masked keys set where bisection starts, so the same visible keys with masked keys
    beside them or without: equal to about 2^-n_iter, not to rounding."""
    s, visible = rand(1, 1, 1, 16), (torch.arange(16) < 5).view(1, 1, 1, 16)
    for n_iter, low, high in ((6, 1e-3, 1.0), (50, 0.0, 1e-12)):
        scorer = create_scorer("entmax_bisect", num_heads=1, n_iter=n_iter)
        whole = scorer.weights_from_logits(s, visible)[..., :5]
        cut = scorer.weights_from_logits(s[..., :5])
        assert low < (whole - cut).abs().max().item() < high, n_iter


def test_entmax_bisect_alpha_one_is_uniform_so_the_scorer_refuses_it():
    x = torch.tensor([X], dtype=torch.float64)
    assert torch.allclose(entmax.entmax_bisect(x, alpha=1.0), torch.full((1, 4), 0.25, dtype=torch.float64))
    near_softmax = entmax.entmax_bisect(x, alpha=1.001, n_iter=100)
    assert (near_softmax - torch.softmax(x, -1)).abs().max() <= 3e-4
    with pytest.raises(ScorerError, match="uniform"):
        create_scorer("entmax_bisect", alpha=1.0)


def test_learned_alpha_is_per_head_clamped_and_starts_at_1_5():
    scorer = create_scorer("entmax_bisect", learn_alpha=True, num_heads=3)
    assert scorer.alpha_logit.shape == (1, 3, 1, 1)
    s = rand(2, 3, 5, 5)
    assert torch.equal(scorer.alpha_value(s).detach(), torch.full((1, 3, 1, 1), 1.5, dtype=torch.float64))
    with torch.no_grad():
        scorer.alpha_logit.copy_(torch.tensor([-100.0, 0.0, 100.0]).view(1, 3, 1, 1))
    np.testing.assert_allclose(scorer.alpha_value(s).detach().view(-1).numpy(), [1.01, 1.5, 2.0])
    with pytest.raises(ScorerError, match="num_heads|3"):
        scorer.weights_from_logits(rand(2, 4, 5, 5))


@pytest.mark.parametrize("name", ["sparsemax", "entmax15", "entmax_bisect"])
def test_entmax_scorers_cast_bf16_logits_to_fp32(name):
    s = (rand(64, 128, seed=3, dtype=torch.float32) * 10 - 1000).to(torch.bfloat16).view(1, 1, 64, 128)
    scorer = create_scorer(name)
    w = scorer.weights_from_logits(s)
    assert w.dtype == torch.float32 and bool(torch.isfinite(w).all())
    assert (w.sum(-1) - 1).abs().max() <= 1e-6
    assert torch.equal(w, scorer.weights_from_logits(s.float()))


# SSA family -----------------------------------------------------------------------------------

def test_ssa_golden_values_and_initial_parameters():
    np.testing.assert_allclose(row_weights("ssa"), [0.3995, 0.2740, 0.1198, 0.2067], atol=5e-5)
    np.testing.assert_allclose(row_weights("ssa_gpt2"), [0.5451, 0.2765, 0.0316, 0.1469], atol=5e-5)
    ssa = create_scorer("ssa")
    assert ssa.rho.shape == (1,) and ssa.b_fixed.shape == (1,)
    assert abs(ssa.rho.item() - 1.2475) <= 5e-5 and abs(ssa.n_value().item() - 1.5) <= 1e-6
    gpt2 = create_scorer("ssa_gpt2")
    assert gpt2.a.shape == (1,) and gpt2.nu.shape == (1,)
    assert abs(gpt2.b_value().item() - 2.71828) <= 5e-6
    assert abs(gpt2.n_value().item() - 1.49182) <= 5e-6


def direct_ssa(s, n, b):
    u = (1 + b * s.abs()) ** (n * torch.sign(s))
    return u / u.sum(-1, keepdim=True)


@pytest.mark.parametrize("name,kwargs", [("ssa", {}), ("ssa", {"learn_b": True, "b": 1.7}),
                                         ("ssa_gpt2", {})])
def test_ssa_log_domain_equals_direct_form(name, kwargs):
    scorer = create_scorer(name, **kwargs)
    s = rand(2, 3, 9, 9) * 3
    n = scorer.n_value(torch.float64)
    b = scorer.b_value(torch.float64)
    with torch.no_grad():
        w = scorer.weights_from_logits(s)
    assert (w - direct_ssa(s, n, b)).abs().max() <= 1e-12


def test_ssa_softmax_limit_is_order_one_over_m():
    x = torch.tensor(X, dtype=torch.float64)
    expected = [0.0638, 0.0102, 0.00108, 0.000109]
    for m, want in zip([1, 10, 100, 1000], expected):
        w = row_weights("ssa", learn_n=False, n=m, b=1.0 / m)
        got = np.abs(w - torch.softmax(x, -1).numpy()).max()
        assert got == pytest.approx(want, rel=5e-3), m


def test_ssa_theorem1_logit_magnification():
    x = np.array(X)
    np.testing.assert_allclose(row_weights("softmax", 10 * x), [0.99297, 0.00669, 2.2e-6, 0.00033],
                               rtol=0, atol=5e-6)
    ssa = row_weights("ssa", 1000 * x)
    np.testing.assert_allclose(ssa, [0.6924, 0.2452, 0.0000, 0.0624], atol=5e-5)
    limit = np.maximum(x, 0) ** 1.5 / (np.maximum(x, 0) ** 1.5).sum()
    np.testing.assert_allclose(limit, [0.6930, 0.2450, 0, 0.0620], atol=5e-5)
    assert np.abs(ssa - limit).max() <= 1e-3


def test_ssa_theorem2_dominant_token():
    x = np.array(X)
    softmax_mass, ssa_mass, asymptote = [], [], []
    for big in (10.0, 100.0, 1000.0):
        y = x.copy()
        y[0] = big
        softmax_mass.append(row_weights("softmax", y)[1:].sum())
        ssa_mass.append(row_weights("ssa", y)[1:].sum())
        others = ((1 + 0.8 * np.abs(x[1:])) ** (1.5 * np.sign(x[1:]))).sum()
        asymptote.append(others / (1 + 0.8 * big) ** 1.5)
    np.testing.assert_allclose(softmax_mass[:2], [1.64e-4, 1.34e-43], rtol=5e-3)
    assert softmax_mass[2] == 0.0
    np.testing.assert_allclose(ssa_mass, [0.1185, 0.004955, 0.0001601], rtol=5e-4)
    np.testing.assert_allclose(asymptote, [0.1344, 0.004980, 0.0001601], rtol=5e-4)
    ratios = np.array(ssa_mass[:-1]) / np.array(ssa_mass[1:])
    np.testing.assert_allclose(np.log10(ratios[1]), 1.5, atol=0.01)


def test_stablemax_equals_ssa_with_b_and_n_one():
    s = rand(2, 3, 11, 11) * 4
    mask = causal_mask(11)
    a = create_scorer("stablemax").weights_from_logits(s, mask)
    b = create_scorer("ssa", learn_n=False, n=1.0, b=1.0).weights_from_logits(s, mask)
    assert (a - b).abs().max() <= 1e-12


def test_ssa_slope_at_zero_is_n_times_b():
    from scorers.ssa import signed_log1p
    s = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    signed_log1p(s, 0.8).sum().backward()
    assert torch.allclose(s.grad, torch.full((3,), 0.8, dtype=torch.float64))


# softmax family -------------------------------------------------------------------------------

def test_learnable_temperature_at_init_equals_softmax():
    q, k, v = (rand(2, 3, 13, 8, seed=i, dtype=torch.float32) for i in range(3))
    mask = causal_mask(13)
    ref = create_scorer("softmax")
    temp = create_scorer("temperature_softmax", learnable=True, num_heads=3)
    assert temp.log_tau.shape == (3,)
    assert (temp.weights_from_qk(q, k, mask) - ref.weights_from_qk(q, k, mask)).abs().max() <= 1e-7
    for fast in (False, True):
        set_fast(temp, fast)
        set_fast(ref, fast)
        assert (temp.attend(q, k, v, mask) - ref.attend(q, k, v, mask)).abs().max() <= 1e-7


def test_fixed_temperature_is_softmax_of_scaled_logits():
    s = rand(1, 2, 6, 6)
    w = create_scorer("temperature_softmax", tau=0.25).weights_from_logits(s)
    assert (w - torch.softmax(4 * s, -1)).abs().max() <= 1e-12


def test_ssmax_equals_softmax_at_the_training_length():
    q, k, v = (rand(2, 3, 17, 8, seed=i, dtype=torch.float32) for i in range(3))
    ssmax = create_scorer("ssmax", num_heads=3, max_len=17)
    assert torch.allclose(ssmax.sigma, torch.full((3,), 1 / math.log(17)))
    soft = create_scorer("softmax")
    assert (ssmax.attend(q, k, v) - soft.attend(q, k, v)).abs().max() <= 1e-6
    shorter = (ssmax.attend(q, k, v, causal_mask(17)) - soft.attend(q, k, v, causal_mask(17)))
    assert shorter.abs().max() > 1e-3


def test_adaptive_temperature_beta_values():
    beta = adaptive_beta(torch.tensor([2.0, 3.0, 4.0, 0.4], dtype=torch.float64))
    np.testing.assert_allclose(beta.numpy(), [2.099, 2.250, 2.389, 1.0], atol=5e-4)
    low_to_high = [np.polyval(list(reversed([-0.037, 0.481, -2.3, 4.917, -1.791])), h) for h in (2, 3, 4)]
    np.testing.assert_allclose(low_to_high, [2.405, -31.6, -178.7], atol=0.05)


def test_adaptive_temperature_beta_grad_option():
    s0 = rand(1, 2, 9, 9)
    mask = causal_mask(9)
    grads = []
    for beta_grad in (False, True):
        s = s0.clone().requires_grad_(True)
        w = create_scorer("adaptive_temperature", beta_grad=beta_grad).weights_from_logits(s, mask)
        (w * rand(*w.shape, seed=4)).sum().backward()
        assert bool(torch.isfinite(s.grad).all())
        grads.append((w.detach(), s.grad))
    assert torch.equal(grads[0][0], grads[1][0])
    assert (grads[0][1] - grads[1][1]).abs().max() > 1e-6


def test_sa_softmax_edge_rows():
    scorer = create_scorer("sa_softmax")
    s = torch.tensor([[-0.5, 3.0], [0.0, 0.0], [2.0, -1.0]], dtype=torch.float64).view(1, 1, 3, 2)
    mask = torch.tensor([[True, False], [True, True], [True, True]]).view(1, 1, 3, 2)
    w = scorer.weights_from_logits(s, mask).view(3, 2)
    assert torch.equal(w[0], torch.zeros(2, dtype=torch.float64))
    assert torch.equal(w[1], torch.zeros(2, dtype=torch.float64))
    p = torch.softmax(torch.tensor([2.0, -1.0], dtype=torch.float64), -1)
    assert torch.allclose(w[2], torch.tensor([3.0, 0.0], dtype=torch.float64) / 3 * p)
    plain = create_scorer("sa_softmax", variant="plain").weights_from_logits(s[:, :, 2:], None)
    assert torch.allclose(plain.view(-1), torch.tensor([2.0, -1.0], dtype=torch.float64) * p)


def test_cog_signed_signs_and_abs_mass():
    s = torch.tensor([1.0, -2.0, 0.5, -0.1], dtype=torch.float64).view(1, 1, 1, 4)
    w = create_scorer("cog_signed").weights_from_logits(s).view(-1)
    expected = torch.sign(s.view(-1)) * torch.softmax(s.view(-1).abs(), -1)
    assert torch.allclose(w, expected) and abs(w.abs().sum().item() - 1) <= 1e-12


# sinks, gates ---------------------------------------------------------------------------------

def test_learned_sink_at_init_equals_softmax_plus_one():
    q, k, v = (rand(2, 3, 10, 8, seed=i, dtype=torch.float32) for i in range(3))
    a = create_scorer("learned_sink", num_heads=3)
    b = create_scorer("softmax1", num_heads=3)
    assert torch.equal(a.sink, torch.zeros(3))
    for fast in (False, True):
        set_fast(a, fast)
        set_fast(b, fast)
        assert (a.attend(q, k, v, causal_mask(10)) - b.attend(q, k, v, causal_mask(10))).abs().max() <= 1e-6
    np.testing.assert_allclose(row_weights("softmax_plus_one"),
                               np.exp(X) / (1 + np.exp(X).sum()), atol=1e-12)


def test_softpick_golden_row():
    x = np.array(X)
    expected = np.maximum(np.exp(x) - 1, 0) / (np.abs(np.exp(x) - 1).sum() + 1e-8)
    np.testing.assert_allclose(row_weights("softpick"), expected, atol=1e-8)


def test_sigmoid_bias_is_minus_log_training_length():
    scorer = create_scorer("sigmoid", max_len=2048)
    assert scorer.bias == pytest.approx(-7.6246, abs=5e-5)
    w = scorer.weights_from_logits(torch.zeros(1, 1, 1, 3, dtype=torch.float64))
    assert torch.allclose(w, torch.full((1, 1, 1, 3), 1 / 2049, dtype=torch.float64))


def test_stick_breaking_matches_the_cubic_reference_form():
    """The official O(N^3) form (sb_ref: log-space matrix product) with the remainder on v_i."""
    n = 40
    q, k, v = (rand(2, 3, n, 8, seed=i) for i in range(3))
    logits = q @ k.transpose(-1, -2) / math.sqrt(8)
    hidden = torch.ones(n, n, dtype=torch.bool).triu(0)
    log_z = torch.nn.functional.logsigmoid(logits).masked_fill(hidden, -1e5)
    log_beta = torch.nn.functional.logsigmoid(-logits).masked_fill(hidden, 0)
    cum_weight = torch.ones(n, n, dtype=torch.float64).tril(-1)
    att = (log_z + torch.einsum("bhij,jk->bhik", log_beta, cum_weight)).exp()
    expected = att @ v + (1 - att.sum(-1))[..., None] * v
    scorer = create_scorer("stick_breaking")
    assert (scorer.attend(q, k, v, causal_mask(n)) - expected).abs().max() <= 1e-12
    w = scorer.weights_from_qk(q, k, causal_mask(n))
    assert (w.sum(-1) - 1).abs().max() <= 1e-12


def test_stick_breaking_is_causal_only():
    q = rand(1, 1, 5, 4, dtype=torch.float32)
    scorer = create_scorer("stick_breaking")
    assert scorer.causal_only
    with pytest.raises(ValueError, match="causal"):
        scorer.attend(q, q, q, torch.ones(1, 1, 5, 5, dtype=torch.bool))


@pytest.mark.parametrize("name", ["relu", "relu2"])
def test_relu_lengths(name):
    s = torch.tensor([1.5, -1.0, 0.5, 2.0], dtype=torch.float64).view(1, 1, 1, 4)
    mask = torch.tensor([True, True, True, False]).view(1, 1, 1, 4)
    power = 1 if name == "relu" else 2
    visible = create_scorer(name).weights_from_logits(s, mask).view(-1)
    fixed = create_scorer(name, length="fixed", max_len=10).weights_from_logits(s, mask).view(-1)
    expected = torch.tensor([1.5, 0.0, 0.5, 0.0], dtype=torch.float64) ** power
    assert torch.allclose(visible, expected / 3) and torch.allclose(fixed, expected / 10)


# linear (module-kind) -------------------------------------------------------------------------

def long_masks(n):
    valid = torch.arange(n)[None, :] < torch.tensor([n, n - 37])[:, None]
    pad = valid[:, None, None, :] & valid[:, None, :, None]
    return {"none": None, "causal": causal_mask(n), "causal+padding": causal_mask(n) & pad,
            "causal+padded keys": causal_mask(n) & valid[:, None, None, :],
            "causal, 2-D": causal_mask(n)[0, 0], "padding": pad,
            "padded keys": valid[:, None, None, :]}


def out_and_grads(fn, q, k, v, g, mask):
    qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
    out = fn(qq, kk, vv, mask)
    (out * g).sum().backward()
    return {"out": out.detach(), "dq": qq.grad, "dk": kk.grad, "dv": vv.grad}


def linear_inputs(lq, lk, dtype, d=8):
    q, g = (rand(2, 3, lq, d, seed=i).to(dtype) for i in (0, 3))
    k, v = (rand(2, 3, lk, d, seed=i).to(dtype) for i in (1, 2))
    q[0, 1, 70 % lq] = -1.0     # cosformer: phi(q) = 0, a zero denominator
    return q, k, v, g


@pytest.mark.parametrize("name", ["cosformer", "linear_elu"])
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_linear_form_and_its_gradients_equal_quadratic_across_chunks(name, dtype, tol):
    """150 rows: two chunks of 64 and a part of one; errors relative to each tensor's largest
    entry. Causal or not, padded rows and keys; then 100 queries against 150 keys (aligned to the
    last keys, as cosformer's positions)."""
    scorer = create_scorer(name, max_len=256)
    assert scorer.chunk == 64
    cases = [(150, 150, kind, mask) for kind, mask in long_masks(150).items()]
    valid = torch.arange(150)[None, :] < torch.tensor([150, 113])[:, None]
    cases += [(100, 150, "100 queries", None),
              (100, 150, "100 queries, padded keys", valid[:, None, None, :])]
    for lq, lk, kind, mask in cases:
        q, k, v, g = linear_inputs(lq, lk, dtype)
        fast = out_and_grads(scorer.linear_attend, q, k, v, g, mask)
        quadratic = out_and_grads(scorer.reference_attend, q, k, v, g, mask)
        for what, want in quadratic.items():
            err = (fast[what] - want).abs().max() / want.abs().max()
            assert err <= tol, (kind, what, err.item())


@pytest.mark.parametrize("name", ["cosformer", "linear_elu"])
def test_linear_form_gradients_where_the_denominator_is_below_eps(name):
    """Rows whose denominator is under eps = 1e-6, and not 0 (cosformer: phi(q) = 1e-9;
    linear_elu: phi(q) = e^-30): the clamp passes no gradient to the denominator. Their dq is
    about 1e6 times the others', so they are compared alone, in float64."""
    scorer = create_scorer(name, max_len=256)
    q, k, v, g = linear_inputs(150, 150, torch.float64)
    q[1, 2, 100] = 1e-9 if name == "cosformer" else -30.0
    fast = out_and_grads(scorer.linear_attend, q, k, v, g, causal_mask(150))
    quadratic = out_and_grads(scorer.reference_attend, q, k, v, g, causal_mask(150))
    assert 0 < scorer.weights_from_qk(q, k, causal_mask(150))[1, 2, 100].sum() < 0.9
    for what, want in quadratic.items():
        err = (fast[what] - want).abs().max() / want.abs().max()
        assert err <= 1e-12, (what, err.item())


@pytest.mark.parametrize("name", ["cosformer", "linear_elu"])
def test_linear_form_gradcheck_over_small_chunks(name):
    scorer = create_scorer(name, max_len=16)
    scorer.chunk = 4
    valid = torch.arange(11)[None, :] < torch.tensor([11, 7])[:, None]
    for lq, mask in ((11, causal_mask(11) & valid[:, None, None, :]), (6, valid[:, None, None, :])):
        q, k, v, _ = linear_inputs(lq, 11, torch.float64, d=3)
        q, k, v = (t[:, :2].requires_grad_() for t in (q, k, v))
        assert torch.autograd.gradcheck(lambda q, k, v: scorer.linear_attend(q, k, v, mask),
                                        (q, k, v))


@pytest.mark.parametrize("name", ["cosformer", "linear_elu"])
def test_linear_form_memory_is_within_twice_sdpas(name):
    """Peak memory of forward + backward (the bench's measure), causal, fp32, at the bench's
    shapes: the chunks' states are carried, not kept (kept, cosformer's took 3.7x and 2.1x)."""
    from tasks.bench import cpu_peak_bytes

    scorer = create_scorer(name, max_len=2048)
    for shape in ((4, 8, 512, 64), (1, 8, 2048, 64)):
        q, k, v, g = (rand(*shape, seed=i, dtype=torch.float32) for i in range(4))
        mask = causal_mask(shape[2])

        def step(fn):
            qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
            fn(qq, kk, vv, mask).backward(g)

        sdpa = cpu_peak_bytes(lambda: step(
            lambda q, k, v, m: torch.nn.functional.scaled_dot_product_attention(q, k, v, m)))
        peak = cpu_peak_bytes(lambda: step(scorer.linear_attend))
        assert peak <= 2.0 * sdpa, (shape, peak / sdpa)


def test_cosformer_prefix_needs_a_fixed_l_max():
    q, k, v = (rand(1, 2, 256, 8, seed=i) for i in range(3))
    fixed = create_scorer("cosformer", max_len=256)
    full = fixed.attend(q, k, v, causal_mask(256))[:, :, :128]
    prefix = fixed.attend(q[:, :, :128], k[:, :, :128], v[:, :, :128], causal_mask(128))
    assert (full - prefix).abs().max() <= 1e-12
    per_length = create_scorer("cosformer", max_len=128)
    moved = per_length.attend(q[:, :, :128], k[:, :, :128], v[:, :, :128], causal_mask(128))
    assert (full - moved).abs().max() > 1e-3


def test_cosformer_refuses_sequences_longer_than_l_max():
    q = rand(1, 1, 20, 4, dtype=torch.float32)
    scorer = create_scorer("cosformer", max_len=16)
    for path in (scorer.linear_attend, scorer.reference_attend):
        with pytest.raises(ScorerError, match="max_len"):
            path(q, q, q, causal_mask(20))


def test_cosformer_row_orthogonal_to_every_key_outputs_zero():
    q, k, v = (rand(1, 1, 6, 4, seed=i) for i in range(3))
    q[0, 0, 2] = -1.0
    scorer = create_scorer("cosformer", max_len=8)
    for fast in (False, True):
        set_fast(scorer, fast)
        out = scorer.attend(q, k, v, causal_mask(6))
        assert bool(torch.isfinite(out).all()) and torch.equal(out[0, 0, 2], torch.zeros(4, dtype=torch.float64))


def test_linear_scorers_fall_back_to_quadratic_for_general_masks():
    q, k, v = (rand(1, 2, 12, 4, seed=i) for i in range(3))
    mask = rand(1, 2, 12, 12, seed=9) > 0
    for name in ("cosformer", "linear_elu"):
        scorer = create_scorer(name)
        assert (scorer.attend(q, k, v, mask) - scorer.reference_attend(q, k, v, mask)).abs().max() <= 1e-12
