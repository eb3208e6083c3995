"""Collecting the rows: the records of each (profile, task) become one row per (metric, scorer)
with its statistics (:mod:`leaderboard.method.table_stats`), failures and provenance, plus what the
rest of the aggregation needs: each seed's normalized values, the anchored headline metrics of
the overall, the averaged grids, the failed cells and every scorer's records."""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..loading.records import Problem, Record, failure_counts, provenance_lists
from . import informative
from .anchors import bounds, has_anchors, record_normalized
from .board import DESCRIPTIVE_TRACKS, OVERALL_TRACKS
from .grids import mean_grids
from .table_stats import Series, mark_informative, metric_stats

SPEC_KEYS = ("direction", "headline", "floor", "ceiling", "log_scale", "min_effect")


@dataclass
class Collected:
    """What collecting gives.

    rows:         one per (profile, task, metric, scorer), in the order collected.
    z:            (profile, task) -> metric -> scorer -> seed -> unclipped normalized value.
    anchored:     (profile, task) -> its headline metrics of the overall with both anchors.
    unanchored:   "task/metric (profile)" of each headline metric of the overall without them.
    grids, failed_cells: rows of the Board's frames of those names.
    records_by_scorer: (profile, scorer) -> its records.
    problems:     what was found wrong in the records while collecting.
    """

    rows: list[dict] = field(default_factory=list)
    z: dict[tuple, dict] = field(default_factory=dict)
    anchored: dict[tuple, list[str]] = field(default_factory=dict)
    unanchored: list[str] = field(default_factory=list)
    grids: list[dict] = field(default_factory=list)
    failed_cells: list[dict] = field(default_factory=list)
    records_by_scorer: dict[tuple[str, str], list[Record]] = field(
        default_factory=lambda: defaultdict(list))
    problems: list[Problem] = field(default_factory=list)


@dataclass
class _Task:
    """The records of one (profile, task), by scorer label, and the method's settings."""

    profile: str
    task: str
    track: str
    by_scorer: dict[str, list[Record]]
    baseline: str
    n_boot: int
    alpha: float
    baseline_means: dict[str, float] = field(default_factory=dict)


def collect(by_task: dict[tuple[str, str], list[Record]], baseline: str, n_boot: int,
            alpha: float) -> Collected:
    """``by_task``: (profile label, task) -> its records (one per cell)."""
    out = Collected()
    for (profile, task), recs in sorted(by_task.items()):
        _collect_task(out, profile, task, recs, baseline, n_boot, alpha)
    return out


def _collect_task(out: Collected, profile: str, task: str, recs: list[Record], baseline: str,
                  n_boot: int, alpha: float) -> None:
    track = Counter(r.track for r in recs).most_common(1)[0][0]
    specs = _metric_specs(profile, task, recs, out.problems)
    by_scorer: dict[str, list[Record]] = defaultdict(list)
    for r in recs:
        by_scorer[r.scorer_label].append(r)
        out.records_by_scorer[(profile, r.scorer_label)].append(r)
    for label in sorted(by_scorer):
        out.grids.extend(mean_grids(profile, task, label, by_scorer[label], out.problems))
        out.failed_cells.extend(_failed_cells(profile, track, task, label, by_scorer[label]))
    t = _Task(profile, task, track, by_scorer, baseline, n_boot, alpha)
    zs: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    first_row = len(out.rows)
    t.baseline_means = _baseline_means(by_scorer.get(baseline, []))
    for metric in sorted(specs):
        spec = specs[metric]
        if spec["headline"] and track in OVERALL_TRACKS:
            if has_anchors(spec, recs, metric):
                out.anchored.setdefault((profile, task), []).append(metric)
            else:
                out.unanchored.append(f"{task}/{metric} ({profile})")
        out.rows.extend(_metric_rows(t, metric, spec, zs[metric]))
    task_z = {m: {label: dict(v) for label, v in by_label.items()}
              for m, by_label in zs.items()}
    mark_informative(out.rows[first_row:], task, task_z, baseline, track, alpha)
    out.z[(profile, task)] = task_z


def _baseline_means(records: list[Record]) -> dict[str, float]:
    """Metric -> the baseline's mean over its cells that report it."""
    values: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.status == "ok":
            for name, v in r.metrics.items():
                if not math.isnan(v):
                    values[name].append(v)
    return {name: float(np.mean(v)) for name, v in values.items()}


