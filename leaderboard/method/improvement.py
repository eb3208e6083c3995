"""The overall's headline: the probability of improvement over the baseline, averaged over tasks
(rliable, Agarwal et al. 2021), with the metric's practical size, and its stratified bootstrap.

For one headline metric of one task, with seeds x_1..x_n of the scorer and y_1..y_m of the
baseline, signed so that larger is better, and the metric's minimum effect δ
(:mod:`leaderboard.method.resolution`):

    P(X > Y) = 1/(n m) Σ_i Σ_j ( [x_i - y_j > δ] + ½ [|x_i - y_j| <= δ] )

A task's value is the mean over its headline metrics of the overall (0 where every cell failed),
the headline the mean over the tasks the scorer ran. The baseline scores ½ on every task. It
depends on each task only through comparisons with the baseline, so no task weighs more than
1/K however widely its values spread, and a scorer's value does not move when others are added.

Interval: the percentile bootstrap stratified by task (each replicate resamples, per task, the
baseline's seeds once and each scorer's seeds with replacement, the same seed draw for all the
task's metrics; generators seeded by what they resample, so adding a scorer changes no other
scorer's draws). The two-sided bootstrap p of two scorers' difference is 2 min(P*(d <= 0),
P*(d >= 0)) over the replicates, with the same baseline draws for both.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import stats
from .table_stats import better_sign

N_BOOT = 2000


@dataclass
class TaskValues:
    """One task's headline metrics for one scorer: the seeds (sorted), per metric the signed values
    at those seeds (NaN where a seed has none) and the metric's minimum effect."""

    seeds: list[int]
    values: dict[str, np.ndarray] = field(default_factory=dict)
    failed: bool = False


def task_values(rows: list[dict], metrics: list[str]) -> TaskValues:
    """``rows``: one scorer's rows of one task; signed values of ``metrics`` by seed."""
    use = [r for r in rows if r["metric"] in metrics and r["n"] > 0]
    seeds = sorted({k for r in use for k in r["seeds"]})
    out = TaskValues(seeds)
    for r in use:
        by_seed = dict(zip(r["seeds"], r["values"]))
        out.values[r["metric"]] = better_sign(r["direction"]) * np.array(
            [by_seed.get(k, math.nan) for k in seeds], dtype=np.float64)
    out.failed = not use and any(r["n_failed"] + r["n_null"] > 0
                                 for r in rows if r["metric"] in metrics)
    return out


def probability(x: np.ndarray, y: np.ndarray, effect: float) -> np.ndarray:
    """P(X > Y) with ties within ``effect`` counting half, over the last axis of ``x`` (…, n) and
    ``y`` (…, m); NaN entries are left out (NaN when no pair is left)."""
    d = x[..., :, None] - y[..., None, :]
    valid = ~np.isnan(d)
    tol = effect + stats.TIE_TOL * np.maximum(1.0, np.nanmax(np.abs(d), initial=0.0))
    score = np.where(d > tol, 1.0, np.where(np.abs(d) <= tol, 0.5, 0.0))
    with np.errstate(invalid="ignore"):
        return np.where(valid, score, 0.0).sum(axis=(-2, -1)) / valid.sum(axis=(-2, -1))


def task_probability(scorer: TaskValues, base: TaskValues, effects: dict[str, float],
                     scorer_draw: np.ndarray | None = None,
                     base_draw: np.ndarray | None = None) -> np.ndarray | float:
    """The task's P(X > Y), the mean over its metrics; with index draws (replicates, seeds) the
    value of each replicate."""
    if scorer.failed:
        return 0.0 if scorer_draw is None else np.zeros(len(scorer_draw))
    per_metric = []
    for metric in sorted(scorer.values):
        if metric not in base.values:
            continue
        x, y = scorer.values[metric], base.values[metric]
        if scorer_draw is not None:
            x, y = x[scorer_draw], y[base_draw]
        per_metric.append(probability(x, y, effects[metric]))
    if not per_metric:
        return math.nan if scorer_draw is None else np.full(len(scorer_draw), np.nan)
    return np.mean(per_metric, axis=0) if scorer_draw is not None else float(np.mean(per_metric))


def draws(n_seeds: int, *key) -> np.ndarray:
    """(N_BOOT, n_seeds) seed indices drawn with replacement, from a generator seeded by ``key``."""
    return stats.rng_for("improvement", *key).integers(0, n_seeds, size=(N_BOOT, n_seeds))


def bootstrap_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided bootstrap p of mean(a) = mean(b) from paired replicates ``a`` and ``b``."""
    d = a - b
    tol = stats.TIE_TOL * max(1.0, float(np.max(np.abs(a))), float(np.max(np.abs(b))))
    if np.all(np.abs(d) <= tol):
        return 1.0
    return float(min(1.0, 2 * min(np.mean(d <= tol), np.mean(d >= -tol))))
