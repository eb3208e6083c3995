"""The blocked form with recompute (scorers/fast/blocked.py, scorers/fast/blocked_sparse.py,
scorers/fast/blocked_rows.py, scorers/fast/blocked_stick.py) equals each declaring scorer's
reference: outputs and gradients (q, k, v and the scorer's parameters), every mask (none, causal,
padded causal, random with fully-masked rows), cross-attention, query and key blocks that cut
rows and keys unevenly, the weights recomputed or kept; bf16 in and out; rows whose statistics
swing across key blocks; and its memory grows like L, not L^2 (at 2,048 keys, the forms of
blocked_rows.py and blocked_stick.py against the reference too)."""
from __future__ import annotations

import entmax
import pytest
import torch

import scorers
from scorers.fast.blocked import blocked_attend, gate_attend, softmax_attend
from scorers.fast import blocked_sparse, tiles
from scorers.fast.blocked_sparse import sparse_attend
from scorers.fast.tiles import BlockedError, plan_tiles
from scorers.fast import accelerate, fast_paths, scorers_with
from scorers.forms import spec_for
from scorer_checks import make_scorer

from fast_support import assert_close, inputs, masks, run

DECLARED = [("ssa", {}), ("ssa", {"learn_b": True}), ("ssa", {"learn_n": False, "n": 2.0}),
            ("ssa_n2", {}), ("ssa_n1_5", {}), ("ssa_gpt2", {}), ("stablemax", {}),
            ("temperature_softmax", {"tau": 0.5}),
            ("temperature_softmax", {"learnable": True}), ("ssmax", {}),
            ("softmax_plus_one", {}), ("learned_sink", {}), ("sigmoid", {}), ("relu", {}),
            ("relu", {"length": "fixed"}), ("relu2", {}), ("relu2", {"length": "fixed"}),
            ("sparsemax", {}), ("entmax15", {}), ("entmax_bisect", {}),
            ("entmax_bisect", {"alpha": 1.25}), ("entmax_bisect", {"learn_alpha": True}),
            ("softpick", {}), ("softpick", {"eps": 0.5}), ("adaptive_temperature", {}),
            ("adaptive_temperature", {"beta_grad": True}),
            ("cog_signed", {}), ("sa_softmax", {}), ("sa_softmax", {"variant": "plain"}),
            ("stick_breaking", {}), ("stick_breaking", {"attend_current": False})]
# The forms of blocked_rows.py and blocked_stick.py, each beside its reference's edge cases.
ROW_STATISTICS = [("softpick", {}), ("cog_signed", {}), ("sa_softmax", {}),
                  ("sa_softmax", {"variant": "plain"}), ("adaptive_temperature", {}),
                  ("adaptive_temperature", {"beta_grad": True}),
                  ("stick_breaking", {}), ("stick_breaking", {"attend_current": False})]
SOFTMAX_DECLARED = {"ssa", "ssa_n2", "ssa_n1_5", "ssa_gpt2", "stablemax", "temperature_softmax",
                    "ssmax", "softmax_plus_one", "learned_sink", "adaptive_temperature"}
# (query block rows, key block, recompute): uneven cuts recomputed, uneven cuts kept, one block.
TILINGS = [(4, 5, True), (3, 4, False), (64, None, True)]
SHAPES = [(17, 17), (9, 17)]


def blocked(scorer, block_size, key_block, recompute):
    def fn(q, k, v, mask):
        return blocked_attend(spec_for(scorer.kernels().blocked, q, k, mask), q, k, v, mask,
                              block_size=block_size, key_block=key_block, recompute=recompute)
    return fn


def test_the_declaring_scorers():
    declared = set(scorers_with("blocked"))
    assert declared == {name for name, _ in DECLARED}


