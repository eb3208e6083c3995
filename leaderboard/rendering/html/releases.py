"""The Releases tab: every release of the directory, linked."""
from __future__ import annotations

from ..text import joined, short_shas
from .context import PageData
from .markup import Markup, tag
from .tables import Column, legend, num_cell, table, text_cell


def releases_tab(page: PageData) -> Markup:
    """The Releases tab: every release beside this one, newest first, with a link to it."""
    rows = [{"name": name, "href": href, "meta": meta} for name, href, meta in page.releases]
    columns = [
        Column("release", lambda r: tag("td", tag("a", r["name"], href=r["href"]),
                                        class_="current" if r["name"] == page.meta["release"]
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
        Column("harness", text_cell(lambda r: short_shas(r["meta"].get("git_sha", []))),
               title="Harness git commits of its records."),
        Column("hardware", text_cell(lambda r: joined(r["meta"].get("hardware", []))),
               title="Hardware of its records."),
    ]
    return tag("section", tag("h2", "All releases"),
               legend([], "Newest first; the selector at the top switches between them and "
                          "keeps the tab and filter. Hover a header for its meaning.",
                      "Legend"),
               table(columns, rows), id="releases", class_="tab")
