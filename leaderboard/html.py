"""The leaderboard as a static web page: ``<release>/index.html`` beside each release.

The page is rendered from the release's ``results.json`` (the canonical Board the README is
rendered from): the overall table, one tab per track (one table per profile with scorers as rows
and headline metrics as columns, secondary metrics and the per-metric statistics one click away),
the claims when results.json has them, failed cells, the plots grouped by track, the scorers'
metadata and a selector for the other releases. Every table has a legend and every header a
``title``; columns sort on click (numbers by their raw value, kept in ``data-sort``) and a box
filters scorers.

Which results.json fields the page reads, and how each is labelled, explained and formatted, is
declared once in :data:`FIELDS` (row and overall fields) and :data:`CLAIM_FIELDS`; a numeric
field of a row that neither names is still shown, under its own name, in the per-metric tables.
Numbers have a fixed number of decimals per column (:func:`decimals`), so they line up.

The page is self-contained: the template, stylesheet and script in ``leaderboard/static/`` are
inlined, plots are relative links to ``plots/*.png``, and nothing is fetched from the network.
Every string that comes from records or scorer metadata is HTML-escaped: :func:`tag` escapes any
child or attribute that is not :class:`Markup`. The output depends only on the files of the
releases, so publishing twice writes the same bytes.
"""
from __future__ import annotations

import html
import json
import math
import re
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import pandas as pd

from suite.records import TRACKS

from . import markdown as md
from . import marks
from .plots import safe_name
from .board import Board
from .columns import CLAIM_FIELDS, FIELDS, Field
from .release import ReleaseError, _plot_order, list_releases, load_release

INDEX = "index.html"
SCORERS_JSON = "scorers.json"
SCORER_FIELDS = ("family", "kind", "normalization", "paper", "version", "aliases", "description")
TAB_TITLES = {"icl": "ICL", "decoder": "Decoder", "encoder": "Encoder", "probe": "Probes",
              "cost": "Cost"}


# --------------------------------------------------------------------------- fields shown


# Numeric fields that are parts of a shown column or bookkeeping (never an extra column).
NOT_EXTRA = {
    "rows": {"task_version", "scorer_version", "std", "n_items", "n_cells", "n_ok", "n_failed",
             "n_skipped", "n_null", "p_vs_baseline", "n_paired", "ci_low", "ci_high",
             "rank_high"},
    "overall": {"ci_low", "ci_high", "rank_high", "tasks_failed", "tasks_skipped", "n_cells"},
    "claims": {"ci_low", "ci_high"},
}
HEADLINE_TITLE = ("{task} · {metric}: mean over seeds with its 95% interval (grey); {better} "
                  "is better.")
VERDICTS = ("supported", "not supported", "contradicted", "uninformative", "degenerate", "not run")


def extra_fields(rows: list[dict], known: Mapping[str, Field], frame: str) -> list[Field]:
    """Numeric fields of ``rows`` that :data:`FIELDS` does not name, as plain number columns."""
    keys = []
    for r in rows:
        for k, v in r.items():
            if (k not in known and k not in NOT_EXTRA[frame] and k not in keys
                    and isinstance(v, (int, float)) and not isinstance(v, bool)):
                keys.append(k)
    return [Field(k, k.replace("_", " "), f"results.json field {k!r}.",
                  "int" if all(isinstance(r.get(k), int) or r.get(k) is None for r in rows)
                  else "num") for k in keys]

# --------------------------------------------------------------------------- safe markup


class Markup(str):
    """HTML that is already safe; :func:`tag` inserts it unchanged."""