@pytest.mark.parametrize("name,kwargs", DECLARED, ids=lambda x: str(x))
@pytest.mark.parametrize("lq,lk", SHAPES, ids=["self", "cross"])
def test_blocked_equals_reference_fp64(name, kwargs, lq, lk):
    scorer = make_scorer(name, kwargs).double()
    q, k, v, g = inputs(torch.float64, lq, lk)
    for mask_name, mask in masks(lq, lk).items():
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        for tiling in TILINGS if lq == lk else TILINGS[:1]:
            got = run(blocked(scorer, *tiling), scorer, q, k, v, g, mask)
            assert_close(ref, got, f"{name}{kwargs} {lq}x{lk} {mask_name} {tiling}", tol=1e-12)
            if mask_name == "random_empty_rows":
                assert got[0][0, 1, 3].abs().max().item() == 0.0
                assert all(torch.isfinite(x).all() for x in got[1])


@pytest.mark.parametrize("name,kwargs", DECLARED, ids=lambda x: str(x))
def test_blocked_equals_reference_fp32_through_accelerate(name, kwargs):
    scorer = make_scorer(name, kwargs)
    q, k, v, g = inputs()
    assert accelerate(scorer, "blocked", block_size=5) == {name: "blocked"}
    for mask_name in ("padded_causal",) + (() if scorer.causal_only else ("random_empty_rows",)):
        mask = masks()[mask_name]
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        got = run(scorer.attend, scorer, q, k, v, g, mask)
        assert_close(ref, got, f"{name}{kwargs} {mask_name}", tol=2e-5)


@pytest.mark.parametrize("name", ["ssa", "sigmoid", "entmax15", "entmax_bisect", "learned_sink",
                                  "softpick", "adaptive_temperature", "cog_signed",
                                  "sa_softmax", "stick_breaking"])
def test_bf16_in_and_out(name):
    scorer = make_scorer(name)
    q, k, v, g = inputs(torch.bfloat16)
    mask = masks()["padded_causal"]
    ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
    got = run(blocked(scorer, 4, 5, True), scorer, q, k, v, g, mask)
    assert got[0].dtype == torch.bfloat16 and all(x.dtype == torch.bfloat16 for x in got[1][:3])
    for a, b in zip([ref[0], *ref[1][:3]], [got[0], *got[1][:3]]):
        assert (a.float() - b.float()).abs().max().item() <= 2e-2


@pytest.mark.parametrize("kind,fn", [("sparsemax", entmax.sparsemax),
                                     ("entmax15", entmax.entmax15)])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0, 1e3])
def test_streamed_threshold_equals_the_sort_based_solver(kind, fn, scale):
    """Over 5 key blocks of 7 keys, at every logit scale: the sort's weights, exactly."""
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(2, 2, 9, 8, generator=gen, dtype=torch.float64) * scale
    k = torch.randn(2, 2, 33, 8, generator=gen, dtype=torch.float64)
    v = torch.eye(33, dtype=torch.float64).expand(2, 2, 33, 33)   # the output is the weights
    mask = torch.rand(2, 1, 9, 33, generator=gen) > 0.3
    mask[..., 0] = True
    got = sparse_attend(q, k, v, mask, kind=kind, block_size=4, key_block=7, recompute=True)
    s = (q @ k.transpose(-1, -2) / 8 ** 0.5).masked_fill(~mask, float("-inf"))
    want = fn(s, dim=-1)
    assert (got - want).abs().max().item() <= 1e-12
    assert torch.equal(got == 0, want == 0) or scale >= 1e3


