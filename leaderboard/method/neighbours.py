"""Does a verdict hold next door? For a scorer's verdict against the baseline on a headline
metric, the same comparison at the learning rates next to the scorer's chosen one.

The sweep cells of a task trained to convergence run the reported evaluation on their tuning
seeds (tasks/icl_training.py ``evaluated``). At each grid neighbour of the scorer's chosen rate,
the scorer's mean over its tuning seeds is compared with the baseline's mean at the baseline's
own chosen rate over the same tuning seeds (at a rate a screen left out, its screen seeds); the
verdict holds there when the difference has the verdict's sign. A verdict that holds at every
neighbour reads "holds at k/k neighbouring rates"; one that does not is "rate-sensitive". A
neighbour with records on fewer than two seeds, or on a seed the baseline's chosen rate lacks, is
left out, and the words count it. A chosen rate at an end of its grid (grown edges included) has a
neighbour on one side only, which the words say: no rate past it was run.
"""
from __future__ import annotations

import math
from collections import defaultdict

from ..loading.records import LoadedRecords, Record
from .tuning import RATE_KEY

BETTER, WORSE = 1, -1
MIN_SEEDS = 2   # a screened bimodal rate has its screen seeds, a confirmed one every tuning seed


def _chosen(records: list[Record]) -> tuple[float | None, list[float]]:
    """The chosen rate and the rate grid that the reporting records' tuning block names."""
    block = next((r.tuning for r in records if r.tuning and r.tuning.get("role") == "report"),
                 None) or {}
    point, grid = block.get("point") or {}, (block.get("grid") or {}).get(RATE_KEY) or []
    return point.get(RATE_KEY), sorted(grid)


def neighbours(rate: float, grid: list[float]) -> list[float]:
    i = grid.index(rate)
    return [grid[j] for j in (i - 1, i + 1) if 0 <= j < len(grid)]


def _means(sweeps: list[Record], rate: float, metric: str) -> dict[int, float]:
    out = {}
    for r in sweeps:
        value = r.metrics.get(metric)
        if r.config.get(RATE_KEY) == rate and r.status == "ok" and value is not None \
                and math.isfinite(value):
            out[r.seed] = value
    return out


def check(loaded: LoadedRecords, verdicts: dict[tuple[str, str, str], int],
          baseline: str = "softmax") -> dict[tuple[str, str, str], dict]:
    """For each (task, scorer label, metric) -> sign (BETTER or WORSE, in the metric's favour),
    ``{"holds": k, "of": m, "rates": {rate: bool}}``, with ``"edge": "lowest"`` or ``"highest"``
    where the chosen rate ends its grid and ``"left_out": n`` where n neighbours were left out;
    verdicts without sweep metrics at any neighbour are left out."""
    reports: dict[tuple[str, str], list[Record]] = defaultdict(list)
    sweeps: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in loaded.records:
        reports[(r.task, r.scorer_label)].append(r)
    for r in loaded.sweeps:
        sweeps[(r.task, r.scorer_label)].append(r)
    out = {}
    for (task, label, metric), sign in verdicts.items():
        base_rate, _ = _chosen(reports[(task, baseline)])
        rate, grid = _chosen(reports[(task, label)])
        if base_rate is None or rate is None or rate not in grid:
            continue
        direction = next((r.metric_specs[metric]["direction"] for r in reports[(task, label)]
                          if metric in r.metric_specs), "higher")
        base = _means(sweeps[(task, baseline)], base_rate, metric)
        rates = {}
        near_rates = neighbours(rate, grid)
        for near in near_rates:
            mine = _means(sweeps[(task, label)], near, metric)
            seeds = sorted(mine)
            if len(seeds) < MIN_SEEDS or not set(mine) <= set(base):
                continue
            diff = sum(mine[s] - base[s] for s in seeds) / len(seeds)
            favour = diff if direction == "higher" else -diff
            rates[near] = favour * sign > 0
        if rates:
            edge = "lowest" if rate == grid[0] else "highest" if rate == grid[-1] else None
            left_out = len(near_rates) - len(rates)
            out[(task, label, metric)] = {"holds": sum(rates.values()), "of": len(rates),
                                          "rates": rates, **({"edge": edge} if edge else {}),
                                          **({"left_out": left_out} if left_out else {})}
    return out


def words(result: dict) -> str:
    """"holds at 2/2 neighbouring rates" or "rate-sensitive (holds at 1/2)", and where fewer
    neighbours were checked, why: "; the grid's lowest rate" (a chosen rate that ends its grid),
    "; 1 left out" (a neighbour with too few seeds)."""
    why = ((f"; the grid's {result['edge']} rate" if result.get("edge") else "")
           + (f"; {result['left_out']} left out" if result.get("left_out") else ""))
    if result["holds"] == result["of"]:
        return f"holds at {result['holds']}/{result['of']} neighbouring rates{why}"
    return f"rate-sensitive (holds at {result['holds']}/{result['of']}{why})"
