"""Markdown views of a :class:`~leaderboard.method.aggregate.Board` (tables by tabulate): the
release README and the root LEADERBOARD.md. Everything shown is read from the Board, nothing
recomputed."""
from __future__ import annotations

import textwrap
from typing import Iterable

import pandas as pd
from tabulate import tabulate

from ..loading.schema import TRACKS
from ..method.board import DESCRIPTIVE_TRACKS
from . import notes, summary
from .columns import CLAIM_FIELDS, DETAIL_MAX_SCORERS, FIELDS, MARKDOWN_FIELDS, shown_rows
from .plots import CAPTIONS
from .text import (TRACK_TITLES, cell_text, claim_verdict_text, delta_text, failed_text,
                   failures_text, interval, joined, mean_text, missing, normalized_text, num,
                   outside_text, poi_tasks_text, poi_text, pval, rank_without_text, score_text,
                   scorer_text, short_shas, tasks_text, tier_text)

MESSAGE_WIDTH = 120

METHOD = """\
- **Rows** are (profile, task, metric, scorer). *n* counts the seeds whose cell finished `ok`
  with a value; mean and std are over those seeds. Headline metrics are shown here, and every
  metric of a task run by at most {detail} scorers; all of them are in `results.csv` /
  `results.json`.
- **The seed is the unit.** A seed's value is its mean over the evaluation items, so item noise
  enters once, through each seed's mean. **95% CI**: Student t on the seed values,
  mean ± t(n-1) · s/√n (needs n >= 2). It is calibrated at 3 to 10 seeds: in simulation it covers
  the true mean in 95% of rows whether seed or item noise dominates (the former two-stage
  bootstrap covered about 75% at three seeds). The column **items only** is a different
  question, "given these trained models": a percentile bootstrap ({n_boot} replicates) over items
  only, one item draw shared by all seeds evaluated on the same items. It says how much the
  evaluation set alone moves the number, not how another training run would land.
- **Δ vs {baseline}** is the mean paired difference on the seeds both ran; **p** is the paired t
  test on the per-seed differences (two-sided), corrected twice: Holm per scorer across the
  tasks and headline metrics of a profile (secondary metrics form their own family), and
  Benjamini-Hochberg across the scorers compared with {baseline} on one metric. *better* /
  *worse* need both corrected p <= {alpha} and |Δ| at least the metric's minimum effect.
  **p sign-flip** is the exact sign-flip permutation test over the seed differences
  (uncorrected, assumes no normality): it cannot go below 2^(1-n), so below six seeds it cannot
  reach α = 0.05 and is n/a.
- **No verdict below the practical size.** Differences within a numeric tolerance ({tie_tol:g}
  relative) are zero. Each metric has a minimum effect in its own units (see *Practical size*
  below): a significant |Δ| below it is *within resolution*, never better or worse, and no
  difference below it separates tiers.
- **Informative or not, from the baseline alone.** Each headline metric (and the metrics the
  claims use) declares when it can tell scorers apart at a profile (`leaderboard/method/informative.py`),
  read from {baseline}'s own records, never the judged scorer's: {baseline} must be *clearly*
  above the floor (on the normalized scale below, the lower end of its 95% t interval reaches
  both a declared margin and the difference a paired test at its seed count detects when two
  scorers scatter like its seeds, sd·√2), or, for an out-of-distribution metric, the task's
  in-distribution metric must show the task was learned. An uninformative metric keeps its
  numbers but gets no better/worse, tier or rank, stays out of the Holm and BH families and out
  of the overall; the line under its table says why. Where `icl_linear`'s raw shifted MSE is
  uninformative, the mean over the shifted cells of MSE / zero-predictor MSE
  (`mse_over_zero_shifted`) is the headline in its place, when it is informative itself.
- **Degenerate is not a tie.** A metric whose every scorer gives one value at all its seeds, or
  at whose every seed all scorers give the same value (the seed's data decides it, not the
  scorer), is *degenerate*: no better/worse, tier or rank, and the reason is printed; so is a
  comparison where the scorer and {baseline} are both constant over their seeds (a constant
  difference has p = 0 and says nothing).
- **Power.** Under each table, per metric: the smallest difference vs {baseline} the paired t test
  detects with {power:.0%} power at α = {alpha}, from its n and the spread of the per-seed
  differences; *n.s.* reads "no difference larger than that". A paired t test needs
  {n_2sd} seeds to detect a difference of 2 standard deviations of the per-seed differences,
  {n_1sd} seeds for 1 and {n_halfsd} for 0.5 (80% power, α = {alpha}, before correction); three
  seeds detect {d3:.1f} standard deviations.
- **Tier**: walk the scorers from the best mean. The first leads a tier; every later scorer is
  compared with the leader (paired t on common seeds; a tie below the minimum effect is not a
  difference), p-values Holm-corrected within the step; the tier ends just before the first
  scorer, in score order, that is significantly worse than the leader, which leads the next
  tier. So tiers follow the score order. **Rank** is an interval from the same pairwise tests:
  1 + the number of scorers significantly better, to the count of scorers minus the number
  significantly worse (Holm over each scorer's comparisons). A scorer with fewer than two seeds
  gets no tier and no rank.
- **Probes and cost are descriptive**: their tables have no better/worse words, tiers or ranks,
  and they never enter the overall (a probe's "better" direction is a value judgement).
- **Failures** (diverged / nan / oom / timeout / error, and `null` for a metric the cell reported
  as missing) are counted per row; a mean marked † is over the surviving seeds only. A metric
  that cannot apply (the cell was `skipped`, or the task does not compute it for that scorer) is
  **n/a** with the reason, not a failure; the failed-cells section counts the same cells. A
  headline metric of the overall that a scorer cannot report is left out of its task score and
  named in its row.
- **Overall**: per profile, over the ICL, decoder and encoder tasks that every scorer has records
  of (a task run by some scorers only is named under the table), and their informative headline
  metrics with both anchors (the others are listed under the table). **The headline** is
  rliable's probability of improvement: per headline metric, the probability that a seed of the
  scorer beats a seed of {baseline} by more than the metric's minimum effect (a difference within
  it counts half), P(X > Y) over all pairs of their seeds; a task's value is the mean over its
  metrics (0 where all the scorer's cells failed), the headline the mean over the tasks the
  scorer ran, each task with weight 1/K. {baseline} scores 0.5. Because each task enters only
  through comparisons with {baseline}, a task whose values spread ten times wider across scorers
  moves no scorer further than one whose values spread little: no task can weigh more than 1/K.
  It counts how often a scorer is ahead, not by how much. Its 95% interval is a percentile
  bootstrap stratified by task ({overall_n_boot} replicates; each resamples, per task, the seeds
  of {baseline} once and of each scorer with replacement); tiers and rank intervals come from the
  two-sided bootstrap test of two scorers' headlines (Holm, as above). At five seeds a
  percentile bootstrap interval is somewhat narrower than its nominal coverage. **The normalized
  score** beside it says how far: each headline metric on fixed anchors, z = (x - floor) /
  (ceiling - floor), on log x for perplexity, with floor = the trivial predictor or chance
  (zero-predictor MSE, constant-answer error, chance accuracy, unigram perplexity) and ceiling =
  perfect, each record on its own anchors; a seed's task value is the mean of its normalized
  headline metrics, the task score their mean over seeds **clipped to [0, 1] as a mean, never per
  seed** (one lucky seed above the floor does not lift a worse mean), the score the mean over
  tasks with a Student t interval (Welch-Satterthwaite degrees of freedom) clipped to [0, 1]. The
  tables show z as it is (column *normalized*, ▽ below 0, △ above 1), and each row names the
  tasks where its unclipped task score leaves [0, 1] (column *outside [0, 1]*).
  **What it rests on**: beside each scorer, its headline rank with each task left out (*overall
  rank if a task is left out*: not a rank on that task), and under the table each task's share of
  the spread of the headline across scorers (Cov(task value / K, headline) / Var(headline) over
  K tasks; the shares sum to 1), and of the normalized score's. Equal weights bound what a task
  can move (1/K), not how much of the spread it carries: a task where scorers split into those
  that learn it and those that do not (at the cpu profile, icl_mqar within its step budget)
  carries more of the spread than tasks where most scorers sit near {baseline}; a task above half
  of it is named under the table with the measured spread of each task's values.
- **Informative**: every headline metric must show {baseline} clearly better than the task's
  trivial predictor (the lower end of its 95% interval on the normalized scale at least its
  rule's margin, 0.1 where the rule names none); a metric where {baseline} is worse than the
  trivial predictor reads "the baseline is below the trivial predictor" and leaves the overall.
- **Practical size**: each metric has a minimum effect in its own units, stated in
  `leaderboard/method/resolution.py` (2% for a perplexity, half a tuning-grid step; 0.02 for an
  accuracy or error; 5% of the baseline's raw MSE; 2 Zorro points; ...). A significant difference
  smaller than it reads *within resolution*; a non-significant one whose 95% interval lies
  inside ± it reads *tie*.
- **Bounded numbers**: an interval of a metric with a bounded range (accuracies and errors in
  [0, 1], perplexity at least 1, MSE at least 0, a declared ceiling) is clipped to that range and
  its method says so; the exact sign-flip test, whose smallest p is 2^(1-n), is n/a at fewer
  seeds than can reach α (five seeds: 0.0625).
- **icl_mqar**: multi-query associative recall (Zoology): a decoder trained from scratch at one
  length recalls the value of each queried key; accuracy on a pairs x length grid that includes
  longer sequences and more pairs than trained (floor: guessing one of the context's values).
- **Length generalization** (`decoder_lm`): held-out perplexity in rolling windows of 1x, 2x and
  4x the training context over the same tokens, RoPE as trained (floor: the unigram perplexity);
  a scorer defined only up to its training length has no value beyond it.
- **Superseded** records (older task, scorer or harness records version than the newest seen)
  are listed, not used. Each row's date, harness git sha and hardware come from its records' provenance.
- **Precision**: the statistics use no BLAS or LAPACK (the items-only bootstrap resamples the
  items' mean over seeds by integer counts or indices; sums are numpy's fixed-order reductions),
  so `results.json` is the same bytes on any CPU, BLAS kernel and thread count for the same
  records and library versions. `scorebench publish --check` republishes a release from its
  records (`meta.records` holds each record's digest) and holds every number to a relative
  {rtol:g}; it names a changed record and the rows it feeds, or the fields whose arithmetic moved.
"""


