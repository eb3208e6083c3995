"""The leaderboard's statistics against scipy, statsmodels, closed forms and hand-worked examples."""
import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from leaderboard.method import stats


def test_t_interval_matches_scipy_and_handles_no_spread():
    values = [0.12, 0.31, 0.18]
    ref = sps.t.interval(0.95, 2, loc=np.mean(values), scale=sps.sem(values))
    assert stats.t_interval(values) == pytest.approx(ref, rel=1e-12)
    assert stats.t_interval([0.5, 0.5, 0.5]) == (0.5, 0.5)
    assert all(math.isnan(x) for x in stats.t_interval([0.5]))


def test_paired_t_matches_ttest_rel():
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 10):
        a, b = rng.normal(0, 1, n), rng.normal(0.3, 1, n)
        assert stats.paired_t(a, b) == pytest.approx(sps.ttest_rel(a, b).pvalue, rel=1e-10)


def test_ties_within_tolerance_and_constant_differences():
    a = np.array([0.0, 2.5e-44, 9.2e-43])
    assert stats.paired_t(a, np.zeros(3)) == 1.0          # floating-point noise is no effect
    assert stats.sign_flip(a, np.zeros(3)) == 1.0
    base = np.array([0.3, 0.4, 0.5])
    assert stats.paired_t(base + 0.1, base) == 0.0        # the same difference at every seed
    assert stats.paired_t(base, base) == 1.0


def test_sign_flip_is_exact_and_bounded_below():
    d = np.array([0.3, 0.1, 0.2])
    assert stats.sign_flip(d, np.zeros(3)) == pytest.approx(0.25)    # 2 / 2^3
    rng = np.random.default_rng(1)
    a, b = rng.normal(0, 1, 6), rng.normal(0, 1, 6)
    signs = np.array(np.meshgrid(*[[1, -1]] * 6)).reshape(6, -1).T
    stat = np.abs(signs @ (a - b)) / 6
    ref = np.mean(stat >= abs(np.mean(a - b)) - 1e-12)
    assert stats.sign_flip(a, b) == pytest.approx(ref)


def test_holm_and_bh_match_statsmodels_and_keep_nans():
    p = [0.01, 0.04, 0.03, float("nan"), 0.2]
    valid = [0.01, 0.04, 0.03, 0.2]
    holm = stats.holm(p)
    bh = stats.benjamini_hochberg(p)
    assert math.isnan(holm[3]) and math.isnan(bh[3])
    np.testing.assert_allclose(np.delete(holm, 3), multipletests(valid, method="holm")[1])
    np.testing.assert_allclose(np.delete(bh, 3), multipletests(valid, method="fdr_bh")[1])
    # hand-worked Holm: sorted 0.01, 0.03, 0.04, 0.2 times 4, 3, 2, 1 -> 0.04, 0.09, 0.09, 0.2
    np.testing.assert_allclose(np.delete(holm, 3), [0.04, 0.09, 0.09, 0.2])


def test_detectable_difference_is_the_80_percent_power_effect():
    d = stats.detectable_difference(0.5, 3)
    power = TTestPower().power(effect_size=d / 0.5, nobs=3, alpha=0.05)
    assert power == pytest.approx(0.8, abs=1e-6)
    # by simulation: the paired t test rejects about 80% of the time at that difference
    rng = np.random.default_rng(2)
    diffs = rng.normal(d, 0.5, size=(20000, 3))
    t = diffs.mean(1) / (diffs.std(1, ddof=1) / math.sqrt(3))
    assert np.mean(2 * sps.t.sf(np.abs(t), 2) <= 0.05) == pytest.approx(0.8, abs=0.015)
    assert stats.seeds_needed(1.0) == 10 and stats.seeds_needed(2.0) == 5
    assert stats.detectable_difference(0.0, 3) == 0.0 and math.isnan(stats.detectable_difference(1, 1))


def test_combined_t_of_independent_tasks():
    means, var, df = [0.4, 0.6], [0.01, 0.04], [2, 4]
    mean, lo, hi, p = stats.combined_t(means, var, df)
    se = math.sqrt(sum(var)) / 2
    nu = sum(var) ** 2 / (var[0] ** 2 / 2 + var[1] ** 2 / 4)
    q = sps.t.ppf(0.975, nu)
    assert (mean, lo, hi) == pytest.approx((0.5, 0.5 - q * se, 0.5 + q * se))
    assert p == pytest.approx(2 * sps.t.sf(0.5 / se, nu))


def test_tiers_walk_in_score_order():
    scores = {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6}
    # c is noisy and cannot be separated from a; b can: the tier still ends at b
    sig = {frozenset("ab"), frozenset("ad"), frozenset("bd"), frozenset("cd")}

    def pvalue(x, y):
        return 0.001 if frozenset((x, y)) in sig else 0.9

    tiers = stats.assign_tiers(scores, True, pvalue)
    assert tiers == {"a": 1, "b": 2, "c": 2, "d": 3}
    order = sorted(scores, key=lambda s: -scores[s])
    assert [tiers[s] for s in order] == sorted(tiers[s] for s in order)
    assert stats.assign_tiers({"a": 1.0, "b": float("nan")}, True, pvalue)["b"] is None


