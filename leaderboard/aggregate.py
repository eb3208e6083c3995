"""From records to the leaderboard's tables: one function, :func:`aggregate`, returns a
:class:`Board` of tidy pandas frames; ``Board.to_dict()`` is the release's ``results.json`` and
every renderer (markdown, plots, HTML) reads a Board, so all of them show the same numbers.

Rules (the release README repeats them):

- Records whose task version is older than the newest seen for that task, whose scorer version
  is older than the newest seen for that scorer, or whose harness version (``records_version``)
  is older than the newest seen, are *superseded*: listed, never mixed in.
- A row is (profile, task, metric, scorer[kwargs]). Mean, std (ddof=1) and n are over the seeds
  whose cell finished ``ok`` with a non-null value. Cells that diverged / went NaN / errored /
  ran out of memory or time are counted per status in ``failures``; such a row's mean is over the
  survivors and is flagged ``survivors_only``.
- 95% CI: Student t on the seed values (each seed's value is its mean over the evaluation
  items, so items enter once); needs two or more seeds. ``ci_items_low/high``: a percentile
  bootstrap over items only ("given these trained models"), one item draw shared by every seed
  evaluated on the same items.
- vs softmax: paired t test on the per-seed differences of the seeds both have, two-sided;
  Holm-corrected per (profile, scorer) across the tasks and headline metrics (secondary metrics
  form their own family) and Benjamini-Hochberg-corrected across the scorers of one metric.
  better / worse need both corrected p <= alpha and |delta| >= the metric's ``min_effect``
  (relative to softmax's mean); below it a row is a ``tie``. ``p_signflip`` is the exact
  sign-flip test over the seed differences. ``detectable_vs_baseline`` is the smallest
  difference the paired t test detects with 80% power at alpha.
- Tiers and rank intervals: see :func:`leaderboard.stats.assign_tiers` and
  :func:`leaderboard.stats.rank_intervals`, on pairwise paired t tests. A scorer with fewer than
  two seeds cannot be tested: it gets no tier and no rank interval. Probe and cost tracks are
  descriptive: no verdict, tier or rank, and never in the overall.
- A metric a cell does not report (or a ``skipped`` cell) is n/a (``n_na``), not a failure; a
  metric reported as null is a failure (``n_null``).
- Overall (per profile, ICL / decoder / encoder tracks, headline metrics with a floor and a
  ceiling, over the tasks that every scorer of the profile has records of): each record's value
  is normalized on fixed anchors, clip((x - floor) / (ceiling - floor), 0, 1) (log scale where
  declared), the record's own ``extra["anchors"]`` overriding the declared ones; a seed's task
  score is the mean over its normalized headline metrics, a scorer's task score the mean over
  seeds, its score the mean over the tasks it ran (a task where every cell failed counts 0; a
  skipped task does not count). So a score depends on the scorer's own records only. CI: t with
  Welch-Satterthwaite degrees of freedom; tiers and ranks from paired per-task differences;
  ``win_rate`` is HELM's mean win rate over the overall's headline metrics.
"""
from __future__ import annotations

import hashlib
import json
import math
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from suite.records import FAILURES, TRACKS

from . import informative, stats
from .claims import judge as judge_claims
from .claims import load_claims
from .records import LoadedRecords, Problem, Record

FORMAT_VERSION = 1
BASELINE = "softmax"
# Tracks whose headline metrics enter the overall; probe and cost tables are descriptive: no
# better/worse words, tiers or ranks, never in the overall.
OVERALL_TRACKS = ("icl", "decoder", "encoder")
DESCRIPTIVE_TRACKS = ("probe", "cost")
# The smallest difference of overall scores (normalized scale, 0..1) that can separate tiers.
OVERALL_MIN_EFFECT = 1e-6
SPEC_KEYS = ("direction", "headline", "floor", "ceiling", "log_scale", "min_effect")