def skipped_tasks(board) -> dict[tuple[str, str], list[str]]:
    """(profile, scorer) -> the overall's tasks it has no value on because every cell was
    skipped (a probe or a task left out of the overall is not among them)."""
    in_overall = {(t["profile"], t["task"]) for t in _records(board.overall_tasks)}
    out: dict[tuple[str, str], set[str]] = {}
    for r in _records(board.rows):
        if (r["n_cells"] and r["n_skipped"] == r["n_cells"]
                and (r["profile"], r["task"]) in in_overall):
            out.setdefault((r["profile"], r["scorer"]), set()).add(r["task"])
    return {key: sorted(tasks) for key, tasks in out.items()}


def _field(frame: str, key: str):
    """The one definition of a column (:mod:`leaderboard.rendering.columns`)."""
    known = CLAIM_FIELDS if frame == "claims" else FIELDS[frame]
    return known[key] if key in known else MARKDOWN_FIELDS[key]


def labels(frame: str, keys: Iterable[str], baseline: str = "") -> list[str]:
    """The headers of ``keys`` as every view of the release names them."""
    return [_field(frame, k).label.format(baseline=baseline) for k in keys]


def column_legend(baseline: str) -> str:
    """What each column of the tables above means, from the same definitions as the page's
    header titles."""
    groups = (("Track tables", "rows", ("mean", "normalized", "ci_items_low", "n",
                                        "delta_vs_baseline",
                                        "p_vs_baseline_holm", "p_vs_baseline_bh", "p_signflip",
                                        "tier", "rank_low", "failures")),
              ("Overall", "overall", ("poi", "score", "tier", "rank_low", "poi_tasks",
                                      "rank_without", "outside_anchors", "n_tasks",
                                      "tier1_tasks", "n_failed")),
              ("Claims", "claims", ("effect", "min_effect", "p", "detectable", "verdict",
                                    "reason")))
    lines = []
    for title, frame, keys in groups:
        lines.append(f"- **{title}**: " + "; ".join(
            f"*{f.label.format(baseline=baseline)}*: {f.title}"
            for f in (_field(frame, k) for k in keys)))
    return "\n".join(lines)


