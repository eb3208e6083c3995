"""The statistics of one table, a (profile, task, metric) with one row per scorer: mean, std and
intervals over seeds, the paired comparison with the baseline, tiers and rank intervals, and
whether the metric is informative at the profile (see :mod:`leaderboard.method.aggregate` for the
rules). A descriptive table (probe and cost tracks) gets no tiers or ranks."""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from . import informative, resolution, stats
from .board import DESCRIPTIVE_TRACKS


@dataclass
class Series:
    """One scorer's observations of one metric in one task: seed -> (value, items or None)."""

    label: str
    by_seed: dict[int, tuple[float, np.ndarray | None]] = field(default_factory=dict)

    def mean(self) -> float:
        return float(np.mean([v for v, _ in self.by_seed.values()])) if self.by_seed else math.nan

    def values(self, seeds: list[int]) -> np.ndarray:
        return np.array([self.by_seed[k][0] for k in seeds], dtype=np.float64)


def better_sign(direction: str) -> float:
    return 1.0 if direction == "higher" else -1.0


def metric_stats(profile: str, task: str, metric: str, direction: str, min_effect: float,
                 descriptive: bool, series: list[Series], n_boot: int, alpha: float,
                 baseline: str, bounds: tuple[float, float] = (-math.inf, math.inf),
                 baseline_means: dict[str, float] | None = None) -> dict:
    """Per-scorer statistics, comparisons to the baseline, tiers and rank intervals of one
    metric. A descriptive metric (probe and cost tracks) gets no tiers or ranks. Intervals are
    clipped to ``bounds``, the values the metric can take (the method says so)."""
    out: dict[str, dict] = {}
    base = next((s for s in series if s.label == baseline), None)
    effect, effect_rule = resolution.min_effect(
        task, metric, min_effect, base.mean() if base is not None else math.nan, baseline_means)
    for s in series:
        row = _series_stats(s, effect, n_boot, alpha, (profile, task, metric), bounds)
        row["min_effect_rule"] = effect_rule
        if base is not None and s is not base:
            _compare_with_baseline(row, s, base, alpha)
        out[s.label] = row
    if not descriptive:
        _rank(out, series, direction == "higher", effect, alpha)
    return out


def _series_stats(s: Series, effect: float, n_boot: int, alpha: float,
                  where: tuple[str, str, str], bounds: tuple[float, float]) -> dict:
    """One scorer's mean, std, t interval over seeds and bootstrap interval over items."""
    seeds = sorted(s.by_seed)
    values = s.values(seeds)
    items = [s.by_seed[k][1] for k in seeds]
    row = {"n": len(seeds), "seeds": seeds, "values": values.tolist(), "mean": s.mean(),
           "std": float(np.std(values, ddof=1)) if len(values) > 1 else math.nan,
           "ci_low": math.nan, "ci_high": math.nan, "ci_method": "",
           "ci_items_low": math.nan, "ci_items_high": math.nan,
           "n_items": sum(len(it) for it in items if it is not None),
           "min_effect": effect, "delta_vs_baseline": math.nan, "p_vs_baseline": math.nan,
           "p_signflip": math.nan, "n_paired": 0, "sd_paired": math.nan,
           "detectable_vs_baseline": math.nan, "tier": None,
           "rank_low": math.nan, "rank_high": math.nan}
    if len(seeds) >= 2:
        t_ci = stats.t_interval(values, alpha)
        row["ci_low"], row["ci_high"] = _within(t_ci, bounds)
        row["ci_method"] = "t over seeds"
        if (row["ci_low"], row["ci_high"]) != t_ci:
            row["ci_method"] += f", clipped to the metric's range [{bounds[0]:g}, {bounds[1]:g}]"
    if seeds and all(it is not None for it in items):
        row["ci_items_low"], row["ci_items_high"] = _within(stats.items_interval(
            items, n_boot, stats.rng_for("items", *where, s.label), alpha), bounds)
    return row


def _within(interval: tuple[float, float], bounds: tuple[float, float]) -> tuple[float, float]:
    low, high = interval
    return float(min(max(low, bounds[0]), bounds[1])), float(max(min(high, bounds[1]), bounds[0]))


