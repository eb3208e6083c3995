"""The overall: per profile, one headline per scorer, and the normalized score beside it.

Over the ICL / decoder / encoder tracks, the informative headline metrics with a floor and a
ceiling, and the tasks that every scorer of the profile has records of:

- the headline, ``poi``: the probability of improvement over the baseline averaged over tasks
  (:mod:`leaderboard.method.improvement`), with its stratified bootstrap interval; tiers and rank
  intervals come from it;
- ``score``: how far from floor to ceiling: each record's value normalized on fixed anchors
  (:mod:`leaderboard.method.anchors`), a seed's task value the mean over its normalized headline
  metrics, the task score the mean over seeds clipped to [0, 1] as a mean (never per seed; the
  unclipped mean is kept and marked), the score the mean over the tasks the scorer ran, with a
  Student t interval on Welch-Satterthwaite degrees of freedom clipped to [0, 1].

A task where every cell failed counts 0 in both; a skipped task does not count, nor does a
headline metric the scorer cannot report (n/a), which its row names.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ..loading.records import Record, failure_counts, provenance_lists
from . import improvement, informative, stats
from .board import OVERALL_TRACKS


def overall_norms(rows: list[dict], all_z: dict, anchored: dict,
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



@dataclass
class TaskScore:
    """One scorer's normalized score of one task: the mean over seeds of the seed's mean
    normalized headline value (``unclipped``), clipped to [0, 1] as a mean (``score``); ``var`` is
    the variance of that mean (0 for a task where every cell failed, which counts 0; NaN with one
    seed) and ``df`` its degrees of freedom; ``seeds`` the unclipped seed values."""

    score: float
    var: float
    df: float
    seeds: dict[int, float]
    unclipped: float = math.nan


def task_score(per_seed: dict[int, list[float]], all_failed: bool) -> TaskScore | None:
    """``per_seed``: seed -> the unclipped normalized values of the task's headline metrics."""
    seeds = {k: float(np.mean(v)) for k, v in sorted(per_seed.items()) if v}
    if seeds:
        x = np.array(list(seeds.values()))
        var = float(x.var(ddof=1)) / x.size if x.size > 1 else math.nan
        raw = float(x.mean())
        return TaskScore(min(1.0, max(0.0, raw)), var, float(x.size - 1), seeds, raw)
    return TaskScore(0.0, 0.0, 1.0, {}, 0.0) if all_failed else None


def overall(rows: list[dict], seed_norms: dict, anchored: dict,
            records_by_scorer: dict[tuple[str, str], list[Record]], alpha: float,
            baseline: str) -> tuple[list[dict], list[dict], list[dict]]:
    """Per profile: each scorer's headline (probability of improvement over ``baseline``) with its
    interval, tier and rank interval, its normalized score with its interval, its rank with each
    task left out and the tasks where its unclipped score leaves [0, 1]; the per-task values
    both average; each task's metrics and share of the headline's spread across scorers."""
    out, task_scores, overall_tasks = [], [], []
    by_profile: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if r["track"] in OVERALL_TRACKS:
            by_profile[r["profile"]].append(r)
    for profile in sorted(by_profile):
        scores = _ProfileOverall(profile, by_profile[profile], seed_norms, anchored, alpha,
                                 baseline)
        task_scores += scores.task_score_rows()
        overall_tasks += scores.task_rows(anchored)
        out += scores.scorer_rows(records_by_scorer)

    def order(r):
        headline = r["poi"] if not math.isnan(r["poi"]) else r["score"]
        return (r["profile"], r["tier"] if r["tier"] is not None else math.inf,
                -headline if not math.isnan(headline) else math.inf, r["scorer"])

    out.sort(key=order)
    return out, task_scores, overall_tasks


