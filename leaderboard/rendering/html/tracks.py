"""A track's tab: per profile, scorers as rows and one column per headline metric (mean and
interval), the secondary metrics folded below, and per metric a table of its statistics."""
from __future__ import annotations

import json

from ...method.board import DESCRIPTIVE_TRACKS
from .. import convergence_section
from ..columns import FIELDS, scorer_order, shown_rows
from ..notes import track_notes
from ..palette import tier_class
from ..text import (NO_VERDICT, TRACK_TITLES, VERDICT_MARKS, VERDICT_WORDS, arrow,
                    column_format, delta_text, failures_text, missing, normalized_text,
                    number_format, verdict_mark)
from .context import PageData
from .markup import Markup, concat, slug, tag
from .tables import (Column, better, extra_fields, field_column, num_cell, order_text,
                     provenance_cell, row_order, table, text_cell)

HEADLINE_TITLE = ("{task} · {metric}: mean over seeds with its 95% interval (grey) and its mark "
                  "against the baseline; {better} is better. Shading: the tier; outlined: the "
                  "best mean of the column.")
MATRIX_LEGEND = [
    (f"{VERDICT_MARKS['better']} / {VERDICT_MARKS['worse']}",
     f"After a mean: {VERDICT_WORDS[VERDICT_MARKS['better']]} / worse (the same marks as the "
     "front page)."),
    (NO_VERDICT, f"After a mean: {VERDICT_WORDS[NO_VERDICT]}."),
    (VERDICT_MARKS["uninformative"], f"After a mean: "
     f"{VERDICT_WORDS[VERDICT_MARKS['uninformative']]} (the baseline does not clearly beat the "
     "task's trivial predictor)."),
    ("shading", "The scorer's tier on that metric: the darker, the better the tier (tier 1 "
     "darkest); no shading, no tier."),
    ("outlined, bold", "The best mean of the column (none where the metric is uninformative)."),
]


def _detail_columns(page: PageData, rows: list[dict], order: str | None = None) -> list[Column]:
    f = lambda k: page.field("rows", k)  # noqa: E731
    delta, failures, prov = f("delta_vs_baseline"), f("failures"), f("provenance")

    def n_bad(r):
        return sum((r["failures"] or {}).values())

    def extra(r):
        kwargs = json.dumps(r["scorer_kwargs"] or {}, sort_keys=True)
        return [f"scorebench {', '.join(r['harness_version'] or []) or 'unknown'}",
                (f"task {r['task']} v{r['task_version']}, scorer {r['scorer_name']} "
                 f"v{r['scorer_version']} {kwargs}"),
                f"seeds: {', '.join(str(s) for s in r['seeds'] or []) or 'none'}"]

    deltas = column_format(rows, "delta_vs_baseline")

    known = FIELDS["rows"]
    norm, items = f("normalized"), f("ci_items_low")
    spans = number_format([x for r in rows for x in (r.get("ci_items_low"),
                                                      r.get("ci_items_high"))],
                          [None if missing(r.get("ci_items_low")) else
                           r["ci_items_high"] - r["ci_items_low"] for r in rows])

    def items_text(r):
        lo, hi = r.get("ci_items_low"), r.get("ci_items_high")
        return "n/a" if missing(lo) or missing(hi) else f"[{spans(lo)}, {spans(hi)}]"

    return [
        page.scorer_column(),
        field_column(f("mean"), rows, sort=None if order != "value" else (
            "descending" if rows[0]["direction"] != "lower" else "ascending")),
        Column(norm.label, num_cell(normalized_text, lambda r: r.get("normalized")), True,
               norm.title),
        Column(items.label, num_cell(items_text, lambda r: r.get("ci_items_low")), True,
               items.title),
        field_column(f("n"), rows),
        Column(delta.label, num_cell(lambda r: delta_text(r, page.baseline, deltas),
                                    lambda r: r["delta_vs_baseline"]), True,
               delta.title),
        field_column(f("p_vs_baseline_holm"), rows),
        field_column(f("p_vs_baseline_bh"), rows),
        field_column(f("p_signflip"), rows),
        field_column(f("tier"), rows, sort="ascending" if order == "tier" else None),
        field_column(f("rank_low"), rows),
        Column(failures.label, num_cell(lambda r: failures_text(r["failures"]), n_bad,
                                        lambda r: "failed" if n_bad(r) else None), True,
               failures.title),
        *(field_column(x, rows) for x in extra_fields(rows, known, "rows")),
        Column(prov.label, lambda r: provenance_cell(r, extra(r)), False, prov.title),
    ]