def _alpha_case(alpha, scale, seed=2):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, 9, 8, generator=gen, dtype=torch.float64) * scale
    k, v = (torch.randn(2, 3, 33, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    g = torch.randn(2, 3, 9, 8, generator=gen, dtype=torch.float64)
    mask = torch.rand(2, 1, 9, 33, generator=gen) > 0.3
    mask[..., 0] = True
    if alpha == "heads":
        alpha = torch.tensor([1.05, 1.5, 2.0], dtype=torch.float64).view(1, 3, 1, 1)
    return q, k, v, g, mask, torch.as_tensor(alpha, dtype=torch.float64)


def _alpha_grads(fn, q, k, v, g, alpha):
    qq, kk, vv, aa = (t.clone().requires_grad_() for t in (q, k, v, alpha))
    out = fn(qq, kk, vv, aa)
    (out * g).sum().backward()
    return [out, qq.grad, kk.grad, vv.grad, aa.grad]


@pytest.mark.parametrize("alpha", [1.01, 1.1, 1.5, 1.9, 2.0, "heads"])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0, 1e3])
@pytest.mark.parametrize("share", [0.0, 1.0], ids=["whole_tiles", "candidates"])
def test_streamed_alpha_entmax_equals_the_package(alpha, scale, share, monkeypatch):
    """Over 5 key blocks of 7 keys, at every logit scale, alpha from near softmax to sparsemax
    (one per head too), the threshold's passes over whole tiles or over the candidates alone:
    the package's bisection (100 steps, fp64): weights, and the gradients of q, k, v and alpha."""
    monkeypatch.setattr(blocked_sparse, "COMPACT_SHARE", share)
    monkeypatch.setattr(blocked_sparse, "COMPACT_FROM_KEYS", 0)
    found = []
    of = blocked_sparse._Candidates.of.__func__
    monkeypatch.setattr(blocked_sparse._Candidates, "of",
                        classmethod(lambda cls, *a: found.append(of(cls, *a)) or found[-1]))
    q, k, v, g, mask, a = _alpha_case(alpha, scale)

    def blocked(q, k, v, a):
        return sparse_attend(q, k, v, mask, kind="entmax_alpha", alpha=a, block_size=4,
                             key_block=7, recompute=True)

    def package(q, k, v, a):
        s = (q @ k.transpose(-1, -2) / 8 ** 0.5).masked_fill(~mask, float("-inf"))
        return entmax.entmax_bisect(s, a, dim=-1, n_iter=100) @ v

    eye = torch.eye(33, dtype=torch.float64).expand(2, 3, 33, 33)
    weights = sparse_attend(q, k, eye, mask, kind="entmax_alpha", alpha=a, block_size=4,
                            key_block=7)
    s = (q @ k.transpose(-1, -2) / 8 ** 0.5).masked_fill(~mask, float("-inf"))
    assert (weights - entmax.entmax_bisect(s, a, dim=-1, n_iter=100)).abs().max() <= 1e-10
    assert (weights.sum(-1) - 1).abs().max() <= 1e-12
    assert any(c is not None for c in found) == (share == 1.0)
    got, want = _alpha_grads(blocked, q, k, v, g, a), _alpha_grads(package, q, k, v, g, a)
    for i, (x, y) in enumerate(zip(got, want)):
        assert (x - y).abs().max() <= 1e-9 * max(1.0, y.abs().max()), i


def test_alpha_entmax_newton_goes_on_where_the_output_pass_finds_it_unsettled(monkeypatch):
    """With the output pass made after every step, each one finds the step too large until
    Newton has converged: the same weights and gradients, kept or recomputed."""
    q, k, v, g, mask, a = _alpha_case("heads", 1.0)

    def blocked(recompute):
        return lambda q, k, v, a: sparse_attend(q, k, v, mask, kind="entmax_alpha", alpha=a,
                                                block_size=4, key_block=7, recompute=recompute)

    want = _alpha_grads(blocked(True), q, k, v, g, a)
    monkeypatch.setattr(blocked_sparse, "SETTLE", 1e6)
    for recompute in (True, False):
        for x, y in zip(_alpha_grads(blocked(recompute), q, k, v, g, a), want):
            assert (x - y).abs().max() <= 1e-12 * max(1.0, y.abs().max())


def test_alpha_entmax_keeps_a_nan_row_to_itself():
    q, k, v, _, mask, _ = _alpha_case(1.5, 1.0)
    q[0, 1, 2, 0] = float("nan")
    out = sparse_attend(q, k, v, mask, kind="entmax_alpha", alpha=1.5, block_size=4)
    assert out[0, 1, 2].isnan().all()
    out[0, 1, 2] = 0.0
    assert torch.isfinite(out).all()