def esc(value: Any) -> Markup:
    """``value`` as HTML text (``& < > " '`` escaped) unless it is already :class:`Markup`."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def _attrs(attrs: Mapping[str, Any]) -> str:
    """Attribute names: a trailing ``_`` is dropped and ``_`` becomes ``-`` (``class_``,
    ``data_sort``). None or False leaves the attribute out; True writes it bare."""
    out = []
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        key = key.rstrip("_").replace("_", "-")
        out.append(f" {key}" if value is True else f' {key}="{esc(value)}"')
    return "".join(out)


def tag(name: str, *children: Any, **attrs: Any) -> Markup:
    return Markup(f"<{name}{_attrs(attrs)}>{concat(children)}</{name}>")


def void(name: str, **attrs: Any) -> Markup:
    return Markup(f"<{name}{_attrs(attrs)}>")


def concat(children: Iterable[Any], sep: str = "") -> Markup:
    return Markup(sep.join(esc(c) for c in children))




# --------------------------------------------------------------------------- values


def _missing(x: Any) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def sort_key(x: Any) -> str:
    """The ``data-sort`` value of a numeric cell: the number as Python prints it, "" if missing."""
    return "" if _missing(x) else repr(float(x))


def number_format(values: Iterable[Any], widths: Iterable[Any] = ()) -> Callable[[float], str]:
    """One format for every number of a column, so decimals line up: three significant digits
    of the median magnitude and two of the narrowest interval (``widths``), at most 6 decimals;
    scientific with 2 decimals when the largest magnitude is below 1e-3 or from 1e6 on."""
    mags = [abs(float(v)) for v in values if not _missing(v) and float(v) != 0]
    if not mags:
        return lambda x: f"{x:.2f}"
    top = max(mags)
    if top < 1e-3 or top >= 1e6:
        return lambda x: f"{x:.2e}"
    places = 2 - math.floor(math.log10(statistics.median(mags)))
    spans = [float(w) for w in widths if not _missing(w) and float(w) > 0]
    if spans:
        places = max(places, 1 - math.floor(math.log10(min(spans))))
    places = min(max(places, 0), 6)
    return lambda x: f"{x:.{places}f}"


def decimals(text: str) -> set[int]:
    """The decimal places of every number in ``text`` (digits after the point, before any
    exponent)."""
    return {len(m) for m in re.findall(r"\d\.(\d+)", text)}


def provenance_text(row: dict) -> str:
    return (f"date {row['date']} · harness {md.short_shas(row['git_sha'])} · "
            f"hardware {md.joined(row['hardware'])}")


def _provenance_cell(row: dict, extra: list[str]) -> Markup:
    lines = [f"hardware: {md.joined(row['hardware'])}",
             f"git: {', '.join(row['git_sha'] or []) or 'unknown'}", *extra]
    summary = f"{row['date']} · {md.short_shas(row['git_sha'])}"
    return tag("td", tag("details", tag("summary", summary),
                         concat(tag("div", line) for line in lines)), class_="prov")


def code_text(text: str) -> Markup:
    """Docstring text as HTML: ````x```` becomes ``<code>x</code>``, everything else escaped."""
    parts = re.split(r"``(.+?)``", text or "")
    return concat(tag("code", p) if i % 2 else esc(p) for i, p in enumerate(parts))


def slug(*parts: Any) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9_.]+", "-", str(p)).strip("-") for p in parts)


def row_order(rows: list[dict], key: str, higher: bool) -> str | None:
    """How ``rows`` are ordered as results.json gives them: "tier" (tier, then ``key`` best
    first), "value" (``key`` best first), or None (neither)."""
    def value(r):
        x = r.get(key)
        return math.inf if _missing(x) else (-x if higher else x)

    def tier(r):
        return math.inf if _missing(r.get("tier")) else r["tier"]

    keys = [(tier(r), value(r)) for r in rows]
    if keys == sorted(keys) and len({t for t, _ in keys}) > 1:
        return "tier"
    if [v for _, v in keys] == sorted(v for _, v in keys):
        return "value"
    return "tier" if keys == sorted(keys) else None


def order_text(order: str | None, name: str) -> str:
    return {"tier": f"sorted by tier, then {name}", "value": f"sorted by {name}, best first",
            None: "in results.json order"}[order]


def better(direction: str | None) -> str:
    return "lower" if direction == "lower" else "higher"


def arrow(direction: str | None) -> str:
    return "↓" if direction == "lower" else "↑"


# --------------------------------------------------------------------------- tables


class Column:
    """A table column: its header, header title, whether it sorts as numbers, the cell of a
    row; ``head`` adds markup after the header's sort button, ``sort`` marks the default order."""

    def __init__(self, header: str, cell: Callable[[dict], Markup], numeric: bool = False,
                 title: str | None = None, css: str | None = None, head: Markup | None = None,
                 sort: str | None = None):
        self.header, self.cell, self.numeric, self.title = header, cell, numeric, title
        self.css, self.head, self.sort = css, head, sort


def num_cell(text: Callable[[dict], Any], key: Callable[[dict], Any],
             css: Callable[[dict], str | None] = lambda r: None) -> Callable[[dict], Markup]:
    return lambda r: tag("td", text(r), class_=" ".join(filter(None, ["num", css(r)])),
                         data_sort=sort_key(key(r)))


def text_cell(text: Callable[[dict], Any], css: str | None = None) -> Callable[[dict], Markup]:
    return lambda r: tag("td", text(r), class_=css)


def table(columns: list[Column], rows: list[dict], caption: Any = None,
          row_attrs: Callable[[dict], dict] = lambda r: {}, css: str | None = None) -> Markup:
    """A sortable table inside its own horizontally scrolling box."""
    head = tag("thead", tag("tr", concat(
        tag("th", tag("button", c.header, type="button"), c.head or Markup(""),
            data_type="num" if c.numeric else "text", scope="col", title=c.title,
            class_=c.css, data_default_sort=c.sort) for c in columns)))
    body = tag("tbody", concat(
        tag("tr", concat(c.cell(r) for c in columns), **row_attrs(r)) for r in rows))
    return tag("div", tag("table", tag("caption", caption) if caption else Markup(""), head, body,
                          class_=" ".join(filter(None, ["sortable", css]))), class_="scroll")


def legend(items: Iterable[tuple[str, str]], intro: str | None = None,
           summary: str = "Legend: what the columns mean") -> Markup:
    """What each column (or mark) means, above a tab's tables (open; the script folds it on
    narrow screens)."""
    items = list(items)
    return tag("details", tag("summary", summary),
               tag("p", intro) if intro else Markup(""),
               tag("dl", concat(tag("div", tag("dt", k), tag("dd", v)) for k, v in items))
               if items else Markup(""), class_="legend", open=True)


