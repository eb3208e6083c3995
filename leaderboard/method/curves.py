"""Learning curves in a release: every training task's validation metric during training
(``extra["validation"]["curve"]`` of the reporting records; tasks/validation.py), or where the
records carry the stopping rule's blocks (tasks/stopping.py) their dense curve, evaluated every
``eval_every`` steps; a model that stopped stands at its best value after its stop, and the
entry is marked ``dense`` with each scorer's median stop step (``stop_step``).
A scorer whose seeds split on the target (some reach it, some never do) carries each seed's curve
(``seed_curves``: seed, whether it reached the target, values) and no first step of its mean: its
mean is a curve no seed follows.

``summary(loaded, baseline)`` gives, per task (``<profile>/<task>`` when several profiles ran it),
per scorer: the curve steps, the mean over seeds with a 95% t-interval, the final validation value
and ``reach_step``: the first curve step at which the scorer's mean reaches the declared fraction
``reach`` of the baseline's final value (``reach x final`` when higher is better, ``final / reach``
when lower is), None when it never does. A task whose stopping rule declares a ``target`` (the one
its speed and reliability are measured at, :mod:`leaderboard.method.convergence`) is read at that
target instead (``target``; no ``baseline_final``). :mod:`leaderboard.rendering.curves` plots and
tabulates them.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
from scipy import stats as sps

from ..loading.records import LoadedRecords, Record
from .convergence import seed_outcome


def budget(curves: dict, task: str) -> int | None:
    """The step a release's learning curves of ``task`` end at (``meta.curves``): its step budget
    where it trained a fixed number of steps; None without curves of it."""
    scorers = (curves.get(task) or {}).get("scorers")
    return max(max(c["step"]) for c in scorers.values()) if scorers else None


def _band(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95% t-interval of the finite values (the interval is the mean itself for one)."""
    v = values[np.isfinite(values)]
    if not len(v):
        return (np.nan, np.nan, np.nan)
    mean = float(v.mean())
    if len(v) < 2:
        return (mean, mean, mean)
    half = float(sps.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return (mean, mean - half, mean + half)


def reached(value: float, final: float, reach: float, direction: str) -> bool:
    if direction == "higher":
        return value >= reach * final
    return value <= final / reach


def at_target(value: float, target: float, direction: str) -> bool:
    return value >= target if direction == "higher" else value <= target


def _first(scorer: dict, test) -> int | None:
    """The first curve step at which the scorer's mean passes ``test``; None: never."""
    return next((step for step, m in zip(scorer["step"], scorer["mean"])
                 if np.isfinite(m) and test(m)), None)


def _dense(record: Record) -> list[dict]:
    """The stopping blocks of a record that carry a curve (one per trained model)."""
    return [b for b in record.stopping if (b.get("curve") or {}).get("step")]


def _seed_values(record: Record, steps: list[int]) -> np.ndarray:
    """A record's curve at ``steps`` (NaN: missing): the validation curve, or with stopping
    blocks their dense curve, the mean over its models, a model that stopped standing at its
    best value (the checkpoint it reports) after its stop."""
    out = np.full(len(steps), np.nan)
    blocks = _dense(record)
    if not blocks:
        c = record.validation.get("curve") or {}
        for s, v in zip(c.get("step", []), c.get("value", [])):
            if v is not None:
                out[steps.index(int(s))] = float(v)
        return out
    models = np.full((len(blocks), len(steps)), np.nan)
    for i, b in enumerate(blocks):
        at = {int(s): v for s, v in zip(b["curve"]["step"], b["curve"]["value"])}
        last = max(at)
        for j, step in enumerate(steps):
            v = at.get(step) if step <= last else b.get("best_value")
            if v is not None:
                models[i, j] = float(v)
    seen = np.isfinite(models).any(axis=0)
    out[seen] = np.nanmean(models[:, seen], axis=0)
    return out


def _curves(records: list[Record]) -> tuple[list[int], np.ndarray] | None:
    """The common steps of the records' curves and the (seeds, steps) values (NaN: missing)."""
    steps = sorted({int(s) for r in records
                    for c in ([b["curve"] for b in _dense(r)]
                              or [r.validation.get("curve") or {}])
                    for s in c.get("step", [])})
    if not steps:
        return None
    return steps, np.array([_seed_values(r, steps) for r in records])


def _split_seeds(records: list[Record], table: np.ndarray) -> list[dict] | None:
    """Each seed's curve (a row of ``table``) with whether it reached the target, when the
    records' seeds split on it; else None."""
    outcomes = [seed_outcome(r) for r in records]
    if None in outcomes or len({o["reached"] for o in outcomes}) < 2:
        return None
    return [{"seed": o["seed"], "reached": o["reached"], "value": row.tolist()}
            for o, row in sorted(zip(outcomes, table), key=lambda p: p[0]["seed"])]


def summary(loaded: LoadedRecords, baseline: str = "softmax") -> dict:
    groups: dict[tuple[str, str], dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for r in loaded.records:
        if r.status == "ok" and r.validation and ((r.validation.get("curve") or {}).get("step")
                                                  or _dense(r)):
            groups[(r.profile, r.task)][r.scorer_label].append(r)
    profiles = defaultdict(set)
    for profile, task in groups:
        profiles[task].add(profile)
    out: dict = {}
    for (profile, task), by_scorer in sorted(groups.items()):
        key = task if len(profiles[task]) == 1 else f"{profile}/{task}"
        first = next(iter(by_scorer.values()))[0].validation
        entry = {"profile": profile, "metric": first.get("metric"),
                 "direction": first.get("direction", "higher"),
                 "reach": float(first.get("reach", 0.9)), "baseline": baseline,
                 "baseline_final": None, "scorers": {}}
        targets: set[float] = set()
        for label, recs in sorted(by_scorer.items()):
            found = _curves(recs)
            if found is None:
                continue
            steps, table = found
            bands = [_band(table[:, j]) for j in range(len(steps))]
            finals = np.array([(r.validation.get("value") if r.validation.get("value")
                                is not None else np.nan) for r in recs], dtype=float)
            entry["scorers"][label] = {
                "seeds": len(recs), "step": steps,
                "mean": [b[0] for b in bands], "lo": [b[1] for b in bands],
                "hi": [b[2] for b in bands], "final": _band(finals)[0],
            }
            stops = [max(b["stop_step"] for b in _dense(r)) for r in recs if _dense(r)]
            if stops:
                entry["dense"] = True
                entry["scorers"][label]["stop_step"] = float(np.median(stops))
            targets.update(b["target"] for r in recs for b in _dense(r)
                           if b.get("target") is not None)
            split = _split_seeds(recs, table)
            if split:
                entry["scorers"][label]["seed_curves"] = split
        if len(targets) == 1:
            entry["target"] = float(targets.pop())
        base = entry["scorers"].get(baseline)
        if "target" in entry:
            for s in entry["scorers"].values():
                s["reach_step"] = None if "seed_curves" in s else _first(
                    s, lambda m: at_target(m, entry["target"], entry["direction"]))
        elif base is not None and np.isfinite(base["mean"][-1]):
            final = base["mean"][-1]
            entry["baseline_final"] = final
            for s in entry["scorers"].values():
                s["reach_step"] = _first(s, lambda m: reached(m, final, entry["reach"],
                                                              entry["direction"]))
        out[key] = entry
    return out