def _compare_with_baseline(row: dict, s: Series, base: Series, alpha: float) -> None:
    """The paired comparison of ``s`` with the baseline over the seeds both have."""
    common = sorted(set(s.by_seed) & set(base.by_seed))
    row["n_paired"] = len(common)
    if common:
        a, b = s.values(common), base.values(common)
        row["delta_vs_baseline"] = float(np.mean(a - b))
    if len(common) >= 2:
        row["degenerate_pair"] = informative.comparison_degenerate(
            a.tolist(), b.tolist(), s.label, base.label)
        row["p_vs_baseline"] = stats.paired_t(a, b)
        if stats.sign_flip_floor(len(common)) <= alpha:
            row["p_signflip"] = stats.sign_flip(a, b)
        row["sd_paired"] = float(np.std(a - b, ddof=1))
        row["detectable_vs_baseline"] = stats.detectable_difference(
            row["sd_paired"], len(common), alpha)


def _rank(out: dict[str, dict], series: list[Series], higher: bool, effect: float,
          alpha: float) -> None:
    """Tiers and rank intervals of the scorers with two or more seeds, on pairwise paired t
    tests (a difference below the minimum effect is no difference)."""
    present = {s.label: s for s in series if len(s.by_seed) >= 2}
    cache: dict[frozenset, float] = {}

    def pvalue(a: str, b: str) -> float:
        key = frozenset((a, b))
        if key not in cache:
            common = sorted(set(present[a].by_seed) & set(present[b].by_seed))
            if len(common) < 2:
                cache[key] = math.nan
            else:
                x, y = present[a].values(common), present[b].values(common)
                if informative.comparison_degenerate(x.tolist(), y.tolist(), a, b):
                    cache[key] = math.nan   # both constant: nothing to test
                else:
                    cache[key] = (1.0 if abs(float(np.mean(x - y))) < effect
                                  else stats.paired_t(x, y))
        return cache[key]

    means = {label: s.mean() for label, s in present.items()}
    tiers = stats.assign_tiers(means, higher, pvalue, alpha)
    ranks = stats.rank_intervals(means, higher, pvalue, alpha)
    for label in present:
        out[label]["tier"] = tiers.get(label)
        out[label]["rank_low"], out[label]["rank_high"] = ranks[label]


def mark_informative(rows: list[dict], task: str, task_z: dict, baseline: str, track: str,
                     alpha: float) -> None:
    """Decide, per metric of one (profile, task), whether it is informative (from the baseline's
    normalized values only), which headline a stand-in replaces, which scorers did not learn the
    task in distribution; uninformative and degenerate metrics lose their tiers and ranks."""
    if track in DESCRIPTIVE_TRACKS:
        for r in rows:
            r.update(informative=None, informative_reason="", stand_in_for="", not_learned="")
        return
    baseline_z = {m: list(by_label.get(baseline, {}).values()) for m, by_label in task_z.items()}
    metrics = sorted({r["metric"] for r in rows})
    headline = {r["metric"] for r in rows if r["headline"]}
    decisions = {m: informative.decide(task, m, baseline_z, alpha, m in headline)
                 for m in metrics}
    stand_ins = {}
    for m in sorted(headline):
        rule = informative.rule_for(task, m)
        if (decisions[m].informative is False and rule is not None and rule.stand_in
                and rule.stand_in in metrics and rule.stand_in not in headline
                and decisions[rule.stand_in].informative):
            stand_ins[rule.stand_in] = m
    scorer_z: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for m, by_label in task_z.items():
        for label, seeds in by_label.items():
            scorer_z[label][m] = list(seeds.values())
    by_metric: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_metric[r["metric"]].append(r)
    for m, mrows in by_metric.items():
        metric_level = informative.metric_degenerate(
            {r["scorer"]: dict(zip(r["seeds"], r["values"])) for r in mrows})
        for r in mrows:
            d = decisions[m]
            r["informative"], r["informative_reason"] = d.informative, d.reason
            r["stand_in_for"] = stand_ins.get(m, "")
            if r["stand_in_for"]:
                r["headline"] = True
                r["informative_reason"] = (f"stands in for {r['stand_in_for']}, which is "
                                           f"uninformative here; {d.reason}")
            r["not_learned"] = informative.did_not_learn(task, scorer_z[r["scorer"]], alpha) \
                or ""
            if d.informative is False or metric_level:
                r["tier"], r["rank_low"], r["rank_high"] = None, math.nan, math.nan
