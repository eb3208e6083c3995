"""Two scorers of a release compared directly, as the board compares each with the baseline.

Per (profile, task, headline metric): the mean paired difference a - b over their common seeds,
its Student t interval, the paired t test Holm-corrected across the metrics compared at the
profile, and a word with the metric's minimum effect (:mod:`leaderboard.method.resolution`, in the
release's units): ``<a> better`` / ``<b> better`` (significant and at least the minimum effect),
``within resolution`` (significant, smaller), ``tie`` (the interval inside ± the minimum
effect), ``n.s.``; an uninformative metric gets no word. Overall: P(a better than b) averaged over
the overall's tasks (:mod:`leaderboard.method.improvement`), with the stratified bootstrap interval
and the bootstrap test of P = 1/2.
"""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from . import improvement, stats
from .table_stats import better_sign
from .verdicts import word


def _word(a: str, b: str, row: dict, alpha: float) -> str:
    if row["informative"] is False:
        return "uninformative"
    if math.isnan(row["p_holm"]):
        return ""
    said = word(row["p_holm"] <= alpha, row["delta"] * row["sign"],
                (row["ci_high"] - row["ci_low"]) / 2, row["min_effect"])
    return {"better": f"{a} better", "worse": f"{b} better"}.get(said, said)


def compare(rows: list[dict], overall_tasks: list[dict], a: str, b: str,
            alpha: float = stats.ALPHA) -> tuple[list[dict], list[dict]]:
    """(metric comparisons, overall comparisons) of scorers ``a`` and ``b`` from a release's
    ``rows`` and ``overall_tasks`` (results.json's frames)."""
    index = {(r["profile"], r["task"], r["metric"], r["scorer"]): r for r in rows}
    out: list[dict] = []
    for (profile, task, metric, scorer), ra in sorted(index.items()):
        rb = index.get((profile, task, metric, b))
        if scorer != a or rb is None or not ra["headline"] or ra["track"] in ("probe", "cost"):
            continue
        va, vb = dict(zip(ra["seeds"] or [], ra["values"] or [])), dict(
            zip(rb["seeds"] or [], rb["values"] or []))
        common = sorted(set(va) & set(vb))
        d = np.array([va[k] - vb[k] for k in common], dtype=np.float64)
        lo, hi = stats.t_interval(d, alpha) if d.size >= 2 else (math.nan, math.nan)
        out.append(dict(profile=profile, task=task, metric=metric, n=len(common),
                        delta=float(d.mean()) if d.size else math.nan, ci_low=lo, ci_high=hi,
                        p=stats.paired_t(d, np.zeros_like(d)) if d.size >= 2 else math.nan,
                        min_effect=ra["min_effect"], sign=better_sign(ra["direction"]),
                        informative=ra.get("informative")))
    families: dict[str, list[dict]] = defaultdict(list)
    for r in out:
        r["p_holm"] = math.nan
        if not math.isnan(r["p"]) and r["informative"] is not False:
            families[r["profile"]].append(r)
    for family in families.values():
        for r, p in zip(family, stats.holm([r["p"] for r in family])):
            r["p_holm"] = float(p)
    for r in out:
        r["word"] = _word(a, b, r, alpha)
    return out, _overall(rows, overall_tasks, a, b, alpha)


def _overall(rows: list[dict], overall_tasks: list[dict], a: str, b: str,
             alpha: float) -> list[dict]:
    """Per profile: P(a better than b) over the overall's tasks, interval and bootstrap p."""
    out = []
    for profile in sorted({t["profile"] for t in overall_tasks}):
        tasks = {t["task"]: t["metrics"] for t in overall_tasks if t["profile"] == profile}
        points, replicates = [], []
        for task, metrics in sorted(tasks.items()):
            of = lambda s: [r for r in rows if r["profile"] == profile  # noqa: E731
                            and r["task"] == task and r["scorer"] == s]
            va, vb = improvement.task_values(of(a), metrics), improvement.task_values(of(b), metrics)
            if not vb.seeds or (not va.seeds and not va.failed):
                continue
            effects = {r["metric"]: r["min_effect"] for r in of(b)}
            point = improvement.task_probability(va, vb, effects)
            if math.isnan(point):
                continue
            draw_a = (improvement.draws(len(va.seeds), profile, task, a) if va.seeds
                      else np.zeros((improvement.N_BOOT, 0), dtype=np.int64))
            draw_b = improvement.draws(len(vb.seeds), profile, task, b)
            points.append(point)
            replicates.append(improvement.task_probability(va, vb, effects, draw_a, draw_b))
        if not points:
            continue
        reps = np.mean(replicates, axis=0)
        out.append(dict(profile=profile, tasks=len(points), poi=float(np.mean(points)),
                        ci_low=float(np.quantile(reps, alpha / 2)),
                        ci_high=float(np.quantile(reps, 1 - alpha / 2)),
                        p=improvement.bootstrap_p(reps, np.full_like(reps, 0.5))))
    return out