def _table(rows: list[list], headers: list[str]) -> str:
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.to_dict(orient="records")


def track_table(board, track: str) -> str:
    rows = shown_rows(board, track)
    if not rows:
        return "No records for this track in this release."
    baseline = board.meta.get("baseline", "softmax")
    multi = len({r["profile"] for r in rows}) > 1
    headers = (["profile"] if multi else []) + ["task", "metric"] + labels(
        "rows", ("scorer", "mean", "normalized", "ci_items_low", "n", "delta_vs_baseline",
                 "p_vs_baseline_holm", "p_vs_baseline_bh", "p_signflip", "tier", "rank_low",
                 "failures"), baseline) + ["date", "harness", "hardware"]
    body = []
    for r in rows:
        arrow = " ↓" if r["direction"] == "lower" else " ↑"
        body.append(([r["profile"]] if multi else []) + [
            cell_text(r["task"]), f"{cell_text(r['metric'])}{arrow}",
            cell_text(scorer_text(r)), cell_text(mean_text(r)),
            normalized_text(r),
            interval(r["ci_items_low"], r["ci_items_high"]), str(r["n"]),
            delta_text(r, baseline),
            pval(r["p_vs_baseline_holm"]),
            pval(r["p_vs_baseline_bh"]), pval(r["p_signflip"]), tier_text(r),
            interval(r["rank_low"], r["rank_high"], integer=True), failures_text(r["failures"]),
            r["date"], short_shas(r["git_sha"]), cell_text(joined(r["hardware"]))])
    return _table(body, headers)


