"""Leaderboard statistics at a few seeds: t intervals, paired tests, Holm and Benjamini-Hochberg,
power, tiers in score order, rank intervals, and the items-only bootstrap.

The unit of replication is the seed (one trained model): a row's interval and its comparison with
the baseline use one number per seed, the seed's mean over its evaluation items, so item noise
enters through each seed's mean and is not counted twice.

- Interval of a mean over n seeds: Student t, mean ± t_{n-1, 1-α/2} · s / √n (``scipy.stats.t``).
- Interval of a mean waiting time (steps to a target: positive, right-skewed): the modified Cox
  interval of a log-normal mean (:func:`lognormal_mean_interval`).
- Paired comparison of two scorers on the seeds both ran: the paired t test on the per-seed
  differences d_k = a_k - b_k (``scipy.stats.ttest_rel``), with the exact sign-flip permutation
  test (``scipy.stats.permutation_test``) as the distribution-free companion, whose smallest
  attainable p is 2^(1-n).
- Ties: differences within the numeric tolerance ``TIE_TOL`` are zero, so identical series get
  p = 1 and a constant non-zero difference (a deterministic metric) p = 0; whether an effect is
  big enough to name is the caller's rule (the metric's ``min_effect``).
- Corrections: Benjamini-Hochberg from ``statsmodels.stats.multitest.multipletests``; Holm as
  there (see :func:`holm`).
- Power: the smallest difference a two-sided paired t test detects with 80% power at α, given n
  seeds and the standard deviation of the differences (``statsmodels`` ``TTestPower``).

The items-only interval ("given these trained models") is a percentile bootstrap over items whose
draws are shared by every seed when the seeds were evaluated on the same items; its generator is
seeded by a hash of what is estimated (:func:`rng_for`), so republishing gives the same bytes.

Precision: nothing here goes through BLAS or LAPACK (no matrix products, no decompositions); sums
are numpy's fixed-order reductions and scipy's special functions, so a release's numbers are the
same bits on any CPU, BLAS kernel and thread count for the same records and library versions.
``publish --check`` holds a republished release to ``REPRODUCE_RTOL`` (relative) and names what
differs; on the hosts tested it reproduces byte for byte.
"""
from __future__ import annotations

import functools
import hashlib
import math
from typing import Callable, Mapping, Sequence

import numpy as np
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

# The method behind each statistic of a release, by the one name every legend uses for it (the
# column titles of leaderboard.rendering.columns and the markdown method text name these and no
# others).
METHODS = {
    "seed_interval": "Student t interval",
    "speed_interval": "modified Cox interval of a log-normal mean",
    "paired_test": "paired t test",
    "exact_test": "exact sign-flip permutation test",
    "items_interval": "percentile bootstrap over items",
    "family_correction": "Holm",
    "metric_correction": "Benjamini-Hochberg",
    "overall_interval": "Student t interval with Welch-Satterthwaite degrees of freedom",
    "overall_headline_interval": "percentile bootstrap stratified by task",
    "power": "power of the paired t test",
    "anchors": "fixed anchors",
}
ALPHA = 0.05
POWER = 0.8
N_BOOT = 4000
# Differences with |d| <= TIE_TOL * max(1, |scale|) are zero: floating-point noise, not an effect.
TIE_TOL = 1e-9
# What results.json promises given the same records: every number to this relative precision (a
# newer scipy may move a special function's last bits), everything else exactly.
REPRODUCE_RTOL = 1e-9
# The exact sign-flip test enumerates all 2^n sign patterns up to this many seeds.
EXACT_SIGN_FLIP_MAX_N = 16
# Items with at most this many distinct values are resampled exactly through multinomial counts;
# otherwise exactly by index up to EXACT_ITEM_DRAWS draws (replicates x items), and beyond that
# from the normal limit (see item_resample_means).
MULTINOMIAL_MAX_VALUES = 256
EXACT_ITEM_DRAWS = 2_000_000