def field_column(field: Field, rows: list[dict], label: str | None = None,
                 title: str | None = None, get: Callable[[dict], dict | None] = lambda r: r,
                 **kwargs) -> Column:
    """The column of a numeric :class:`Field` over ``rows`` (``get`` picks the dict the field is
    read from; None gives an empty cell), with one number format for the whole column."""
    src = [d for d in map(get, rows) if d is not None]
    values = [d.get(field.key) for d in src]
    widths = ([None if _missing(d.get(field.lo)) or _missing(d.get(field.hi))
               else d[field.hi] - d[field.lo] for d in src] if field.fmt == "ci" else [])
    fmt = (number_format(values, widths) if field.decimals is None
           else lambda x: f"{x:.{field.decimals}f}")

    def text(d: dict) -> Markup | str:
        x = d.get(field.key)
        if field.fmt == "ci":
            if "n" in d and d.get("n") == 0:
                return "all failed" if (d.get("n_failed") or 0) + (d.get("n_null") or 0) \
                    else "skipped"
            if _missing(x):
                return "n/a"
            out = [tag("span", fmt(x), class_="v")]
            if not _missing(d.get(field.lo)) and not _missing(d.get(field.hi)):
                out.append(tag("span", f"[{fmt(d[field.lo])}, {fmt(d[field.hi])}]",
                               class_="ci"))
            if d.get("survivors_only"):
                out.append(tag("span", "†", class_="mark", title="over surviving seeds only"))
            return concat(out, " ")
        if field.fmt == "rank":
            return md.interval(d.get(field.lo), d.get(field.hi), True)
        if _missing(x):
            return "n/a"
        if field.fmt == "p":
            return md.pval(x)
        if field.fmt == "int":
            return str(int(x))
        return fmt(float(x))

    def cell(r: dict) -> Markup:
        d = get(r)
        if d is None:
            return tag("td", "—", class_="num none", data_sort="")
        return tag("td", text(d), class_="num", data_sort=sort_key(d.get(field.key)))

    return Column(label or field.label, cell, True, title or field.title, **kwargs)


