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
  form their own family) and Benjamini-Hochberg-corrected across the scorers of one metric. The
  words, with the metric's practical minimum effect (:mod:`leaderboard.method.resolution`): better /
  worse (significant, |delta| at least the minimum effect), within resolution (significant,
  smaller), tie (not significant, the delta's interval inside ± the minimum effect), n.s.
  ``p_signflip`` is the exact sign-flip test over the seed differences, n/a where its smallest
  value 2^(1-n) exceeds alpha. ``detectable_vs_baseline`` is the smallest difference the paired
  t test detects with 80% power at alpha.
- Tiers and rank intervals: see :func:`leaderboard.method.stats.assign_tiers` and
  :func:`leaderboard.method.stats.rank_intervals`, on pairwise paired t tests. A scorer with fewer
  than two seeds cannot be tested: it gets no tier and no rank interval. Probe and cost tracks are
  descriptive: no verdict, tier or rank, and never in the overall.
- A metric a cell does not report (or a ``skipped`` cell) is n/a (``n_na``, with ``na_reason``),
  not a failure; a metric reported as null is a failure (``n_null``).
- Intervals of a bounded metric stay within its bounds
  (:func:`leaderboard.method.table_stats.bounds`).
- Overall: see :mod:`leaderboard.method.overall`: the headline is the probability of improvement
  over softmax averaged over tasks (:mod:`leaderboard.method.improvement`), with its stratified
  bootstrap interval, tiers and ranks; the normalized score stands beside it.

The work is split by job: :mod:`leaderboard.loading.selection` (which records count),
:mod:`leaderboard.method.rows` (the rows of each task), :mod:`leaderboard.method.table_stats` (the
statistics of one metric's table), :mod:`leaderboard.method.verdicts` (the words against the
baseline), :mod:`leaderboard.method.overall` (the overall score) and
:mod:`leaderboard.method.claims` (the paper's claims); :mod:`leaderboard.method.board` holds the
result.
"""
from __future__ import annotations

import math
from collections import defaultdict

from ..loading.records import LoadedRecords, Problem, Record, provenance_lists
from ..loading.schema import BASELINE, TRACKS
from ..loading.selection import deduplicate, setting_labels, split_superseded
from . import improvement, stats
from .board import (CLAIM_COLUMNS, DESCRIPTIVE_TRACKS, FAILED_CELL_COLUMNS, GRID_COLUMNS,
                    OVERALL_COLUMNS, OVERALL_TASK_COLUMNS, OVERALL_TRACKS, PROBLEM_COLUMNS,
                    ROW_COLUMNS, SUPERSEDED_COLUMNS, TASK_SCORE_COLUMNS, Board, to_frame)
from .claims import judge as judge_claims
from .claims import load_claims
from .overall import overall, overall_norms
from .rows import collect
from .table_stats import better_sign
from .verdicts import verdicts


def aggregate(loaded: LoadedRecords, release: str = "", baseline: str = BASELINE,
              n_boot: int = stats.N_BOOT, alpha: float = stats.ALPHA) -> Board:
    """Aggregate loaded records into a :class:`Board` (deterministic: same records, same Board)."""
    problems = list(loaded.problems)
    current, superseded = split_superseded(loaded.records)
    labels = setting_labels(current)

    def label_of(r: Record) -> str:
        return labels[(r.task, r.profile, r.config_key)]

    current, dup_problems = deduplicate(current, label_of)
    problems.extend(dup_problems)
    by_task: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in current:
        by_task[(label_of(r), r.task)].append(r)
    collected = collect(by_task, baseline, n_boot, alpha)
    problems.extend(collected.problems)
    rows = collected.rows
    verdicts(rows, alpha)
    uninformative: list[str] = []
    seed_norms = overall_norms(rows, collected.z, collected.anchored, uninformative)
    overall_rows, task_scores, overall_tasks = overall(
        rows, seed_norms, collected.anchored, collected.records_by_scorer, alpha, baseline)
    _sort_rows(rows)
    meta = {"release": release, "baseline": baseline, "alpha": alpha, "n_boot": n_boot,
            **_method_meta(), "unanchored": sorted(collected.unanchored),
            "uninformative": sorted(uninformative),
            **_records_meta(loaded, current, superseded, problems),
            "profiles": sorted({label_of(r) for r in current}),
            **_provenance_meta(loaded, current)}
    problems.sort(key=lambda p: (p.path, p.reason))
    return Board(
        meta=meta,
        rows=to_frame(rows, ROW_COLUMNS),
        overall=to_frame(overall_rows, OVERALL_COLUMNS),
        failed_cells=to_frame(collected.failed_cells, FAILED_CELL_COLUMNS),
        superseded=to_frame(superseded, SUPERSEDED_COLUMNS),
        problems=to_frame([p.__dict__ for p in problems], PROBLEM_COLUMNS),
        task_scores=to_frame(task_scores, TASK_SCORE_COLUMNS),
        grids=to_frame(collected.grids, GRID_COLUMNS),
        claims=to_frame(judge_claims(rows, load_claims(), alpha), CLAIM_COLUMNS),
        overall_tasks=to_frame(overall_tasks, OVERALL_TASK_COLUMNS),
    )


def _sort_rows(rows: list[dict]) -> None:
    """By track, task, profile, headline first, metric, tier, then best mean first."""
    track_order = {t: i for i, t in enumerate(TRACKS)}
    rows.sort(key=lambda r: (track_order[r["track"]], r["task"], r["profile"], not r["headline"],
                             r["metric"], r["tier"] if r.get("tier") is not None else math.inf,
                             -better_sign(r["direction"]) * r["mean"]
                             if not math.isnan(r["mean"]) else math.inf, r["scorer"]))


def _method_meta() -> dict:
    return {"exact_item_draws": stats.EXACT_ITEM_DRAWS, "power": stats.POWER,
            "tie_tol": stats.TIE_TOL, "overall_n_boot": improvement.N_BOOT,
            "overall_tracks": list(OVERALL_TRACKS),
            "descriptive_tracks": list(DESCRIPTIVE_TRACKS)}


def _records_meta(loaded: LoadedRecords, used: list[Record], superseded: list[dict],
                  problems: list[Problem]) -> dict:
    dates = sorted({r.date for r in used if r.date != "unknown"})
    return {
        "n_files": len(loaded.records) + sum(1 for p in loaded.problems if p.skipped),
        "n_records": len(loaded.records), "n_used": len(used),
        "n_superseded": sum(s["n_cells"] for s in superseded),
        "n_problems": len(problems),
        "date_first": dates[0] if dates else "unknown",
        "date_last": dates[-1] if dates else "unknown",
        "finished_last": max((str(r.provenance.get("finished") or "") for r in used),
                             default=""),
    }


def _provenance_meta(loaded: LoadedRecords, used: list[Record]) -> dict:
    prov = provenance_lists(used)
    return {"git_sha": prov["git_sha"], "hardware": prov["hardware"],
            "harness_version": prov["harness_version"],
            "records": {r.path: r.digest
                        for r in sorted(loaded.records + loaded.sweeps, key=lambda r: r.path)}}


def build_board(results_dir, release: str = "", **kwargs) -> Board:
    """Load every record under ``results_dir`` and aggregate it."""
    from ..loading.records import load_records

    return aggregate(load_records(results_dir), release=release, **kwargs)
