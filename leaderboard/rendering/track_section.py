"""A track's section of the release README: per profile, one matrix of scorers × headline
metrics (each mean with its mark against the baseline), then per metric a table of its
statistics, each with the lines that belong to it (its power, why it has no verdict, the reasons
of its n/a cells as numbered notes). A scorer that runs none of the section's tasks is named once
above them, with its reason, instead of a row of n/a in every table."""
from __future__ import annotations

import os

import pandas as pd

from ..method.board import DESCRIPTIVE_TRACKS, ran
from ..method.grids import data_grids
from . import notes
from .columns import labels, scorer_order, shown_rows
from .markdown_layout import Notes, block, bullets, fitted, wrap
from .text import (arrow, column_format, delta_text, failures_text, interval, markdown_text,
                   mean_text, missing, normalized_text, not_learned_mark, num, number_format, pval,
                   scorer_text, tier_text, verdict_legend, verdict_mark)

# The columns of a metric's statistics table, at most ten: both corrected p, since a verdict
# needs both. The row fields it leaves out (the items-only interval, p sign-flip and each row's
# provenance) are on the page and in results.json.gz and results.csv; the method text says so.
STATISTICS = ("scorer", "mean", "normalized", "delta_vs_baseline", "p_vs_baseline_holm",
              "p_vs_baseline_bh", "tier", "rank_low", "n", "failures")
ON_THE_PAGE = ("ci_items_low", "p_signflip")


def metric_groups(rows: list[dict]) -> dict[tuple[str, str, str], list[dict]]:
    """(profile, task, metric) -> its rows, in the board's order."""
    out: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        out.setdefault((r["profile"], r["task"], r["metric"]), []).append(r)
    return out


def matrix_metrics(groups: dict[tuple, list[dict]], profile: str) -> list[tuple[str, str]]:
    """The matrix's columns at ``profile``: each task's headline metrics, or every metric shown
    of a task without one."""
    keys = [(t, m) for (p, t, m) in groups if p == profile]
    with_headline = {t for t, m in keys if groups[(profile, t, m)][0]["headline"]}
    return [(t, m) for t, m in keys
            if groups[(profile, t, m)][0]["headline"] or t not in with_headline]


def metric_title(task: str, metric: str, direction: str) -> str:
    return f"{markdown_text(task)} · {markdown_text(metric)} {arrow(direction)}"


def na_mark(row: dict, marks: Notes) -> str:
    """The note mark of an n/a cell's reason ('' without one)."""
    return marks.mark(row["na_reason"]) if row.get("na_reason") else ""


def matrix(board, profile: str, groups: dict[tuple, list[dict]], judged: bool) -> list[str]:
    """Scorers × the profile's headline metrics: each mean in its metric's format, bold in tier
    1, with its mark against the baseline; split by task where it would be too wide."""
    baseline = board.meta.get("baseline", "softmax")
    keys = matrix_metrics(groups, profile)
    rows = [r for k in keys for r in groups[(profile, *k)]]
    scorers, order = scorer_order(board.overall.to_dict(orient="records"), profile, rows)
    cells = {(r["task"], r["metric"], r["scorer"]): r for r in rows}
    formats = {k: column_format(groups[(profile, *k)], "mean", "ci_low", "ci_high") for k in keys}
    marks = Notes()

    def cell(key: tuple[str, str], scorer: str) -> str:
        r = cells.get((*key, scorer))
        if r is None:
            return "not run"
        if not r["n"]:
            return mean_text(r, na=na_mark(r, marks))
        text = (formats[key](r["mean"]) + (" †" if r["survivors_only"] else "")
                + not_learned_mark(r))
        if judged and r.get("tier") == 1:
            text = f"**{text}**"
        return text + (f" {verdict_mark(r)}" if judged and scorer != baseline else "")

    headers = ["scorer"] + [metric_title(*k, groups[(profile, *k)][0]["direction"])
                            for k in keys]
    body = [[markdown_text(s)] + [cell(k, s) for k in keys] for s in scorers]
    tasks = list(dict.fromkeys(t for t, _ in keys))
    by_task = [[i + 1 for i, (t, _) in enumerate(keys) if t == task] for task in tasks]
    what = ("Headline metrics" if any(groups[(profile, *k)][0]["headline"] for k in keys)
            else "Metrics")
    intro = (f"{what}, profile {markdown_text(profile)}: the mean over seeds, scorers in "
             f"{markdown_text(order)}"
             + (f". Bold: tier 1 of the metric; {verdict_legend(markdown_text(baseline))}."
                if judged else ".")
             + " Each metric's statistics follow in its own table.")
    return [wrap(intro), ""] + block(fitted(body, headers, 1, by_task)) + bullets(marks.items())