def _metric_specs(profile: str, task: str, recs: list[Record],
                  problems: list[Problem]) -> dict[str, dict]:
    """Metric -> its declaration (the most common one where records disagree, a problem)."""
    specs: dict[str, Counter] = defaultdict(Counter)
    for r in recs:
        for name, spec in r.metric_specs.items():
            specs[name][tuple(spec[k] for k in SPEC_KEYS)] += 1
    for name, counter in specs.items():
        if len(counter) > 1:
            problems.append(Problem(f"{task} ({profile})", f"metric {name!r} is declared "
                                    f"differently across records {dict(counter)}; the most "
                                    "common declaration is used", skipped=False))
    return {name: dict(zip(SPEC_KEYS, counter.most_common(1)[0][0]))
            for name, counter in specs.items()}


def _failed_cells(profile: str, track: str, task: str, label: str,
                  records: list[Record]) -> list[dict]:
    """The cells of one scorer that did not finish ``ok``, or finished with a null metric."""
    out = []
    for r in sorted(records, key=lambda r: r.seed):
        bad = [m for m, v in r.metrics.items() if math.isnan(v)] if r.status == "ok" else []
        if r.status != "ok" or bad:
            out.append(dict(
                profile=profile, track=track, task=task, scorer=label, seed=r.seed,
                status=r.status if not bad else f"ok, null {', '.join(sorted(bad))}",
                step=r.step, message=r.message, path=r.path, date=r.date,
                git_sha=r.git_sha, hardware=r.hardware))
    return out


def _metric_rows(t: _Task, metric: str, spec: dict,
                 zs: dict[str, dict[int, float]]) -> list[dict]:
    """The rows of one metric, one per scorer; ``zs`` (scorer -> seed -> normalized value) is
    filled on the way."""
    rule = informative.rule_for(t.task, metric)
    default_floor = rule.floor if rule is not None else None
    series = []
    for label in sorted(t.by_scorer):
        s = Series(label)
        for r in t.by_scorer[label]:
            value = r.metrics.get(metric, math.nan)
            if r.status == "ok" and not math.isnan(value):
                s.by_seed[r.seed] = (value, r.items.get(metric))
                zs[label][r.seed] = record_normalized(value, spec, r, metric, default_floor)
        series.append(s)
    descriptive = t.track in DESCRIPTIVE_TRACKS
    result = metric_stats(t.profile, t.task, metric, spec["direction"], spec["min_effect"],
                          descriptive, series, t.n_boot, t.alpha, t.baseline,
                          bounds(metric, spec["direction"], spec["ceiling"]), t.baseline_means)
    degenerate = ("" if descriptive else informative.metric_degenerate(
        {s.label: {k: v for k, (v, _) in s.by_seed.items()} for s in series}))
    return [_row(t, metric, spec, label, result[label], zs[label], degenerate)
            for label in sorted(t.by_scorer)]


def _row(t: _Task, metric: str, spec: dict, label: str, st: dict, z_by_seed: dict[int, float],
         degenerate: str) -> dict:
    scorer_recs = t.by_scorer[label]
    first = scorer_recs[0]
    nulls = sum(1 for r in scorer_recs if r.status == "ok" and metric in r.metrics
                and math.isnan(r.metrics[metric]))
    not_applicable = sum(1 for r in scorer_recs if r.status == "skipped"
                         or (r.status == "ok" and metric not in r.metrics))
    failures = failure_counts(scorer_recs)
    if nulls:
        failures["null"] = nulls
    n_failed = sum(failures.values()) - nulls
    na_reasons = {r.message for r in scorer_recs if r.status == "skipped"} | {
        r.not_applicable[metric] for r in scorer_recs
        if r.status == "ok" and metric in r.not_applicable}
    z = [x for x in z_by_seed.values() if math.isfinite(x)]
    row = dict(
        profile=t.profile, track=t.track, task=t.task, task_version=first.task_version,
        metric=metric, direction=spec["direction"], headline=spec["headline"], scorer=label,
        scorer_name=first.scorer, scorer_version=first.scorer_version,
        scorer_kwargs=first.scorer_kwargs, n_cells=len(scorer_recs),
        n_ok=sum(1 for r in scorer_recs if r.status == "ok"), n_failed=n_failed,
        failures=failures, n_skipped=sum(1 for r in scorer_recs if r.status == "skipped"),
        n_na=not_applicable, na_reason="; ".join(sorted(filter(None, na_reasons))),
        n_null=nulls,
        survivors_only=bool(st["n"] > 0 and (n_failed + nulls) > 0),
        floor=spec["floor"], ceiling=spec["ceiling"], log_scale=spec["log_scale"],
        normalized=float(np.mean(z)) if z else math.nan,
        degenerate=degenerate or st.pop("degenerate_pair", ""),
        cell_ids=[r.cell_id for r in sorted(scorer_recs, key=lambda r: (r.seed, r.cell_id))],
        **st, **provenance_lists(scorer_recs))
    row.pop("degenerate_pair", None)
    return row
