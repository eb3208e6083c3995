"""Markdown views of a :class:`~leaderboard.method.aggregate.Board` (tables by tabulate): the
release README and the root LEADERBOARD.md. Everything shown is read from the Board, nothing
recomputed."""
from __future__ import annotations

import pandas as pd

from ..loading.schema import TRACKS
from ..method.board import ran
from ..method.curves import budget
from . import convergence_section, curves_section, notes, summary, track_section, tuning_section
from .columns import DETAIL_MAX_SCORERS, field, labels
from .markdown_layout import Notes, block, bullets, fitted, wrap
from .plots import CAPTIONS
from .text import (TRACK_TITLES, arrow, claim_verdict_text, column_format, failed_text, interval,
                   joined, markdown_text, missing, num, outside_text, poi_tasks_text, pval,
                   rank_without_text, short_shas, signed, steps, tasks_text, tier_text,
                   value_text)

MESSAGE_WIDTH = 120

METHOD = """\
- **Rows** are (profile, task, metric, scorer). *n* counts the seeds whose cell finished `ok`
  with a value; mean and std are over those seeds. Headline metrics are shown here, and every
  metric of a task run by at most {detail} scorers; all of them are in `results.csv` /
  `results.json`.
- **Layout.** Each track opens with a matrix of scorers × headline metrics: each mean, bold in
  tier 1 of its metric, with its mark against {baseline} (▲ / ▼ better / worse, · no verdict,
  – uninformative), split by task where one table would be too wide. Each metric then has its
  own table of statistics (at most ten columns). Every number of a metric's column has one
  number of decimals, the interval's endpoints too (three significant digits of the column's
  median value, two of its narrowest interval), so the values line up; the reason of an n/a
  cell, and any text too long for a cell, is a numbered note under its table. The release's
  dates, harness commits and hardware are stated once, at the top.
- **The seed is the unit.** A seed's value is its mean over the evaluation items, so item noise
  enters once, through each seed's mean. **95% CI**: Student t on the seed values,
  mean ± t(n-1) · s/√n (needs n >= 2). It is calibrated at 3 to 10 seeds: in simulation it covers
  the true mean in 95% of rows whether seed or item noise dominates (the former two-stage
  bootstrap covered about 75% at three seeds). The **items-only** interval (on the page and in
  `results.csv`) is a different question, "given these trained models": a percentile bootstrap
  ({n_boot} replicates) over items only, one item draw shared by all seeds evaluated on the same
  items. It says how much the evaluation set alone moves the number, not how another training
  run would land.
- **Δ vs {baseline}** is the mean paired difference on the seeds both ran; **p** is the paired t
  test on the per-seed differences (two-sided), corrected twice: Holm per scorer across the
  tasks and headline metrics of a profile (secondary metrics form their own family), and
  Benjamini-Hochberg across the scorers compared with {baseline} on one metric. *better* /
  *worse* need both corrected p <= {alpha} and |Δ| at least the metric's minimum effect.
  **p sign-flip** (on the page and in `results.csv`) is the exact sign-flip
  permutation test over the seed differences (uncorrected, assumes no normality): it cannot go
  below 2^(1-n), so below six seeds it cannot reach α = 0.05 and is n/a.
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
  named in a note on its row.
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
  that learn it and those that do not carries more of the spread than tasks where most scorers
  sit near {baseline}; a task above half of it is named under the table with the measured spread
  of each task's values.
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
- **Superseded** records are listed, not used: those of an older task, scorer or harness
  records version than the newest seen, the earlier of two records of one cell, untuned records
  of a task that has tuned ones, and reporting records at a point the tuning protocol no longer
  chooses. Each row's date, harness git sha and hardware come from its records'
  provenance (in `results.csv` and on the page).
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
        if (r["n_cells"] and not ran(r)
                and (r["profile"], r["task"]) in in_overall):
            out.setdefault((r["profile"], r["scorer"]), set()).add(r["task"])
    return {key: sorted(tasks) for key, tasks in out.items()}


def column_legend(baseline: str) -> list[str]:
    """What each column of the tables above means, from the same definitions as the page's
    header titles, and where the row fields the README leaves out are."""
    groups = (("Per-metric statistics", "rows", track_section.STATISTICS[1:]),
              ("Overall", "overall", tuple(k for k in OVERALL + RESTS_ON if k != "scorer")),
              ("Claims", "claims", ("effect", "min_effect", "p", "detectable", "verdict",
                                    "reason")))
    lines = [f"**{title}**: " + "; ".join(
        f"*{f.label.format(baseline=baseline)}*: {f.title}"
        for f in (field(frame, k) for k in keys)) for title, frame, keys in groups]
    left_out = ", ".join(f"*{label}*" for label in labels("rows", track_section.ON_THE_PAGE))
    lines.append(f"**Left to the page**: {left_out}, and each row's date, harness commit and "
                 "hardware (stated once for the release at the top) are in `results.json.gz`, "
                 "`results.csv` and on the page (`index.html`), not in these tables.")
    return lines


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.to_dict(orient="records")


# The overall's columns: the answer, and what it rests on (one table each, so neither is wide).
OVERALL = ("tier", "scorer", "poi", "score", "rank_low", "n_tasks", "tier1_tasks", "n_failed")
RESTS_ON = ("scorer", "poi_tasks", "rank_without", "outside_anchors")


def overall_table(board) -> str:
    """Per profile, the overall's table (tier, headline and normalized score with their
    intervals, rank, tasks, failures; the names of n/a tasks as notes) and the table of what
    each scorer's overall rests on."""
    rows = _records(board.overall)
    if not rows:
        return "No quality-track records in this release."
    skipped = skipped_tasks(board)
    baseline = board.meta.get("baseline", "softmax")
    profiles = sorted({r["profile"] for r in rows})
    out: list[str] = []
    for profile in profiles:
        prows = [r for r in rows if r["profile"] == profile]
        marks = Notes()
        poi = column_format(prows, "poi", "poi_low", "poi_high")
        score = column_format(prows, "score", "ci_low", "ci_high")
        main = [[tier_text(r), markdown_text(r["scorer"]),
                 value_text(r, "poi", "poi_low", "poi_high", poi),
                 value_text(r, "score", "ci_low", "ci_high", score),
                 interval(r["rank_low"], r["rank_high"], integer=True),
                 tasks_text(r, skipped, marks.mark), str(r["tier1_tasks"]), failed_text(r)]
                for r in prows]
        rests = [[markdown_text(r["scorer"]), markdown_text(poi_tasks_text(r)),
                  markdown_text(rank_without_text(r)), markdown_text(outside_text(r))]
                 for r in prows]
        out += [f"Profile {markdown_text(profile)}:", ""] if len(profiles) > 1 else []
        out += block(fitted(main, labels("overall", OVERALL, baseline))) + bullets(marks.items())
        out += [wrap(f"What each scorer's overall rests on: its P(better than "
                     f"{markdown_text(baseline)}) on "
                     "each task, its overall rank with each task left out (not a rank on that "
                     "task), and the tasks where its normalized score leaves [0, 1]."), ""]
        out += block(fitted(rests, labels("overall", RESTS_ON, baseline)))
    return "\n".join(out).rstrip()