def test_tiers_use_holm_within_the_step():
    scores = {"a": 3.0, "b": 2.0, "c": 1.0}
    p = {frozenset("ab"): 0.03, frozenset("ac"): 0.001, frozenset("bc"): 0.5}
    # raw 0.03 <= 0.05 but Holm: 0.001*2 = 0.002, then max(0.002, 0.03*1) = 0.03 -> b leaves
    assert stats.assign_tiers(scores, True, lambda x, y: p[frozenset((x, y))]) == {
        "a": 1, "b": 2, "c": 2}
    p[frozenset("ab")] = 0.04
    p[frozenset("ac")] = 0.03
    # Holm: 0.03*2 = 0.06 and 0.06 -> neither separated
    assert stats.assign_tiers(scores, True, lambda x, y: p[frozenset((x, y))]) == {
        "a": 1, "b": 1, "c": 1}


def test_rank_intervals_from_pairwise_tests():
    scores = {"a": 3.0, "b": 2.0, "c": 1.0}
    p = {frozenset("ab"): 0.5, frozenset("ac"): 0.001, frozenset("bc"): 0.001}
    ranks = stats.rank_intervals(scores, True, lambda x, y: p[frozenset((x, y))])
    assert ranks == {"a": (1, 2), "b": (1, 2), "c": (3, 3)}


def test_items_interval_shares_draws_across_seeds():
    rng = np.random.default_rng(3)
    items = rng.normal(0, 1, 500)
    seeds = [items + 0.1 * k for k in range(3)]   # the same items at every seed, shifted
    lo, hi = stats.items_interval(seeds, 8000, stats.rng_for("items"))
    se = items.std() / math.sqrt(500)   # shared items: the seed shift does not add variance
    assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.05)
    assert lo < np.mean(seeds) < hi


def test_multinomial_resampling_equals_index_resampling_in_distribution():
    rng = np.random.default_rng(4)
    x = rng.binomial(1, 0.3, size=400).astype(float)
    fast = stats.item_resample_means(x, 20000, stats.rng_for("m1"))
    slow = x[stats.rng_for("m3").integers(0, 400, size=(20000, 400))].mean(axis=1)
    assert fast.mean() == pytest.approx(slow.mean(), abs=1e-3)
    assert fast.var() == pytest.approx(slow.var(), rel=0.05)
    assert fast.var() == pytest.approx(x.var() / 400, rel=0.05)   # the bootstrap variance


def test_normal_limit_matches_index_resampling_in_distribution():
    x = np.random.default_rng(5).gamma(2.0, size=3000)
    limit = stats.item_resample_means(x, 20000, stats.rng_for("n1"), exact_draws=0)
    exact = stats.item_resample_means(x, 20000, stats.rng_for("n2"), exact_draws=10**9)
    assert limit.mean() == pytest.approx(exact.mean(), rel=1e-3)
    assert limit.std() == pytest.approx(exact.std(), rel=0.03)


def test_shared_items_bootstrap_is_the_bootstrap_of_the_per_item_mean():
    """Resampling the same item indices in every seed and averaging the seeds' resampled means
    is, replicate by replicate, resampling the items' means over seeds."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=(4, 300))
    idx = rng.integers(0, 300, size=(50, 300))
    joint = x[:, idx].mean(axis=2).mean(axis=0)
    per_item = x.mean(axis=0)[idx].mean(axis=1)
    np.testing.assert_allclose(joint, per_item, rtol=1e-13)


def test_rng_is_keyed_not_global():
    a = stats.rng_for("x", 1).random(3)
    np.random.seed(0)
    b = stats.rng_for("x", 1).random(3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, stats.rng_for("x", 2).random(3))


def test_lognormal_mean_interval_by_hand_and_at_its_bounds():
    # entmax15's steps to icl_linear's target: logs 7.207860 (twice), 7.170120, 7.467371,
    # 9.674074; mean 7.745457, variance 4.705917 / 4 = 1.176479; centre 7.745457 + 0.588240 =
    # 8.333697; half 2.776445 * sqrt(1.176479 / 5 + 1.176479^2 / 8) = 2.776445 * 0.638990 = 1.774118
    steps = [1350, 1300, 1350, 1750, 15900]
    lo, hi = stats.lognormal_mean_interval(steps)
    assert (lo, hi) == pytest.approx((math.exp(8.333697 - 1.774118),
                                      math.exp(8.333697 + 1.774118)), rel=1e-5)
    assert (round(lo), round(hi)) == (706, 24534)
    assert 0 < lo < np.mean(steps) < hi
    assert stats.t_interval(steps)[0] < 0             # what the t interval says of the same steps
    assert stats.lognormal_mean_interval(steps, upper=20000) == (lo, 20000.0)
    assert stats.lognormal_mean_interval([500, 500]) == (500.0, 500.0)
    assert all(math.isnan(x) for x in stats.lognormal_mean_interval([500]))
    with pytest.raises(ValueError, match="positive"):
        stats.lognormal_mean_interval([0, 100])


@pytest.mark.parametrize("sigma", [0.3, 1.0])
def test_lognormal_mean_interval_covers_the_mean_of_skewed_steps(sigma):
    """Five log-normal draws: the interval covers the population mean exp(μ + σ²/2) at about its
    95%, where at σ = 1 the t interval covers it about 83% of the time."""
    rng = np.random.default_rng(7)
    mu, n, trials = math.log(2000), 5, 4000
    mean = math.exp(mu + sigma ** 2 / 2)
    draws = rng.lognormal(mu, sigma, (trials, n))
    cox = np.array([stats.lognormal_mean_interval(x) for x in draws])
    t_lo, t_hi = stats.t_interval(draws)
    covered = np.mean((cox[:, 0] <= mean) & (mean <= cox[:, 1]))
    assert 0.925 <= covered <= 0.975
    assert (cox[:, 0] > 0).all()
    if sigma == 1.0:
        assert np.mean((t_lo <= mean) & (mean <= t_hi)) < 0.87
