"""The tuning protocol in a release (suite/tuning.py): what the sweep found and what was chosen.

``summary(loaded)`` reads the sweep records (``LoadedRecords.sweeps``) and the ``tuning`` objects
of the reporting records into plain JSON (``results.json`` ``meta["tuning"]``):

    {task: {"metric", "direction", "grid": {key: [values]}, "tuning_seeds": [...],
            "cells": {"sweep": n, "report": n},
            "scorers": {label: {"points": [{"point", "mean", "ok", "failed"}], "chosen",
                                "at_edge", "all_failed", "sweep_cells", "learned": {...}}}}}

``render`` draws, per task, the validation metric against the learning rate, one line per scorer
(the best value over the other axes at each rate; a failed point is a gap); ``markdown`` gives the
method paragraph (the protocol and its cost in cells) and the table of chosen points.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from .choice import Rule, pick, point_label, points, rate_of, trial

from .records import LoadedRecords, Record

# The learning-rate axes of a grid, as data: the leaderboard reads records and never the tasks'
# declarations (role="rate", registry/settings.py), and the records name no roles. Every task's
# tunable rate is "lr"; a test holds the tasks' declarations to this tuple.
RATE_KEYS = ("lr",)
RATE_KEY = RATE_KEYS[0]   # the x axis of the tuning plots


def _point_key(point: dict) -> str:
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
    ``rule`` (``leaderboard.choice.SELECTION_RULE``; releases from before it pass None), each scorer
    also gets the rule's choice recomputed from its sweep records, ``rule_choice``, and the worst
    cell at each rate, ``rate_scores``, and each task names the rule."""
    sweeps: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in loaded.sweeps:
        sweeps[(r.task, r.scorer_label)].append(r)
    reports: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in loaded.records:
        if r.tuning and r.tuning.get("role") == "report":
            reports[(r.task, r.scorer_label)].append(r)
    out: dict = {}
    for task, label in sorted(set(sweeps) | set(reports)):
        recs, reps = sweeps.get((task, label), []), reports.get((task, label), [])
        block = next((r.tuning for r in reps), None) or {}
        grid = block.get("grid") or _grid_of(recs)
        keys = sorted(grid)
        per_point: dict[str, dict] = {}
        for r in recs:
            point = {k: r.config.get(k) for k in keys}
            entry = per_point.setdefault(_point_key(point), {"point": point, "values": [],
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
            task_out["grid"][k] = sorted(set(task_out["grid"].get(k, [])) | set(values))
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
            task_out["rule"] = block.get("rule") or rule
            task_out["scorers"][label].update(_recomputed(block, recs, task_out["direction"]))
    return out


def _recomputed(block: dict, recs: list[Record], direction: str) -> dict:
    """The rule's choice over the grid the reporting records name, from the sweep records; a
    grid with a point not swept yet (or no reporting record) has none."""
    axes = {k: tuple(v) for k, v in (block.get("grid") or {}).items()}
    cells: dict[str, list] = defaultdict(list)
    for r in recs:
        cells[point_label({k: r.config.get(k) for k in axes})].append(trial(r.status, (r.validation or {}).get("value"), r.stopping))
    grid = points(axes)
    if not axes or any(point_label(p) not in cells for p in grid):
        return {"rule_choice": None, "rate_scores": {}}
    picked = pick(grid, cells, direction, rates=RATE_KEYS,
                  rule=Rule.of(direction, block.get("rule_params")))
    return {"rule_choice": picked.best, "rate_scores": picked.rate_scores}


def _grid_of(recs: list[Record]) -> dict:
    block = next((r.tuning for r in recs if r.tuning), {}) or {}
    keys = sorted((block.get("point") or {}).keys()) or [RATE_KEY]
    return {k: sorted({r.config.get(k) for r in recs if k in r.config}) for k in keys}


def _metric_of(recs: list[Record]) -> str:
    return next(((r.validation or {}).get("metric") for r in recs if r.validation), "?")


def _direction_of(recs: list[Record]) -> str:
    return next(((r.validation or {}).get("direction") for r in recs if r.validation), "higher")


# ------------------------------------------------------------------------------------ plots


def rate_lines(task: dict) -> dict[str, tuple[list[float], list[float | None]]]:
    """Per scorer: the learning rates and, at each, the best mean validation value over the other
    axes (None where every point at that rate failed)."""
    better = max if task["direction"] == "higher" else min
    out = {}
    for label, s in task["scorers"].items():
        by_rate: dict[float, list[float | None]] = defaultdict(list)
        for p in s["points"]:
            rate = p["point"].get(RATE_KEY)
            if rate is not None:
                by_rate[float(rate)].append(p["mean"])
        rates = sorted(by_rate)
        out[label] = (rates, [better([v for v in by_rate[x] if v is not None])
                              if any(v is not None for v in by_rate[x]) else None
                              for x in rates])
    return out


def render(tuning: dict | None, outdir: Path) -> list[Path]:
    """``tuning__<task>.png``: validation metric against learning rate, one line per scorer, the
    chosen rate marked."""
    from .plots import safe_name, save_log_x, series_style

    paths = []
    for task, t in sorted((tuning or {}).items()):
        lines = rate_lines(t)
        if not any(rates for rates, _ in lines.values()):
            continue
        fig = Figure(figsize=(7.0, 4.2))
        ax = fig.add_subplot(1, 1, 1)
        for i, (label, (rates, values)) in enumerate(sorted(lines.items())):
            y = [np.nan if v is None else v for v in values]
            (line,) = ax.plot(rates, y, marker="o", ms=3, lw=1.2, label=label,
                              **series_style(i))
            chosen = (t["scorers"][label].get("chosen") or {}).get(RATE_KEY)
            if chosen is not None and chosen in rates and values[rates.index(chosen)] is not None:
                ax.plot([chosen], [values[rates.index(chosen)]], marker="*", ms=11,
                        color=line.get_color())
        paths.append(save_log_x(
            fig, ax, Path(outdir) / f"{safe_name('tuning', task)}.png", "learning rate",
            f"{t['metric']} ({t['direction']} is better), mean over tuning seeds",
            f"{task}: validation metric against learning rate (star: chosen)"))
    return paths


# ------------------------------------------------------------------------------------ text


def _value(x) -> str:
    return "–" if x is None else f"{x:.4g}"


def method_text(tuning: dict | None) -> str:
    """The protocol as this release ran it, and its cost in cells."""
    if not tuning:
        return ""
    sweep = sum(t["cells"]["sweep"] for t in tuning.values())
    report = sum(t["cells"]["report"] for t in tuning.values())
    grids = "; ".join(f"{task}: " + " x ".join(f"{k} {{{', '.join(f'{v:g}' for v in vals)}}}"
                                               for k, vals in t["grid"].items())
                      for task, t in sorted(tuning.items()))
    seeds = sorted({s for t in tuning.values() for s in t["tuning_seeds"]})
    return (
        "**Tuning.** Every scorer gets the same grid on each tuned task (" + grids + "), trained "
        f"at the task's full budget on tuning seeds {seeds}, which no reporting cell uses, and "
        "scored on the task's validation metric: in distribution, on validation data disjoint "
        "from the reported evaluation items (fresh draws for the ICL tasks and MQAR, held-out "
        "documents or sentences outside the reported evaluation for the language models). "
        + _rule_text(tuning) + " A chosen point on an edge of the grid grows it by one step that "
        "way (the ratio of the two edge values) up to the profile's cap, the same rule for every "
        "scorer; a scorer whose best is still on an edge is flagged. The reporting cells run at "
        "the chosen point on the reporting seeds, and every number on the board comes from "
        "them. " + (f"Cost: {sweep} sweep cells for {report} reporting cells "
                    f"({sweep / report:.1f} sweep cells per reporting cell)." if report else
                    f"Cost so far: {sweep} sweep cells; no reporting cell yet."))


def _rule_text(tuning: dict) -> str:
    """How the points were chosen; with the rule named, the scorers whose point it would not
    choose from their sweep records."""
    if not any("rule" in t for t in tuning.values()):
        return ("A point's score is its mean over the tuning seeds; a point where a seed "
                "diverged or failed is never chosen.")
    text = ("The learning rate is chosen first, by its worst tuning cell (over the tuning seeds "
            "and every value of the other axes at that rate; a rate with a cell that diverged or "
            "failed is never chosen), then the point with the best mean over the tuning seeds "
            "at that rate: a rate where one cell trained badly sits at the edge of the scorer's "
            "stable range, which a mean over the tuning seeds hides. The release recomputes "
            "each choice from the sweep records.")
    other = sorted(f"{label} ({task}: the rule chooses {_label(s['rule_choice'])})"
                   for task, t in tuning.items() for label, s in t["scorers"].items()
                   if s["complete"] and s.get("rule_choice") not in (None, s["chosen"]))
    if other:
        text += (" Reported at a point an earlier rule chose, not the rule's: " + "; ".join(other)
                 + "; a run under the current rule reports them at its own choice.")
    return text


def _label(point: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in point.items())


def markdown(tuning: dict | None, plots: list[str]) -> str:
    """The release's tuning section: method paragraph, chosen points, sensitivity plots."""
    if not tuning:
        return ""
    lines = ["## Tuning", "", method_text(tuning), ""]
    for task, t in sorted(tuning.items()):
        lines += [f"### {task}: chosen points ({t['metric']}, {t['direction']} is better)", "",
                  "| scorer | chosen point | validation at it | worst cell at its rate | best on an "
                  "edge | points ok / failed | learned scorer parameters (mean over reporting "
                  "seeds) |",
                  "|---|---|---|---|---|---|---|"]
        for label, s in sorted(t["scorers"].items()):
            chosen = s["chosen"]
            if s["all_failed"]:
                point, value = "every point failed", None
            elif chosen is None:
                point, value = "sweep not complete", None
            else:
                point = ", ".join(f"{k}={v:g}" for k, v in sorted(chosen.items()))
                value = next((p["mean"] for p in s["points"]
                              if _point_key(p["point"]) == _point_key(chosen)), None)
            worst = (s.get("rate_scores") or {}).get(point_label(rate_of(chosen, RATE_KEYS))) \
                if chosen else None
            ok = sum(p["ok"] for p in s["points"])
            failed = sum(p["failed"] for p in s["points"])
            learned = ", ".join(f"{k} {v:.3g}" for k, v in s["learned"].items()) or "–"
            edge = ", ".join(s["at_edge"]) or "no"
            lines.append(f"| {label} | {point} | {_value(value)} | {_value(worst)} | {edge} | "
                         f"{ok} / {failed} | {learned} |")
        lines.append("")
        mine = [p for p in plots if Path(p).name.startswith(f"tuning__{task}")]
        lines += [f"![{task}: validation metric against learning rate]({p})" for p in mine]
        lines += [""] if mine else []
    return "\n".join(lines)