def power_lines(board, track: str) -> list[str]:
    """Per shown (profile, task, metric): the smallest difference vs the baseline detectable at
    80% power, from the rows' n and the spread of their per-seed differences (the median over the
    scorers compared)."""
    baseline = board.meta.get("baseline", "softmax")
    groups: dict[tuple, list[dict]] = {}
    for r in shown_rows(board, track):
        groups.setdefault((r["profile"], r["task"], r["metric"]), []).append(r)
    out = []
    for (profile, task, metric), rows in groups.items():
        tested = [r for r in rows if not missing(r["detectable_vs_baseline"])
                  and r.get("informative") is not False and not r.get("degenerate")]
        if not tested:
            continue
        ns = sorted({int(r["n_paired"]) for r in tested})
        detectable = pd.Series([r["detectable_vs_baseline"] for r in tested]).median()
        spread = pd.Series([r["sd_paired"] for r in tested]).median()
        out.append(f"{task} / {metric} ({profile}): differences vs {baseline} smaller than "
                   f"{num(detectable)} are below 80% power (n = {', '.join(map(str, ns))} "
                   f"seeds, sd of per-seed differences {num(spread)}, median over "
                   f"{len(tested)} scorers)")
    return out


def overall_table(board) -> str:
    rows = _records(board.overall)
    if not rows:
        return "No quality-track records in this release."
    skipped = skipped_tasks(board)
    multi = len({r["profile"] for r in rows}) > 1
    baseline = board.meta.get("baseline", "softmax")
    headers = (["profile"] if multi else []) + labels(
        "overall", ("tier", "scorer", "poi", "score", "rank_low", "poi_tasks", "rank_without",
                    "outside_anchors", "n_tasks", "tier1_tasks", "n_failed"), baseline) + [
        "date", "harness", "hardware"]
    body = []
    for r in rows:
        body.append(([r["profile"]] if multi else []) + [
            tier_text(r), cell_text(r["scorer"]), poi_text(r), score_text(r),
            interval(r["rank_low"], r["rank_high"], integer=True),
            cell_text(poi_tasks_text(r)),
            cell_text(rank_without_text(r)), cell_text(outside_text(r)), tasks_text(r, skipped),
            str(r["tier1_tasks"]), failed_text(r), r["date"], short_shas(r["git_sha"]),
            cell_text(joined(r["hardware"]))])
    return _table(body, headers)