# Column name -> kind, for every frame of the Board; the kind fixes the JSON type of each cell.
ROW_COLUMNS = {
    "profile": "str", "track": "str", "task": "str", "task_version": "int", "metric": "str",
    "direction": "str", "headline": "bool", "scorer": "str", "scorer_name": "str",
    "scorer_version": "int", "scorer_kwargs": "json",
    "n": "int", "mean": "float", "std": "float", "ci_low": "float", "ci_high": "float",
    "ci_method": "str", "n_items": "int", "seeds": "json", "values": "json",
    "ci_items_low": "float", "ci_items_high": "float",
    "n_cells": "int", "n_ok": "int", "n_failed": "int", "failures": "json", "n_skipped": "int",
    "n_na": "int", "n_null": "int", "survivors_only": "bool",
    "floor": "float", "ceiling": "float", "log_scale": "bool", "min_effect": "float",
    "delta_vs_baseline": "float", "p_vs_baseline": "float", "p_vs_baseline_holm": "float",
    "p_vs_baseline_bh": "float", "p_signflip": "float", "n_paired": "int", "sd_paired": "float",
    "detectable_vs_baseline": "float", "vs_baseline": "str",
    "tier": "int", "rank_low": "int", "rank_high": "int",
    "date": "str", "git_sha": "json", "hardware": "json", "harness_version": "json",
    "normalized": "float", "informative": "bool", "informative_reason": "str",
    "degenerate": "str", "stand_in_for": "str", "not_learned": "str",
}
OVERALL_COLUMNS = {
    "profile": "str", "scorer": "str", "score": "float", "ci_low": "float", "ci_high": "float",
    "win_rate": "float", "n_tasks": "int", "tasks_failed": "int", "tasks_skipped": "int", "tier1_tasks": "int",
    "tier": "int", "rank_low": "int", "rank_high": "int",
    "n_cells": "int", "n_failed": "int", "failures": "json",
    "date": "str", "git_sha": "json", "hardware": "json",
    "score_rank": "int", "rank_without": "json", "outside_anchors": "json",
}
FAILED_CELL_COLUMNS = {
    "profile": "str", "track": "str", "task": "str", "scorer": "str", "seed": "int",
    "status": "str", "step": "int", "message": "str", "path": "str", "date": "str",
    "git_sha": "str", "hardware": "str",
}
SUPERSEDED_COLUMNS = {
    "task": "str", "task_version": "int", "scorer": "str", "scorer_version": "int",
    "profile": "str", "n_cells": "int", "reason": "str",
}
PROBLEM_COLUMNS = {"path": "str", "reason": "str", "skipped": "bool"}
TASK_SCORE_COLUMNS = {"profile": "str", "task": "str", "scorer": "str", "score": "float",
                      "score_unclipped": "float"}
OVERALL_TASK_COLUMNS = {"profile": "str", "task": "str", "metrics": "json", "share": "float"}
GRID_COLUMNS = {
    "profile": "str", "task": "str", "grid": "str", "scorer": "str", "rows_name": "str",
    "cols_name": "str", "rows": "json", "cols": "json", "values": "json", "n": "int",
}
CLAIM_COLUMNS = {
    "id": "str", "claim": "str", "source": "str", "profile": "str", "scorer": "str",
    "baseline": "str", "task": "str", "metric": "str", "direction": "str", "paper": "str",
    "verdict": "str", "effect": "float", "ci_low": "float", "ci_high": "float", "p": "float",
    "p_raw": "float", "test": "str", "n_seeds": "int", "detectable": "float",
    "min_effect": "float", "role": "str", "reason": "str", "alpha_corrected": "float",
}
FRAMES = {"rows": ROW_COLUMNS, "overall": OVERALL_COLUMNS, "failed_cells": FAILED_CELL_COLUMNS,
          "superseded": SUPERSEDED_COLUMNS, "problems": PROBLEM_COLUMNS,
          "task_scores": TASK_SCORE_COLUMNS, "grids": GRID_COLUMNS, "claims": CLAIM_COLUMNS,
          "overall_tasks": OVERALL_TASK_COLUMNS}


def _clean(value: Any, kind: str) -> Any:
    """A cell value as the plain JSON type of its column (NaN, NA and None become None)."""
    if value is None or value is pd.NA or (isinstance(value, (float, np.floating))
                                           and math.isnan(value)):
        return None
    if kind == "json":
        return _json_value(value)
    if kind == "int":
        return int(value)
    if kind == "float":
        value = float(value)
        return value if math.isfinite(value) else None
    if kind == "bool":
        return bool(value)
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_json_value(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


_DTYPES = {"int": "Int64", "float": "float64", "bool": "boolean", "str": object, "json": object}


def _frame(rows: Iterable[dict], columns: dict[str, str]) -> pd.DataFrame:
    """A frame with one dtype per column kind: nullable Int64 / boolean, float64 (NaN), object."""
    data = [{c: _clean(r.get(c), kind) for c, kind in columns.items()} for r in rows]
    frame = pd.DataFrame(data, columns=list(columns), dtype=object)
    return frame.astype({c: _DTYPES[kind] for c, kind in columns.items()})


@dataclass
class Board:
    """The aggregated leaderboard: tidy frames (one row per observation) plus release metadata.

    rows:         one per (profile, task, metric, scorer): statistics, failures, provenance.
    overall:      one per (profile, scorer): normalized quality score, tier, rank interval.
    failed_cells: one per cell that did not finish ``ok`` (skipped included) or has a null metric.
    superseded:   records left out because a newer task or scorer version exists.
    problems:     files (or parts) that could not be used, and why.
    task_scores:  per (profile, quality task, scorer): the normalized headline score of the overall.
    grids:        per (profile, task, grid, scorer): the grid averaged over ``ok`` seeds.
    claims:       per (paper claim, scorer, profile): the verdict (see :mod:`leaderboard.claims`).
    overall_tasks: per (profile, task of the overall): its metrics and its share of the spread.
    meta:         release name, record counts, date range, git shas, hardware, method constants.
    """

    meta: dict
    rows: pd.DataFrame
    overall: pd.DataFrame
    failed_cells: pd.DataFrame
    superseded: pd.DataFrame
    problems: pd.DataFrame
    task_scores: pd.DataFrame
    grids: pd.DataFrame
    claims: pd.DataFrame
    overall_tasks: pd.DataFrame = field(
        default_factory=lambda: _frame([], OVERALL_TASK_COLUMNS))

    def to_dict(self) -> dict:
        """The JSON document of the release (``results.json``): plain types, NaN as null."""
        out = {"format": "scorebench-leaderboard", "format_version": FORMAT_VERSION,
               "meta": _json_value(self.meta)}
        for name, columns in FRAMES.items():
            frame = getattr(self, name)
            if name == "claims" and frame.empty:
                continue   # a release that holds no claim's metric judges nothing
            out[name] = [{c: _clean(row[c], kind) for c, kind in columns.items()}
                         for row in frame.to_dict(orient="records")]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=False, ensure_ascii=False,
                          allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict) -> "Board":
        if data.get("format") != "scorebench-leaderboard":
            raise ValueError("not a scorebench leaderboard results.json (no 'format' field)")
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"results.json format_version {data.get('format_version')!r}; this "
                             f"scorebench reads {FORMAT_VERSION}")
        frames = {name: _frame(data.get(name, []), columns) for name, columns in FRAMES.items()}
        return cls(meta=dict(data.get("meta", {})), **frames)

    def with_release(self, release: str) -> "Board":
        frames = {name: getattr(self, name) for name in FRAMES}
        return Board(meta={**self.meta, "release": release}, **frames)


