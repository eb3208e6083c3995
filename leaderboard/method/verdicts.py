"""The words against the baseline: better, worse, within resolution, tie, n.s., uninformative or
degenerate.

Holm per (profile, scorer) across the tasks and headline metrics (secondary metrics form their
own family) and Benjamini-Hochberg across the scorers of one (profile, task, metric). With
significant meaning both adjusted p <= alpha, and the metric's minimum effect from
:mod:`leaderboard.method.resolution`:

- better / worse: significant, and |Δ| reaches the minimum effect;
- within resolution: significant, but |Δ| is below the minimum effect;
- tie: not significant, and the whole 95% t interval of Δ lies within ± the minimum effect;
- n.s.: otherwise.

Probe and cost rows get no verdict.
"""
from __future__ import annotations

import math
from collections import defaultdict

from . import stats
from .board import DESCRIPTIVE_TRACKS
from .table_stats import better_sign


def verdicts(rows: list[dict], alpha: float) -> None:
    """Set every row's Holm- and BH-adjusted p and its ``vs_baseline`` word (module docstring)."""
    holm: dict[tuple, list[int]] = defaultdict(list)
    bh: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        r["p_vs_baseline_holm"] = r["p_vs_baseline_bh"] = math.nan
        if not math.isnan(r["p_vs_baseline"]) and r["track"] not in DESCRIPTIVE_TRACKS \
                and _judgeable(r):
            holm[(r["profile"], r["scorer"], r["headline"])].append(i)
            bh[(r["profile"], r["task"], r["metric"])].append(i)
    for families, key, adjust in ((holm, "p_vs_baseline_holm", stats.holm),
                                  (bh, "p_vs_baseline_bh", stats.benjamini_hochberg)):
        for members in families.values():
            for i, p in zip(members, adjust([rows[i]["p_vs_baseline"] for i in members])):
                rows[i][key] = float(p)
    for r in rows:
        r["vs_baseline"] = _word(r, alpha)


def _word(r: dict, alpha: float) -> str:
    delta = r["delta_vs_baseline"]
    if r["track"] in DESCRIPTIVE_TRACKS or r["n_paired"] < 2:
        return ""
    if r.get("informative") is False:
        return "uninformative"
    if r.get("degenerate"):
        return "degenerate"
    if math.isnan(r["p_vs_baseline_holm"]):
        return ""
    return word(max(r["p_vs_baseline_holm"], r["p_vs_baseline_bh"]) <= alpha,
                delta * better_sign(r["direction"]),
                stats.t_halfwidth(r["sd_paired"], r["n_paired"], alpha), r["min_effect"])


def word(significant: bool, gain: float, halfwidth: float, min_effect: float) -> str:
    """The word for a paired difference whose signed ``gain`` (> 0: better) has a 95% interval
    of half-width ``halfwidth`` (module docstring)."""
    if significant:
        if abs(gain) < min_effect:
            return "within resolution"
        return "better" if gain > 0 else "worse"
    return "tie" if abs(gain) + halfwidth < min_effect else "n.s."


def _judgeable(row: dict) -> bool:
    """Whether a row can get a verdict: its metric is not uninformative at the profile and
    neither the metric nor its comparison with the baseline is degenerate."""
    return row.get("informative") is not False and not row.get("degenerate")