def claims_table(board) -> str:
    rows = _records(board.claims)
    if not rows:
        return "No row of this release holds a claim's metric."
    body = [[cell_text(r["id"]), cell_text(r["claim"]), cell_text(r["source"]), r["profile"],
             f"{cell_text(r['scorer'])} vs {cell_text(r['baseline'])}"
             + (" (beside)" if r.get("role") == "beside" else ""),
             f"{cell_text(r['task'])} / {cell_text(r['metric'])} "
             f"{'↓' if r['direction'] == 'lower' else '↑'}", cell_text(r["paper"]),
             "n/a" if missing(r["effect"]) else
             f"{r['effect']:+.4g} {interval(r['ci_low'], r['ci_high'])}",
             num(r.get("min_effect")), pval(r["p"]), str(r["n_seeds"]),
             cell_text(claim_verdict_text(r))] for r in rows]
    return _table(body, ["claim", "text", "source", "profile", "scorer", "task / metric",
                         "paper", *labels("claims", ("effect", "min_effect")), "p (Holm)", "n",
                         "verdict"])


def failed_cells_sentence(board) -> str:
    """How many cells failed and how many were skipped (n/a), counted as the tables count them."""
    rows = _records(board.failed_cells)
    skipped = sum(1 for r in rows if r["status"] == "skipped")
    failed = len(rows) - skipped
    if not rows:
        return "Every cell finished `ok` with every metric it reports."
    return (f"{failed} failed cell(s) (a failure status, or `ok` with a null metric) and "
            f"{skipped} skipped cell(s) (n/a: the task cannot run that scorer).")


def failed_cells_table(board) -> str:
    rows = _records(board.failed_cells)
    if not rows:
        return failed_cells_sentence(board)
    body = []
    for r in rows:
        message = cell_text(r["message"])
        if len(message) > MESSAGE_WIDTH:
            message = message[:MESSAGE_WIDTH - 1] + "…"
        body.append([r["profile"], cell_text(r["task"]), cell_text(r["scorer"]), str(r["seed"]),
                     cell_text(r["status"]), "" if missing(r["step"]) else str(r["step"]),
                     message, r["date"]])
    return failed_cells_sentence(board) + "\n\n" + _table(
        body, ["profile", "task", "scorer", "seed", "status", "step", "message", "date"])


def superseded_table(board) -> str:
    rows = _records(board.superseded)
    if not rows:
        return "None."
    return _table([[cell_text(r["task"]), str(r["task_version"]), cell_text(r["scorer"]),
                    str(r["scorer_version"]), r["profile"], str(r["n_cells"]),
                    cell_text(r["reason"])] for r in rows],
                  ["task", "task v", "scorer", "scorer v", "profile", "cells", "why"])


def problems_table(board) -> str:
    rows = _records(board.problems)
    if not rows:
        return "None."
    return _table([[cell_text(r["path"]), "skipped" if r["skipped"] else "partly used",
                    cell_text(r["reason"])] for r in rows], ["file", "effect", "reason"])


def header_lines(board) -> list[str]:
    m = board.meta
    return [
        f"- Records: {m['n_used']} used of {m['n_files']} files ({m['n_superseded']} superseded, "
        f"{m['n_problems']} problems listed below); profiles: {', '.join(m['profiles']) or 'none'}",
        f"- Dates: {m['date_first']} to {m['date_last']}",
        f"- Harness (git): {short_shas(m['git_sha'])}; "
        f"scorebench {', '.join(m['harness_version'])}",
        f"- Hardware: {cell_text(joined(m['hardware']))}",
        f"- Baseline for paired tests: `{m['baseline']}`; α = {m['alpha']}",
    ]


def plot_caption(path: str) -> str:
    """The caption under an embedded plot, from its file name."""
    name = path.rsplit("/", 1)[-1].removesuffix(".png")
    kind, _, rest = name.partition("__")
    if kind == "normalized":
        return f"*{CAPTIONS['normalized'].format(profile=rest)}*"
    if kind == "curves":
        return (f"*Learning curves of {rest}: validation metric against training step, mean over "
                "seeds, one panel per scorer with the baseline in every panel.*")
    return f"*{name}*"


def plot_links(plots: list[str], prefix: str = "") -> list[str]:
    """Each plot embedded with its caption under it."""
    return [f"![{p.rsplit('/', 1)[-1].removesuffix('.png')}]({prefix}{p})\n\n{plot_caption(p)}"
            for p in plots]


