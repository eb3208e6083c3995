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
- 95% CI: percentile bootstrap, two-stage (seeds, then items within each seed) where every seed
  has per-item outcomes, over seeds otherwise; needs two or more seeds.
- vs softmax: paired two-stage bootstrap on the seeds both have (and their items), two-sided p,
  Holm-corrected per (profile, scorer) across the tasks and headline metrics (secondary metrics
  form their own family). ``p_signflip`` is the exact sign-flip test over the seed differences,
  a conservative companion (its smallest value is 2^(1-n)).
- Tiers: see :func:`leaderboard.stats.assign_tiers`; the pairwise p-values come from one joint
  bootstrap per (profile, task, metric) that resamples the same seeds and items for every scorer,
  and the rank intervals are the 2.5-97.5% quantiles of each scorer's rank in those replicates
  (those where every scorer drew at least one of its seeds).
  A scorer with fewer than two seeds cannot be tested: it gets no tier and no rank interval.
- Overall (per profile, quality tracks only, headline metrics, over the tasks that every scorer
  of the profile has records of, skipped ones included; a task run by some scorers only is shown
  in its track but left out, so every score averages the same tasks): each task's headline
  metrics are normalized to 1 = best scorer mean, 0 = worst scorer mean and averaged per task; a
  scorer's score is the mean over the tasks it ran. A task where every cell of the scorer failed counts 0;
  a task the scorer cannot run (skipped) does not count. CIs, ranks and tiers come from the same
  replicates pushed through the same fixed normalization (a scorer without replicates in some
  task, i.e. fewer than two seeds there, gets a score but no CI, rank interval or tier).
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

from . import stats
from .records import LoadedRecords, Problem, Record

FORMAT_VERSION = 1
BASELINE = "softmax"

