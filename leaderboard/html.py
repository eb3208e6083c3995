"""The leaderboard as a static web page: ``<release>/index.html`` beside each release.

The page is rendered from the release's ``results.json`` (the canonical Board the README is
rendered from) with the markdown module's formatting functions, so every number reads the same on
the page and in the README. It shows the overall table, one tab per track, failed cells, the
release's plots, the scorers' metadata and a selector for the other releases; columns sort on
click (numbers by their raw value, kept in ``data-sort``) and a box filters scorers.

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
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import pandas as pd

from suite.records import TRACKS

from . import markdown as md
from .release import ReleaseError, _plot_order, list_releases, load_release

INDEX = "index.html"
SCORERS_JSON = "scorers.json"
SCORER_FIELDS = ("family", "kind", "normalization", "paper", "version", "aliases", "description")
TAB_TITLES = {"icl": "ICL", "decoder": "Decoder", "encoder": "Encoder", "probe": "Probes",
              "cost": "Cost"}


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


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.to_dict(orient="records")


def provenance_text(row: dict) -> str:
    return (f"date {row['date']} · harness {md.short_shas(row['git_sha'])} · "
            f"hardware {md.joined(row['hardware'])}")


def _provenance_cell(row: dict, extra: list[str]) -> Markup:
    lines = [f"hardware: {md.joined(row['hardware'])}",
             f"git: {', '.join(row['git_sha'] or []) or 'unknown'}", *extra]
    summary = f"{row['date']} · {md.short_shas(row['git_sha'])}"
    return tag("td", tag("details", tag("summary", summary),
                         concat(tag("div", line) for line in lines)), class_="prov")


# --------------------------------------------------------------------------- tables


class Column:
    """A table column: its header, whether it sorts as numbers, and the cell of a row."""

    def __init__(self, header: str, cell: Callable[[dict], Markup], numeric: bool = False):
        self.header, self.cell, self.numeric = header, cell, numeric


def num_cell(text: Callable[[dict], str], key: Callable[[dict], Any],
             css: Callable[[dict], str | None] = lambda r: None) -> Callable[[dict], Markup]:
    return lambda r: tag("td", text(r), class_=" ".join(filter(None, ["num", css(r)])),
                         data_sort=sort_key(key(r)))


def text_cell(text: Callable[[dict], Any], css: str | None = None) -> Callable[[dict], Markup]:
    return lambda r: tag("td", text(r), class_=css)


def table(columns: list[Column], rows: list[dict], caption: str | None = None,
          row_attrs: Callable[[dict], dict] = lambda r: {}) -> Markup:
    head = tag("thead", tag("tr", concat(
        tag("th", tag("button", c.header, type="button"), data_type="num" if c.numeric else "text",
            scope="col") for c in columns)))
    body = tag("tbody", concat(
        tag("tr", concat(c.cell(r) for c in columns), **row_attrs(r)) for r in rows))
    return tag("table", tag("caption", caption) if caption else Markup(""), head, body,
               class_="sortable")


class Page:
    """Renders one release's page from its canonical Board."""

    def __init__(self, board, plots: list[str], releases: list[tuple[str, str, dict]],
                 scorers: Mapping[str, Mapping[str, Any]]):
        self.board = board
        self.meta = board.meta
        self.baseline = self.meta.get("baseline", "softmax")
        self.plots = plots
        self.releases = releases
        self.scorers = scorers
        self.scorer_name = {r["scorer"]: r["scorer_name"] for r in _records(board.rows)}

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

    def row_attrs(self, row: dict) -> dict:
        tier = row.get("tier")
        return {"data_scorer": row["scorer"], "title": provenance_text(row),
                "class_": "tier1" if not _missing(tier) and tier == 1 else None}

    def overall_columns(self) -> list[Column]:
        return [
            Column("tier", num_cell(md.tier_text, lambda r: r["tier"]), True),
            Column("scorer", lambda r: self.scorer_cell(r["scorer"])),
            Column("score [95% CI]", num_cell(md.score_text, lambda r: r["score"]), True),
            Column("rank", num_cell(lambda r: md.interval(r["rank_low"], r["rank_high"], True),
                                    lambda r: r["rank_low"]), True),
            Column("tasks", num_cell(md.tasks_text, lambda r: r["n_tasks"]), True),
            Column("tier-1 tasks", num_cell(lambda r: str(r["tier1_tasks"]),
                                            lambda r: r["tier1_tasks"]), True),
            Column("failed cells", num_cell(md.failed_text, lambda r: r["n_failed"],
                                            lambda r: "failed" if r["n_failed"] else None), True),
            Column("provenance", lambda r: _provenance_cell(r, [])),
        ]

    def track_columns(self) -> list[Column]:
        def n_bad(r):
            return sum((r["failures"] or {}).values())

        def extra(r):
            kwargs = json.dumps(r["scorer_kwargs"] or {}, sort_keys=True)
            return [f"scorebench {', '.join(r['harness_version'] or []) or 'unknown'}",
                    (f"task {r['task']} v{r['task_version']}, scorer {r['scorer_name']} "
                     f"v{r['scorer_version']} {kwargs}"),
                    f"seeds: {', '.join(str(s) for s in r['seeds'] or []) or 'none'}"]

        return [
            Column("scorer", lambda r: self.scorer_cell(r["scorer"])),
            Column("mean [95% CI]", num_cell(md.mean_text, lambda r: r["mean"]), True),
            Column("n", num_cell(lambda r: str(r["n"]), lambda r: r["n"]), True),
            Column(f"Δ vs {self.baseline}", num_cell(lambda r: md.delta_text(r, self.baseline),
                                                     lambda r: r["delta_vs_baseline"]), True),
            Column("p (Holm)", num_cell(lambda r: md.pval(r["p_vs_baseline_holm"]),
                                        lambda r: r["p_vs_baseline_holm"]), True),
            Column("p sign-flip", num_cell(lambda r: md.pval(r["p_signflip"]),
                                           lambda r: r["p_signflip"]), True),
            Column("tier", num_cell(md.tier_text, lambda r: r["tier"]), True),
            Column("rank", num_cell(lambda r: md.interval(r["rank_low"], r["rank_high"], True),
                                    lambda r: r["rank_low"]), True),
            Column("failures", num_cell(lambda r: md.failures_text(r["failures"]), n_bad,
                                        lambda r: "failed" if n_bad(r) else None), True),
            Column("provenance", lambda r: _provenance_cell(r, extra(r))),
        ]

    # ----------------------------------------------------------------- sections

    def header(self) -> Markup:
        m = self.meta
        options = concat(tag("option", name, value=href, selected=name == m["release"])
                         for name, href, _ in self.releases)
        controls = tag("div", tag("label", "Release", tag("select", options, id="release-select")),
                       tag("label", "Filter scorers",
                           void("input", id="scorer-filter", type="search",
                                placeholder="scorer name", autocomplete="off")),
                       tag("span", "", id="filter-count"), class_="controls")
        lines = [
            (f"Records: {m['n_used']} used of {m['n_files']} files ({m['n_superseded']} "
             f"superseded, {m['n_problems']} problems); profiles: "
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
                       tag("p", "Files: ", files, " (the method is described in README.md)."),
                       "\n"])

    def overall(self) -> Markup:
        rows = _records(self.board.overall)
        parts = [tag("h2", "Overall")]
        if not rows:
            parts.append(tag("p", "No quality-track records in this release.", class_="empty"))
        for profile in sorted({r["profile"] for r in rows}):
            prows = [r for r in rows if r["profile"] == profile]
            parts.append(table(self.overall_columns(), prows, f"profile {profile}",
                               self.row_attrs))
        outside = md.outside_overall(self.board)
        if outside:
            parts.append(tag("ul", concat(tag("li", line) for line in outside), class_="meta"))
        return tag("section", concat(parts), id="overall", class_="tab")

    def track(self, track: str) -> Markup:
        rows = md.shown_rows(self.board, track)
        parts = [tag("h2", md.TRACK_TITLES[track])]
        if not rows:
            parts.append(tag("p", "No records for this track in this release.", class_="empty"))
        groups: dict[tuple, list[dict]] = {}
        for r in rows:
            groups.setdefault((r["profile"], r["task"], r["metric"]), []).append(r)
        for (profile, task, metric), grows in groups.items():
            arrow = "↓" if grows[0]["direction"] == "lower" else "↑"
            caption = f"{task} · {metric} {arrow} · profile {profile}"
            parts.append(table(self.track_columns(), grows, caption, self.row_attrs))
        return tag("section", concat(parts), id=f"track-{track}", class_="tab")

    def failures(self) -> Markup:
        failed = _records(self.board.failed_cells)
        columns = [Column("profile", text_cell(lambda r: r["profile"])),
                   Column("task", text_cell(lambda r: r["task"])),
                   Column("scorer", lambda r: self.scorer_cell(r["scorer"])),
                   Column("seed", num_cell(lambda r: str(r["seed"]), lambda r: r["seed"]), True),
                   Column("status", text_cell(lambda r: r["status"], "failed")),
                   Column("step", num_cell(lambda r: "" if _missing(r["step"]) else str(r["step"]),
                                           lambda r: r["step"]), True),
                   Column("message", text_cell(lambda r: r["message"], "message")),
                   Column("date", text_cell(lambda r: r["date"]))]
        parts = [tag("h2", "Failed and skipped cells")]
        parts.append(table(columns, failed, None,
                           lambda r: {"data_scorer": r["scorer"],
                                      "title": f"{r['path']} · git {r['git_sha']} · "
                                               f"{r['hardware']}"})
                     if failed else tag("p", "Every cell finished ok.", class_="empty"))
        superseded = _records(self.board.superseded)
        parts.append(tag("h2", "Superseded records"))
        parts.append(table([Column(h, text_cell(lambda r, k=k: r[k]), h in ("task v", "scorer v",
                                                                              "cells"))
                            for h, k in (("task", "task"), ("task v", "task_version"),
                                         ("scorer", "scorer"), ("scorer v", "scorer_version"),
                                         ("profile", "profile"), ("cells", "n_cells"),
                                         ("why", "reason"))], superseded)
                     if superseded else tag("p", "None.", class_="empty"))
        problems = _records(self.board.problems)
        parts.append(tag("h2", "Records not used"))
        parts.append(table([Column("file", text_cell(lambda r: r["path"])),
                            Column("effect", text_cell(
                                lambda r: "skipped" if r["skipped"] else "partly used")),
                            Column("reason", text_cell(lambda r: r["reason"], "message"))],
                           problems)
                     if problems else tag("p", "None.", class_="empty"))
        return tag("section", concat(parts), id="failures", class_="tab")

    def plots_section(self) -> Markup:
        parts = [tag("h2", "Plots")]
        if not self.plots:
            parts.append(tag("p", "This release has no plots.", class_="empty"))
        for plot in self.plots:
            name = plot.rsplit("/", 1)[-1].removesuffix(".png")
            parts.append(tag("figure", tag("a", void("img", src=plot, alt=name), href=plot),
                             tag("figcaption", name)))
        return tag("section", concat(parts), id="plots", class_="tab")

    def scorers_section(self) -> Markup:
        labels = sorted(self.scorer_name)
        parts = [tag("h2", "Scorers"),
                 tag("p", "Metadata as registered when the release was published "
                          "(scorebench ls scorers).")]

        def field(key):
            def text(label):
                info = self.scorer_info(label)
                if info is None:
                    return "not registered at publish time" if key == "description" else ""
                value = info.get(key)
                if isinstance(value, (list, tuple)):
                    return ", ".join(str(v) for v in value)
                return "" if value is None else str(value)
            return text_cell(lambda r: text(r["scorer"]))

        columns = [Column("scorer", text_cell(lambda r: r["scorer"], "scorer"))] + [
            Column(key, field(key), key == "version") for key in SCORER_FIELDS]
        parts.append(table(columns, [{"scorer": s} for s in labels], None,
                           lambda r: {"data_scorer": r["scorer"]})
                     if labels else tag("p", "No scorers in this release.", class_="empty"))
        return tag("section", concat(parts), id="scorers", class_="tab")

    def releases_section(self) -> Markup:
        rows = [{"name": name, "href": href, "meta": meta} for name, href, meta in self.releases]
        columns = [
            Column("release", lambda r: tag("td", tag("a", r["name"], href=r["href"]),
                                            class_="current" if r["name"] == self.meta["release"]
                                            else None)),
            Column("dates", text_cell(lambda r: f"{r['meta'].get('date_first', 'unknown')} to "
                                                f"{r['meta'].get('date_last', 'unknown')}")),
            Column("records", num_cell(lambda r: str(r["meta"].get("n_used", "")),
                                       lambda r: r["meta"].get("n_used")), True),
            Column("profiles", text_cell(lambda r: ", ".join(r["meta"].get("profiles", [])))),
            Column("harness", text_cell(lambda r: md.short_shas(r["meta"].get("git_sha", [])))),
            Column("hardware", text_cell(lambda r: md.joined(r["meta"].get("hardware", [])))),
        ]
        return tag("section", tag("h2", "All releases"), table(columns, rows), id="releases",
                   class_="tab")

    # ----------------------------------------------------------------- page

    def render(self) -> str:
        sections = ([("overall", "Overall", self.overall())]
                    + [(f"track-{t}", TAB_TITLES[t], self.track(t)) for t in TRACKS]
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


def render_page(board, plots: list[str], releases: list[tuple[str, str, dict]],
                scorers: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """The page of ``board`` (read from a release's results.json). ``plots``: paths relative to
    the release directory; ``releases``: (name, link relative to the page, meta) newest first;
    ``scorers``: registered name -> metadata (fields of :data:`SCORER_FIELDS`)."""
    return Page(board, plots, releases, scorers or {}).render()


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
    board = load_release(release_dir)
    plot_files = _plot_order(sorted(p.relative_to(release_dir).as_posix()
                                    for p in (release_dir / "plots").glob("*.png")))
    path = release_dir / INDEX
    path.write_text(render_page(board, plot_files, releases, read_scorers(release_dir)),
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
