"""The leaderboard's statistics against scipy, closed forms and hand-worked examples."""
import math

import numpy as np
import pytest
from scipy import stats as sps

from leaderboard import stats


def test_seed_bootstrap_ci_matches_scipy_percentile():
    values = np.array([0.12, 0.31, 0.18, 0.25, 0.09, 0.22, 0.27, 0.15])
    ours = stats.bootstrap_ci(values, n_boot=20000, rng=stats.rng_for("t1"))
    ref = sps.bootstrap((values,), np.mean, method="percentile", n_resamples=20000,
                        confidence_level=0.95, random_state=np.random.default_rng(7))
    spread = values.max() - values.min()
    assert ours[0] == pytest.approx(ref.confidence_interval.low, abs=0.02 * spread)
    assert ours[1] == pytest.approx(ref.confidence_interval.high, abs=0.02 * spread)
    assert ours[0] < values.mean() < ours[1]


def _two_stage_variance(groups):
    """Closed-form variance of the two-stage bootstrap mean (ddof=0 throughout):
    Var* = (1/S) [ (1/S) Σ (x̄_s - x̄)² + (1/S) Σ σ_s² / n_s ]."""
    means = np.array([g.mean() for g in groups])
    within = np.array([g.var() / g.size for g in groups])
    s = len(groups)
    return (np.mean((means - means.mean()) ** 2) + within.mean()) / s


@pytest.mark.parametrize("kind,exact_draws", [
    ("binary", stats.EXACT_ITEM_DRAWS),       # multinomial counts over the distinct values
    ("continuous", 10**9),                    # item indices
    ("continuous", 0),                        # normal limit
])
def test_two_stage_bootstrap_variance_matches_closed_form(kind, exact_draws):
    rng = np.random.default_rng(3)
    if kind == "binary":
        groups = [rng.binomial(1, p, size=300).astype(float) for p in (0.2, 0.35, 0.25, 0.3)]
    else:
        groups = [rng.gamma(2.0, mu, size=300) for mu in (0.2, 0.35, 0.25, 0.3)]
    reps = stats.hierarchical_bootstrap([g[None, :] for g in groups], 20000,
                                        stats.rng_for("t2"), exact_draws=exact_draws)[:, 0]
    assert reps.mean() == pytest.approx(np.mean([g.mean() for g in groups]), rel=0.01)
    assert reps.var() == pytest.approx(_two_stage_variance(groups), rel=0.05)


def test_multinomial_resampling_equals_index_resampling_in_distribution():
    rng = np.random.default_rng(4)
    x = rng.binomial(1, [[0.3], [0.2]], size=(2, 400)).astype(float)  # two paired series
    fast = stats.item_resample_means(x, 10000, stats.rng_for("m1"))
    idx = stats.rng_for("m3").integers(0, 400, size=(10000, 400))
    slow = x[:, idx].mean(axis=2).T
    np.testing.assert_allclose(fast.mean(axis=0), slow.mean(axis=0), atol=2e-3)
    np.testing.assert_allclose(np.cov(fast.T), np.cov(slow.T), rtol=0.05, atol=2e-5)


def test_two_stage_without_items_is_the_seed_bootstrap():
    values = [1.0, 2.0, 4.0]
    reps = stats.hierarchical_bootstrap([np.array([[v]]) for v in values], 20000,
                                        stats.rng_for("t3"))[:, 0]
    # Var of the bootstrap mean over seeds = σ²(ddof=0) / S
    assert reps.var() == pytest.approx(np.var(values) / 3, rel=0.05)
    assert set(np.round(reps * 3).astype(int)) <= set(range(3, 13))


def test_item_resampling_keeps_series_paired():
    x = np.random.default_rng(0).normal(size=(1, 500))
    pair = np.vstack([x, x + 1.0])
    draws = stats.item_resample_means(pair, 200, stats.rng_for("t4"))
    np.testing.assert_allclose(draws[:, 1] - draws[:, 0], 1.0, atol=1e-12)
    normal = stats.item_resample_means(pair, 200, stats.rng_for("t4"), exact_draws=0)
    np.testing.assert_allclose(normal[:, 1] - normal[:, 0], 1.0, atol=1e-9)


def test_paired_bootstrap_strong_effect_and_identical():
    rng = np.random.default_rng(1)
    base = [rng.binomial(1, 0.3, 200).astype(float) for _ in range(3)]
    better = [np.where(rng.random(200) < 0.5, 0.0, b) for b in base]  # errors removed
    n_boot = 2000
    delta, p = stats.paired_bootstrap_pvalue([np.vstack([b2, b1]) for b1, b2 in zip(base, better)],
                                             n_boot, stats.rng_for("t5"))
    assert delta < 0
    assert p <= 2 / (n_boot + 1) + 1e-12
    delta, p = stats.paired_bootstrap_pvalue([np.vstack([b, b]) for b in base], n_boot,
                                             stats.rng_for("t6"))
    assert delta == 0 and p == 1.0