def rng_for(*key) -> np.random.Generator:
    """A generator seeded by the SHA-256 of ``key`` (joined by ``|``): stable across runs."""
    digest = hashlib.sha256("|".join(map(str, key)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def tolerance(*values: float) -> float:
    """The numeric tolerance below which a difference between ``values`` is zero."""
    scale = max([1.0] + [abs(v) for v in values if math.isfinite(v)])
    return TIE_TOL * scale


# --------------------------------------------------------------------------- seed level


def _row_tolerance(*arrays: np.ndarray) -> np.ndarray:
    """:func:`tolerance` of each row (last axis) of the arrays."""
    scale = np.max([np.max(np.abs(x), axis=-1) for x in arrays], axis=0)
    return TIE_TOL * np.maximum(1.0, scale)


def t_interval(values, alpha: float = ALPHA):
    """The Student t interval mean ± t_{n-1, 1-α/2} · s / √n of the mean of ``values`` (one per
    seed; ``scipy.stats.t``). Rows of a 2-D array are separate means (one interval each). NaN
    below two values; a point interval when the values agree within the tolerance."""
    x = np.asarray(values, dtype=np.float64)
    n = x.shape[-1]
    if n < 2:
        nan = np.full(x.shape[:-1], np.nan)
        return (float(nan), float(nan)) if x.ndim == 1 else (nan, nan)
    mean = x.mean(axis=-1)
    sem = x.std(axis=-1, ddof=1) / math.sqrt(n)
    sem = np.where(sem <= _row_tolerance(x), 0.0, sem)
    q = _t_quantile(n - 1, alpha)
    lo, hi = mean - q * sem, mean + q * sem
    return (float(lo), float(hi)) if x.ndim == 1 else (lo, hi)


def lognormal_mean_interval(values, alpha: float = ALPHA, upper: float = math.inf):
    """The modified Cox interval of the arithmetic mean of positive ``values`` taken as
    log-normal (Zhou & Gao 1997, with Olsson 2005's t quantile): with y = log x, its mean ȳ and
    variance s² over n values,

        exp(ȳ + s²/2 ± t_{n-1, 1-α/2} · √(s²/n + s⁴ / (2(n-1)))),

    the upper end no higher than ``upper``, a bound on every value (a cap), so on their mean.
    For waiting times (steps to a target, where most seeds arrive together and one much later)
    it stays positive and covers the mean where the t interval's symmetric ends do not: at five
    log-normal values with σ = 1 the t interval covers the mean about 83% of the time and its
    lower end is negative about half the time; this one covers it about 93%. NaN below two
    values; a point interval at their mean when they agree within the tolerance."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or np.any(x <= 0):
        raise ValueError(f"lognormal_mean_interval needs positive values in one row, got {x!r}")
    n = x.size
    if n < 2:
        return math.nan, math.nan
    if float(np.max(x) - np.min(x)) <= tolerance(*x):
        mean = float(x.mean())
        return mean, mean
    y = np.array([math.log(v) for v in x])
    var = float(y.var(ddof=1))
    centre = float(y.mean()) + var / 2
    half = _t_quantile(n - 1, alpha) * math.sqrt(var / n + var ** 2 / (2 * (n - 1)))
    return math.exp(centre - half), float(min(math.exp(centre + half), upper))


def t_halfwidth(sd: float, n: int, alpha: float = ALPHA) -> float:
    """Half the width of the Student t interval of a mean of ``n`` values with standard deviation
    ``sd``: t_{n-1, 1-α/2} · sd / √n (NaN below two values)."""
    if n < 2 or not math.isfinite(sd):
        return math.nan
    return _t_quantile(n - 1, alpha) * sd / math.sqrt(n)


@functools.lru_cache(maxsize=None)
def _t_quantile(df: int, alpha: float) -> float:
    return float(sps.t.ppf(1 - alpha / 2, df))


def paired_t(a, b):
    """Two-sided paired t test of mean(a - b) = 0 over seeds: t = d̄ / (s_d / √n) on n - 1
    degrees of freedom, as ``scipy.stats.ttest_rel``; rows of 2-D arrays are separate tests.

    Differences within the tolerance are zero: all zero gives p = 1; a constant non-zero
    difference (no spread, so the t statistic is infinite) gives p = 0. NaN below two pairs."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n = a.shape[-1]
    if n < 2:
        return math.nan if a.ndim == 1 else np.full(a.shape[:-1], np.nan)
    d = a - b
    tol = _row_tolerance(a, b)
    zero = np.all(np.abs(d) <= tol[..., None], axis=-1)
    constant = np.ptp(d, axis=-1) <= tol
    with np.errstate(divide="ignore", invalid="ignore"):
        t = d.mean(axis=-1) / (d.std(axis=-1, ddof=1) / math.sqrt(n))
    p = np.where(zero, 1.0, np.where(constant, 0.0, 2 * sps.t.sf(np.abs(t), n - 1)))
    return float(p) if a.ndim == 1 else p


def sign_flip(a: Sequence[float], b: Sequence[float], rng: np.random.Generator | None = None,
              n_resamples: int = 100_000) -> float:
    """Two-sided sign-flip permutation test of mean(a - b) = 0 (``scipy.stats.permutation_test``,
    paired samples): exact over all 2^n sign patterns up to ``EXACT_SIGN_FLIP_MAX_N`` seeds, Monte
    Carlo beyond. Its smallest value is 2^(1-n): 0.25 at three seeds. Ties as in
    :func:`paired_t`."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.size < 1:
        return math.nan
    if np.all(np.abs(a - b) <= tolerance(*a, *b)):
        return 1.0
    exact = a.size <= EXACT_SIGN_FLIP_MAX_N
    res = sps.permutation_test(
        (a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
        alternative="two-sided", vectorized=True,
        n_resamples=np.inf if exact else n_resamples,
        random_state=None if exact else (rng if rng is not None else rng_for("sign_flip")))
    return float(min(1.0, res.pvalue))


def sign_flip_floor(n: int) -> float:
    """The smallest p the two-sided exact sign-flip test can give at ``n`` pairs, 2^(1-n): above
    α (0.0625 at five seeds) the test cannot reject and is not reported."""
    return 2.0 ** (1 - n)


def _adjust(pvalues: Sequence[float], method: str) -> np.ndarray:
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    valid = ~np.isnan(p)
    if valid.any():
        out[valid] = multipletests(p[valid], method=method)[1]
    return out


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values; NaNs are not part of the family and stay NaN.

    Sorted ascending, adjusted p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)). This is
    ``multipletests(method="holm")`` (the tests check it is), written out because that function
    runs ``gc.collect()`` on every call: about a second per family with a release in memory,
    and a release has thousands of families (tiers and rank intervals)."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    if valid.size == 0:
        return out
    m = valid.size
    order = valid[np.argsort(p[valid], kind="stable")]
    out[order] = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    return out


def benjamini_hochberg(pvalues: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg (false discovery rate) adjusted p-values; NaNs stay NaN."""
    return _adjust(pvalues, "fdr_bh")


def detectable_difference(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest mean difference a two-sided paired t test on ``n`` seeds detects with
    ``power`` at level ``alpha``, when the per-seed differences have standard deviation ``sd``:
    Cohen's d solved by ``TTestPower`` times ``sd``. NaN below two seeds."""
    if n < 2 or not math.isfinite(sd):
        return math.nan
    if sd == 0:
        return 0.0
    return _detectable_d(n, alpha, power) * sd


@functools.lru_cache(maxsize=None)
def _detectable_d(n: int, alpha: float, power: float) -> float:
    return float(TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power,
                                          alternative="two-sided"))


def seeds_needed(effect_in_sd: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Seeds a paired t test needs to detect a difference of ``effect_in_sd`` standard deviations
    of the per-seed differences with ``power`` at ``alpha`` (rounded up)."""
    n = TTestPower().solve_power(effect_size=effect_in_sd, nobs=None, alpha=alpha, power=power,
                                 alternative="two-sided")
    return int(math.ceil(float(np.ravel(n)[0])))


def welch_satterthwaite(variances: Sequence[float], dofs: Sequence[float]) -> float:
    """Degrees of freedom of a sum of independent mean estimates with variances v_j and df_j:
    (Σ v_j)^2 / Σ (v_j^2 / df_j); infinite when every variance is 0."""
    v, df = np.asarray(variances, dtype=np.float64), np.asarray(dofs, dtype=np.float64)
    den = float(np.sum(v**2 / df))
    return float(v.sum() ** 2 / den) if den > 0 else math.inf


def combined_t(means: Sequence[float], variances: Sequence[float], dofs: Sequence[float],
               alpha: float = ALPHA) -> tuple[float, float, float, float]:
    """The mean of independent per-task estimates m_j (each with variance v_j of its mean and df_j
    degrees of freedom): (mean, ci_low, ci_high, two-sided p of mean = 0) with a t law on the
    Welch-Satterthwaite degrees of freedom. A zero total variance gives a point interval and
    p = 0 or 1 (tolerance as in :func:`paired_t`)."""
    m = np.asarray(means, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)
    k = m.size
    mean = float(m.mean())
    var = float(v.sum()) / k**2
    se = math.sqrt(var)
    if se <= tolerance(mean):
        return mean, mean, mean, (1.0 if abs(mean) <= tolerance(mean) else 0.0)
    df = welch_satterthwaite(v, dofs)
    q = float(sps.t.ppf(1 - alpha / 2, df))
    p = float(2 * sps.t.sf(abs(mean) / se, df))
    return mean, mean - q * se, mean + q * se, p


# --------------------------------------------------------------------------- tiers and ranks


def assign_tiers(scores: Mapping[str, float], higher_is_better: bool,
                 pvalue: Callable[[str, str], float],
                 alpha: float = ALPHA) -> dict[str, int | None]:
    """Tiers in score order. Walk the scorers from the best score: the first is the tier's
    leader; every later scorer is compared with the leader (``pvalue(other, leader)``, which
    returns 1 for a difference below the metric's minimum effect and NaN when untestable), the
    p-values Holm-corrected within the step; the tier ends just before the first scorer (in score
    order) whose adjusted p is <= ``alpha``, which leads the next tier. So a later scorer never
    sits in a better tier than an earlier one. Scorers with a NaN score get no tier (None)."""
    sign = -1.0 if higher_is_better else 1.0
    remaining = sorted((name for name, v in scores.items() if not math.isnan(v)),
                       key=lambda name: (sign * scores[name], name))
    tiers: dict[str, int | None] = {name: None for name in scores}
    tier = 0
    while remaining:
        tier += 1
        leader, others = remaining[0], remaining[1:]
        adjusted = holm([pvalue(other, leader) for other in others])
        cut = next((i for i, p in enumerate(adjusted) if not np.isnan(p) and p <= alpha),
                   len(others))
        for name in [leader] + others[:cut]:
            tiers[name] = tier
        remaining = others[cut:]
    return tiers


def rank_intervals(scores: Mapping[str, float], higher_is_better: bool,
                   pvalue: Callable[[str, str], float],
                   alpha: float = ALPHA) -> dict[str, tuple[float, float]]:
    """A rank interval per scorer from its pairwise tests (1 = best): with the scorer's m - 1
    comparisons Holm-corrected, rank_low = 1 + #(scorers significantly better), rank_high =
    m - #(scorers significantly worse). ``pvalue`` as in :func:`assign_tiers`."""
    names = sorted(n for n, v in scores.items() if not math.isnan(v))
    sign = 1.0 if higher_is_better else -1.0
    out = {}
    for s in names:
        others = [o for o in names if o != s]
        adjusted = holm([pvalue(o, s) for o in others])
        better = sum(1 for o, p in zip(others, adjusted)
                     if not np.isnan(p) and p <= alpha and sign * (scores[o] - scores[s]) > 0)
        worse = sum(1 for o, p in zip(others, adjusted)
                    if not np.isnan(p) and p <= alpha and sign * (scores[o] - scores[s]) < 0)
        out[s] = (float(1 + better), float(len(names) - worse))
    return out


# --------------------------------------------------------------------------- items only


def item_resample_means(x: np.ndarray, k: int, rng: np.random.Generator,
                        exact_draws: int = EXACT_ITEM_DRAWS) -> np.ndarray:
    """``k`` bootstrap replicates of the mean of the items ``x`` (1-D), shape (k,).

    Three ways to the same distribution, cheapest first:
    - few distinct values (0/1 outcomes, means of a few seeds' outcomes): resampling n items with
      replacement is a multinomial draw of how often each distinct value v_j is picked, so
      mean* = sum_j c_j v_j / n, exactly;
    - ``k * n <= exact_draws``: resample item indices;
    - otherwise the central-limit law of the resampled mean, N(x̄, s²/n) with s² the (ddof=0)
      variance of the items, which the exact bootstrap approaches for the item counts where it is
      used (hundreds of thousands of continuous-valued draws and more).

    Host-independent: elementwise products and numpy's fixed-order (pairwise) sums only, no BLAS
    or LAPACK, so the replicates are the same bits on every CPU, BLAS kernel and thread count.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    n = x.size
    if k == 0:
        return np.zeros(0)
    if n == 1:
        return np.full(k, x[0])
    values, inverse = np.unique(x, return_inverse=True)
    if len(values) <= MULTINOMIAL_MAX_VALUES:
        share = np.bincount(np.ravel(inverse), minlength=len(values)) / n
        counts = rng.multinomial(n, share, size=k)
        return (counts * values).sum(axis=1) / n
    if k * n <= exact_draws:
        return x[rng.integers(0, n, size=(k, n))].mean(axis=1)
    return x.mean() + x.std() / math.sqrt(n) * rng.standard_normal(k)


def items_interval(items: Sequence[np.ndarray], n_boot: int, rng: np.random.Generator,
                   alpha: float = ALPHA) -> tuple[float, float]:
    """"Given these trained models": the percentile bootstrap interval of the mean over seeds of
    each seed's item mean, resampling items only. When every seed has the same number of items
    (the same evaluation items at every seed) one draw of item indices is shared by all seeds,
    which is the bootstrap of the per-item mean over seeds (the mean over seeds of resampled item
    means is the resampled mean of the items' means over seeds); otherwise each seed's items are
    resampled on their own."""
    groups = [np.asarray(it, dtype=np.float64).ravel() for it in items]
    if not groups or any(g.size == 0 for g in groups):
        return (math.nan, math.nan)
    if len({g.size for g in groups}) == 1:
        reps = item_resample_means(np.stack(groups).mean(axis=0), n_boot, rng)
    else:
        reps = np.mean([item_resample_means(g, n_boot, rng) for g in groups], axis=0)
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    return (float(lo), float(hi))