class _ProfileOverall:
    """The overall of one profile: each scorer's task values, their means and intervals."""

    def __init__(self, profile: str, rows: list[dict], seed_norms: dict, anchored: dict,
                 alpha: float, baseline: str):
        self.profile, self.rows, self.alpha, self.baseline = profile, rows, alpha, baseline
        self.scorers = sorted({r["scorer"] for r in rows})
        self.row_of = {(r["task"], r["metric"], r["scorer"]): r for r in rows}
        self.scenarios: list[tuple[str, str]] = []
        self.per_task: dict[str, dict[str, TaskScore]] = {}
        self.poi_of: dict[str, dict[str, float]] = {s: {} for s in self.scorers}
        self.replicates: dict[str, dict[str, np.ndarray]] = {s: {} for s in self.scorers}
        for task in sorted({r["task"] for r in rows}):
            metrics = anchored.get((profile, task), [])
            if not metrics or {r["scorer"] for r in rows if r["task"] == task} != set(self.scorers):
                continue   # run by some scorers only, or no anchored headline metric
            self.scenarios += [(task, m) for m in metrics]
            self.per_task[task] = self._task_scores(task, metrics,
                                                    seed_norms.get((profile, task), {}))
            self._improvement(task, metrics)
        self.tasks_of = {s: {t: self.per_task[t][s] for t in self.per_task if s in self.per_task[t]}
                         for s in self.scorers}
        self.score: dict[str, float] = {}
        self.summary: dict[str, tuple] = {}
        for s in self.scorers:
            ts = list(self.tasks_of[s].values())
            if not ts:
                self.score[s] = math.nan
                continue
            if all(math.isfinite(t.var) for t in ts):
                self.summary[s] = stats.combined_t([t.score for t in ts], [t.var for t in ts],
                                                   [t.df for t in ts], alpha)
            self.score[s] = float(np.mean([t.score for t in ts]))
        self.poi = {s: float(np.mean(list(v.values()))) if v else math.nan
                    for s, v in self.poi_of.items()}
        self.poi_replicates = {s: np.mean(list(v.values()), axis=0)
                               for s, v in self.replicates.items()
                               if v and set(v) == set(self.poi_of[s])}

    def _task_scores(self, task: str, metrics: list[str], norms: dict) -> dict[str, TaskScore]:
        scores = {}
        for s in self.scorers:
            trows = [r for r in self.rows if r["task"] == task and r["scorer"] == s
                     and r["metric"] in metrics]
            all_failed = all(r["n"] == 0 for r in trows) and any(
                r["n_failed"] + r["n_null"] > 0 for r in trows)
            ts = task_score(norms.get(s, {}), all_failed)
            if ts is not None:
                scores[s] = ts
        return scores

    def _improvement(self, task: str, metrics: list[str]) -> None:
        """Each scorer's probability of improvement over the baseline on ``task``, and its
        bootstrap replicates."""
        if self.baseline not in self.scorers:
            return
        values = {s: improvement.task_values(
            [r for r in self.rows if r["task"] == task and r["scorer"] == s], metrics)
            for s in self.scorers}
        base = values[self.baseline]
        if not base.seeds:
            return
        effects = {m: self.row_of[(task, m, self.baseline)]["min_effect"] for m in metrics}
        base_draw = improvement.draws(len(base.seeds), self.profile, task, self.baseline)
        for s, v in values.items():
            if not v.seeds and not v.failed:
                continue
            point = improvement.task_probability(v, base, effects)
            if math.isnan(point):
                continue
            self.poi_of[s][task] = point
            if len(v.seeds) == 1:
                continue   # one seed cannot be tested: no interval, tier or rank
            draw = (improvement.draws(len(v.seeds), self.profile, task, s) if v.seeds
                    else np.zeros((improvement.N_BOOT, 0), dtype=np.int64))
            self.replicates[s][task] = improvement.task_probability(v, base, effects, draw,
                                                                    base_draw)

    def task_score_rows(self) -> list[dict]:
        return [dict(profile=self.profile, task=task, scorer=s, score=ts.score,
                     score_unclipped=ts.unclipped,
                     poi=self.poi_of[s].get(task, math.nan))
                for task, scores in self.per_task.items() for s, ts in sorted(scores.items())]

    def task_rows(self, anchored: dict) -> list[dict]:
        shares = informative.spread_shares(self.poi_of)
        score_shares = informative.spread_shares(
            {s: {t: ts.score for t, ts in self.tasks_of[s].items()} for s in self.scorers})
        return [dict(profile=self.profile, task=t, metrics=anchored.get((self.profile, t), []),
                     share=shares.get(t, math.nan), score_share=score_shares.get(t, math.nan))
                for t in sorted(self.per_task)]

    def pvalue(self, a: str, c: str) -> float:
        """The headline's test of two scorers: the bootstrap p of their difference."""
        if a not in self.poi_replicates or c not in self.poi_replicates:
            return math.nan
        return improvement.bootstrap_p(self.poi_replicates[a], self.poi_replicates[c])

    def scorer_rows(self, records_by_scorer: dict[tuple[str, str], list[Record]]) -> list[dict]:
        """One row per scorer: headline, score, intervals, tier, ranks, failures, provenance."""
        testable = {s: self.poi[s] for s in self.poi_replicates}
        tiers = stats.assign_tiers(testable, True, self.pvalue, self.alpha)
        ranks = stats.rank_intervals(testable, True, self.pvalue, self.alpha)
        without = informative.leave_one_out_ranks(self.poi_of)
        return [dict(self._scorer_row(s, records_by_scorer.get((self.profile, s), [])),
                     tier=tiers.get(s), rank_low=ranks.get(s, (math.nan, math.nan))[0],
                     rank_high=ranks.get(s, (math.nan, math.nan))[1],
                     rank_without=without.get(s, {}))
                for s in self.scorers]

    def metrics_na(self, s: str) -> dict[str, list[str]]:
        """Task -> the headline metrics of the overall that ``s`` has no value of because every
        cell left them n/a, for the tasks it has a score of (the score is over the others)."""
        out: dict[str, list[str]] = defaultdict(list)
        for task, metric in self.scenarios:
            r = self.row_of.get((task, metric, s))
            if (task in self.tasks_of[s] and r is not None and r["n"] == 0
                    and r["n_failed"] + r["n_null"] == 0):
                out[task].append(metric)
        return dict(out)

    def _scorer_row(self, s: str, records: list[Record]) -> dict:
        tasks = self.tasks_of[s]
        ci = self.summary[s][1:3] if s in self.summary else (math.nan, math.nan)
        reps = self.poi_replicates.get(s)
        poi_ci = ((float(np.quantile(reps, self.alpha / 2)),
                   float(np.quantile(reps, 1 - self.alpha / 2)))
                  if reps is not None else (math.nan, math.nan))
        tier1 = {r["task"] for r in self.rows if r["scorer"] == s and r["task"] in self.per_task
                 and r["headline"] and r.get("tier") == 1}
        prov = provenance_lists(records)
        return dict(
            profile=self.profile, scorer=s, poi=self.poi[s], poi_low=poi_ci[0],
            poi_high=poi_ci[1], poi_tasks=dict(sorted(self.poi_of[s].items())),
            score=self.score[s], ci_low=float(np.clip(ci[0], 0.0, 1.0)),
            ci_high=float(np.clip(ci[1], 0.0, 1.0)),
            n_tasks=len(tasks),
            tasks_failed=sum(1 for t in tasks.values() if not t.seeds),
            tasks_skipped=sum(1 for t in self.per_task if s not in self.per_task[t]),
            metrics_na=self.metrics_na(s),
            tier1_tasks=len(tier1), n_cells=len(records),
            n_failed=sum(failure_counts(records).values()), failures=failure_counts(records),
            date=prov["date"], git_sha=prov["git_sha"], hardware=prov["hardware"],
            outside_anchors={t: ts.unclipped for t, ts in sorted(tasks.items())
                             if ts.seeds and not 0.0 <= ts.unclipped <= 1.0})