class Page:
    """Renders one release's page from its results.json (as a dict)."""

    def __init__(self, data: Mapping[str, Any], plots: list[str],
                 releases: list[tuple[str, str, dict]], scorers: Mapping[str, Mapping[str, Any]]):
        self.data = data
        self.meta = data["meta"]
        self.baseline = self.meta.get("baseline", "softmax")
        self.rows = list(data.get("rows", []))
        self.overall_rows = list(data.get("overall", []))
        self.plots = plots
        self.releases = releases
        self.scorers = scorers
        self.board = Board.from_dict(dict(data))
        self.scorer_name = {r["scorer"]: r.get("scorer_name", r["scorer"]) for r in self.rows}
        for r in self.overall_rows:
            self.scorer_name.setdefault(r["scorer"], r["scorer"])

    def field(self, frame: str, key: str) -> Field:
        f = FIELDS[frame][key]
        return Field(f.key, f.label.format(baseline=self.baseline), f.title, f.fmt, f.lo, f.hi,
                     f.decimals)

    # ----------------------------------------------------------------- pieces

    def scorer_info(self, label: str) -> Mapping[str, Any] | None:
        return self.scorers.get(self.scorer_name.get(label, label))

    def scorer_cell(self, label: str) -> Markup:
        info = self.scorer_info(label)
        title = None
        if info:
            title = " · ".join(str(x) for x in (info.get("family"), info.get("description"))
                               if x)
        return tag("td", label, class_="scorer", title=title or None)

    def scorer_column(self, frame: str = "rows") -> Column:
        f = self.field(frame, "scorer")
        return Column(f.label, lambda r: self.scorer_cell(r["scorer"]), False, f.title, "scorer")

    def row_attrs(self, row: dict) -> dict:
        tier = row.get("tier")
        return {"data_scorer": row["scorer"], "title": provenance_text(row),
                "class_": "tier1" if not _missing(tier) and tier == 1 else None}

    def field_legend(self, frame: str, keys: Iterable[str], extra: Iterable[tuple] = (),
                     intro: str | None = None) -> Markup:
        return legend([(self.field(frame, k).label, self.field(frame, k).title) for k in keys]
                      + list(extra), intro)

    # ----------------------------------------------------------------- overall

    def overall_columns(self, rows: list[dict], order: str | None = None) -> list[Column]:
        f = lambda k: self.field("overall", k)  # noqa: E731
        failed = f("n_failed")
        prov = f("provenance")
        return [
            self.scorer_column("overall"),
            field_column(f("score"), rows, sort="descending" if order == "value" else None),
            field_column(f("tier"), rows, sort="ascending" if order == "tier" else None),
            field_column(f("rank_low"), rows),
            Column(f("n_tasks").label, num_cell(md.tasks_text, lambda r: r["n_tasks"]), True,
                   f("n_tasks").title),
            field_column(f("tier1_tasks"), rows),
            *(field_column(x, rows) for x in extra_fields(rows, FIELDS["overall"], "overall")),
            Column(failed.label, num_cell(md.failed_text, lambda r: r["n_failed"],
                                          lambda r: "failed" if r["n_failed"] else None), True,
                   failed.title),
            Column(prov.label, lambda r: _provenance_cell(r, []), False, prov.title),
        ]

    def overall(self) -> Markup:
        rows = self.overall_rows
        keys = [k for k in FIELDS["overall"] if k not in ("scorer", "provenance")]
        profiles = sorted({r["profile"] for r in rows})
        orders = {p: row_order([r for r in rows if r["profile"] == p], "score", True)
                  for p in profiles}
        intro = "One row per scorer and profile. "
        if "tier" in orders.values():
            intro += ("Rows are ordered by tier (tier 1 first), then by score within a tier, so a "
                      "scorer can sit above one with a higher score when the data cannot tell "
                      "them apart. ")
        parts = [tag("h2", "Overall"), self.field_legend(
            "overall", keys, [("highlighted row", "Tier 1.")],
            intro + "Click a header to sort; hover a header for its meaning.")]
        if not rows:
            parts.append(tag("p", "No quality-track records in this release.", class_="empty"))
        for profile in profiles:
            prows = [r for r in rows if r["profile"] == profile]
            parts.append(table(self.overall_columns(prows, orders[profile]), prows,
                               f"profile {profile}: {order_text(orders[profile], 'score')}",
                               self.row_attrs))
        outside = md.outside_overall(self.board) + marks.overall_notes(self.board)
        if outside:
            parts.append(tag("ul", concat(tag("li", line) for line in outside), class_="meta"))
        return tag("section", concat(parts), id="overall", class_="tab")

    # ----------------------------------------------------------------- tracks

    def detail_columns(self, rows: list[dict], order: str | None = None) -> list[Column]:
        f = lambda k: self.field("rows", k)  # noqa: E731
        delta, failures, prov = f("delta_vs_baseline"), f("failures"), f("provenance")

        def n_bad(r):
            return sum((r["failures"] or {}).values())

        def extra(r):
            kwargs = json.dumps(r["scorer_kwargs"] or {}, sort_keys=True)
            return [f"scorebench {', '.join(r['harness_version'] or []) or 'unknown'}",
                    (f"task {r['task']} v{r['task_version']}, scorer {r['scorer_name']} "
                     f"v{r['scorer_version']} {kwargs}"),
                    f"seeds: {', '.join(str(s) for s in r['seeds'] or []) or 'none'}"]

        deltas = number_format([r["delta_vs_baseline"] for r in rows])

        def delta_text(r):
            if r["scorer"] == self.baseline:
                return "baseline"
            x = r["delta_vs_baseline"]
            if _missing(x):
                return "n/a"
            text = ("+" if x >= 0 else "") + deltas(x)
            return text + (f" ({r['vs_baseline']})" if r.get("vs_baseline") else "")

        known = FIELDS["rows"]
        return [
            self.scorer_column(),
            field_column(f("mean"), rows, sort=None if order != "value" else (
                "descending" if rows[0]["direction"] != "lower" else "ascending")),
            field_column(f("n"), rows),
            Column(delta.label, num_cell(delta_text, lambda r: r["delta_vs_baseline"]), True,
                   delta.title),
            field_column(f("p_vs_baseline_holm"), rows),
            field_column(f("p_signflip"), rows),
            field_column(f("tier"), rows, sort="ascending" if order == "tier" else None),
            field_column(f("rank_low"), rows),
            Column(failures.label, num_cell(lambda r: md.failures_text(r["failures"]), n_bad,
                                            lambda r: "failed" if n_bad(r) else None), True,
                   failures.title),
            *(field_column(x, rows) for x in extra_fields(rows, known, "rows")),
            Column(prov.label, lambda r: _provenance_cell(r, extra(r)), False, prov.title),
        ]

    def scorer_order(self, profile: str, track_rows: list[dict]) -> tuple[list[str], str]:
        """Scorers of a track's summary table, and what orders them."""
        scorers = sorted({r["scorer"] for r in track_rows})
        overall = [r["scorer"] for r in self.overall_rows if r["profile"] == profile]
        if set(scorers) <= set(overall):
            return [s for s in overall if s in scorers], "overall order (tier, then score)"
        heads = [r for r in track_rows if r["headline"]] or track_rows
        first = (heads[0]["task"], heads[0]["metric"])
        sign = 1.0 if heads[0]["direction"] == "lower" else -1.0
        mean = {r["scorer"]: r["mean"] for r in heads if (r["task"], r["metric"]) == first}
        order = sorted(scorers, key=lambda s: (_missing(mean.get(s)),
                                               0.0 if _missing(mean.get(s)) else sign * mean[s],
                                               s))
        return order, f"{first[0]} · {first[1]}, best first"

    def metric_table(self, profile: str, scorers: list[str], metric_rows: list[dict],
                     caption: str, linked: set) -> Markup:
        """Scorers as rows, one column per (task, metric): mean and interval."""
        keys = list(dict.fromkeys((r["task"], r["metric"]) for r in metric_rows))
        cells = {(r["scorer"], r["task"], r["metric"]): r for r in metric_rows}
        info = {(r["task"], r["metric"]): r for r in metric_rows}
        mean = self.field("rows", "mean")
        pivot = [{"scorer": s} for s in scorers]
        columns = [self.scorer_column()]
        for task, metric in keys:
            direction = info[(task, metric)]["direction"]
            link = (tag("a", "details", href=f"#{slug('detail', profile, task, metric)}",
                        class_="more", title=f"Δ vs {self.baseline}, p-values, tier, rank and "
                        f"failures of {task} · {metric}") if (task, metric) in linked
                    else None)
            columns.append(field_column(
                mean, pivot, f"{task} · {metric} {arrow(direction)}",
                HEADLINE_TITLE.format(task=task, metric=metric, better=better(direction)),
                get=lambda r, k=(task, metric): cells.get((r["scorer"], *k)), head=link))
        return table(columns, pivot, caption,
                     lambda r: {"data_scorer": r["scorer"]}, css="wide")

    def track(self, track: str) -> Markup:
        shown = {(r["profile"], r["task"], r["metric"]) for r in md.shown_rows(self.board, track)}
        every = [r for r in self.rows if r["track"] == track]
        rows = [r for r in every if (r["profile"], r["task"], r["metric"]) in shown]
        parts = [tag("h2", md.TRACK_TITLES[track])]
        keys = [k for k in FIELDS["rows"] if k not in ("scorer", "provenance")]
        parts.append(self.field_legend(
            "rows", keys, [("↑ / ↓", "Higher / lower is better for this metric."),
                           ("highlighted row", "Tier 1 of that metric.")],
            "Per profile, one table of the headline metrics (scorers as rows); every secondary "
            "metric, and the per-metric statistics (Δ, p-values, tier, rank, failures) of the "
            "metrics the README shows, open below. "
            "Click a header to sort; hover a header for its meaning."))
        if not rows:
            parts.append(tag("p", "No records for this track in this release.", class_="empty"))
        for profile in sorted({r["profile"] for r in rows}):
            prows = [r for r in rows if r["profile"] == profile]
            scorers, order = self.scorer_order(profile, prows)
            linked = {(r["task"], r["metric"]) for r in prows}
            head = [r for r in prows if r["headline"]]
            rest = [r for r in every if r["profile"] == profile and not r["headline"]]
            parts.append(tag("h3", f"profile {profile}"))
            if head:
                parts.append(self.metric_table(
                    profile, scorers, head,
                    f"Headline metrics, profile {profile}: rows by {order}", linked))
            notes = marks.track_notes(prows) if track not in md.DESCRIPTIVE else []
            if notes:
                parts.append(tag("ul", concat(tag("li", line) for line in notes), class_="meta"))
            if rest:
                n = len({(r["task"], r["metric"]) for r in rest})
                parts.append(tag("details", tag("summary", f"Secondary metrics ({n})"),
                                 self.metric_table(profile, scorers, rest,
                                                   f"Secondary metrics, profile {profile}: rows "
                                                   f"by {order}", linked),
                                 class_="secondary", open=not head))
            groups: dict[tuple, list[dict]] = {}
            for r in prows:
                groups.setdefault((r["task"], r["metric"]), []).append(r)
            details = []
            for (task, metric), grows in groups.items():
                label = f"{task} · {metric} {arrow(grows[0]['direction'])}"
                order = row_order(grows, "mean", grows[0]["direction"] != "lower")
                details.append(tag(
                    "details", tag("summary", label),
                    table(self.detail_columns(grows, order), grows,
                          f"{label} · profile {profile}: {order_text(order, 'mean')}",
                          self.row_attrs, css="detail"),
                    id=slug("detail", profile, task, metric), class_="detail"))
            parts.append(tag("div", tag("h4", f"Per-metric statistics ({len(groups)}), profile "
                                              f"{profile}"), concat(details),
                             class_="details-list"))
        return tag("section", concat(parts), id=f"track-{track}", class_="tab")

    # ----------------------------------------------------------------- claims

    def claims(self) -> Markup:
        claims = list(self.data.get("claims") or [])
        counts = {v: sum(c.get("verdict") == v for c in claims) for v in VERDICTS}
        parts = [tag("h2", "Claims"), legend(
            [(f.label, f.title) for f in CLAIM_FIELDS.values()],
            "Each row tests one claim of a paper on this release's records, with the same "
            "statistics as the tracks. Verdicts: " + ", ".join(
                f"{n} {v}" for v, n in counts.items()) + ".")]
        columns = []
        for f in CLAIM_FIELDS.values():
            if f.fmt == "text":
                if f.key == "verdict":
                    columns.append(Column(f.label, lambda r: tag(
                        "td", r.get("verdict") or "n/a",
                        class_=f"verdict verdict-{slug(r.get('verdict') or 'none')}"),
                        False, f.title))
                else:
                    columns.append(Column(f.label, text_cell(
                        lambda r, k=f.key: "" if r.get(k) is None else str(r[k]),
                        "scorer" if f.key == "id" else ("claim" if f.key == "claim" else None)),
                        False, f.title, "scorer" if f.key == "id" else None))
            else:
                columns.append(field_column(f, claims))
        columns += [field_column(x, claims) for x in extra_fields(claims, CLAIM_FIELDS, "claims")]
        parts.append(table(columns, claims, "Claims in results.json order",
                           lambda r: {"data_scorer": r.get("scorer") or ""})
                     if claims else tag("p", "No claims were evaluated for this release.",
                                        class_="empty"))
        return tag("section", concat(parts), id="claims", class_="tab")

    # ----------------------------------------------------------------- failures

    def problem_summary(self) -> str:
        """The one wording of the release's problems, in the header and the Failures tab."""
        problems = list(self.data.get("problems", []))
        n_skip = sum(bool(p.get("skipped")) for p in problems)
        files = len({p.get("path") for p in problems})
        return (f"{len(problems)} problem{'s' * (len(problems) != 1)} in {files} record "
                f"file{'s' * (files != 1)} ({len(problems) - n_skip} partly used, {n_skip} "
                "skipped)")

    def failures(self) -> Markup:
        failed = list(self.data.get("failed_cells", []))
        problems = list(self.data.get("problems", []))
        superseded = list(self.data.get("superseded", []))
        columns = [Column("profile", text_cell(lambda r: r["profile"]), title="Suite profile."),
                   Column("task", text_cell(lambda r: r["task"]), title="Task of the cell."),
                   self.scorer_column(),
                   Column("seed", num_cell(lambda r: str(r["seed"]), lambda r: r["seed"]), True,
                          "Seed of the cell."),
                   Column("status", text_cell(lambda r: r["status"], "failed"),
                          title="How the cell ended (diverged, nan, oom, timeout, error, "
                                "skipped) or null for a missing metric."),
                   Column("step", num_cell(lambda r: "" if _missing(r["step"]) else str(r["step"]),
                                           lambda r: r["step"]), True,
                          "Training step where it stopped."),
                   Column("message", text_cell(lambda r: r["message"], "message"),
                          title="The record's own message."),
                   Column("date", text_cell(lambda r: r["date"]), title="Date of the record.")]
        parts = [tag("h2", "Failed and skipped cells"), legend(
            [("failed cells", f"{len(failed)}: cells that did not finish ok or lack a metric; "
                              "they count as failures in the tracks."),
             ("problems", f"{self.problem_summary()}; partly used: the named values are left "
                         "out, the rest is used; skipped: not used at all."),
             ("superseded records", f"{len(superseded)}: older task or scorer versions, not "
                                    "used.")])]
        parts.append(table(columns, failed, None,
                           lambda r: {"data_scorer": r["scorer"],
                                      "title": f"{r['path']} · git {r['git_sha']} · "
                                               f"{r['hardware']}"})
                     if failed else tag("p", "None: every cell finished ok.", class_="empty"))
        parts.append(tag("h2", f"Problems in records ({len(problems)})"))
        parts.append(table([Column("file", text_cell(lambda r: r["path"]),
                                   title="Record file, relative to the results directory."),
                            Column("effect", text_cell(
                                lambda r: "skipped" if r["skipped"] else "partly used"),
                                title="skipped: not used; partly used: the values named in "
                                      "the reason are left out, the rest is used."),
                            Column("reason", text_cell(lambda r: r["reason"], "message"),
                                   title="What is wrong and what was left out.")],
                           problems)
                     if problems else tag("p", "None.", class_="empty"))
        parts.append(tag("h2", f"Superseded records ({len(superseded)})"))
        parts.append(table([Column(h, text_cell(lambda r, k=k: r[k]), h in ("task v", "scorer v",
                                                                              "cells"), t)
                            for h, k, t in (
                                ("task", "task", "Task."),
                                ("task v", "task_version", "Task version of the records."),
                                ("scorer", "scorer", "Scorer."),
                                ("scorer v", "scorer_version", "Scorer version."),
                                ("profile", "profile", "Suite profile."),
                                ("cells", "n_cells", "Cells in the superseded records."),
                                ("why", "reason", "Which newer version replaces them."))],
                           superseded)
                     if superseded else tag("p", "None.", class_="empty"))
        return tag("section", concat(parts), id="failures", class_="tab")

    # ----------------------------------------------------------------- plots

    def plot_captions(self) -> dict[str, tuple[str, str]]:
        """Plot file stem -> (group, caption), for every plot the board can produce."""
        out: dict[str, tuple[str, str]] = {}
        profiles = sorted({r["profile"] for r in self.overall_rows})
        for p in profiles:
            out[safe_name("normalized", p)] = (
                "overall", f"Normalized headline score of every scorer on every task, profile "
                           f"{p} (1 = best scorer of the task, 0 = worst).")
        for r in self.rows:
            p, t, m = r["profile"], r["task"], r["metric"]
            out[safe_name("bars", p, t, m)] = (
                r["track"], f"{t} · {m}: mean and 95% CI per scorer, coloured by tier "
                            f"({better(r['direction'])} is better), profile {p}.")
            if r["track"] == "cost":
                for q in profiles:
                    out[safe_name("cost", t, m, q)] = (
                        "cost", f"Overall quality score (profile {q}, higher is better) against "
                                f"{t} · {m} ({better(r['direction'])} is better), log axis.")
        track_of = {r["task"]: r["track"] for r in self.rows}
        for g in self.data.get("grids", []):
            p, t, name = g["profile"], g["task"], g["grid"]
            out[safe_name("grid", p, t, name)] = (
                track_of.get(t, "other"), f"{t} · {name}: mean over seeds per scorer, over "
                                          f"{g['rows_name']} × {g['cols_name']}, profile {p}.")
        return out

    def plots_section(self) -> Markup:
        parts = [tag("h2", "Plots"), legend([
            ("normalized", "Heat map of the normalized headline scores behind the overall."),
            ("bars", "Mean (bar) and 95% CI (whiskers) per scorer, coloured by tier."),
            ("grids", "A task's grid of results (e.g. error over length and noise), one panel "
                      "per scorer, one colour scale."),
            ("cost", "Overall quality against a cost metric (log axis)."),
        ], "Grouped by track; click a plot to open it full size.", "Legend: the kinds of plot")]
        if not self.plots:
            parts.append(tag("p", "This release has no plots.", class_="empty"))
        captions = self.plot_captions()
        groups: dict[str, list[Markup]] = {}
        for plot in self.plots:
            stem = plot.rsplit("/", 1)[-1].removesuffix(".png")
            group, caption = captions.get(stem, ("other", "Plot: " + " · ".join(
                s.replace("_", " ") for s in stem.split("__"))))
            groups.setdefault(group, []).append(tag(
                "figure", tag("a", void("img", src=plot, alt=caption), href=plot, class_="zoom"),
                tag("figcaption", caption)))
        titles = {"overall": "Overall", **md.TRACK_TITLES, "other": "Other"}
        for group in ["overall", *TRACKS, "other"]:
            if group in groups:
                parts.append(tag("h3", titles[group]))
                parts.append(tag("div", concat(groups[group]), class_="plots"))
        return tag("section", concat(parts), id="plots", class_="tab")

    # ----------------------------------------------------------------- scorers, releases

    def scorers_section(self) -> Markup:
        labels = sorted(self.scorer_name)
        titles = {"family": "Family of scoring functions.",
                  "kind": "logits: maps scores to weights; module: its own attention layer.",
                  "normalization": "What the weights of a row sum to (normalized: 1).",
                  "paper": "Where the scorer is from.",
                  "version": "Scorer version; records of an older version are superseded.",
                  "aliases": "Other names the scorer is registered under.",
                  "description": "The formula, from the scorer's docstring."}
        parts = [tag("h2", "Scorers"), legend(list(titles.items()),
                                              "Metadata as registered when the release was "
                                              "published (scorebench ls scorers).")]

        def text(label, key):
            info = self.scorer_info(label)
            if info is None:
                return "not registered at publish time" if key == "description" else ""
            value = info.get(key)
            if isinstance(value, (list, tuple)):
                return ", ".join(str(v) for v in value)
            return "" if value is None else str(value)

        def cell(key):
            if key == "description":
                return lambda r: tag("td", code_text(text(r["scorer"], key)), class_="desc")
            return text_cell(lambda r: text(r["scorer"], key))

        columns = [Column("scorer", text_cell(lambda r: r["scorer"], "scorer"),
                          title="Scorer name as in the tables.", css="scorer")] + [
            Column(key, cell(key), key == "version", titles[key]) for key in SCORER_FIELDS]
        parts.append(table(columns, [{"scorer": s} for s in labels], None,
                           lambda r: {"data_scorer": r["scorer"]})
                     if labels else tag("p", "No scorers in this release.", class_="empty"))
        return tag("section", concat(parts), id="scorers", class_="tab")

    def releases_section(self) -> Markup:
        rows = [{"name": name, "href": href, "meta": meta} for name, href, meta in self.releases]
        columns = [
            Column("release", lambda r: tag("td", tag("a", r["name"], href=r["href"]),
                                            class_="current" if r["name"] == self.meta["release"]
                                            else None), title="Release name (links its page).",
                   css="scorer"),
            Column("dates", text_cell(lambda r: f"{r['meta'].get('date_first', 'unknown')} to "
                                                f"{r['meta'].get('date_last', 'unknown')}"),
                   title="Dates of its first and last record."),
            Column("records", num_cell(lambda r: str(r["meta"].get("n_used", "")),
                                       lambda r: r["meta"].get("n_used")), True,
                   "Records used."),
            Column("profiles", text_cell(lambda r: ", ".join(r["meta"].get("profiles", []))),
                   title="Suite profiles in the release."),
            Column("harness", text_cell(lambda r: md.short_shas(r["meta"].get("git_sha", []))),
                   title="Harness git commits of its records."),
            Column("hardware", text_cell(lambda r: md.joined(r["meta"].get("hardware", []))),
                   title="Hardware of its records."),
        ]
        return tag("section", tag("h2", "All releases"),
                   legend([], "Newest first; the selector at the top switches between them and "
                              "keeps the tab and filter. Hover a header for its meaning.",
                          "Legend"),
                   table(columns, rows), id="releases", class_="tab")

    # ----------------------------------------------------------------- page

    def header(self) -> Markup:
        m = self.meta
        options = concat(tag("option", name, value=href, selected=name == m["release"])
                         for name, href, _ in self.releases)
        controls = tag("div", tag("label", "Release",
                                  tag("select", options, id="release-select",
                                      autocomplete="off")),
                       tag("label", "Filter scorers",
                           void("input", id="scorer-filter", type="search",
                                placeholder="scorer name", autocomplete="off")),
                       tag("span", "", id="filter-count"), class_="controls")
        lines = [
            (f"Records: {m['n_used']} used of {m['n_files']} files; {m['n_superseded']} "
             f"superseded; {self.problem_summary()}, listed under Failures; profiles: "
             f"{', '.join(m['profiles']) or 'none'}"),
            f"Dates: {m['date_first']} to {m['date_last']}",
            (f"Harness (git): {md.short_shas(m['git_sha'])}; scorebench "
             f"{', '.join(m['harness_version'])}"),
            f"Hardware: {md.joined(m['hardware'])}",
            f"Baseline for paired tests: {m['baseline']}; α = {m['alpha']}",
        ]
        files = concat((tag("a", name, href=name) for name in
                        ("README.md", "results.json", "results.csv", "overall.csv")), ", ")
        return concat([tag("h1", f"scorebench leaderboard: {m['release']}"), controls,
                       tag("ul", concat(tag("li", line) for line in lines), class_="meta"),
                       tag("p", "Files: ", files, " (README.md describes the method)."),
                       "\n"])

    def render(self) -> str:
        sections = ([("overall", "Overall", self.overall())]
                    + [(f"track-{t}", TAB_TITLES[t], self.track(t)) for t in TRACKS]
                    + ([("claims", "Claims", self.claims())] if "claims" in self.data else [])
                    + [("failures", "Failures", self.failures()),
                       ("plots", "Plots", self.plots_section()),
                       ("scorers", "Scorers", self.scorers_section()),
                       ("releases", "Releases", self.releases_section())])
        nav = concat((tag("a", title, href=f"#{sid}") for sid, title, _ in sections), "\n")
        main = concat((body for _, _, body in sections), "\n")
        template = Template(_static("page.html"))
        return template.substitute(
            title=esc(f"scorebench leaderboard: {self.meta['release']}"),
            style=_static("leaderboard.css"), script=_static("leaderboard.js"),
            header=self.header(), nav=nav + "\n", main=main + "\n",
            footer=esc("Rendered by scorebench from results.json, the same data as README.md."))