def _metric_table(page: PageData, profile: str, scorers: list[str], metric_rows: list[dict],
                 caption: str, linked: set) -> Markup:
    """Scorers as rows, one column per (task, metric): mean and interval."""
    keys = list(dict.fromkeys((r["task"], r["metric"]) for r in metric_rows))
    cells = {(r["scorer"], r["task"], r["metric"]): r for r in metric_rows}
    info = {(r["task"], r["metric"]): r for r in metric_rows}
    mean = page.field("rows", "mean")
    pivot = [{"scorer": s} for s in scorers]
    columns = [page.scorer_column()]
    judged = metric_rows[0]["track"] not in DESCRIPTIVE_TRACKS

    def mark(d: dict) -> Markup | None:
        if not judged or d["scorer"] == page.baseline or not d.get("n"):
            return None
        m = verdict_mark(d)
        sign = {VERDICT_MARKS["better"]: " up", VERDICT_MARKS["worse"]: " down"}.get(m, "")
        return tag("span", m, class_="vmark" + sign, title=VERDICT_WORDS[m])

    for task, metric in keys:
        direction = info[(task, metric)]["direction"]
        best = _best(metric_rows, task, metric) if judged else None

        def shade(d: dict, best=best) -> str | None:
            return " ".join(filter(None, [tier_class(d.get("tier")),
                                          "best" if d.get("mean") == best else None])) or None

        link = (tag("a", "details", href=f"#{slug('detail', profile, task, metric)}",
                    class_="more", title=f"Δ vs {page.baseline}, p-values, tier, rank and "
                    f"failures of {task} · {metric}") if (task, metric) in linked
                else None)
        columns.append(field_column(
            mean, pivot, f"{task} · {metric} {arrow(direction)}",
            HEADLINE_TITLE.format(task=task, metric=metric, better=better(direction)),
            get=lambda r, k=(task, metric): cells.get((r["scorer"], *k)), head=link,
            mark=mark, shade=shade))
    return table(columns, pivot, caption,
                 lambda r: {"data_scorer": r["scorer"]}, css="wide matrix")


def _best(rows: list[dict], task: str, metric: str) -> float | None:
    """The best mean of one (task, metric) column; None with fewer than two scorers or on an
    uninformative metric (its means cannot tell scorers apart)."""
    column = [r for r in rows if (r["task"], r["metric"]) == (task, metric)]
    values = [r for r in column if r.get("n") and not missing(r.get("mean"))]
    if len(values) < 2 or any(r.get("informative") is False for r in column):
        return None
    pick = min if values[0]["direction"] == "lower" else max
    return pick(r["mean"] for r in values)