def power_line(rows: list[dict], baseline: str) -> str | None:
    """The smallest difference vs the baseline one metric detects at 80% power, from the rows'
    n and the spread of their per-seed differences (the median over the scorers compared)."""
    tested = [r for r in rows if not missing(r["detectable_vs_baseline"])
              and r.get("informative") is not False and not r.get("degenerate")]
    if not tested:
        return None
    ns = sorted({int(r["n_paired"]) for r in tested})
    detectable = pd.Series([r["detectable_vs_baseline"] for r in tested]).median()
    spread = pd.Series([r["sd_paired"] for r in tested]).median()
    return (f"Differences vs {baseline} smaller than {num(detectable)} are below 80% power "
            f"(n = {', '.join(map(str, ns))} seeds, sd of per-seed differences {num(spread)}, "
            f"median over {len(tested)} scorers).")


def statistics_table(rows: list[dict], baseline: str, heading: str, judged: bool) -> list[str]:
    """One metric's table: each scorer's mean and interval, normalized score, difference to the
    baseline, both corrected p, tier, rank, seeds and failures; under it, its power, why it gets no
    verdict, and the reasons of its n/a cells."""
    marks = Notes()
    means = column_format(rows, "mean", "ci_low", "ci_high")
    deltas = column_format(rows, "delta_vs_baseline")
    body = [[markdown_text(scorer_text(r)), mean_text(r, means, na_mark(r, marks)),
             normalized_text(r), delta_text(r, baseline, deltas), pval(r["p_vs_baseline_holm"]),
             pval(r["p_vs_baseline_bh"]), tier_text(r),
             interval(r["rank_low"], r["rank_high"], integer=True), str(r["n"]),
             failures_text(r["failures"])] for r in rows]
    under = [power_line(rows, baseline), notes.metric_note(rows)] if judged else []
    return ([heading, ""] + block(fitted(body, labels("rows", STATISTICS, baseline)))
            + bullets([line for line in under if line] + marks.items()))


def data_grid_tables(board, profile: str, tasks: set[str]) -> list[str]:
    """The grids of ``tasks`` that are the same for every scorer, each once: its caption and a
    table of its rows by its columns."""
    out = []
    for g in data_grids(board.grids.to_dict(orient="records")):
        if g["profile"] != profile or g["task"] not in tasks:
            continue
        fmt = number_format(v for row in g["values"] for v in row)
        body = [[str(r)] + ["" if missing(v) else fmt(v) for v in row]
                for r, row in zip(g["rows"], g["values"])]
        headers = [f"{g['rows_name']} \\ {g['cols_name']}"] + [str(c) for c in g["cols"]]
        out += [wrap(notes.data_grid_caption(g)), ""] + block(fitted(body, headers))
    return out


def shared_reason(reasons: list[str]) -> str:
    """What every one of ``reasons`` says: the one reason, else their common beginning up to its
    last clause (a scorer's "runs on the encoder track only" without each task's own clause),
    else all of them."""
    distinct = sorted(set(reasons))
    if len(distinct) == 1:
        return distinct[0]
    cut = os.path.commonprefix(distinct).rfind("; ")
    return distinct[0][:cut] if cut > 0 else "; ".join(distinct)


def off_track(rows: list[dict]) -> dict[str, str]:
    """The scorers that ran none of the rows' tasks (:func:`leaderboard.method.board.ran`: every
    cell skipped, for a stated reason), each with the reason its rows share."""
    by_scorer: dict[str, list[dict]] = {}
    for r in rows:
        by_scorer.setdefault(r["scorer"], []).append(r)
    return {s: shared_reason([r["na_reason"] for r in srows]) for s, srows in by_scorer.items()
            if all(not ran(r) and r.get("na_reason") for r in srows)}


def track_section(board, track: str, level: int = 2) -> list[str]:
    """The body of a track's section (under its heading)."""
    rows = shown_rows(board, track)
    if not rows:
        return ["No records for this track in this release.", ""]
    baseline = board.meta.get("baseline", "softmax")
    judged = track not in DESCRIPTIVE_TRACKS
    absent = off_track(rows)
    if len(absent) == len({r["scorer"] for r in rows}):
        absent = {}
    rows = [r for r in rows if r["scorer"] not in absent]
    groups = metric_groups(rows)
    profiles = sorted({r["profile"] for r in rows})
    out = [] if judged else [
        "Descriptive: no better/worse, tiers or ranks; not part of the overall.", ""]
    out += bullets([f"{s} runs none of this section's tasks, so is in none of its tables: "
                    f"{reason}." for s, reason in absent.items()])
    for profile in profiles:
        prows = [r for r in rows if r["profile"] == profile]
        out += matrix(board, profile, groups, judged)
        out += bullets(notes.not_learned_notes(prows) + notes.legend(prows) if judged else [])
        out += data_grid_tables(board, profile, {r["task"] for r in prows})
        for (p, task, metric), grows in groups.items():
            if p != profile:
                continue
            heading = ("#" * (level + 1) + " " + metric_title(task, metric, grows[0]["direction"])
                       + (f" ({markdown_text(profile)})" if len(profiles) > 1 else ""))
            out += statistics_table(grows, baseline, heading, judged)
    return out


def track_table(board, track: str) -> str:
    """A track's section as one text (its matrix and per-metric tables)."""
    return "\n".join(track_section(board, track)).rstrip() + "\n"
