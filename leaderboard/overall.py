"""The overall: per profile, one quality score per scorer from its own records.

Over the ICL / decoder / encoder tracks, headline metrics with a floor and a ceiling, and the
tasks that every scorer of the profile has records of: each record's value is normalized on
fixed anchors (:mod:`leaderboard.anchors`); a seed's task score is the mean over its normalized
headline metrics, a scorer's task score the mean over seeds, its score the mean over the tasks it
ran (a task where every cell failed counts 0; a skipped task does not count, nor does a headline
metric the scorer cannot report, n/a, which its row names). CI: t with
Welch-Satterthwaite degrees of freedom; tiers and ranks from paired per-task differences;
``win_rate`` is HELM's mean win rate over the overall's headline metrics.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from . import informative, stats
from .board import OVERALL_TRACKS
from .records import Record, failure_counts, provenance_lists
from .table_stats import better_sign

# The smallest difference of overall scores (normalized scale, 0..1) that can separate tiers.
OVERALL_MIN_EFFECT = 1e-6


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
    normalized headline value; ``var`` is the variance of that mean (0 for a task where every
    cell failed, which counts 0; NaN with one seed) and ``df`` its degrees of freedom."""

    score: float
    var: float
    df: float
    seeds: dict[int, float]
    unclipped: float = math.nan


def task_score(per_seed: dict[int, list[float]], all_failed: bool) -> TaskScore | None:
    """``per_seed``: seed -> the unclipped normalized values of the task's headline metrics; the
    score clips each to [0, 1], ``unclipped`` keeps them as they are."""
    seeds = {k: float(np.mean(np.clip(v, 0.0, 1.0))) for k, v in sorted(per_seed.items()) if v}
    if seeds:
        x = np.array(list(seeds.values()))
        var = float(x.var(ddof=1)) / x.size if x.size > 1 else math.nan
        raw = float(np.mean([np.mean(v) for v in per_seed.values() if v]))
        return TaskScore(float(x.mean()), var, float(x.size - 1), seeds, raw)
    return TaskScore(0.0, 0.0, 1.0, {}, 0.0) if all_failed else None


def difference(a: dict[str, TaskScore], c: dict[str, TaskScore]) -> tuple[list, list, list]:
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


def win_rate(prows: list[dict], scenarios: list[tuple[str, str]], scorer: str) -> float:
    """HELM's mean win rate: per scenario (task, headline metric of the overall) the share of the
    other scorers whose mean this scorer beats (a tie within the tolerance counts half; a scorer
    whose every cell failed loses to every scorer with a value), averaged over scenarios."""
    rates = []
    for task, metric in scenarios:
        mrows = {r["scorer"]: r for r in prows if r["task"] == task and r["metric"] == metric}
        if scorer not in mrows:
            continue
        sign = better_sign(mrows[scorer]["direction"])

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