def claims_table(board) -> str:
    """The claims' verdicts, one row per claim and scorer (the reasons as notes), and what each
    claim says under it."""
    rows = _records(board.claims)
    if not rows:
        return "No row of this release holds a claim's metric."
    multi = len({r["profile"] for r in rows}) > 1
    marks = Notes()
    effects = {c: column_format([r for r in rows if r["id"] == c], "effect", "ci_low", "ci_high")
               for c in {r["id"] for r in rows}}

    def effect(r: dict) -> str:
        text = value_text(r, "effect", "ci_low", "ci_high", effects[r["id"]])
        return text if missing(r["effect"]) else signed(text)

    body = [[markdown_text(r["id"])] + ([markdown_text(r["profile"])] if multi else []) + [
        markdown_text(r["scorer"]) + (" (beside)" if r.get("role") == "beside" else ""),
        effect(r), num(r.get("min_effect")), pval(r["p"]), str(r["n_seeds"]),
        claim_verdict_text(r, marks.mark)] for r in rows]
    headers = ["claim"] + (["profile"] if multi else []) + [
        "scorer", *labels("claims", ("effect", "min_effect")), "p (Holm)", "n", "verdict"]
    first: dict[str, dict] = {}
    for r in rows:
        first.setdefault(r["id"], r)
    claims = [f"**{markdown_text(c)}** ({markdown_text(r['task'])} / "
              f"{markdown_text(r['metric'])} {arrow(r['direction'])}, against "
              f"{markdown_text(r['baseline'])}): {markdown_text(str(r['claim']).rstrip('.'))}. "
              f"Source: {markdown_text(r['source'])}; paper: {markdown_text(r['paper'])}."
              for c, r in first.items()]
    return "\n".join(block(fitted(body, headers)) + bullets(marks.items())
                     + [wrap(line, "- ") for line in claims]).rstrip()


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
    """The failed and skipped cells, one row per profile, task, scorer, status and message with
    its seeds and steps; the messages as notes."""
    rows = _records(board.failed_cells)
    if not rows:
        return wrap(failed_cells_sentence(board))
    multi = len({r["profile"] for r in rows}) > 1
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["profile"], r["task"], r["scorer"], r["status"], r["message"]),
                         []).append(r)
    marks = Notes()
    body = []
    for (profile, task, scorer, status, message), group in cells.items():
        message = " ".join(str(message or "").split())
        if len(message) > MESSAGE_WIDTH:
            message = message[:MESSAGE_WIDTH - 1] + "…"
        stopped_at = sorted({str(r["step"]) for r in group if not missing(r["step"])})
        body.append(([profile] if multi else []) + [
            markdown_text(task), markdown_text(scorer),
            ", ".join(str(r["seed"]) for r in sorted(group, key=lambda r: r["seed"])),
            markdown_text(status), ", ".join(stopped_at), marks.mark(message) if message else ""])
    headers = (["profile"] if multi else []) + ["task", "scorer", "seeds", "status", "step",
                                                "message"]
    return "\n".join([wrap(failed_cells_sentence(board)), ""] + block(fitted(body, headers))
                     + bullets(marks.items())).rstrip()


