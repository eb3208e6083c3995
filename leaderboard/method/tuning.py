"""The tuning protocol in a release (suite/tuning.py): what the sweep found and what was chosen.

``summary(loaded)`` reads the sweep records (``LoadedRecords.sweeps``) and the ``tuning`` objects
of the reporting records into plain JSON (``results.json`` ``meta["tuning"]``):

    {task: {"metric", "direction", "grid": {key: [values]}, "tuning_seeds": [...],
            "cells": {"sweep": n, "report": n},
            "scorers": {label: {"points": [{"point", "mean", "ok", "failed"}], "chosen",
                                "at_edge", "all_failed", "sweep_cells", "learned": {...}}}}}

:mod:`leaderboard.rendering.tuning` draws and tabulates it.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..loading.choice import Rule, Trial, choose, point_label, points, trial
from ..loading.records import LoadedRecords, Record

# The learning-rate axes of a grid, as data: the leaderboard reads records and never the tasks'
# declarations (role="rate", registry/settings.py), and the records name no roles. Every task's
# tunable rate is "lr"; a test holds the tasks' declarations to this tuple.
RATE_KEYS = ("lr",)
RATE_KEY = RATE_KEYS[0]   # the x axis of the tuning plots


def point_key(point: dict) -> str:
    return ",".join(f"{k}={point[k]:g}" for k in sorted(point))


def _learned(records: list[Record]) -> dict[str, float]:
    """Mean over seeds of each learned scorer parameter's mean (e.g. SSA's n, a temperature)."""
    values: dict[str, list[float]] = defaultdict(list)
    for r in records:
        for name, v in (r.scorer_parameters or {}).items():
            if isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
                values[name.split(".")[-1]].append(float(np.mean(v)))
    return {k: float(np.mean(v)) for k, v in sorted(values.items())}


def summary(loaded: LoadedRecords, rule: str | None = None) -> dict:
    """Per task, the sweep and the choice of every scorer (empty when nothing was tuned). With
    ``rule`` (``leaderboard.loading.choice.SELECTION_RULE``; releases from before it pass None),
    each scorer also gets the rule's choice recomputed from its sweep records, ``rule_choice``, and
    the rule's score of each rate, ``rate_scores`` (its worst cell; under a rule with a target,
    the median, beside the fraction of cells reaching the target, ``rate_reached``), and each task
    names the rule most of its scorers' records name, ``rule``, and where they name several,
    each with its scorers, ``rules``."""
    sweeps: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in loaded.sweeps:
        sweeps[(r.task, r.scorer_label)].append(r)
    reports: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in loaded.records:
        if r.tuning and r.tuning.get("role") == "report":
            reports[(r.task, r.scorer_label)].append(r)
    out: dict = {}
    named: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for task, label in sorted(set(sweeps) | set(reports)):
        reps = reports.get((task, label), [])
        block = latest_choice(reps)
        recs = sweeps.get((task, label), [])
        grid = block.get("grid") or _grid_of(recs)
        keys = sorted(grid)
        per_point: dict[str, dict] = {}
        for r in _shown(block, recs):
            point = {k: r.config.get(k) for k in keys}
            entry = per_point.setdefault(point_key(point), {"point": point, "values": [],
                                                               "ok": 0, "failed": 0})
            value = (r.validation or {}).get("value")
            if r.status == "ok" and isinstance(value, (int, float)):
                entry["ok"] += 1
                entry["values"].append(float(value))
            else:
                entry["failed"] += 1
        points = []
        for key in sorted(per_point, key=lambda k: [per_point[k]["point"][x] for x in keys]):
            e = per_point[key]
            points.append({"point": e["point"], "ok": e["ok"], "failed": e["failed"],
                           "mean": (float(np.mean(e["values"])) if e["values"] and not e["failed"]
                                    else None)})
        task_out = out.setdefault(task, {
            "metric": block.get("selection_metric") or _metric_of(recs),
            "direction": block.get("direction") or _direction_of(recs),
            "grid": {}, "tuning_seeds": [], "cells": {"sweep": 0, "report": 0}, "scorers": {}})
        for k, values in grid.items():
            task_out["grid"][k] = sorted(set(task_out["grid"].get(k, [])) | set(values)
                                         | {p["point"][k] for p in points})
        task_out["tuning_seeds"] = sorted(set(task_out["tuning_seeds"]) | {r.seed for r in recs})
        task_out["cells"]["sweep"] += len(recs)
        task_out["cells"]["report"] += len(reps)
        chosen = block.get("point")
        task_out["scorers"][label] = {
            "points": points, "chosen": chosen, "at_edge": list(block.get("at_edge", [])),
            "all_failed": bool(reps) and chosen is None,
            "complete": bool(reps), "sweep_cells": len(recs), "learned": _learned(reps),
        }
        if rule:
            if reps:
                named[task][block.get("rule") or rule].append(label)
            task_out["scorers"][label].update(_recomputed(block, recs, task_out["direction"]))
    for task, by_rule in named.items():
        out[task]["rule"] = max(by_rule, key=lambda text: len(by_rule[text]))
        if len(by_rule) > 1:
            out[task]["rules"] = {text: labels for text, labels in sorted(by_rule.items())}
    return out


def latest_choice(reports: list[Record]) -> dict:
    """The tuning block of a scorer's latest choice on a task: of its reporting records, one run
    by the current sweep before one carried over from an earlier version (whose block names the
    earlier sweep), then the last finished ({} without any)."""
    if not reports:
        return {}
    return max(reports, key=lambda r: (not r.provenance.get("carried_over"),
                                       r.provenance.get("finished") or "")).tuning or {}


def consulted(block: dict, sweeps: list[Record]) -> list[Record]:
    """The sweep records a choice consulted: those its tuning block lists (``sweep_cells``), or
    every one where it lists none. A cell run at a grid point outside the rule's view (a seed
    the screen of a bimodal task does not run there, a rate a later grid dropped) is left out."""
    listed = set(block.get("sweep_cells") or ())
    return [r for r in sweeps if r.cell_id in listed] if listed else sweeps


def _shown(block: dict, sweeps: list[Record]) -> list[Record]:
    """The sweep records the points show: at a point of the chosen grid, those the rule
    consulted; at a point outside it (a rate an earlier grid or rule ran), every one. The cell
    counts (``sweep_cells``, the cost) count every sweep record run."""
    grid, chosen = block.get("grid") or {}, {r.cell_id for r in consulted(block, sweeps)}
    return [r for r in sweeps if r.cell_id in chosen
            or not all(r.config.get(k) in values for k, values in grid.items())]


def _recomputed(block: dict, recs: list[Record], direction: str) -> dict:
    """The rule's choice over the grid the reporting records name, from the sweep records it
    consulted (every record at the grid's points where they list none); a grid with a point not
    swept yet (or no reporting record) has none."""
    axes = {k: tuple(v) for k, v in (block.get("grid") or {}).items()}
    recs = consulted(block, recs)
    seeds = sorted({r.seed for r in recs})
    cells: dict[str, dict[int, Trial]] = defaultdict(dict)
    for r in recs:
        cells[point_label({k: r.config.get(k) for k in axes})][r.seed] = \
            trial(r.status, (r.validation or {}).get("value"), r.stopping)
    if not axes or any(point_label(p) not in cells for p in points(axes)):
        return {"rule_choice": None, "rate_scores": {}}
    choice = choose(axes, direction, 0, lambda p: [cells[point_label(p)].get(s) for s in seeds],
                    rates=RATE_KEYS, rule=Rule.of(direction, block.get("rule_params")))
    return {"rule_choice": choice.chosen, "rate_scores": choice.rate_scores,
            **({"rate_reached": choice.rate_reached} if choice.rate_reached else {}),
            **({"tied": choice.tied} if choice.tied else {})}


def _grid_of(recs: list[Record]) -> dict:
    block = next((r.tuning for r in recs if r.tuning), {}) or {}
    keys = sorted((block.get("point") or {}).keys()) or [RATE_KEY]
    return {k: sorted({r.config.get(k) for r in recs if k in r.config}) for k in keys}


def _metric_of(recs: list[Record]) -> str:
    return next(((r.validation or {}).get("metric") for r in recs if r.validation), "?")


def _direction_of(recs: list[Record]) -> str:
    return next(((r.validation or {}).get("direction") for r in recs if r.validation), "higher")