REBUILD_NOTE = ("Committed: this README, `results.json.gz` (every number below and all metrics, "
                "as gzipped JSON) and the plots it embeds. `results.csv`, `overall.csv`, the "
                "other plots (per-metric bars and grids, tuning), `index.html` and "
                "`scorers.json` are rebuilt from `results.json.gz` alone: "
                "`scorebench publish --rebuild {release} --out leaderboard/releases`.")


def board_sections(board, plots: list[str], prefix: str = "", level: int = 2) -> list[str]:
    """The body shared by the release README and LEADERBOARD.md."""
    h = "#" * level
    outside = notes.outside_overall(board)
    out = [f"{h} Overall", "", overall_table(board), ""]
    unanchored = [f"{line}: headline metric without a floor and a ceiling, so not in the overall"
                  for line in board.meta.get("unanchored", [])]
    unanchored += notes.overall_notes(board)
    out += [f"- {line}" for line in outside + unanchored] + ([""] if outside + unanchored else [])
    out += [f"{h} Claims", "", "The SSA paper's claims (`leaderboard/method/claims.toml`), judged per "
            "profile on the paper's own variant (scorers marked *beside* are shown next to it): "
            "effect = scorer - baseline, paired over common seeds; paired t test, Holm across "
            "the claims of a profile (the scorers beside form their own family); *supported* / "
            "*contradicted* need adjusted p <= α and the claim's declared minimum effect; *not "
            "supported* gives the difference detectable at the verdict's corrected level; "
            "*uninformative* (the metric cannot tell at this profile) and *degenerate* (no "
            "spread to test) are not tests.", "", claims_table(board), ""]
    for track in TRACKS:
        out += [f"{h} {TRACK_TITLES[track]}", ""]
        if track in DESCRIPTIVE_TRACKS:
            out += ["Descriptive: no better/worse, tiers or ranks; not part of the overall.", ""]
        out += [track_table(board, track), ""]
        power = power_lines(board, track) if track not in DESCRIPTIVE_TRACKS else []
        if track not in DESCRIPTIVE_TRACKS:
            shown = shown_rows(board, track)
            power += notes.metric_notes(shown) + notes.not_learned_notes(shown)
            power += [notes.LEGEND] if shown else []
        out += [f"- {line}" for line in power] + ([""] if power else [])
    out += [f"{h} Failed and skipped cells", "", failed_cells_table(board), "",
            f"{h} Superseded records", "", superseded_table(board), "",
            f"{h} Records not used", "", problems_table(board), ""]
    if plots:
        out += [f"{h} Plots", ""] + [line for p in plot_links(plots, prefix) for line in (p, "")]
    return out


def release_readme(board, plots: list[str]) -> str:
    m = board.meta
    lines = [f"# scorebench leaderboard: {m['release']}", ""] + header_lines(board) + [""]
    lines += [REBUILD_NOTE.format(release=m["release"]), ""]
    lines += board_sections(board, plots)
    if m.get("changes"):
        lines += [changes_section(m["changes"])]
    lines += ["## Method", "", method_text(m)]
    return "\n".join(lines).rstrip() + "\n"