def superseded_table(board) -> str:
    rows = _records(board.superseded)
    if not rows:
        return "None."
    marks = Notes()
    body = [[markdown_text(r["task"]), str(r["task_version"]), markdown_text(r["scorer"]),
             str(r["scorer_version"]), markdown_text(r["profile"]), str(r["n_cells"]),
             marks.mark(r["reason"])] for r in rows]
    return "\n".join(block(fitted(body, ["task", "task v", "scorer", "scorer v", "profile",
                                         "cells", "why"])) + bullets(marks.items())).rstrip()


def problems_table(board) -> str:
    rows = _records(board.problems)
    if not rows:
        return "None."
    marks = Notes()
    body = [[markdown_text(r["path"]), "skipped" if r["skipped"] else "partly used",
             marks.mark(r["reason"])] for r in rows]
    return "\n".join(block(fitted(body, ["file", "effect", "reason"]))
                     + bullets(marks.items())).rstrip()


def header_lines(board) -> list[str]:
    """The release's provenance, stated once: its records, dates, harness commits, hardware and
    baseline."""
    m = board.meta
    return [wrap(line, "- ") for line in (
        f"Records: {m['n_used']} used of {m['n_files']} files ({m['n_superseded']} superseded, "
        f"{m['n_problems']} problems listed below); profiles: "
        f"{markdown_text(', '.join(m['profiles'])) or 'none'}",
        f"Dates: {m['date_first']} to {m['date_last']}",
        f"Harness (git): {short_shas(m['git_sha'])}; "
        f"scorebench {markdown_text(', '.join(m['harness_version']))}",
        f"Hardware: {markdown_text(joined(m['hardware']))}",
        f"Baseline for paired tests: {markdown_text(m['baseline'])}; α = {m['alpha']}")]


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


def plot_links(plots: list[str]) -> list[str]:
    """Each plot embedded with its caption under it."""
    return [f"![{p.rsplit('/', 1)[-1].removesuffix('.png')}]({p})\n\n"
            f"{wrap(plot_caption(p))}" for p in plots]


REBUILD_NOTE = ("Committed: this README, `results.json.gz` (every number below and all metrics, "
                "as gzipped JSON) and the plots it embeds. `results.csv`, `overall.csv`, the "
                "other plots (per-metric bars and grids, tuning), `index.html` and "
                "`scorers.json` are rebuilt from `results.json.gz` alone: "
                "`scorebench publish --rebuild {release} --out leaderboard/releases`.")

