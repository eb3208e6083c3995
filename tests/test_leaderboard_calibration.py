"""Calibration of the leaderboard's seed-level statistics on simulated rows with known truth.

Each row is a scorer's metric over n seeds; a seed's value is the mean of its evaluation items:

    value_k = mu + sigma_seed * z_k + mean_i(sigma_item * e_ki),   z, e ~ N(0, 1)

with fresh items at every seed. "Seed noise dominant": sigma_seed = 1, item variance of the mean
0.02; "item noise dominant": sigma_seed = 0.05 (seed variance 0.0025). The 95% interval must cover
mu in >= 93% of the rows, and under the null (two scorers with the same mu) the raw paired p-value
vs softmax must fall below 0.05 in <= 6% of the rows, before any multiple-testing correction.

The documented failure: the method used up to release 2026-11-29-cpu (a two-stage percentile
bootstrap: seeds, then items within each drawn seed; the paired test read off the same
bootstrap), reconstructed below as the reference, covers mu in about 75% of rows and rejects a
true null about a quarter of the time at three seeds when seed noise dominates.
"""

import numpy as np
import pytest

from leaderboard.method import stats
from leaderboard.method.aggregate import build_board
from leaderboard.publishing.release import canonical
from leaderboard_fakes import load_json, make_record, write_record

N_ITEMS = 50
SETTINGS = {"seed noise dominant": 1.0, "item noise dominant": 0.05}
ROWS = 4000


def simulate(rng, rows, n, sigma_seed, mu=0.5, sigma_item=1.0):
    """(rows, n) seed values and their (rows, n, N_ITEMS) items."""
    items = mu + sigma_seed * rng.standard_normal((rows, n, 1)) + \
        sigma_item * rng.standard_normal((rows, n, N_ITEMS))
    return items.mean(axis=2), items


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("n", [3, 5, 10])
def test_interval_coverage_and_null_rejection(n, setting):
    rng = np.random.default_rng([n, len(setting)])
    a, _ = simulate(rng, ROWS, n, SETTINGS[setting])
    b, _ = simulate(rng, ROWS, n, SETTINGS[setting])
    lo, hi = stats.t_interval(a)
    coverage = np.mean((lo <= 0.5) & (0.5 <= hi))
    rejection = np.mean(stats.paired_t(a, b) < 0.05)
    assert coverage >= 0.93, (n, setting, coverage)
    assert rejection <= 0.06, (n, setting, rejection)
    assert coverage <= 0.97 and rejection >= 0.035    # calibrated, not merely conservative


def old_two_stage(items, b, rng):
    """The former method on one row: (B,) replicates of the two-stage bootstrap mean (seeds drawn
    with replacement, then the items of each drawn seed)."""
    n, m = items.shape
    pick = rng.integers(0, n, size=(b, n))
    idx = rng.integers(0, m, size=(b, n, m))
    return items[pick[:, :, None], idx].mean(axis=(1, 2))


def old_pvalue(reps):
    low = (np.count_nonzero(reps <= 0) + 1) / (reps.size + 1)
    high = (np.count_nonzero(reps >= 0) + 1) / (reps.size + 1)
    return min(1.0, 2 * min(low, high))


def test_the_former_two_stage_bootstrap_fails_at_three_seeds():
    rng = np.random.default_rng(12)
    rows, b = 300, 1000
    _, a = simulate(rng, rows, 3, SETTINGS["seed noise dominant"])
    _, c = simulate(rng, rows, 3, SETTINGS["seed noise dominant"])
    covered = rejected = 0
    for r in range(rows):
        reps = old_two_stage(a[r], b, rng)
        lo, hi = np.quantile(reps, [0.025, 0.975])
        covered += lo <= 0.5 <= hi
        rejected += old_pvalue(old_two_stage(a[r] - c[r], b, rng)) < 0.05
    assert covered / rows < 0.85            # about 0.75: the interval is about [min, max]
    assert rejected / rows > 0.15           # about 0.25 rejections of a true null
    new_a = a.mean(axis=2)
    lo, hi = stats.t_interval(new_a)
    assert np.mean((lo <= 0.5) & (0.5 <= hi)) >= 0.93   # the same rows, the current method


def test_calibration_end_to_end_through_results_json(tmp_path):
    """Records of a task with known truth (every metric mu = 0.5, every scorer equal to softmax)
    through the aggregation ``publish`` runs, into the results.json it writes: the rows' intervals
    and p-values are those of the functions above, and the same coverage and null rejection
    hold (pooled over three and ten seeds)."""
    rng = np.random.default_rng(2026)
    metrics = [f"m{j:03d}" for j in range(200)]
    scorers = ["softmax", "twin_a", "twin_b", "twin_c"]
    specs = {m: {"direction": "lower", "headline": False} for m in metrics}
    truth = {}
    for profile, n in (("three", 3), ("ten", 10)):
        for scorer in scorers:
            values, _ = simulate(rng, len(metrics), n, SETTINGS["seed noise dominant"])
            truth[(profile, scorer)] = values
            for seed in range(n):
                write_record(tmp_path / "results", make_record(
                    "icl_linear", scorer, seed, {m: float(values[j, seed])
                                                 for j, m in enumerate(metrics)},
                    specs=specs, profile=profile))
    path = tmp_path / "results.json"
    path.write_text(canonical(build_board(tmp_path / "results")).to_json(), encoding="utf-8")
    rows = load_json(path)["rows"]
    assert len(rows) == 2 * len(metrics) * len(scorers)
    covered = [r["ci_low"] <= 0.5 <= r["ci_high"] for r in rows]
    nulls = [r["p_vs_baseline"] < 0.05 for r in rows if r["scorer"] != "softmax"]
    assert np.mean(covered) >= 0.93 and np.mean(nulls) <= 0.06, (np.mean(covered), np.mean(nulls))
    row = next(r for r in rows if r["profile"] == "three" and r["scorer"] == "twin_a"
               and r["metric"] == "m007")
    a, base = truth[("three", "twin_a")][7], truth[("three", "softmax")][7]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(stats.t_interval(a), rel=1e-12)
    assert row["p_vs_baseline"] == pytest.approx(stats.paired_t(a, base), rel=1e-12)
    assert not [r for r in rows if r["vs_baseline"] in ("better", "worse")
                and r["p_vs_baseline"] > 0.05]