def test_alpha_entmax_bad_alpha_is_an_error():
    q, k, v, _ = inputs()
    with pytest.raises(ValueError, match=r"alpha in \(1, 2\]"):
        sparse_attend(q, k, v, kind="entmax_alpha", alpha=2.5)
    with pytest.raises(BlockedError, match=r"\(B, H, 1, 1\)"):
        sparse_attend(q, k, v, kind="entmax_alpha", alpha=torch.full((3,), 1.5))
    with pytest.raises(ValueError, match="needs alpha"):
        sparse_attend(q, k, v, kind="entmax_alpha")
    with pytest.raises(ValueError, match="takes no alpha"):
        sparse_attend(q, k, v, kind="entmax15", alpha=1.5)


def test_ties_and_one_key_rows():
    q = torch.zeros(1, 1, 3, 4, dtype=torch.float64)
    k = torch.zeros(1, 1, 5, 4, dtype=torch.float64)
    v = torch.eye(5, dtype=torch.float64)[None, None]
    causal = torch.ones(3, 5, dtype=torch.bool).tril(2)[None, None]
    for kind in ("sparsemax", "entmax15"):
        w = sparse_attend(q, k, v, causal, kind=kind, key_block=2)
        assert torch.allclose(w[0, 0, 0], torch.tensor([1 / 3] * 3 + [0.0] * 2,
                                                       dtype=torch.float64), atol=1e-15)
    one = torch.zeros(1, 1, 3, 5, dtype=torch.bool)
    one[..., 0, 4] = True
    out = sparse_attend(q, k, v, one, kind="entmax15", key_block=2)
    assert out[0, 0, 0].tolist() == [0.0, 0.0, 0.0, 0.0, 1.0]
    assert out[0, 0, 1:].abs().max().item() == 0.0


def test_online_normalization_survives_far_apart_blocks():
    """Logits of -1000 in the first key block and +1000 in the last: the running max rescales
    what came before instead of overflowing or losing the row."""
    q = torch.ones(1, 1, 2, 1, dtype=torch.float64)
    k = torch.tensor([-1000.0, -999.0, 1000.0, 999.0], dtype=torch.float64).view(1, 1, 4, 1)
    v = torch.eye(4, dtype=torch.float64)[None, None]
    out = softmax_attend(q, k, v, key_block=2, query_scale=1.0)
    want = torch.softmax(k.view(4), -1)
    assert (out[0, 0, 0] - want).abs().max().item() <= 1e-12   # t log2 e rounds: ~|t| eps
    out = softmax_attend(q, k, v, key_block=2, query_scale=1.0,
                         sink=torch.full((1, 1, 1, 1), 2000.0, dtype=torch.float64))
    assert out.abs().max().item() <= 1e-300                     # the sink takes it all


def test_a_whole_masked_key_tile_weighs_zero_under_a_transform_bounded_below():
    """Rows whose first key tiles are all masked: the form fills masked logits with the lowest
    float to find each row's largest, and SSA at a small n maps that to a finite t (0.01 log1p
    of 1.8e308 is -7.1), a weight of about 1e-3 if it leaked. Outputs and gradients, n's included,
    equal the reference's, recomputed or kept."""
    scorer = make_scorer("ssa", {"n": 0.01}).double()
    q, k, v, g = inputs(torch.float64)
    mask = torch.zeros(1, 1, 17, 17, dtype=torch.bool)
    mask[..., 9:] = True
    mask[..., 2, :] = False
    ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
    for tiling in TILINGS[:2]:
        got = run(blocked(scorer, *tiling), scorer, q, k, v, g, mask)
        assert_close(ref, got, f"ssa n=0.01 {tiling}", tol=1e-12)