CLAIMS_INTRO = ("The SSA paper's claims (`leaderboard/method/claims.toml`), judged per profile on "
                "the paper's own variant (scorers marked *beside* are shown next to it): effect = "
                "scorer - baseline, paired over common seeds; paired t test, Holm across the "
                "claims of a profile (the scorers beside form their own family); *supported* / "
                "*contradicted* need adjusted p <= α and the claim's declared minimum effect; *not "
                "supported* gives the difference detectable at the verdict's corrected level; "
                "*uninformative* (the metric cannot tell at this profile) and *degenerate* (no "
                "spread to test) are not tests. What each claim says, and on which metric, is "
                "listed under the table.")


def board_sections(board, plots: list[str]) -> list[str]:
    """The body of the release README, from the overall to the plots."""
    unanchored = [f"{line}: headline metric without a floor and a ceiling, so not in the overall"
                  for line in board.meta.get("unanchored", [])]
    out = ["## Overall", "", overall_table(board), ""]
    out += bullets(notes.outside_overall(board) + unanchored + notes.overall_notes(board))
    out += ["## Claims", "", wrap(CLAIMS_INTRO), "", claims_table(board), ""]
    for track in TRACKS:
        out += [f"## {TRACK_TITLES[track]}", ""] + track_section.track_section(board, track)
    convergence = convergence_section.markdown(board)
    if convergence:
        out += [convergence, ""]
    out += ["## Failed and skipped cells", "", failed_cells_table(board), "",
            "## Superseded records", "", superseded_table(board), "",
            "## Records not used", "", problems_table(board), ""]
    if plots:
        out += ["## Plots", ""] + [line for p in plot_links(plots) for line in (p, "")]
    return out


def release_readme(board, plots: list[str], section_plots: list[str] = ()) -> str:
    """The release README: provenance once, the board's sections (the convergence's beside the
    tasks), what changed, the method, and the sections of the tuning protocol and the learning
    curves (their plots among ``section_plots``)."""
    m = board.meta
    lines = [f"# scorebench leaderboard: {markdown_text(m['release'])}", ""]
    lines += header_lines(board) + [""]
    lines += [wrap(REBUILD_NOTE.format(release=m["release"])), ""]
    lines += board_sections(board, plots)
    if m.get("changes"):
        lines += [changes_section(m["changes"], board.overall.to_dict(orient="records"))]
    lines += ["## Method", "", method_text(m)]
    sections = [tuning_section.markdown(m.get("tuning"), list(section_plots)),
                curves_section.markdown(m.get("curves"), list(section_plots))]
    return "\n".join([*lines, *[s for s in sections if s]]).rstrip() + "\n"


def _changes_table(title: str, headers: list[str], rows: list[list], noted: int = 1
                   ) -> list[str]:
    """A table of what changed, its last ``noted`` columns (why, the rule, speed or level) as
    notes."""
    marks = Notes()
    body = [[markdown_text(c) for c in r[:-noted]] + [marks.mark(c) if c else "" for c in
                                                       r[-noted:]] for r in rows]
    return [wrap(title), ""] + block(fitted(body, headers)) + bullets(marks.items())


def _rests_on(overall: list[dict], profile: str) -> str:
    """" It rests on N task(s) now: a, b." for a profile's overall (its rows' P(better) tasks)."""
    tasks = sorted({task for r in overall if r.get("profile") == profile
                    for task in (r.get("poi_tasks") or {})})
    return (f" It rests on {len(tasks)} task(s) now: {', '.join(tasks)}; a tier moves with the "
            "tasks it rests on too." if tasks else "")


