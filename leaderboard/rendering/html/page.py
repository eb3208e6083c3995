"""The page: the header, the navigation and one tab per section, in the template of
``leaderboard/rendering/html/static/`` with its stylesheet and script inlined."""
from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from string import Template
from typing import Any

from ...loading.schema import TRACKS
from ..palette import tier_css
from ..summary import sentences
from ..text import joined, short_shas
from .claims import claims_tab
from .context import PageData
from .failures import failures_tab
from .markup import Markup, concat, esc, tag, void
from .overall import overall_tab
from .plots import plots_tab
from .releases import releases_tab
from .scorers import scorers_tab
from .tracks import track_tab

TAB_TITLES = {"icl": "ICL", "decoder": "Decoder", "encoder": "Encoder", "probe": "Probes",
              "cost": "Cost"}


def render(page: PageData) -> str:
    """The whole page: the header, one tab per section and the navigation between them."""
    sections = ([("overall", "Overall", overall_tab(page))]
                + [(f"track-{t}", TAB_TITLES[t], track_tab(page, t)) for t in TRACKS]
                + ([("claims", "Claims", claims_tab(page))] if "claims" in page.data else [])
                + [("failures", "Failures", failures_tab(page)),
                   ("plots", "Plots", plots_tab(page)),
                   ("scorers", "Scorers", scorers_tab(page)),
                   ("releases", "Releases", releases_tab(page))])
    nav = concat((tag("a", title, href=f"#{sid}") for sid, title, _ in sections), "\n")
    main = concat((body for _, _, body in sections), "\n")
    template = Template(_static("page.html"))
    return template.substitute(
        title=esc(f"scorebench leaderboard: {page.meta['release']}"),
        style=_static("leaderboard.css") + tier_css(), script=_static("leaderboard.js"),
        header=header(page), nav=nav + "\n", main=main + "\n",
        footer=esc("Rendered by scorebench from results.json.gz, the same data as README.md."))


def header(page: PageData) -> Markup:
    """The title, the release's answer in sentences (the front page's), the release selector,
    the scorer filter, and the release's provenance and files folded below them."""
    m = page.meta
    options = concat(tag("option", name, value=href, selected=name == m["release"])
                     for name, href, _ in page.releases)
    controls = tag("div", tag("label", "Release",
                              tag("select", options, id="release-select",
                                  autocomplete="off")),
                   tag("label", "Filter scorers",
                       void("input", id="scorer-filter", type="search",
                            placeholder="scorer name", autocomplete="off")),
                   tag("span", "", id="filter-count"), class_="controls")
    lines = [
        (f"Records: {m['n_used']} used of {m['n_files']} files; {m['n_superseded']} "
         f"superseded; {page.problem_summary()}, listed under Failures; profiles: "
         f"{', '.join(m['profiles']) or 'none'}"),
        f"Dates: {m['date_first']} to {m['date_last']}",
        (f"Harness (git): {short_shas(m['git_sha'])}; scorebench "
         f"{', '.join(m['harness_version'])}"),
        f"Hardware: {joined(m['hardware'])}",
        f"Baseline for paired tests: {m['baseline']}; α = {m['alpha']}",
    ]
    files = concat((tag("a", name, href=name) for name in
                    ("README.md", "results.json.gz", "results.csv", "overall.csv")), ", ")
    answer = tag("ul", concat(tag("li", line) for line in sentences(page.board)),
                 class_="summary")
    about = tag("details", tag("summary", f"Records, dates, harness, hardware, files: "
                                          f"{m['n_used']} records, {m['date_first']} to "
                                          f"{m['date_last']}, baseline {m['baseline']}"),
                tag("ul", concat(tag("li", line) for line in lines), class_="meta"),
                tag("p", "Files: ", files, " (README.md describes the method)."),
                class_="about")
    return concat([tag("h1", f"scorebench leaderboard: {m['release']}"), answer, controls,
                   about, "\n"])


def _static(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def render_page(data: Mapping[str, Any], plots: list[str],
                releases: list[tuple[str, str, dict]],
                scorers: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """The page of a release's results.json (``data``, as parsed). ``plots``: paths relative to
    the release directory; ``releases``: (name, link relative to the page, meta) newest first;
    ``scorers``: registered name -> metadata (fields of :data:`SCORER_FIELDS`)."""
    return render(PageData(data, plots, releases, scorers or {}))