@pytest.mark.parametrize("name,kwargs", [d for d in DECLARED if d[0] in SOFTMAX_DECLARED],
                         ids=lambda x: str(x))
def test_every_declared_logit_transform_is_nondecreasing(name, kwargs):
    """The form takes a row's largest t as f of its largest s (scorers/forms.py)."""
    scorer = make_scorer(name, kwargs).double()
    q, k, _, _ = inputs(torch.float64)
    spec = spec_for(scorer.kernels().blocked, q, k, None)
    s = torch.cat([torch.tensor([float("-inf"), torch.finfo(torch.float64).min],
                                dtype=torch.float64),
                   torch.linspace(-1e4, 1e4, 40001, dtype=torch.float64) ** 3 / 1e8])
    t = spec.transform.exponent(s.clone(), None, *[p.detach() for p in spec.transform.params])[0]
    assert t[0] == float("-inf") and bool((t[1:] >= t[:-1]).all())


def test_plan_tiles():
    q = torch.zeros(2, 3, 10, 4)
    causal = torch.ones(10, 10, dtype=torch.bool).tril()[None, None]
    plan = plan_tiles(q, q, causal, block_size=4, key_block=3)
    assert plan.causal and plan.blocks == ((0, 4, 4), (4, 8, 8), (8, 10, 10))
    cut = [(a, b, None if h is None else h.c) for a, b, h in plan.tiles(4, 8, 8)]
    assert cut == [(0, 3, None), (3, 6, 0), (6, 8, 0)]      # from a multiple of MASK_ALIGN keys
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tiles, "MASK_ALIGN", 1)
        plan = plan_tiles(q, q, causal, block_size=4, key_block=3)
        cut = [(a, b, None if h is None else h.c) for a, b, h in plan.tiles(4, 8, 8)]
        assert cut == [(0, 3, None), (3, 6, 2), (6, 8, 0)]  # masks only keys 5.. of rows 4..7
    padded = causal & torch.tensor([True] * 6 + [False] * 4)
    assert [e for _, _, e in plan_tiles(q, q, padded, block_size=4).blocks] == [4, 6, 6]
    assert plan_tiles(q, q, None).recompute is False           # 10 keys: kept on a CPU
    assert plan_tiles(q, q, None, recompute=True).recompute
    assert plan_tiles(q, q, causal, block_size=4).kept == {0, 4, 8}   # within KEEP_BUDGET
    assert plan_tiles(q, q, causal, block_size=4, recompute=True).kept == frozenset()
    with pytest.MonkeyPatch.context() as patch:     # 0.1 x 2 (10 + 10) 4 = 16 entries per (b, h)
        patch.setattr(tiles, "KEEP_BUDGET", 0.1)
        assert plan_tiles(q, q, causal, block_size=4).kept == {0, 4, 8}   # 10 keys: all kept
        patch.setattr(tiles, "KEEP_ALL_BELOW", 0)
        assert plan_tiles(q, q, causal, block_size=4).kept == {0}  # 4 x 4 fits, 4 x 8 not
        assert plan_tiles(q, q, causal, block_size=4, state=2).kept == frozenset()
        assert plan_tiles(q, q, causal, block_size=4, recompute=False).kept == {0, 4, 8}
    with pytest.raises(TypeError, match="boolean"):
        plan_tiles(q, q, torch.ones(10, 10))


@pytest.mark.parametrize("name,kwargs", DECLARED, ids=lambda x: str(x))
def test_blocked_equals_reference_with_masks_cut_inside_a_key_block(name, kwargs, monkeypatch):
    """Causal tiles masked from the first key a row cannot see (MASK_ALIGN 1), not from a
    multiple of 32 keys into the tile: fp64, causal and padded causal, equal to the reference."""
    monkeypatch.setattr(tiles, "MASK_ALIGN", 1)
    scorer = make_scorer(name, kwargs).double()
    q, k, v, g = inputs(torch.float64)
    for mask_name in ("causal", "padded_causal"):
        mask = masks()[mask_name]
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        for tiling in TILINGS[:2]:
            got = run(blocked(scorer, *tiling), scorer, q, k, v, g, mask)
            assert_close(ref, got, f"{name}{kwargs} {mask_name} {tiling}", tol=1e-12)


