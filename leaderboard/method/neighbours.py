"""Does a verdict hold next door? For a scorer's verdict against the baseline on a headline
metric, the same comparison at the learning rates next to the scorer's chosen one.

The sweep cells of a task trained to convergence run the reported evaluation on their tuning
seeds (tasks/icl_training.py ``evaluated``). At each grid neighbour of the scorer's chosen rate,
the scorer's mean over its tuning seeds is compared with the baseline's mean at the baseline's
own chosen rate over the same tuning seeds (at a rate a screen left out, its screen seeds). Only
the sweep cells each choice consulted count (``tuning.consulted``): a cell run at a rate outside
the rule's view, such as an extra seed from before the screen, would weigh in one side alone. The
verdict holds there when the difference has the verdict's sign. A verdict that holds at every
neighbour reads "holds at k/k neighbouring rates"; one that does not is "rate-sensitive". A
neighbour with records on fewer than two seeds, or on a seed the baseline's chosen rate lacks, is
left out, and the words count it. A chosen rate at an end of its grid (grown edges included) has a
neighbour on one side only, which the words say: no rate past it was run. The same comparison is
made the other way, the baseline at each of its own neighbouring rates against the scorer at its
chosen one ("at softmax's 2/2"): a verdict holds only where it holds on both sides.
"""
from __future__ import annotations

import math
from collections import defaultdict

from ..loading.records import LoadedRecords, Record
from .tuning import RATE_KEY, consulted, latest_choice

BETTER, WORSE = 1, -1
MIN_SEEDS = 2   # a screened bimodal rate has its screen seeds, a confirmed one every tuning seed


def _choice(records: list[Record]) -> dict:
    """The tuning block of the reporting records' latest choice ({} without one)."""
    return latest_choice([r for r in records if r.tuning and r.tuning.get("role") == "report"])


def _chosen(block: dict) -> tuple[float | None, list[float]]:
    """The chosen rate and the rate grid that a tuning block names."""
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


def _holds(mine: dict[int, float], base: dict[int, float], seeds: set[int], direction: str,
           sign: int) -> bool | None:
    """Whether the mean difference, scorer (``mine``) minus baseline, over ``seeds`` (the
    neighbouring rate's) has the verdict's ``sign``; None for fewer than MIN_SEEDS seeds, or a
    seed either side lacks."""
    if len(seeds) < MIN_SEEDS or not seeds <= set(mine) & set(base):
        return None
    diff = sum(mine[s] - base[s] for s in seeds) / len(seeds)
    return (diff if direction == "higher" else -diff) * sign > 0


def check(loaded: LoadedRecords, verdicts: dict[tuple[str, str, str], int],
          baseline: str = "softmax") -> dict[tuple[str, str, str], dict]:
    """For each (task, scorer label, metric) -> sign (BETTER or WORSE, in the metric's favour),
    ``{"holds": k, "of": m, "rates": {rate: bool}}``, with ``"edge": "lowest"`` or ``"highest"``
    where the chosen rate ends its grid, ``"left_out": n`` where n neighbours were left out, and
    ``"baseline_rates": {rate: bool}`` (with ``"baseline"``) for the baseline at its neighbouring
    rates; verdicts without sweep metrics at any neighbour of the scorer are left out."""
    reports: dict[tuple[str, str], list[Record]] = defaultdict(list)
    sweeps: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in loaded.records:
        reports[(r.task, r.scorer_label)].append(r)
    for r in loaded.sweeps:
        sweeps[(r.task, r.scorer_label)].append(r)
    out = {}
    for (task, label, metric), sign in verdicts.items():
        base_block, block = _choice(reports[(task, baseline)]), _choice(reports[(task, label)])
        base_rate, base_grid = _chosen(base_block)
        rate, grid = _chosen(block)
        if base_rate is None or rate is None or rate not in grid:
            continue
        direction = next((r.metric_specs[metric]["direction"] for r in reports[(task, label)]
                          if metric in r.metric_specs), "higher")
        mine = consulted(block, sweeps[(task, label)])
        base = consulted(base_block, sweeps[(task, baseline)])
        at_chosen, base_at_chosen = _means(mine, rate, metric), _means(base, base_rate, metric)
        rates, base_rates = {}, {}
        near_rates = neighbours(rate, grid)
        for near in near_rates:
            at_near = _means(mine, near, metric)
            held = _holds(at_near, base_at_chosen, set(at_near), direction, sign)
            if held is not None:
                rates[near] = held
        # the baseline at its own neighbouring rates, against the scorer at its chosen one
        for near in neighbours(base_rate, base_grid) if base_rate in base_grid else []:
            base_near = _means(base, near, metric)
            held = _holds(at_chosen, base_near, set(base_near), direction, sign)
            if held is not None:
                base_rates[near] = held
        if rates:
            edge = "lowest" if rate == grid[0] else "highest" if rate == grid[-1] else None
            left_out = len(near_rates) - len(rates)
            out[(task, label, metric)] = {"holds": sum(rates.values()), "of": len(rates),
                                          "rates": rates, **({"edge": edge} if edge else {}),
                                          **({"left_out": left_out} if left_out else {}),
                                          **({"baseline": baseline, "baseline_rates": base_rates}
                                             if base_rates else {})}
    return out


def words(result: dict) -> str:
    """"holds at 2/2 neighbouring rates" or "rate-sensitive (holds at 1/2)", and where fewer
    neighbours were checked, why: "; the grid's lowest rate" (a chosen rate that ends its grid),
    "; 1 left out" (a neighbour with too few seeds); then the baseline's neighbouring rates
    against the scorer's chosen one, "; at softmax's 2/2"."""
    why = ((f"; the grid's {result['edge']} rate" if result.get("edge") else "")
           + (f"; {result['left_out']} left out" if result.get("left_out") else ""))
    theirs = result.get("baseline_rates") or {}
    at_base = (f"; at {result['baseline']}'s {sum(theirs.values())}/{len(theirs)}" if theirs
               else "")
    if result["holds"] == result["of"] and all(theirs.values()):
        return f"holds at {result['holds']}/{result['of']} neighbouring rates{why}{at_base}"
    return f"rate-sensitive (holds at {result['holds']}/{result['of']}{why}{at_base})"