def changes_section(ch: dict) -> str:
    """The release README's section on what changed since ``ch["against"]``."""
    lines = [f"## What changed since {ch['against']}", "",
             "Rows matched by profile, task, metric and scorer in both releases; a verdict is the "
             "row's comparison with the baseline, a tier its membership in the task's tiers.", "",
             "| profile | task | rows in both | verdicts changed | tiers changed | rows new | "
             "rows gone |", "|---|---|---|---|---|---|---|"]
    for t in ch["tasks"]:
        lines.append(f"| {t['profile']} | {t['task']} | {t['compared']} | {len(t['verdicts'])} | "
                     f"{len(t['tiers'])} | {t['only_now']} | {t['only_before']} |")
    lines.append("")
    for o in ch["overall"]:
        rho = ("not computed (fewer than 3 scorers in both)" if o["rho"] is None
               else f"{o['rho']:.3f}")
        lines.append(f"Overall ({o['profile']}): Spearman rank correlation {rho} over "
                     f"{len(o['scorers'])} scorers in both"
                     + (f"; new: {', '.join(o['only_now'])}" if o["only_now"] else "")
                     + (f"; gone: {', '.join(o['only_before'])}" if o["only_before"] else "")
                     + ".")
    if ch.get("overall_tiers"):
        lines += ["", "Overall tiers that changed:", "",
                  "| profile | scorer | before | now | why |", "|---|---|---|---|---|"]
        lines += [f"| {p} | {s} | {a} | {b} | {w} |" for p, s, a, b, w in ch["overall_tiers"]]
    if ch.get("claims"):
        lines += ["", "Claim verdicts that changed:", "",
                  "| profile | claim | scorer | before | now | why |", "|---|---|---|---|---|---|"]
        lines += [f"| {p} | {i} | {s} | {a} | {b} | {w} |" for p, i, s, a, b, w in ch["claims"]]
    changed = [(t["task"], v) for t in ch["tasks"] for v in t["verdicts"]]
    if changed:
        why = any(len(v) > 5 for _, v in changed)
        lines += ["", "Verdicts that changed"
                  + (" (on a task now trained to convergence, by speed or by level: speed when "
                     "the scorer's or the baseline's median seed reached the target only after "
                     "the earlier release's step budget)" if why else "") + ":", "",
                  "| task | metric | scorer | before | now | rule |" + (" speed or level |" if why
                                                                        else ""),
                  "|---|---|---|---|---|---|" + ("---|" if why else "")]
        lines += [f"| {task} | {v[0]} | {v[1]} | {v[2]} | {v[3]} | "
                  f"{v[4] if len(v) > 4 else ''} |" + (f" {v[5] if len(v) > 5 else ''} |" if why
                                                      else "")
                  for task, v in changed]
    tiers = [(t["task"], v) for t in ch["tasks"] for v in t["tiers"] if len(v) > 4]
    if tiers:
        lines += ["", "Tiers that changed:", "",
                  "| task | metric | scorer | before | now | rule |", "|---|---|---|---|---|---|"]
        lines += [f"| {task} | {m} | {s} | {a} | {b} | {w} |" for task, (m, s, a, b, w) in tiers]
    return "\n".join(lines) + "\n"



PAPER_DIFFERENCES = """\
**Differences from the paper's protocol** (ICL; the SSA authors' code, omyokun/SSA `scratch/src/`):
labels, read-out, loss, curriculum, model and optimizer match; these differ.

- **Which SSA**: the original's ICL run names say "exp(a), exp(b)" (the edit is not released),
  the `ssa_gpt2` parametrization; its ICL claims are judged on `ssa_gpt2`, with `ssa` (the
  decoder's Triton v4 setting: softplus n, fixed b) shown beside it.
- **`icl_linear` headlines are the paper's cell**: raw MSE at T = 9 in distribution (σx = σ = 1,
  `mse_T9_id`) and the mean raw MSE over the shifted cells of the T = 9 grid (`mse_T9_shifted`),
  anchored by the zero predictor's MSE on the same cells. T = 41 (`mse_T41_*`) and the ratios to
  the zero predictor (`mse_over_zero_*`, pooled over lengths) are secondary. The raw mean is
  mostly the few largest-σ cells, where every model is near the zero predictor: where that
  leaves it uninformative, `mse_over_zero_shifted`, which weighs every cell of the grid alike,
  is the headline in its place, and the out-of-distribution claim is judged on it.
- **Out-of-distribution sequences are independent draws**; the original seeds element (i, j) with
  100i + 10j, so its sequences are overlapping shifted copies and every shorter T is a prefix of
  the longer ones (its curves are monotone by construction). Ours is the better design; compare
  with the paper in expectation only, never sequence by sequence.
- **Deviant values**: the paper's two protocols are reported as named metrics: `paper_fixed_*`,
  the one sequence [1, −1, −2, 1000] (T = 4, its labels unchanged by the deviant; last-layer
  |w| on the deviant), and `paper_variant_error` (−70 at point 6 and 70000 at point 8, sequence
  error across σ). Ours (`deviant_*`: ±10 … ±10⁴ at p ∈ {4, ⌊T/2⌋, T} in N(0, 1) sequences)
  runs at the last training length (19 points at the cpu profile), so it shifts only the value.
  Only "attention concentrates on the deviant" compares with the paper, qualitatively.
- **Precision**: ICL trains in fp32 in every profile, as the original (`precision` in the cell
  config); evaluation is fp32.
- **Size**: the cpu profile trains 2-layer, 32-wide models for 500 (quantifiers) and 1,000
  (linear) steps, curriculum to 19 / 21 points, on smaller grids; the paper profile is the paper's
  size. A profile may demote a headline that cannot separate scorers at its size
  (`headline_metrics` in the cell config): at cpu, `icl_quantifiers` `error_id` (0 for every
  scorer) is secondary.
"""