def changes_section(ch: dict, overall: list[dict] | None = None) -> str:
    """The release README's section on what changed since ``ch["against"]``; with this release's
    ``overall`` rows, the tasks each profile's overall rests on now."""
    lines = [f"## What changed since {markdown_text(ch['against'])}", "",
             wrap("Rows matched by profile, task, metric and scorer in both releases; a verdict "
                  "is the row's comparison with the baseline, a tier its membership in the "
                  "task's tiers."), ""]
    lines += block(fitted([[markdown_text(t["profile"]), markdown_text(t["task"]),
                            str(t["compared"]), str(len(t["verdicts"])), str(len(t["tiers"])),
                            str(t["only_now"]), str(t["only_before"])] for t in ch["tasks"]],
                          ["profile", "task", "rows in both", "verdicts changed",
                           "tiers changed", "rows new", "rows gone"], keep=2))
    waiting = [t for t in ch["tasks"] if t.get("no_baseline_now")]
    lines += bullets([f"{t['task']} ({t['profile']}): {t['no_baseline_now']} rows in both not "
                      "compared, as the baseline has no records of the task in this release yet"
                      for t in waiting])
    for o in ch["overall"]:
        rho = ("not computed (fewer than 3 scorers in both)" if o["rho"] is None
               else f"{o['rho']:.3f}")
        lines.append(wrap(markdown_text(
            f"Overall ({o['profile']}): Spearman rank correlation {rho} over "
            f"{len(o['scorers'])} scorers in both"
            + (f"; new: {', '.join(o['only_now'])}" if o["only_now"] else "")
            + (f"; gone: {', '.join(o['only_before'])}" if o["only_before"] else "") + "."
            + _rests_on(overall or [], o["profile"]))))
        lines.append("")
    if ch.get("overall_tiers"):
        lines += _changes_table("Overall tiers that changed:",
                                ["profile", "scorer", "before", "now", "why"],
                                [list(r) for r in ch["overall_tiers"]])
    if ch.get("claims"):
        lines += _changes_table("Claim verdicts that changed:",
                                ["profile", "claim", "scorer", "before", "now", "why"],
                                [list(r) for r in ch["claims"]])
    verdicts = [(t["task"], v) for t in ch["tasks"] for v in t["verdicts"]]
    if verdicts:
        why = any(len(v) > 5 for _, v in verdicts)
        width = 6 if why else 5      # metric, scorer, before, now, rule[, speed or level]
        lines += _changes_table(
            "Verdicts that changed"
            + (" (on a task now trained to convergence, by speed or by level: speed when the "
               "scorer's or the baseline's median seed reached its best only after the earlier "
               "release's step budget, or was still gaining at the cap; a changed learning rate "
               "is named beside it)" if why else "") + ":",
            ["task", "metric", "scorer", "before", "now", "rule"]
            + (["speed or level"] if why else []),
            [[task, *(list(v) + [""] * width)[:width]] for task, v in verdicts], width - 4)
    tiers = [[t["task"], *v] for t in ch["tasks"] for v in t["tiers"] if len(v) > 4]
    if tiers:
        lines += _changes_table("Tiers that changed:",
                                ["task", "metric", "scorer", "before", "now", "rule"], tiers)
    return "\n".join(lines).rstrip() + "\n"


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
  is the headline in its place; the out-of-distribution claim stays on `mse_T9_shifted`, the
  paper's figure, and reads uninformative there.
- **Out-of-distribution sequences are independent draws**; the original seeds element (i, j) with
  100i + 10j, so its sequences are overlapping shifted copies and every shorter T is a prefix of
  the longer ones (its curves are monotone by construction). Ours is the better design; compare
  with the paper in expectation only, never sequence by sequence.
- **Deviant values**: the paper's two protocols are reported as named metrics: `paper_fixed_*`,
  the one sequence [1, −1, −2, 1000] (T = 4, its labels unchanged by the deviant; last-layer
  |w| on the deviant), and `paper_variant_error` (−70 at point 6 and 70000 at point 8, sequence
  error across σ). Ours (`deviant_*`: ±10 … ±10⁴ at p ∈ {4, ⌊T/2⌋, T} in N(0, 1) sequences)
  runs at the last training length (`deviant_points` in the cell config), so it shifts only the
  value. Only "attention concentrates on the deviant" compares with the paper, qualitatively.
- **Precision**: ICL trains in fp32 in every profile, as the original (`precision` in the cell
  config); evaluation is fp32.