# --------------------------------------------------------------------------- selection


def _split_superseded(records: list[Record]) -> tuple[list[Record], list[dict]]:
    newest_task: dict[str, int] = {}
    newest_scorer: dict[str, int] = {}
    newest_records = max((r.records_version for r in records), default=0)
    for r in records:
        newest_task[r.task] = max(newest_task.get(r.task, r.task_version), r.task_version)
        newest_scorer[r.scorer] = max(newest_scorer.get(r.scorer, r.scorer_version),
                                      r.scorer_version)
    current, old = [], Counter()
    for r in records:
        reasons = []
        if r.task_version < newest_task[r.task]:
            reasons.append(f"task {r.task} v{r.task_version} < v{newest_task[r.task]}")
        if r.scorer_version < newest_scorer[r.scorer]:
            reasons.append(f"scorer {r.scorer} v{r.scorer_version} < v{newest_scorer[r.scorer]}")
        if r.records_version < newest_records:
            reasons.append(f"records v{r.records_version} < v{newest_records}")
        if reasons:
            old[(r.task, r.task_version, r.scorer_label, r.scorer_version, r.profile,
                 "; ".join(reasons))] += 1
        else:
            current.append(r)
    superseded = [dict(task=t, task_version=tv, scorer=s, scorer_version=sv, profile=p,
                       n_cells=n, reason=why)
                  for (t, tv, s, sv, p, why), n in sorted(old.items())]
    return current, superseded


def _setting_labels(records: list[Record]) -> dict[tuple[str, str, str], str]:
    """(task, profile, config) -> the profile label of its rows: the profile name, or
    ``profile@<config hash>`` when one task ran under several configs in that profile."""
    configs: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in records:
        configs[(r.task, r.profile)].add(r.config_key)
    labels = {}
    for (task, profile), keys in configs.items():
        for key in keys:
            digest = hashlib.sha256(key.encode()).hexdigest()[:6]
            labels[(task, profile, key)] = profile if len(keys) == 1 else f"{profile}@{digest}"
    return labels


def _deduplicate(records: list[Record], label_of) -> tuple[list[Record], list[Problem]]:
    """One record per (profile label, task, scorer, seed): the latest finished wins."""
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in records:
        groups[(label_of(r), r.task, r.scorer_label, r.seed)].append(r)
    kept, problems = [], []
    for key in sorted(groups):
        group = sorted(groups[key], key=lambda r: (str(r.provenance.get("finished", "")), r.path))
        kept.append(group[-1])
        for r in group[:-1]:
            problems.append(Problem(r.path, f"another record of the same cell ({group[-1].path}) "
                                            "finished later; this one is left out"))
    return kept, problems


# --------------------------------------------------------------------------- statistics


@dataclass
class _Series:
    """One scorer's observations of one metric in one task: seed -> (value, items or None)."""

    label: str
    by_seed: dict[int, tuple[float, np.ndarray | None]] = field(default_factory=dict)

    def mean(self) -> float:
        return float(np.mean([v for v, _ in self.by_seed.values()])) if self.by_seed else math.nan

    def values(self, seeds: list[int]) -> np.ndarray:
        return np.array([self.by_seed[k][0] for k in seeds], dtype=np.float64)


def _better_sign(direction: str) -> float:
    return 1.0 if direction == "higher" else -1.0


def _min_effect(min_effect: float, reference: float) -> float:
    """The metric's minimum effect in its own units: relative to ``reference`` (the baseline's
    mean), absolute when that mean is 0 or unknown."""
    if math.isnan(reference) or reference == 0:
        return min_effect
    return min_effect * abs(reference)