def track_tab(page: PageData, track: str) -> Markup:
    """A track's tab: per profile, the headline and secondary metric tables and the per-metric
    statistics of the rows the README shows."""
    shown = {(r["profile"], r["task"], r["metric"]) for r in shown_rows(page.board, track)}
    every = [r for r in page.rows if r["track"] == track]
    rows = [r for r in every if (r["profile"], r["task"], r["metric"]) in shown]
    parts = [tag("h2", TRACK_TITLES[track])]
    keys = [k for k in FIELDS["rows"] if k not in ("scorer", "provenance")]
    parts.append(page.field_legend(
        "rows", keys, [("↑ / ↓", "Higher / lower is better for this metric."),
                       *(MATRIX_LEGEND if track not in DESCRIPTIVE_TRACKS else []),
                       ("highlighted row", "In the per-metric statistics: tier 1 of that "
                                           "metric.")],
        "Per profile, one table of the headline metrics (scorers as rows); every secondary "
        "metric, and the per-metric statistics (Δ, p-values, tier, rank, failures) of the "
        "metrics the README shows, open below. "
        "Click a header to sort; hover a header for its meaning."))
    if not rows:
        parts.append(tag("p", "No records for this track in this release.", class_="empty"))
    for profile in sorted({r["profile"] for r in rows}):
        prows = [r for r in rows if r["profile"] == profile]
        rest = [r for r in every if r["profile"] == profile and not r["headline"]]
        parts += _profile_tables(page, track, profile, prows, rest)
        parts.append(_metric_details(page, profile, prows))
    parts += _convergence_tables(page, {r["task"] for r in every})
    return tag("section", concat(parts), id=f"track-{track}", class_="tab")


def _convergence_tables(page: PageData, tasks: set[str]) -> list[Markup]:
    """Per task of the track trained to convergence: level, speed and reliability per scorer."""
    found = sorted(t for t in page.meta.get("convergence") or {} if t in tasks)
    if not found:
        return []
    parts = [tag("h3", "Level, speed and reliability"),
             tag("p", convergence_section.method_text(page.board), class_="meta")]
    caps = convergence_section.cap_text(page.board)
    if caps:
        parts.append(tag("p", caps, class_="meta"))
    for task in found:
        cells = convergence_section.task_rows(page.board, task)
        rows = [{"scorer": c[0], "cells": c} for c in cells]
        columns = [page.scorer_column()] + [
            Column(header, text_cell(lambda r, j=j: r["cells"][j]), False, title)
            for j, (header, title) in enumerate(convergence_section.COLUMNS) if j]
        parts.append(table(columns, rows, f"{task}: level, speed and reliability",
                           lambda r: {"data_scorer": r["scorer"]}, css="convergence"))
    return parts


def _profile_tables(page: PageData, track: str, profile: str, prows: list[dict],
                    rest: list[dict]) -> list[Markup]:
    """The headline table, the track's notes and the secondary metrics of one profile."""
    scorers, order = scorer_order(page.overall_rows, profile, prows)
    linked = {(r["task"], r["metric"]) for r in prows}
    head = [r for r in prows if r["headline"]]
    parts = [tag("h3", f"profile {profile}")]
    if head:
        parts.append(_metric_table(
            page, profile, scorers, head,
            f"Headline metrics, profile {profile}: rows by {order}", linked))
    notes = track_notes(prows) if track not in DESCRIPTIVE_TRACKS else []
    if notes:
        parts.append(tag("ul", concat(tag("li", line) for line in notes), class_="meta"))
    if rest:
        n = len({(r["task"], r["metric"]) for r in rest})
        parts.append(tag("details", tag("summary", f"Secondary metrics ({n})"),
                         _metric_table(page, profile, scorers, rest,
                                      f"Secondary metrics, profile {profile}: rows "
                                      f"by {order}", linked),
                         class_="secondary", open=not head))
    return parts


def _metric_details(page: PageData, profile: str, prows: list[dict]) -> Markup:
    """One folded table per (task, metric) of the profile: Δ, p-values, tier, rank, failures."""
    groups: dict[tuple, list[dict]] = {}
    for r in prows:
        groups.setdefault((r["task"], r["metric"]), []).append(r)
    details = []
    for (task, metric), grows in groups.items():
        label = f"{task} · {metric} {arrow(grows[0]['direction'])}"
        order = row_order(grows, "mean", grows[0]["direction"] != "lower")
        details.append(tag(
            "details", tag("summary", label),
            table(_detail_columns(page, grows, order), grows,
                  f"{label} · profile {profile}: {order_text(order, 'mean')}",
                  page.row_attrs, css="detail"),
            id=slug("detail", profile, task, metric), class_="detail"))
    return tag("div", tag("h4", f"Per-metric statistics ({len(groups)}), profile "
                                f"{profile}"), concat(details),
               class_="details-list")
