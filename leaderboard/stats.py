"""Leaderboard statistics: two-stage bootstrap over seeds and items, paired tests, Holm, tiers.

Every random draw comes from a generator seeded by a hash of what is being estimated
(:func:`rng_for`), so a number does not depend on the order of computation or on which other
scorers are in the release, and republishing the same records gives the same bytes.

Only numpy is needed; scipy is used by the tests as an independent reference.
"""
from __future__ import annotations

import hashlib
import itertools
from typing import Callable, Mapping, Sequence

import numpy as np

ALPHA = 0.05
N_BOOT = 4000
# Items with at most this many distinct (joint) values are resampled exactly through multinomial
# counts; otherwise exactly by index up to EXACT_ITEM_DRAWS draws (replicates x items x series),
# and beyond that from the normal limit (see item_resample_means).
MULTINOMIAL_MAX_VALUES = 256
EXACT_ITEM_DRAWS = 2_000_000
_CHUNK = 4_000_000


def rng_for(*key) -> np.random.Generator:
    """A generator seeded by the SHA-256 of ``key`` (joined by ``|``): stable across runs."""
    digest = hashlib.sha256("|".join(map(str, key)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def item_resample_means(x: np.ndarray, k: int, rng: np.random.Generator,
                        exact_draws: int = EXACT_ITEM_DRAWS) -> np.ndarray:
    """``k`` bootstrap replicates of the item mean of each row of ``x`` (shape (m, n)), sharing the
    resampled item indices across rows so that rows stay paired. Returns shape (k, m).

    Three ways to the same distribution, cheapest first:
    - few distinct item columns (0/1 outcomes of a few scorers): resampling n items with
      replacement is a multinomial draw of how often each distinct column is picked, so
      mean* = counts · columns / n, exactly;
    - ``k * n * m <= exact_draws``: resample item indices;
    - otherwise the central-limit law of the resampled mean, N(x̄, Σ/n) with Σ the (ddof=0)
      covariance of the rows' items, which the exact bootstrap approaches for the item counts
      where it is used (hundreds of continuous-valued items and more).
    Rows that are all NaN (a series absent at this seed) give NaN.
    """
    x = np.asarray(x, dtype=np.float64)
    m, n = x.shape
    out = np.full((k, m), np.nan)
    present = ~np.isnan(x).all(axis=1)
    if k == 0 or not present.any():
        return out
    xp = x[present]
    if n == 1:
        out[:, present] = xp[:, 0]
        return out
    mp = xp.shape[0]
    distinct = _distinct_columns(xp)
    if distinct is not None:
        columns, inverse = distinct
        share = np.bincount(inverse, minlength=columns.shape[1]) / n
        counts = rng.multinomial(n, share, size=k)
        out[:, present] = counts @ columns.T / n
        return out
    if k * n * mp <= exact_draws:
        step = max(1, _CHUNK // (n * mp))
        rows = []
        for start in range(0, k, step):
            idx = rng.integers(0, n, size=(min(step, k - start), n))
            rows.append(xp[:, idx].mean(axis=2).T)
        out[:, present] = np.concatenate(rows, axis=0)
        return out
    mean = xp.mean(axis=1)
    centred = xp - mean[:, None]
    cov = centred @ centred.T / n**2
    w, v = np.linalg.eigh(cov)
    scale = v * np.sqrt(np.clip(w, 0.0, None))
    out[:, present] = mean + rng.standard_normal((k, mp)) @ scale.T
    return out


def _distinct_columns(x: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(distinct columns of ``x``, index of each column's distinct column), or None when there are
    more than MULTINOMIAL_MAX_VALUES of them. Rows are coded one at a time (1-D uniques) and the
    codes combined into one integer key per column, which is far cheaper than a 2-D unique."""
    key = np.zeros(x.shape[1], dtype=np.int64)
    radix = 1
    for row in x:
        values, code = np.unique(row, return_inverse=True)
        radix *= len(values)
        if len(values) > MULTINOMIAL_MAX_VALUES or radix > 2**62:
            return None
        key = key * len(values) + np.ravel(code)
    keys, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if len(keys) > MULTINOMIAL_MAX_VALUES:
        return None
    return x[:, first], np.ravel(inverse)


def hierarchical_bootstrap(groups: Sequence[np.ndarray], n_boot: int, rng: np.random.Generator,
                           exact_draws: int = EXACT_ITEM_DRAWS) -> np.ndarray:
    """Replicates of the two-stage (seeds, then items within seeds) bootstrap of a grand mean.

    ``groups[s]`` is an (m, n_s) array: the outcomes of m series (scorers) on the n_s items of seed
    s, items aligned across series; n_s = 1 when only the seed-level value is known, which reduces
    this to the ordinary bootstrap over seeds. A row of NaN marks a series absent at that seed.

    Stage 1 draws S seeds with replacement; stage 2 resamples the items of each drawn seed (the
    same indices for every series). Replicate b of series r:

        θ*_br = mean over drawn seeds j where r is present of  (1/n_sj) Σ_i x_r[s_j, i*]

    Returns an (n_boot, m) array (NaN where a replicate drew no seed of that series).
    """
    groups = [np.atleast_2d(np.asarray(g, dtype=np.float64)) for g in groups]
    s = len(groups)
    m = groups[0].shape[0]
    pick = rng.integers(0, s, size=(n_boot, s))
    draws = np.empty((n_boot, s, m))
    for seed_index, g in enumerate(groups):
        where = pick == seed_index
        draws[where] = item_resample_means(g, int(where.sum()), rng, exact_draws)
    with np.errstate(invalid="ignore"):
        counts = (~np.isnan(draws)).sum(axis=1)
        sums = np.nansum(draws, axis=1)
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def percentile_ci(replicates: np.ndarray, alpha: float = ALPHA) -> tuple[float, float]:
    """The percentile interval [q_{α/2}, q_{1-α/2}] of bootstrap replicates (NaNs dropped)."""
    r = np.asarray(replicates, dtype=np.float64)
    r = r[~np.isnan(r)]
    if r.size == 0:
        return (float("nan"), float("nan"))
    lo, hi = np.quantile(r, [alpha / 2, 1 - alpha / 2])
    return (float(lo), float(hi))


def bootstrap_ci(values: Sequence[float], n_boot: int = N_BOOT, alpha: float = ALPHA,
                 rng: np.random.Generator | None = None) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean of ``values`` (one number per seed)."""
    rng = rng if rng is not None else rng_for("bootstrap_ci")
    groups = [np.array([[v]]) for v in values]
    return percentile_ci(hierarchical_bootstrap(groups, n_boot, rng)[:, 0], alpha)


def bootstrap_pvalue(differences: np.ndarray) -> float:
    """Two-sided bootstrap p-value of "mean difference = 0" from replicates of the difference:
    p = 2·min(#(d* ≤ 0) + 1, #(d* ≥ 0) + 1) / (B + 1), capped at 1; the smallest α at which the
    percentile interval excludes 0. Identical series give d* = 0 everywhere and p = 1."""
    d = np.asarray(differences, dtype=np.float64)
    d = d[~np.isnan(d)]
    if d.size == 0:
        return float("nan")
    b = d.size
    lower = (np.count_nonzero(d <= 0) + 1) / (b + 1)
    upper = (np.count_nonzero(d >= 0) + 1) / (b + 1)
    return float(min(1.0, 2 * min(lower, upper)))


def paired_bootstrap_pvalue(groups: Sequence[np.ndarray], n_boot: int = N_BOOT,
                            rng: np.random.Generator | None = None) -> tuple[float, float]:
    """Paired two-stage bootstrap test of two series. ``groups[s]`` is a (2, n_s) array (series A
    and B on the same items of seed s). Returns (mean difference A - B, two-sided p)."""
    rng = rng if rng is not None else rng_for("paired_bootstrap")
    diffs = [np.atleast_2d(g)[0:1] - np.atleast_2d(g)[1:2] for g in groups]
    observed = float(np.mean([d.mean() for d in diffs]))
    reps = hierarchical_bootstrap(diffs, n_boot, rng)[:, 0]
    return observed, bootstrap_pvalue(reps)


def sign_flip_pvalue(differences: Sequence[float], n_perm: int = 100_000,
                     rng: np.random.Generator | None = None) -> float:
    """Two-sided sign-flip permutation test of "mean paired difference = 0" over seeds.

    Exact (all 2^n sign patterns) for n ≤ 16, Monte Carlo otherwise. Under the null the two
    scorers are exchangeable within a seed, so each seed's difference is equally likely to carry
    either sign. The smallest attainable p is 2^(1-n): 0.25 at three seeds.
    """
    d = np.asarray(differences, dtype=np.float64)
    n = d.size
    if n == 0:
        return float("nan")
    observed = abs(d.mean())
    if n <= 16:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
    else:
        rng = rng if rng is not None else rng_for("sign_flip")
        signs = rng.choice((1.0, -1.0), size=(n_perm, n))
    stats = np.abs(signs @ d) / n
    tol = 1e-12 * max(1.0, observed)
    return float(np.mean(stats >= observed - tol))


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (NaNs are not part of the family and stay NaN).

    Sort the m p-values ascending p_(1) ≤ ... ≤ p_(m); adjusted p_(i) = max_{j ≤ i} min(1,
    (m - j + 1) p_(j)). Reject at level α where the adjusted p ≤ α.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    if valid.size == 0:
        return out
    m = valid.size
    order = valid[np.argsort(p[valid], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


def assign_tiers(scores: Mapping[str, float], higher_is_better: bool,
                 pvalue: Callable[[str, str], float],
                 alpha: float = ALPHA) -> dict[str, int | None]:
    """Tie groups, top down. Among the scorers not yet placed, the leader is the one with the best
    score; every other unplaced scorer is tested against the leader (``pvalue(other, leader)``),
    the p-values are Holm-corrected within that step, and the scorers whose adjusted p is above
    ``alpha`` (or that cannot be tested: p is NaN) share the leader's tier. Repeat with the rest.
    Scorers with a NaN score get no tier (None).
    """
    sign = -1.0 if higher_is_better else 1.0
    remaining = sorted((name for name, v in scores.items() if not np.isnan(v)),
                       key=lambda name: (sign * scores[name], name))
    tiers: dict[str, int | None] = {name: None for name in scores}
    tier = 0
    while remaining:
        tier += 1
        leader, others = remaining[0], remaining[1:]
        adjusted = holm([pvalue(other, leader) for other in others])
        members = {leader} | {o for o, p in zip(others, adjusted) if np.isnan(p) or p > alpha}
        for name in members:
            tiers[name] = tier
        remaining = [name for name in remaining if name not in members]
    return tiers


def rank_replicates(replicates: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Competition ranks (1 = best; rank = 1 + number of strictly better series) of each series in
    each bootstrap replicate; (B, m) -> (B, m), NaN where the series has no value."""
    r = np.asarray(replicates, dtype=np.float64)
    better = r[:, None, :] > r[:, :, None] if higher_is_better else r[:, None, :] < r[:, :, None]
    ranks = 1.0 + better.sum(axis=2)
    ranks[np.isnan(r)] = np.nan
    return ranks


def rank_interval(ranks: np.ndarray, alpha: float = ALPHA) -> tuple[float, float]:
    """The central (1 - α) interval of one series' bootstrap ranks, as ranks that occurred."""
    r = np.asarray(ranks, dtype=np.float64)
    r = r[~np.isnan(r)]
    if r.size == 0:
        return (float("nan"), float("nan"))
    lo, hi = np.quantile(r, [alpha / 2, 1 - alpha / 2], method="inverted_cdf")
    return (float(lo), float(hi))