def test_paired_bootstrap_p_matches_normal_theory_for_many_seeds():
    rng = np.random.default_rng(11)
    d = rng.normal(0.0, 1.0, 60)
    d = d - d.mean() + 0.25  # mean difference 0.25
    a, b = d, np.zeros_like(d)
    _, p = stats.paired_bootstrap_pvalue([np.array([[x], [y]]) for x, y in zip(a, b)], 20000,
                                         stats.rng_for("t7"))
    se = d.std() / math.sqrt(d.size)  # the bootstrap's se (ddof=0)
    assert p == pytest.approx(2 * sps.norm.sf(0.25 / se), abs=0.02)


def test_sign_flip_matches_scipy_exact_permutation_test():
    x = np.array([0.31, 0.42, 0.28, 0.39, 0.35, 0.44])
    y = np.array([0.30, 0.36, 0.29, 0.31, 0.30, 0.33])
    ref = sps.permutation_test((x, y), lambda a, b: np.mean(a - b), permutation_type="samples",
                               alternative="two-sided", n_resamples=np.inf)
    assert stats.sign_flip_pvalue(x - y) == pytest.approx(ref.pvalue, abs=1e-12)
    # three seeds that agree: the smallest attainable p, 2^(1-3)
    assert stats.sign_flip_pvalue([0.1, 0.2, 0.3]) == pytest.approx(0.25)
    assert stats.sign_flip_pvalue([0.0, 0.0, 0.0]) == 1.0


def test_holm_hand_worked():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> max so far 0.06
    adjusted = stats.holm([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])
    adjusted = stats.holm([0.2, float("nan"), 0.01])
    np.testing.assert_allclose(adjusted, [0.2, np.nan, 0.02])
    np.testing.assert_allclose(stats.holm([0.5, 0.9]), [1.0, 1.0])


def test_bootstrap_pvalue_definition():
    assert stats.bootstrap_pvalue(np.zeros(99)) == 1.0
    assert stats.bootstrap_pvalue(np.ones(99)) == pytest.approx(2 / 100)
    d = np.concatenate([-np.ones(10), np.ones(89)])
    assert stats.bootstrap_pvalue(d) == pytest.approx(2 * 11 / 100)


def test_tiers_known_answer_with_holm_inside_each_step():
    scores = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 10.0, "e": float("nan")}
    p_vs_leader = {("b", "a"): 0.5, ("c", "a"): 0.001, ("d", "a"): 0.001, ("d", "c"): 0.2}
    tiers = stats.assign_tiers(scores, higher_is_better=False,
                               pvalue=lambda x, leader: p_vs_leader[(x, leader)])
    assert tiers == {"a": 1, "b": 1, "c": 2, "d": 2, "e": None}
    # raw p 0.03 and 0.04 are below 0.05, but Holm over the two gives 0.06: one tier
    raw = {("y", "x"): 0.03, ("z", "x"): 0.04}
    one_tier = stats.assign_tiers({"x": 3, "y": 2, "z": 1}, True,
                                  lambda other, leader: raw[(other, leader)])
    assert one_tier == {"x": 1, "y": 1, "z": 1}
    # an untestable pair (p NaN) cannot be told apart
    untestable = stats.assign_tiers({"x": 1, "y": 5}, False, lambda other, leader: float("nan"))
    assert untestable == {"x": 1, "y": 1}


def test_rank_intervals():
    reps = np.array([[1.0, 2.0, 3.0]] * 50 + [[2.5, 2.0, 3.0]] * 50)
    ranks = stats.rank_replicates(reps, higher_is_better=False)
    assert stats.rank_interval(ranks[:, 0]) == (1.0, 2.0)
    assert stats.rank_interval(ranks[:, 1]) == (1.0, 2.0)
    assert stats.rank_interval(ranks[:, 2]) == (3.0, 3.0)


def test_rng_is_keyed_not_global():
    a = stats.rng_for("ci", "cpu", "t", "m", "s").random(3)
    np.random.seed(123)
    b = stats.rng_for("ci", "cpu", "t", "m", "s").random(3)
    assert (a == b).all()
    assert not (a == stats.rng_for("ci", "cpu", "t", "m", "other").random(3)).all()