def overall(rows: list[dict], seed_norms: dict, anchored: dict,
            records_by_scorer: dict[tuple[str, str], list[Record]],
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
        scores = _ProfileOverall(profile, by_profile[profile], seed_norms, anchored, alpha)
        task_scores += scores.task_score_rows()
        overall_tasks += scores.task_rows(anchored)
        out += scores.scorer_rows(records_by_scorer)
    out.sort(key=lambda r: (r["profile"], r["tier"] if r["tier"] is not None else math.inf,
                            -r["score"] if not math.isnan(r["score"]) else math.inf, r["scorer"]))
    return out, task_scores, overall_tasks


class _ProfileOverall:
    """The overall of one profile: each scorer's task scores, their mean and its interval."""

    def __init__(self, profile: str, rows: list[dict], seed_norms: dict, anchored: dict,
                 alpha: float):
        self.profile, self.rows, self.alpha = profile, rows, alpha
        self.scorers = sorted({r["scorer"] for r in rows})
        self.row_of = {(r["task"], r["metric"], r["scorer"]): r for r in rows}
        self.scenarios: list[tuple[str, str]] = []
        self.per_task: dict[str, dict[str, TaskScore]] = {}
        for task in sorted({r["task"] for r in rows}):
            metrics = anchored.get((profile, task), [])
            if not metrics or {r["scorer"] for r in rows if r["task"] == task} != set(self.scorers):
                continue   # run by some scorers only, or no anchored headline metric
            self.scenarios += [(task, m) for m in metrics]
            self.per_task[task] = self._task_scores(task, metrics,
                                                    seed_norms.get((profile, task), {}))
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

    def task_score_rows(self) -> list[dict]:
        return [dict(profile=self.profile, task=task, scorer=s, score=ts.score,
                     score_unclipped=ts.unclipped)
                for task, scores in self.per_task.items() for s, ts in sorted(scores.items())]

    def by_scorer(self) -> dict[str, dict[str, float]]:
        return {s: {t: ts.score for t, ts in self.tasks_of[s].items()} for s in self.scorers}

    def task_rows(self, anchored: dict) -> list[dict]:
        shares = informative.spread_shares(self.by_scorer())
        return [dict(profile=self.profile, task=t, metrics=anchored.get((self.profile, t), []),
                     share=shares.get(t, math.nan)) for t in sorted(self.per_task)]

    def pvalue(self, a: str, c: str) -> float:
        """The overall's test of two scorers: paired per task where they ran the same tasks."""
        tasks_of = self.tasks_of
        if set(tasks_of[a]) == set(tasks_of[c]):
            means, variances, dofs = difference(tasks_of[a], tasks_of[c])
        else:
            means = [self.score[a] - self.score[c]]
            va = sum(t.var for t in tasks_of[a].values()) / len(tasks_of[a]) ** 2
            vc = sum(t.var for t in tasks_of[c].values()) / len(tasks_of[c]) ** 2
            variances, dofs = [va + vc], [stats.welch_satterthwaite(
                [va, vc], [min(t.df for t in tasks_of[x].values()) for x in (a, c)])
                if va + vc > 0 else 1.0]
        if abs(float(np.mean(means))) < OVERALL_MIN_EFFECT:
            return 1.0
        return stats.combined_t(means, variances, dofs, self.alpha)[3]

    def scorer_rows(self, records_by_scorer: dict[tuple[str, str], list[Record]]) -> list[dict]:
        """One row per scorer: score, interval, tier, ranks, failures and provenance."""
        testable = {s: self.score[s] for s in self.summary}
        tiers = stats.assign_tiers(testable, True, self.pvalue, self.alpha)
        ranks = stats.rank_intervals(testable, True, self.pvalue, self.alpha)
        without = informative.leave_one_out_ranks(self.by_scorer())
        point = {s: v for s, v in self.score.items() if not math.isnan(v)}
        score_rank = {s: 1 + sum(1 for o in point.values() if o > v + stats.tolerance(o, v))
                      for s, v in point.items()}
        return [dict(self._scorer_row(s, records_by_scorer.get((self.profile, s), [])),
                     tier=tiers.get(s), rank_low=ranks.get(s, (math.nan, math.nan))[0],
                     rank_high=ranks.get(s, (math.nan, math.nan))[1],
                     score_rank=score_rank.get(s), rank_without=without.get(s, {}))
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
        tier1 = {r["task"] for r in self.rows if r["scorer"] == s and r["task"] in self.per_task
                 and r["headline"] and r.get("tier") == 1}
        prov = provenance_lists(records)
        return dict(
            profile=self.profile, scorer=s, score=self.score[s], ci_low=ci[0], ci_high=ci[1],
            win_rate=win_rate(self.rows, self.scenarios, s), n_tasks=len(tasks),
            tasks_failed=sum(1 for t in tasks.values() if not t.seeds),
            tasks_skipped=sum(1 for t in self.per_task if s not in self.per_task[t]),
            metrics_na=self.metrics_na(s),
            tier1_tasks=len(tier1), n_cells=len(records),
            n_failed=sum(failure_counts(records).values()), failures=failure_counts(records),
            date=prov["date"], git_sha=prov["git_sha"], hardware=prov["hardware"],
            outside_anchors={t: ts.unclipped for t, ts in sorted(tasks.items())
                             if ts.seeds and not 0.0 <= ts.unclipped <= 1.0})