def _static(name: str) -> str:
    return resources.files("leaderboard").joinpath("static", name).read_text(encoding="utf-8")


def render_page(data: Mapping[str, Any], plots: list[str],
                releases: list[tuple[str, str, dict]],
                scorers: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """The page of a release's results.json (``data``, as parsed). ``plots``: paths relative to
    the release directory; ``releases``: (name, link relative to the page, meta) newest first;
    ``scorers``: registered name -> metadata (fields of :data:`SCORER_FIELDS`)."""
    return Page(data, plots, releases, scorers or {}).render()


# --------------------------------------------------------------------------- files


def read_scorers(release_dir: Path) -> dict:
    path = Path(release_dir) / SCORERS_JSON
    if not path.is_file():
        return {}
    try:
        return dict(json.loads(path.read_text(encoding="utf-8"))["scorers"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ReleaseError(f"{path}: not a readable scorer metadata file ({exc}); delete it and "
                           "publish again with --html") from None


def write_scorers(release_dir: Path, scorers: Mapping[str, Mapping[str, Any]]) -> Path:
    clean = {name: {k: scorers[name].get(k) for k in SCORER_FIELDS} for name in sorted(scorers)}
    path = Path(release_dir) / SCORERS_JSON
    path.write_text(json.dumps({"scorers": clean}, indent=1, sort_keys=True, ensure_ascii=False)
                    + "\n", encoding="utf-8", newline="\n")
    return path


def write_index(release_dir: Path, releases: list[tuple[str, str, dict]]) -> Path:
    """Render ``<release_dir>/index.html`` from its results.json, scorers.json and plots/."""
    release_dir = Path(release_dir)
    load_release(release_dir)  # a clear error for a missing or unreadable results.json
    data = json.loads((release_dir / "results.json").read_text(encoding="utf-8"))
    plot_files = _plot_order(sorted(p.relative_to(release_dir).as_posix()
                                    for p in (release_dir / "plots").glob("*.png")))
    path = release_dir / INDEX
    path.write_text(render_page(data, plot_files, releases, read_scorers(release_dir)),
                    encoding="utf-8", newline="\n")
    return path


def write_site(release_dir: str | Path,
               scorers: Mapping[str, Mapping[str, Any]] | None = None) -> list[Path]:
    """Write ``index.html`` (and, given ``scorers``, ``scorers.json``) into a published release,
    and re-render the ``index.html`` of every sibling release that has one, so that each page's
    release selector lists every release. Returns the files written."""
    release_dir = Path(release_dir)
    if not (release_dir / "results.json").is_file():
        raise ReleaseError(f"{release_dir / 'results.json'} does not exist; publish the release "
                           "before writing its page (scorebench publish --html)")
    written = []
    if scorers is not None:
        written.append(write_scorers(release_dir, scorers))
    releases = list_releases(release_dir.parent)
    current = release_dir.resolve()
    pages = {d.resolve() for d, _ in releases if d.resolve() == current or (d / INDEX).is_file()}
    links = [(d.name, f"../{d.name}/{INDEX if d.resolve() in pages else 'README.md'}", meta)
             for d, meta in releases]
    for d, _ in releases:
        if d.resolve() in pages:
            written.append(write_index(d, links))
    return written