def _metric_stats(profile: str, task: str, metric: str, direction: str, min_effect: float,
                  descriptive: bool, series: list[_Series], n_boot: int, alpha: float,
                  baseline: str) -> dict:
    """Per-scorer statistics, comparisons to the baseline, tiers and rank intervals of one
    metric. A descriptive metric (probe and cost tracks) gets no tiers or ranks."""
    higher = direction == "higher"
    out: dict[str, dict] = {}
    base = next((s for s in series if s.label == baseline), None)
    effect = _min_effect(min_effect, base.mean() if base is not None else math.nan)
    for s in series:
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
            row["ci_low"], row["ci_high"] = stats.t_interval(values, alpha)
            row["ci_method"] = "t over seeds"
        if seeds and all(it is not None for it in items):
            row["ci_items_low"], row["ci_items_high"] = stats.items_interval(
                items, n_boot, stats.rng_for("items", profile, task, metric, s.label), alpha)
        if base is not None and s is not base:
            common = sorted(set(s.by_seed) & set(base.by_seed))
            row["n_paired"] = len(common)
            if common:
                a, b = s.values(common), base.values(common)
                row["delta_vs_baseline"] = float(np.mean(a - b))
            if len(common) >= 2:
                row["degenerate_pair"] = informative.comparison_degenerate(
                    a.tolist(), b.tolist(), s.label, baseline)
                row["p_vs_baseline"] = stats.paired_t(a, b)
                row["p_signflip"] = stats.sign_flip(a, b)
                row["sd_paired"] = float(np.std(a - b, ddof=1))
                row["detectable_vs_baseline"] = stats.detectable_difference(
                    row["sd_paired"], len(common), alpha)
        out[s.label] = row
    if descriptive:
        return out

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
    return out


def _verdicts(rows: list[dict], alpha: float) -> None:
    """Holm per (profile, scorer) across the tasks and headline metrics (secondary metrics form
    their own family) and Benjamini-Hochberg across the scorers of one (profile, task, metric);
    a row is better / worse when both adjusted p are <= alpha and |Δ| reaches the metric's minimum
    effect, a tie when |Δ| is below it, n.s. otherwise. Probe and cost rows get no verdict."""
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
        delta = r["delta_vs_baseline"]
        if r["track"] in DESCRIPTIVE_TRACKS or r["n_paired"] < 2:
            r["vs_baseline"] = ""
        elif r.get("informative") is False:
            r["vs_baseline"] = "uninformative"
        elif r.get("degenerate"):
            r["vs_baseline"] = "degenerate"
        elif math.isnan(r["p_vs_baseline_holm"]):
            r["vs_baseline"] = ""
        elif abs(delta) < r["min_effect"]:
            r["vs_baseline"] = "tie"
        elif max(r["p_vs_baseline_holm"], r["p_vs_baseline_bh"]) <= alpha:
            r["vs_baseline"] = "better" if delta * _better_sign(r["direction"]) > 0 else "worse"
        else:
            r["vs_baseline"] = "n.s."


def _judgeable(row: dict) -> bool:
    """Whether a row can get a verdict: its metric is not uninformative at the profile and
    neither the metric nor its comparison with the baseline is degenerate."""
    return row.get("informative") is not False and not row.get("degenerate")