def method_text(meta: dict) -> str:
    from ..method.stats import POWER, REPRODUCE_RTOL, TIE_TOL, detectable_difference, seeds_needed

    alpha = meta["alpha"]
    return METHOD.format(n_boot=meta["n_boot"], baseline=meta["baseline"], alpha=alpha,
                         overall_n_boot=meta.get("overall_n_boot", 2000),
                         detail=DETAIL_MAX_SCORERS, tie_tol=meta.get("tie_tol", TIE_TOL),
                         power=meta.get("power", POWER), n_2sd=seeds_needed(2.0, alpha),
                         n_1sd=seeds_needed(1.0, alpha), n_halfsd=seeds_needed(0.5, alpha),
                         d3=detectable_difference(1.0, 3, alpha), rtol=REPRODUCE_RTOL
                         ) + "\n**Columns**\n\n" + column_legend(meta["baseline"]) + "\n\n" \
        + PAPER_DIFFERENCES


def leaderboard_index(latest, latest_link: str, releases: list[tuple[dict, str]]) -> str:
    """The root LEADERBOARD.md, the front page: the latest release's answer in sentences, one
    compact table per profile, links to the release's sections, and every release as a link.
    ``releases`` holds (meta, link to its README) newest first."""
    m = latest.meta
    sections = {track: f"{latest_link}#{_anchor(TRACK_TITLES[track])}" for track in TRACKS}
    task_links = {r["task"]: sections[r["track"]] for r in _records(latest.rows)}
    lines = ["# scorebench leaderboard", "",
             f"Latest release: **[{m['release']}]({latest_link})**", "",
             _wrap(f"{m['n_used']} records, profile(s) {', '.join(m['profiles']) or 'none'}, "
                   f"{m['date_first']} to {m['date_last']}, baseline `{m['baseline']}`, "
                   f"α = {m['alpha']}, {'; '.join(m.get('hardware') or []) or 'unknown hardware'}."),
             ""]
    lines += [_wrap(sentence, "- ") for sentence in summary.sentences(latest)] + [""]
    for profile in m["profiles"]:
        if any(r["profile"] == profile for r in _records(latest.overall)):
            table = summary.front_table(latest, profile, task_links)
            lines += [f"## Overall ({profile})", ""] + [
                line if line.startswith(("|", "[")) else _wrap(line) for line in table] + [""]
    lines += ["## In the release", ""]
    lines += [f"- [{title}]({latest_link}#{_anchor(title)})" for title in (
        "Overall", "Claims", *(TRACK_TITLES[t] for t in TRACKS), "Failed and skipped cells",
        "Method")]
    lines += [f"- [Plots]({latest_link}#plots)", "- The same numbers as a page: index.html, "
              f"rebuilt with `scorebench publish --rebuild {m['release']} --out "
              "leaderboard/releases` (`scorebench serve`)"]
    lines += ["", "## Releases", ""]
    lines += [f"- [{meta['release']}]({link}): {meta['date_first']} to {meta['date_last']}, "
              f"{meta['n_used']} records" for meta, link in releases]
    return "\n".join(lines).rstrip() + "\n"


def _wrap(text: str, bullet: str = "") -> str:
    """``text`` as a markdown paragraph (or list item) wrapped at 100 characters."""
    return textwrap.fill(text, 100, initial_indent=bullet, subsequent_indent=" " * len(bullet),
                         break_long_words=False, break_on_hyphens=False)


def _anchor(title: str) -> str:
    """The anchor a markdown renderer gives a heading (GitHub's rule)."""
    keep = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return keep.replace(" ", "-")