# Column name -> kind, for every frame of the Board; the kind fixes the JSON type of each cell.
ROW_COLUMNS = {
    "profile": "str", "track": "str", "task": "str", "task_version": "int", "metric": "str",
    "direction": "str", "headline": "bool", "scorer": "str", "scorer_name": "str",
    "scorer_version": "int", "scorer_kwargs": "json",
    "n": "int", "mean": "float", "std": "float", "ci_low": "float", "ci_high": "float",
    "ci_method": "str", "n_items": "int", "seeds": "json", "values": "json",
    "n_cells": "int", "n_ok": "int", "n_failed": "int", "failures": "json", "n_skipped": "int",
    "n_null": "int", "survivors_only": "bool",
    "delta_vs_baseline": "float", "p_vs_baseline": "float", "p_vs_baseline_holm": "float",
    "p_signflip": "float", "n_paired": "int", "vs_baseline": "str",
    "tier": "int", "rank_low": "int", "rank_high": "int",
    "date": "str", "git_sha": "json", "hardware": "json", "harness_version": "json",
}
OVERALL_COLUMNS = {
    "profile": "str", "scorer": "str", "score": "float", "ci_low": "float", "ci_high": "float",
    "n_tasks": "int", "tasks_failed": "int", "tasks_skipped": "int", "tier1_tasks": "int",
    "tier": "int", "rank_low": "int", "rank_high": "int",
    "n_cells": "int", "n_failed": "int", "failures": "json",
    "date": "str", "git_sha": "json", "hardware": "json",
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
TASK_SCORE_COLUMNS = {"profile": "str", "task": "str", "scorer": "str", "score": "float"}
GRID_COLUMNS = {
    "profile": "str", "task": "str", "grid": "str", "scorer": "str", "rows_name": "str",
    "cols_name": "str", "rows": "json", "cols": "json", "values": "json", "n": "int",
}
FRAMES = {"rows": ROW_COLUMNS, "overall": OVERALL_COLUMNS, "failed_cells": FAILED_CELL_COLUMNS,
          "superseded": SUPERSEDED_COLUMNS, "problems": PROBLEM_COLUMNS,
          "task_scores": TASK_SCORE_COLUMNS, "grids": GRID_COLUMNS}


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

    def to_dict(self) -> dict:
        """The JSON document of the release (``results.json``): plain types, NaN as null."""
        out = {"format": "scorebench-leaderboard", "format_version": FORMAT_VERSION,
               "meta": _json_value(self.meta)}
        for name, columns in FRAMES.items():
            frame = getattr(self, name)
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


def _groups(series: list[_Series], seeds: list[int]) -> tuple[list[np.ndarray], bool]:
    """Per-seed (m, n_s) arrays for :func:`stats.hierarchical_bootstrap`, and whether every seed
    used items (they do where every series present at the seed has items of one length)."""
    out, all_items = [], True
    for seed in seeds:
        present = [s.by_seed[seed] for s in series if seed in s.by_seed]
        items = [it for _, it in present]
        use_items = all(it is not None for it in items) and len({len(it) for it in items}) == 1
        all_items &= use_items
        width = len(items[0]) if use_items else 1
        g = np.full((len(series), width), np.nan)
        for row, s in enumerate(series):
            if seed in s.by_seed:
                value, it = s.by_seed[seed]
                g[row] = it if use_items else value
        out.append(g)
    return out, all_items


def _better_sign(direction: str) -> float:
    return 1.0 if direction == "higher" else -1.0


def _metric_stats(profile: str, task: str, metric: str, direction: str,
                  series: list[_Series], n_boot: int, alpha: float, baseline: str) -> dict:
    """Per-scorer statistics, comparisons to the baseline, tiers and rank intervals of one metric.
    Returns {label: {...}} and, under key None, the joint replicates (B, m) or None."""
    higher = direction == "higher"
    out: dict[Any, dict] = {}
    base = next((s for s in series if s.label == baseline), None)
    for s in series:
        seeds = sorted(s.by_seed)
        values = [s.by_seed[k][0] for k in seeds]
        row = {"n": len(seeds), "seeds": seeds, "values": values, "mean": s.mean(),
               "std": float(np.std(values, ddof=1)) if len(values) > 1 else math.nan,
               "ci_low": math.nan, "ci_high": math.nan, "ci_method": "",
               "n_items": sum(len(it) for _, it in s.by_seed.values() if it is not None),
               "delta_vs_baseline": math.nan, "p_vs_baseline": math.nan,
               "p_signflip": math.nan, "n_paired": 0}
        if len(seeds) >= 2:
            groups, with_items = _groups([s], seeds)
            reps = stats.hierarchical_bootstrap(
                groups, n_boot, stats.rng_for("ci", profile, task, metric, s.label))
            row["ci_low"], row["ci_high"] = stats.percentile_ci(reps[:, 0], alpha)
            row["ci_method"] = "seeds+items" if with_items else "seeds"
        if base is not None and s is not base:
            common = sorted(set(s.by_seed) & set(base.by_seed))
            row["n_paired"] = len(common)
            if common:
                diffs = [s.by_seed[k][0] - base.by_seed[k][0] for k in common]
                row["delta_vs_baseline"] = float(np.mean(diffs))
            if len(common) >= 2:
                groups, _ = _groups([s, base], common)
                _, row["p_vs_baseline"] = stats.paired_bootstrap_pvalue(
                    groups, n_boot, stats.rng_for("paired", profile, task, metric, s.label,
                                                  baseline))
                row["p_signflip"] = stats.sign_flip_pvalue(diffs)
        out[s.label] = row

    present = [s for s in series if len(s.by_seed) >= 2]
    union = sorted(set().union(*(s.by_seed for s in present))) if present else []
    joint = None
    if len(union) >= 2 and present:
        groups, _ = _groups(present, union)
        joint = stats.hierarchical_bootstrap(
            groups, n_boot, stats.rng_for("joint", profile, task, metric))
        complete = ~np.isnan(joint).any(axis=1)
        ranks = stats.rank_replicates(joint[complete] if complete.mean() >= 0.5 else joint, higher)
        for col, s in enumerate(present):
            out[s.label]["rank_low"], out[s.label]["rank_high"] = stats.rank_interval(
                ranks[:, col], alpha)
    column = {s.label: i for i, s in enumerate(present)}
    seeds_of = {s.label: set(s.by_seed) for s in present}

    def pvalue(a: str, b: str) -> float:
        if joint is None or len(seeds_of[a] & seeds_of[b]) < 2:
            return math.nan
        return stats.bootstrap_pvalue(joint[:, column[a]] - joint[:, column[b]])

    tiers = stats.assign_tiers({s.label: s.mean() for s in present}, higher, pvalue, alpha)
    for label in out:
        out[label]["tier"] = tiers.get(label)
    out[None] = {"joint": joint, "labels": [s.label for s in present]}
    return out


def _holm_by_family(rows: list[dict], alpha: float) -> None:
    families: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if not math.isnan(r["p_vs_baseline"]):
            families[(r["profile"], r["scorer"], r["headline"])].append(i)
    for members in families.values():
        adjusted = stats.holm([rows[i]["p_vs_baseline"] for i in members])
        for i, p in zip(members, adjusted):
            rows[i]["p_vs_baseline_holm"] = float(p)
    for r in rows:
        r.setdefault("p_vs_baseline_holm", math.nan)
        p, delta = r["p_vs_baseline_holm"], r["delta_vs_baseline"]
        if math.isnan(p):
            r["vs_baseline"] = ""
        elif p <= alpha and delta * _better_sign(r["direction"]) > 0:
            r["vs_baseline"] = "better"
        elif p <= alpha and delta * _better_sign(r["direction"]) < 0:
            r["vs_baseline"] = "worse"
        else:
            r["vs_baseline"] = "n.s."


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


def _task_scores(trows: list[dict], joints: dict, n_boot: int) -> tuple[dict, dict, bool]:
    """One task's normalized score per scorer (mean over its headline metrics), the score's
    bootstrap replicates (only for scorers with replicates in every headline metric, i.e. two or
    more seeds), and whether every headline metric had a joint bootstrap. Normalization per
    metric: (x - worst) / (best - worst) over scorer means."""
    scores: dict[str, list[float]] = defaultdict(list)
    reps: dict[str, list[np.ndarray]] = defaultdict(list)
    replicable = True
    for metric in sorted({r["metric"] for r in trows if r["headline"]}):
        mrows = {r["scorer"]: r for r in trows if r["metric"] == metric}
        means = {s: r["mean"] for s, r in mrows.items() if r["n"] > 0}
        if not means:
            continue
        sign = _better_sign(next(iter(mrows.values()))["direction"])
        best = max(means.values(), key=lambda v: sign * v)
        worst = min(means.values(), key=lambda v: sign * v)

        def norm(x, best=best, worst=worst):
            return (x - worst) / (best - worst) if best != worst else np.ones_like(x)

        joint = joints.get((trows[0]["profile"], trows[0]["task"], metric))
        replicable &= joint is not None
        for s, r in mrows.items():
            if r["n"] > 0:
                scores[s].append(float(norm(np.float64(r["mean"]))))
                if joint is not None and s in joint["labels"]:
                    reps[s].append(norm(joint["joint"][:, joint["labels"].index(s)]))
                else:
                    reps[s].append(None)
            elif r["n_failed"] + r["n_null"] > 0:
                scores[s].append(0.0)
                reps[s].append(np.zeros(n_boot))
    task_score = {s: float(np.mean(v)) for s, v in scores.items()}
    task_reps = {s: np.mean(v, axis=0) for s, v in reps.items()
                 if replicable and all(r is not None for r in v)}
    return task_score, task_reps, replicable


def _overall(rows: list[dict], joints: dict, records_by_scorer: dict, n_boot: int,
             alpha: float) -> tuple[list[dict], list[dict]]:
    """Per profile: normalized headline score per scorer, with CI, tiers and rank intervals; and
    the per-task normalized scores it averages."""
    out, task_scores = [], []
    by_profile: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if r["track"] != "cost":
            by_profile[r["profile"]].append(r)
    for profile in sorted(by_profile):
        prows = by_profile[profile]
        scorers = sorted({r["scorer"] for r in prows})
        per_task_score, per_task_reps, replicable = {}, {}, True
        for task in sorted({r["task"] for r in prows}):
            if {r["scorer"] for r in prows if r["task"] == task} != set(scorers):
                continue   # run by some scorers only: shown in its track, not in the overall
            score, reps, ok = _task_scores([r for r in prows if r["task"] == task], joints, n_boot)
            if score:
                per_task_score[task], per_task_reps[task] = score, reps
                replicable &= ok
                task_scores += [dict(profile=profile, task=task, scorer=s, score=v)
                                for s, v in sorted(score.items())]
        overall_score, overall_reps = {}, {}
        for s in scorers:
            tasks = [t for t in per_task_score if s in per_task_score[t]]
            overall_score[s] = float(np.mean([per_task_score[t][s] for t in tasks])) \
                if tasks else math.nan
            if replicable and tasks and all(s in per_task_reps[t] for t in tasks):
                overall_reps[s] = _nanmean(np.stack([per_task_reps[t][s] for t in tasks]), 0)
        labels = sorted(overall_reps)
        ranks = (stats.rank_replicates(np.stack([overall_reps[s] for s in labels], axis=1), True)
                 if labels else None)

        def pvalue(a, c, reps=overall_reps):
            if a not in reps or c not in reps:
                return math.nan
            return stats.bootstrap_pvalue(reps[a] - reps[c])

        tiers = stats.assign_tiers({s: overall_score[s] for s in labels}, True, pvalue, alpha)
        for s in scorers:
            by_task = defaultdict(list)
            for r in prows:
                if r["scorer"] == s and r["task"] in per_task_score:
                    by_task[r["task"]].append(r)
            recs = records_by_scorer.get((profile, s), [])
            ci = rank = (math.nan, math.nan)
            if s in overall_reps:
                ci = stats.percentile_ci(overall_reps[s], alpha)
                rank = stats.rank_interval(ranks[:, labels.index(s)], alpha)
            prov = _provenance_lists(recs)
            out.append(dict(
                profile=profile, scorer=s, score=overall_score[s], ci_low=ci[0], ci_high=ci[1],
                n_tasks=sum(1 for t in per_task_score if s in per_task_score[t]),
                tasks_failed=sum(1 for rs in by_task.values() if all(
                    r["n"] == 0 and r["n_failed"] + r["n_null"] > 0 for r in rs)),
                tasks_skipped=sum(1 for rs in by_task.values() if all(
                    r["n"] == 0 and r["n_failed"] + r["n_null"] == 0 for r in rs)),
                tier1_tasks=sum(1 for rs in by_task.values()
                                if any(r["headline"] and r.get("tier") == 1 for r in rs)),
                tier=tiers.get(s), rank_low=rank[0], rank_high=rank[1],
                n_cells=len(recs), n_failed=sum(_failure_counts(recs).values()),
                failures=_failure_counts(recs), date=prov["date"], git_sha=prov["git_sha"],
                hardware=prov["hardware"]))
    out.sort(key=lambda r: (r["profile"], r["tier"] if r["tier"] is not None else math.inf,
                            -r["score"] if not math.isnan(r["score"]) else math.inf, r["scorer"]))
    return out, task_scores


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
    joints: dict[tuple, dict] = {}
    grids: list[dict] = []
    failed_cells: list[dict] = []
    records_by_scorer: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for (profile, task), recs in sorted(by_task.items()):
        track = Counter(r.track for r in recs).most_common(1)[0][0]
        specs: dict[str, Counter] = defaultdict(Counter)
        for r in recs:
            for name, spec in r.metric_specs.items():
                specs[name][(spec["direction"], spec["headline"])] += 1
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
        for metric in sorted(specs):
            direction, headline = specs[metric].most_common(1)[0][0]
            series = []
            for label in sorted(by_scorer):
                s = _Series(label)
                for r in by_scorer[label]:
                    value = r.metrics.get(metric, math.nan)
                    if r.status == "ok" and not math.isnan(value):
                        items = r.items.get(metric)
                        s.by_seed[r.seed] = (value, items)
                series.append(s)
            result = _metric_stats(profile, task, metric, direction, series, n_boot, alpha,
                                   baseline)
            joint = result.pop(None)
            if joint["joint"] is not None:
                joints[(profile, task, metric)] = joint
            for label in sorted(by_scorer):
                scorer_recs = by_scorer[label]
                first = scorer_recs[0]
                nulls = sum(1 for r in scorer_recs if r.status == "ok"
                            and math.isnan(r.metrics.get(metric, math.nan)))
                failures = _failure_counts(scorer_recs)
                if nulls:
                    failures["null"] = nulls
                st = result[label]
                n_failed = sum(failures.values()) - nulls
                rows.append(dict(
                    profile=profile, track=track, task=task, task_version=first.task_version,
                    metric=metric, direction=direction, headline=headline, scorer=label,
                    scorer_name=first.scorer, scorer_version=first.scorer_version,
                    scorer_kwargs=first.scorer_kwargs, n_cells=len(scorer_recs),
                    n_ok=sum(1 for r in scorer_recs if r.status == "ok"), n_failed=n_failed,
                    failures=failures, n_skipped=sum(1 for r in scorer_recs
                                                     if r.status == "skipped"),
                    n_null=nulls, survivors_only=bool(st["n"] > 0 and (n_failed + nulls) > 0),
                    **st, **_provenance_lists(scorer_recs)))
    _holm_by_family(rows, alpha)
    overall, task_scores = _overall(rows, joints, records_by_scorer, n_boot, alpha)

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
        "exact_item_draws": stats.EXACT_ITEM_DRAWS,
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
    )


def build_board(results_dir, release: str = "", **kwargs) -> Board:
    """Load every record under ``results_dir`` and aggregate it."""
    from .records import load_records

    return aggregate(load_records(results_dir), release=release, **kwargs)