def _informative(rows: list[dict], task: str, task_z: dict, baseline: str, track: str,
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
    decisions = {m: informative.decide(task, m, baseline_z, alpha) for m in metrics}
    headline = {r["metric"] for r in rows if r["headline"]}
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


def _overall_norms(rows: list[dict], all_z: dict, anchored: dict,
                   uninformative: list[str]) -> dict:
    """The headline metrics the overall uses, per (profile, task): the anchored ones (a stand-in
    included) that are not uninformative; ``anchored`` is updated to them and
    each metric left out is named in ``uninformative``. Returns (profile, task) -> scorer ->
    seed -> [normalized value of each metric used, unclipped]."""
    heads: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        if r["track"] in OVERALL_TRACKS and r["headline"]:
            heads[(r["profile"], r["task"])].setdefault(r["metric"], r)
    out = {}
    for key in sorted(heads):
        profile, task = key
        used = []
        for metric, r in sorted(heads[key].items()):
            if metric not in anchored.get(key, []) and not (
                    r["stand_in_for"] and r["floor"] is not None and r["ceiling"] is not None):
                continue
            if r["informative"] is False:
                uninformative.append(f"{task}/{metric} ({profile}): {r['informative_reason']}")
            else:
                used.append(metric)
        if used:
            anchored[key] = used
        else:
            anchored.pop(key, None)
        per_scorer: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for metric in used:
            for label, seeds in all_z.get(key, {}).get(metric, {}).items():
                for seed, z in seeds.items():
                    if math.isfinite(z):
                        per_scorer[label][seed].append(z)
        out[key] = {label: dict(v) for label, v in per_scorer.items()}
    return out


def _provenance_lists(records: list[Record]) -> dict:
    return {"date": max((r.date for r in records), default="unknown"),
            "git_sha": sorted({r.git_sha for r in records}),
            "hardware": sorted({r.hardware for r in records}),
            "harness_version": sorted({str(r.provenance.get("harness_version", "unknown"))
                                       for r in records})}


def _failure_counts(records: list[Record]) -> dict[str, int]:
    counts = Counter(r.status for r in records)
    return {s: counts[s] for s in FAILURES if counts[s]}


# --------------------------------------------------------------------------- grids


def _mean_grids(profile: str, task: str, label: str, records: list[Record],
                problems: list[Problem]) -> list[dict]:
    by_name: dict[str, list[tuple[Record, dict]]] = defaultdict(list)
    for r in records:
        if r.status == "ok":
            for name, grid in r.grids.items():
                by_name[name].append((r, grid))
    out = []
    for name in sorted(by_name):
        first = by_name[name][0][1]
        shape = (first["rows"], first["cols"])
        stack = []
        for r, grid in by_name[name]:
            if (grid["rows"], grid["cols"]) != shape:
                problems.append(Problem(r.path, f"grid {name!r} has other row/column labels than "
                                                f"{by_name[name][0][0].path}; left out of the "
                                                "averaged grid", skipped=False))
                continue
            stack.append(np.array(grid["values"], dtype=np.float64))
        values = _nanmean(np.stack(stack), 0)
        out.append(dict(profile=profile, task=task, grid=name, scorer=label,
                        rows_name=first["rows_name"], cols_name=first["cols_name"],
                        rows=first["rows"], cols=first["cols"], values=values.tolist(),
                        n=len(stack)))
    return out


# --------------------------------------------------------------------------- overall


def _nanmean(a: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(a, axis=axis)


def normalized(x: float, floor: float | None, ceiling: float | None, log_scale: bool,
               clip: bool = True) -> float:
    """(x - floor) / (ceiling - floor), on log(x) when ``log_scale``: 0 = the trivial predictor or
    chance, 1 = perfect; clipped to [0, 1] unless ``clip`` is false (below 0: worse than the
    floor). NaN without both anchors (or a non-positive value on a log scale)."""
    if floor is None or ceiling is None or math.isnan(x):
        return math.nan
    if log_scale:
        if min(x, floor, ceiling) <= 0:
            return math.nan
        x, floor, ceiling = math.log(x), math.log(floor), math.log(ceiling)
    if floor == ceiling:
        return math.nan
    z = (x - floor) / (ceiling - floor)
    return min(1.0, max(0.0, z)) if clip else z


@dataclass
class _TaskScore:
    """One scorer's normalized score of one task: the mean over seeds of the seed's mean
    normalized headline value; ``var`` is the variance of that mean (0 for a task where every
    cell failed, which counts 0; NaN with one seed) and ``df`` its degrees of freedom."""

    score: float
    var: float
    df: float
    seeds: dict[int, float]
    unclipped: float = math.nan


def _task_score(per_seed: dict[int, list[float]], all_failed: bool) -> _TaskScore | None:
    """``per_seed``: seed -> the unclipped normalized values of the task's headline metrics; the
    score clips each to [0, 1], ``unclipped`` keeps them as they are."""
    seeds = {k: float(np.mean(np.clip(v, 0.0, 1.0))) for k, v in sorted(per_seed.items()) if v}
    if seeds:
        x = np.array(list(seeds.values()))
        var = float(x.var(ddof=1)) / x.size if x.size > 1 else math.nan
        raw = float(np.mean([np.mean(v) for v in per_seed.values() if v]))
        return _TaskScore(float(x.mean()), var, float(x.size - 1), seeds, raw)
    return _TaskScore(0.0, 0.0, 1.0, {}, 0.0) if all_failed else None


def _difference(a: dict[str, _TaskScore], c: dict[str, _TaskScore]) -> tuple[list, list, list]:
    """Per task: the mean difference of two scorers' task scores, its variance and df; paired on
    the seeds both have where both have two or more of them, independent otherwise."""
    means, variances, dofs = [], [], []
    for task in sorted(a):
        x, y = a[task], c[task]
        common = sorted(set(x.seeds) & set(y.seeds))
        if len(common) >= 2 and len(common) == len(x.seeds) == len(y.seeds):
            d = np.array([x.seeds[k] - y.seeds[k] for k in common])
            means.append(float(d.mean()))
            variances.append(float(d.var(ddof=1)) / d.size)
            dofs.append(float(d.size - 1))
        else:
            means.append(x.score - y.score)
            variances.append(x.var + y.var)
            dofs.append(stats.welch_satterthwaite([x.var, y.var], [x.df, y.df])
                        if x.var + y.var > 0 else 1.0)
    return means, variances, dofs


def _win_rate(prows: list[dict], scenarios: list[tuple[str, str]], scorer: str) -> float:
    """HELM's mean win rate: per scenario (task, headline metric of the overall) the share of the
    other scorers whose mean this scorer beats (a tie within the tolerance counts half; a scorer
    whose every cell failed loses to every scorer with a value), averaged over scenarios."""
    rates = []
    for task, metric in scenarios:
        mrows = {r["scorer"]: r for r in prows if r["task"] == task and r["metric"] == metric}
        if scorer not in mrows:
            continue
        sign = _better_sign(mrows[scorer]["direction"])

        def value(r):
            if r["n"] > 0:
                return sign * r["mean"]
            return -math.inf if r["n_failed"] + r["n_null"] > 0 else math.nan

        mine = value(mrows[scorer])
        if math.isnan(mine):
            continue
        wins = []
        for other, r in mrows.items():
            theirs = value(r)
            if other == scorer or math.isnan(theirs):
                continue
            if mine == theirs or (math.isfinite(mine) and math.isfinite(theirs)
                                  and abs(mine - theirs) <= stats.tolerance(mine, theirs)):
                wins.append(0.5)
            else:
                wins.append(1.0 if mine > theirs else 0.0)
        if wins:
            rates.append(float(np.mean(wins)))
    return float(np.mean(rates)) if rates else math.nan


def _overall(rows: list[dict], seed_norms: dict, anchored: dict, records_by_scorer: dict,
             alpha: float) -> tuple[list[dict], list[dict], list[dict]]:
    """Per profile: the fixed-anchor quality score per scorer, with t interval, mean win rate,
    tiers and rank intervals, its rank with each task left out and the tasks where its unclipped
    score leaves [0, 1]; the per-task normalized scores it averages; each task's metrics and
    share of the spread of the overall across scorers."""
    out, task_scores, overall_tasks = [], [], []
    by_profile: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if r["track"] in OVERALL_TRACKS:
            by_profile[r["profile"]].append(r)
    for profile in sorted(by_profile):
        prows = by_profile[profile]
        scorers = sorted({r["scorer"] for r in prows})
        per_task: dict[str, dict[str, _TaskScore]] = {}
        scenarios = []
        for task in sorted({r["task"] for r in prows}):
            metrics = anchored.get((profile, task), [])
            if not metrics or {r["scorer"] for r in prows if r["task"] == task} != set(scorers):
                continue   # run by some scorers only, or no anchored headline metric
            scenarios += [(task, m) for m in metrics]
            scores = {}
            for s in scorers:
                trows = [r for r in prows if r["task"] == task and r["scorer"] == s
                         and r["metric"] in metrics]
                all_failed = all(r["n"] == 0 for r in trows) and any(
                    r["n_failed"] + r["n_null"] > 0 for r in trows)
                ts = _task_score(seed_norms.get((profile, task), {}).get(s, {}), all_failed)
                if ts is not None:
                    scores[s] = ts
            per_task[task] = scores
            task_scores += [dict(profile=profile, task=task, scorer=s, score=ts.score,
                                 score_unclipped=ts.unclipped)
                            for s, ts in sorted(scores.items())]
        tasks_of = {s: {t: per_task[t][s] for t in per_task if s in per_task[t]} for s in scorers}
        overall_score, summary = {}, {}
        for s in scorers:
            ts = list(tasks_of[s].values())
            if not ts:
                overall_score[s] = math.nan
                continue
            if all(math.isfinite(t.var) for t in ts):
                summary[s] = stats.combined_t([t.score for t in ts], [t.var for t in ts],
                                              [t.df for t in ts], alpha)
            overall_score[s] = float(np.mean([t.score for t in ts]))
        testable = {s: overall_score[s] for s in summary}

        def pvalue(a, c):
            if set(tasks_of[a]) == set(tasks_of[c]):
                means, variances, dofs = _difference(tasks_of[a], tasks_of[c])
            else:
                means = [overall_score[a] - overall_score[c]]
                va = sum(t.var for t in tasks_of[a].values()) / len(tasks_of[a]) ** 2
                vc = sum(t.var for t in tasks_of[c].values()) / len(tasks_of[c]) ** 2
                variances, dofs = [va + vc], [stats.welch_satterthwaite(
                    [va, vc], [min(t.df for t in tasks_of[x].values()) for x in (a, c)])
                    if va + vc > 0 else 1.0]
            if abs(float(np.mean(means))) < OVERALL_MIN_EFFECT:
                return 1.0
            return stats.combined_t(means, variances, dofs, alpha)[3]

        tiers = stats.assign_tiers(testable, True, pvalue, alpha)
        ranks = stats.rank_intervals(testable, True, pvalue, alpha)
        by_scorer = {s: {t: ts.score for t, ts in tasks_of[s].items()} for s in scorers}
        without = informative.leave_one_out_ranks(by_scorer)
        point = {s: v for s, v in overall_score.items() if not math.isnan(v)}
        score_rank = {s: 1 + sum(1 for o in point.values() if o > v + stats.tolerance(o, v))
                      for s, v in point.items()}
        shares = informative.spread_shares(by_scorer)
        overall_tasks += [dict(profile=profile, task=t, metrics=anchored.get((profile, t), []),
                               share=shares.get(t, math.nan)) for t in sorted(per_task)]
        for s in scorers:
            by_task = defaultdict(list)
            for r in prows:
                if r["scorer"] == s and r["task"] in per_task and r["headline"]:
                    by_task[r["task"]].append(r)
            recs = records_by_scorer.get((profile, s), [])
            ci = summary[s][1:3] if s in summary else (math.nan, math.nan)
            rank = ranks.get(s, (math.nan, math.nan))
            prov = _provenance_lists(recs)
            out.append(dict(
                profile=profile, scorer=s, score=overall_score[s], ci_low=ci[0], ci_high=ci[1],
                win_rate=_win_rate(prows, scenarios, s),
                n_tasks=len(tasks_of[s]),
                tasks_failed=sum(1 for t in tasks_of[s].values() if not t.seeds),
                tasks_skipped=sum(1 for t in per_task if s not in per_task[t]),
                tier1_tasks=sum(1 for rs in by_task.values()
                                if any(r.get("tier") == 1 for r in rs)),
                tier=tiers.get(s), rank_low=rank[0], rank_high=rank[1],
                n_cells=len(recs), n_failed=sum(_failure_counts(recs).values()),
                failures=_failure_counts(recs), date=prov["date"], git_sha=prov["git_sha"],
                hardware=prov["hardware"], score_rank=score_rank.get(s),
                rank_without=without.get(s, {}),
                outside_anchors={t: ts.unclipped for t, ts in sorted(tasks_of[s].items())
                                 if ts.seeds and not 0.0 <= ts.unclipped <= 1.0}))
    out.sort(key=lambda r: (r["profile"], r["tier"] if r["tier"] is not None else math.inf,
                            -r["score"] if not math.isnan(r["score"]) else math.inf, r["scorer"]))
    return out, task_scores, overall_tasks


# --------------------------------------------------------------------------- main entry


def aggregate(loaded: LoadedRecords, release: str = "", baseline: str = BASELINE,
              n_boot: int = stats.N_BOOT, alpha: float = stats.ALPHA) -> Board:
    """Aggregate loaded records into a :class:`Board` (deterministic: same records, same Board)."""
    problems = list(loaded.problems)
    current, superseded = _split_superseded(loaded.records)
    labels = _setting_labels(current)

    def label_of(r: Record) -> str:
        return labels[(r.task, r.profile, r.config_key)]

    current, dup_problems = _deduplicate(current, label_of)
    problems.extend(dup_problems)

    by_task: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in current:
        by_task[(label_of(r), r.task)].append(r)

    rows: list[dict] = []
    all_z: dict[tuple, dict] = {}
    anchored: dict[tuple, list[str]] = {}
    unanchored: list[str] = []
    grids: list[dict] = []
    failed_cells: list[dict] = []
    records_by_scorer: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for (profile, task), recs in sorted(by_task.items()):
        track = Counter(r.track for r in recs).most_common(1)[0][0]
        specs: dict[str, Counter] = defaultdict(Counter)
        for r in recs:
            for name, spec in r.metric_specs.items():
                specs[name][tuple(spec[k] for k in SPEC_KEYS)] += 1
        for name, counter in specs.items():
            if len(counter) > 1:
                problems.append(Problem(f"{task} ({profile})", f"metric {name!r} is declared "
                                        f"differently across records {dict(counter)}; the most "
                                        "common declaration is used", skipped=False))
        by_scorer: dict[str, list[Record]] = defaultdict(list)
        for r in recs:
            by_scorer[r.scorer_label].append(r)
            records_by_scorer[(profile, r.scorer_label)].append(r)
        for label in sorted(by_scorer):
            grids.extend(_mean_grids(profile, task, label, by_scorer[label], problems))
            for r in sorted(by_scorer[label], key=lambda r: r.seed):
                bad = [m for m, v in r.metrics.items() if math.isnan(v)] if r.status == "ok" else []
                if r.status != "ok" or bad:
                    failed_cells.append(dict(
                        profile=profile, track=track, task=task, scorer=label, seed=r.seed,
                        status=r.status if not bad else f"ok, null {', '.join(sorted(bad))}",
                        step=r.step, message=r.message, path=r.path, date=r.date,
                        git_sha=r.git_sha, hardware=r.hardware))
        zs: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
        first_row = len(rows)
        for metric in sorted(specs):
            spec = dict(zip(SPEC_KEYS, specs[metric].most_common(1)[0][0]))
            direction, headline = spec["direction"], spec["headline"]
            rule = informative.rule_for(task, metric)
            anchored_here = (spec["ceiling"] is not None
                             and (spec["floor"] is not None
                                  or any("floor" in r.anchors.get(metric, {}) for r in recs)))
            if headline and track in OVERALL_TRACKS and not anchored_here:
                unanchored.append(f"{task}/{metric} ({profile})")
            if headline and track in OVERALL_TRACKS and anchored_here:
                anchored.setdefault((profile, task), []).append(metric)
            series = []
            for label in sorted(by_scorer):
                s = _Series(label)
                for r in by_scorer[label]:
                    value = r.metrics.get(metric, math.nan)
                    if r.status == "ok" and not math.isnan(value):
                        s.by_seed[r.seed] = (value, r.items.get(metric))
                        anchor = {**spec, **r.anchors.get(metric, {})}
                        if anchor["floor"] is None and rule is not None:
                            anchor["floor"] = rule.floor
                        zs[metric][label][r.seed] = normalized(
                            value, anchor["floor"], anchor["ceiling"], spec["log_scale"],
                            clip=False)
                series.append(s)
            result = _metric_stats(profile, task, metric, direction, spec["min_effect"],
                                   track in DESCRIPTIVE_TRACKS, series, n_boot, alpha, baseline)
            degenerate = ("" if track in DESCRIPTIVE_TRACKS else informative.metric_degenerate(
                {s.label: {k: v for k, (v, _) in s.by_seed.items()} for s in series}))
            for label in sorted(by_scorer):
                scorer_recs = by_scorer[label]
                first = scorer_recs[0]
                nulls = sum(1 for r in scorer_recs if r.status == "ok" and metric in r.metrics
                            and math.isnan(r.metrics[metric]))
                not_applicable = sum(1 for r in scorer_recs if r.status == "skipped"
                                     or (r.status == "ok" and metric not in r.metrics))
                failures = _failure_counts(scorer_recs)
                if nulls:
                    failures["null"] = nulls
                st = result[label]
                n_failed = sum(failures.values()) - nulls
                z = [x for x in zs[metric][label].values() if math.isfinite(x)]
                rows.append(dict(
                    profile=profile, track=track, task=task, task_version=first.task_version,
                    metric=metric, direction=direction, headline=headline, scorer=label,
                    scorer_name=first.scorer, scorer_version=first.scorer_version,
                    scorer_kwargs=first.scorer_kwargs, n_cells=len(scorer_recs),
                    n_ok=sum(1 for r in scorer_recs if r.status == "ok"), n_failed=n_failed,
                    failures=failures, n_skipped=sum(1 for r in scorer_recs
                                                     if r.status == "skipped"),
                    n_na=not_applicable, n_null=nulls,
                    survivors_only=bool(st["n"] > 0 and (n_failed + nulls) > 0),
                    floor=spec["floor"], ceiling=spec["ceiling"], log_scale=spec["log_scale"],
                    normalized=float(np.mean(z)) if z else math.nan,
                    degenerate=degenerate or st.pop("degenerate_pair", ""),
                    **st, **_provenance_lists(scorer_recs)))
                rows[-1].pop("degenerate_pair", None)
        task_z = {m: {label: dict(v) for label, v in by_label.items()}
                  for m, by_label in zs.items()}
        _informative(rows[first_row:], task, task_z, baseline, track, alpha)
        all_z[(profile, task)] = task_z
    _verdicts(rows, alpha)
    uninformative: list[str] = []
    seed_norms = _overall_norms(rows, all_z, anchored, uninformative)
    overall, task_scores, overall_tasks = _overall(rows, seed_norms, anchored,
                                                   records_by_scorer, alpha)

    track_order = {t: i for i, t in enumerate(TRACKS)}
    rows.sort(key=lambda r: (track_order[r["track"]], r["task"], r["profile"], not r["headline"],
                             r["metric"], r["tier"] if r.get("tier") is not None else math.inf,
                             -_better_sign(r["direction"]) * r["mean"]
                             if not math.isnan(r["mean"]) else math.inf, r["scorer"]))
    used = current
    prov = _provenance_lists(used)
    dates = sorted({r.date for r in used if r.date != "unknown"})
    meta = {
        "release": release, "baseline": baseline, "alpha": alpha, "n_boot": n_boot,
        "exact_item_draws": stats.EXACT_ITEM_DRAWS, "power": stats.POWER,
        "tie_tol": stats.TIE_TOL, "overall_min_effect": OVERALL_MIN_EFFECT,
        "overall_tracks": list(OVERALL_TRACKS), "descriptive_tracks": list(DESCRIPTIVE_TRACKS),
        "unanchored": sorted(unanchored),
        "uninformative": sorted(uninformative),
        "n_files": len(loaded.records) + sum(1 for p in loaded.problems if p.skipped),
        "n_records": len(loaded.records), "n_used": len(used),
        "n_superseded": sum(s["n_cells"] for s in superseded),
        "n_problems": len(problems),
        "date_first": dates[0] if dates else "unknown",
        "date_last": dates[-1] if dates else "unknown",
        "finished_last": max((str(r.provenance.get("finished") or "") for r in used),
                             default=""),
        "profiles": sorted({label_of(r) for r in used}),
        "git_sha": prov["git_sha"], "hardware": prov["hardware"],
        "harness_version": prov["harness_version"],
        "records": {r.path: r.digest
                    for r in sorted(loaded.records + loaded.sweeps, key=lambda r: r.path)},
    }
    problems.sort(key=lambda p: (p.path, p.reason))
    return Board(
        meta=meta,
        rows=_frame(rows, ROW_COLUMNS),
        overall=_frame(overall, OVERALL_COLUMNS),
        failed_cells=_frame(failed_cells, FAILED_CELL_COLUMNS),
        superseded=_frame(superseded, SUPERSEDED_COLUMNS),
        problems=_frame([p.__dict__ for p in problems], PROBLEM_COLUMNS),
        task_scores=_frame(task_scores, TASK_SCORE_COLUMNS),
        grids=_frame(grids, GRID_COLUMNS),
        claims=_frame(judge_claims(rows, load_claims(), alpha), CLAIM_COLUMNS),
        overall_tasks=_frame(overall_tasks, OVERALL_TASK_COLUMNS),
    )


def build_board(results_dir, release: str = "", **kwargs) -> Board:
    """Load every record under ``results_dir`` and aggregate it."""
    from .records import load_records

    return aggregate(load_records(results_dir), release=release, **kwargs)