@pytest.mark.parametrize("name,kwargs", DECLARED, ids=lambda x: str(x))
def test_blocked_keeping_some_blocks_equals_reference(name, kwargs, monkeypatch):
    """Within a small KEEP_BUDGET the first query blocks keep their tiles' state and the later
    ones make it again in the backward: fp64, every mask, equal to the reference."""
    monkeypatch.setattr(tiles, "KEEP_BUDGET", 0.1)
    monkeypatch.setattr(tiles, "KEEP_ALL_BELOW", 0)
    scorer = make_scorer(name, kwargs).double()
    q, k, v, g = inputs(torch.float64)
    plan = plan_tiles(q, k, masks()["causal"], block_size=4)
    assert 0 < len(plan.kept) < len(plan.blocks)
    for mask_name, mask in masks().items():
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        got = run(blocked(scorer, 4, 5, None), scorer, q, k, v, g, mask)
        assert_close(ref, got, f"{name}{kwargs} {mask_name}", tol=1e-12)


def test_bad_options_are_errors():
    q, k, v, _ = inputs()
    with pytest.raises(BlockedError, match="gate must be one of"):
        gate_attend(q, k, v, gate="tanh")
    with pytest.raises(BlockedError, match="query_scale"):
        softmax_attend(q, k, v, query_scale=torch.ones(16))
    with pytest.raises(BlockedError, match="block_size"):
        softmax_attend(q, k, v, block_size=0)
    with pytest.raises(BlockedError, match="sink"):
        softmax_attend(q, k, v, sink=torch.zeros(3))


def test_a_model_trains_through_the_blocked_form_like_the_reference():
    torch.manual_seed(0)
    layer = scorers.Attention(16, 2, "learned_sink")
    x = torch.randn(2, 9, 16)
    mask = masks(9, 9)["causal"]
    layer(x, mask).square().sum().backward()
    ref = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    assert accelerate(layer, "off") == {"learned_sink": "sdpa"}
    assert accelerate(layer, "auto", block_size=4) == {"learned_sink": "blocked"}
    assert fast_paths(layer) == {"scorer": "blocked"}
    layer(x, mask).square().sum().backward()
    for a, p in zip(ref, layer.parameters()):
        assert (a - p.grad).abs().max().item() <= 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ssa", "sigmoid", "entmax15", "entmax_bisect", "softpick",
                                  "adaptive_temperature", "cog_signed", "sa_softmax",
                                  "stick_breaking"])
def test_memory_grows_like_the_length(name):
    """Peak memory of forward + backward at L = 4096 with the weights recomputed: well below one
    (H, L, L) matrix, and growing from L = 2048 by less than the 4x of a quadratic."""
    from tasks.bench import cpu_peak_bytes

    scorer = make_scorer(name, num_heads=2)
    accelerate(scorer, "blocked")
    peaks = {}
    for length in (2048, 4096):
        q, k, v = (torch.randn(1, 2, length, 16) for _ in range(3))
        mask = torch.ones(length, length, dtype=torch.bool).tril()[None, None]

        def step():
            qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
            scorer.attend(qq, kk, vv, mask).sum().backward()

        step()      # the first call checks the mask against an (L, L) triangle, once per mask
        peaks[length] = cpu_peak_bytes(step)
    square = 2 * 4096 * 4096 * 4
    assert peaks[4096] <= square / 3, peaks
    assert peaks[4096] <= 3.2 * peaks[2048], peaks