"""
# The paper's ICL tasks, whose training length the method's size bullet states.
PAPER_ICL_TASKS = ("icl_linear", "icl_quantifiers")


def size_text(meta: dict) -> str:
    """The ICL sizes, with how long this release's ICL tasks trained: to convergence up to a
    cap, or the step budget their learning curves end at."""
    converged = meta.get("convergence") or {}
    curves = meta.get("curves") or {}
    parts = []
    for task in PAPER_ICL_TASKS:
        if task in converged:
            parts.append(f"`{task}` until its validation metric converges, up to "
                         f"{steps(converged[task]['cap'])} steps")
        elif (last := budget(curves, task)) is not None:
            parts.append(f"`{task}` for {steps(last)} steps")
    trained = f" In this release they train {' and '.join(parts)}." if parts else ""
    return ("**Size**: the cpu profile trains 2-layer, 32-wide models with a shorter curriculum, "
            f"on smaller grids; the paper profile is the paper's size.{trained} Each record's "
            "config (`cell.config`) holds its curriculum and evaluated lengths. A profile may "
            "demote a headline that cannot separate scorers at its size (`headline_metrics` in "
            "the cell config): at cpu, `icl_quantifiers` `error_id`, near 0 for every model at "
            "that size, is secondary.")


def method_text(meta: dict) -> str:
    from ..method.stats import POWER, REPRODUCE_RTOL, TIE_TOL, detectable_difference, seeds_needed

    alpha = meta["alpha"]
    return METHOD.format(n_boot=meta["n_boot"], baseline=meta["baseline"], alpha=alpha,
                         overall_n_boot=meta.get("overall_n_boot", 2000),
                         detail=DETAIL_MAX_SCORERS, tie_tol=meta.get("tie_tol", TIE_TOL),
                         power=meta.get("power", POWER), n_2sd=seeds_needed(2.0, alpha),
                         n_1sd=seeds_needed(1.0, alpha), n_halfsd=seeds_needed(0.5, alpha),
                         d3=detectable_difference(1.0, 3, alpha), rtol=REPRODUCE_RTOL
                         ) + "\n**Columns**\n\n" + "\n".join(
        wrap(line, "- ") for line in column_legend(meta["baseline"])) + "\n\n" + \
        PAPER_DIFFERENCES + wrap(size_text(meta), "- ") + "\n"


def section_titles(readme: str) -> list[str]:
    """The titles of a release README's sections (its level-2 headings), in order."""
    return [line[3:] for line in readme.splitlines() if line.startswith("## ")]


def leaderboard_index(latest, latest_link: str, releases: list[tuple[dict, str]],
                      sections: list[str] | None = None) -> str:
    """The root LEADERBOARD.md, the front page: the latest release's answer in sentences, one
    compact table per profile, links to the release's sections, and every release as a link.
    ``releases`` holds (meta, link to its README) newest first; ``sections`` the titles of the
    latest release README's sections as written there (default: those every release has)."""
    m = latest.meta
    track_links = {track: f"{latest_link}#{_anchor(TRACK_TITLES[track])}" for track in TRACKS}
    task_links = {r["task"]: track_links[r["track"]] for r in _records(latest.rows)}
    lines = ["# scorebench leaderboard", "",
             f"Latest release: **[{markdown_text(m['release'])}]({latest_link})**", "",
             wrap(markdown_text(
                 f"{m['n_used']} records, profile(s) {', '.join(m['profiles']) or 'none'}, "
                 f"{m['date_first']} to {m['date_last']}, baseline {m['baseline']}, "
                 f"α = {m['alpha']}, {'; '.join(m.get('hardware') or []) or 'unknown hardware'}.")),
             ""]
    lines += bullets(summary.sentences(latest))
    for profile in m["profiles"]:
        if any(r["profile"] == profile for r in _records(latest.overall)):
            table = summary.front_table(latest, profile, task_links)
            lines += [f"## Overall ({markdown_text(profile)})", ""] + [
                line if line.startswith(("|", "[")) else wrap(line) for line in table] + [""]
    lines += ["## In the release", ""]
    lines += [f"- [{title}]({latest_link}#{_anchor(title)})" for title in sections
              or ("Overall", "Claims", *(TRACK_TITLES[t] for t in TRACKS),
                  "Failed and skipped cells", "Method", "Plots")]
    lines += ["- The same numbers as a page: index.html, "
              f"rebuilt with `scorebench publish --rebuild {m['release']} --out "
              "leaderboard/releases` (`scorebench serve`)"]
    lines += ["", "## Releases", ""]
    lines += [f"- [{markdown_text(meta['release'])}]({link}): {meta['date_first']} to "
              f"{meta['date_last']}, {meta['n_used']} records" for meta, link in releases]
    return "\n".join(lines).rstrip() + "\n"


def _anchor(title: str) -> str:
    """The anchor a markdown renderer gives a heading (GitHub's rule)."""
    keep = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return keep.replace(" ", "-")