@pytest.mark.parametrize("name,kwargs", ROW_STATISTICS, ids=lambda x: str(x))
@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["rising", "falling"])
def test_row_statistics_survive_far_apart_blocks(name, kwargs, sign):
    """Logits of -1000 in the first key block and +1000 in the last (and the reverse), rows that
    see only one side, over key blocks of 2: the running maximum, minimum and sums rescale what
    came before; the weights equal the reference's (sa_softmax's plain weights s p to the
    rounding of s)."""
    scorer = make_scorer(name, kwargs).double()
    q = torch.ones(1, 1, 3, 1, dtype=torch.float64)
    k = sign * torch.tensor([-1000.0, -999.0, 1000.0, 999.0], dtype=torch.float64).view(1, 1, 4, 1)
    v = torch.eye(4, dtype=torch.float64)[None, None]
    mask = torch.tensor([[True] * 4, [True, True, False, False], [False, False, True, True]])
    mask = mask[None, None]
    want = scorer.weights_from_logits(q @ k.transpose(-1, -2), mask)
    got = blocked_attend(spec_for(scorer.kernels().blocked, q, k, mask), q, k, v, mask, key_block=2,
                         recompute=True)
    assert torch.isfinite(got).all()
    assert (got - want).abs().max().item() <= 1e-12 * max(1.0, want.abs().max().item())


@pytest.mark.slow
@pytest.mark.parametrize("length", [512, 2048], ids=["within_budget", "recomputed"])
@pytest.mark.parametrize("name,kwargs", ROW_STATISTICS + [("sparsemax", {}), ("entmax15", {}),
                                                          ("entmax_bisect", {}), ("sigmoid", {})],
                         ids=lambda x: str(x))
def test_blocked_equals_reference_at_long_rows(name, kwargs, length):
    """Causal and padded causal, the default tiling: at 512 keys the first query blocks keep
    their state within KEEP_BUDGET and the later ones make it again, at 2,048 keys every tile is
    made again; outputs and gradients equal the reference's in fp64."""
    scorer = make_scorer(name, kwargs).double()
    gen = torch.Generator().manual_seed(3)
    q, k, v, g = (torch.randn(1, 2, length, 16, generator=gen, dtype=torch.float64)
                  for _ in range(4))
    causal = torch.ones(length, length, dtype=torch.bool).tril()[None, None]
    plan = plan_tiles(q, k, causal)
    assert (0 < len(plan.kept) < len(plan.blocks)) if length == 512 else not plan.kept
    valid = torch.arange(length) < length * 3 // 4
    for mask in (causal, causal & valid):
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        got = run(blocked(scorer, None, None, None), scorer, q, k, v, g, mask)
        assert_close(ref, got, f"{name}{kwargs} {length}", tol=1e-10)


def test_sa_softmax_takes_keys_laid_out_as_heads_of_a_projection():
    """(B, L, H, D) memory viewed as (B, H, L, D), as attention layers pass q and k: lo's and
    hi's gradients reach the right keys."""
    scorer = make_scorer("sa_softmax").double()
    q, k, v, g = (t.transpose(1, 2).contiguous().transpose(1, 2)
                  for t in inputs(torch.float64))
    assert not k.is_contiguous()
    for mask_name, mask in masks().items():
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        for tiling in TILINGS[:2]:
            got = run(blocked(scorer, *tiling), scorer, q, k, v, g, mask)
            assert_close(ref, got, f"sa_softmax {mask_name} {tiling}", tol=1e-12)


@pytest.mark.parametrize("name,kwargs", ROW_STATISTICS, ids=lambda x: str(x))
def test_more_queries_than_keys(name, kwargs):
    """17 queries over 9 keys (stick_breaking's first queries then sit before every key): every
    mask, recomputed and kept."""
    scorer = make_scorer(name, kwargs).double()
    q, k, v, g = inputs(torch.float64, 17, 9)
    for mask_name, mask in masks(17, 9).items():
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        for tiling in TILINGS[:2]:
            got = run(blocked(scorer, *tiling), scorer, q, k, v, g, mask)
            assert_close(ref, got, f"{name}{kwargs} 17x9 {mask_name} {tiling}", tol=1e-12)
