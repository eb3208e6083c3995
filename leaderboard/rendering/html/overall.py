"""The Overall tab: per profile, every scorer's headline (the probability of improvement over the
baseline) and normalized score with their intervals, tier, rank interval, tasks and failures."""
from __future__ import annotations

from ..columns import FIELDS
from ..notes import outside_overall, overall_notes
from ..palette import tier_class
from ..text import failed_text, outside_text, poi_tasks_text, rank_without_text, tasks_text
from .context import PageData
from .markup import Markup, concat, tag
from .tables import (Column, extra_fields, field_column, num_cell, order_text, provenance_cell,
                     row_order, table, text_cell)


def overall_columns(page: PageData, rows: list[dict], order: str | None = None) -> list[Column]:
    f = lambda k: page.field("overall", k)  # noqa: E731
    failed = f("n_failed")
    prov = f("provenance")
    return [
        page.scorer_column("overall"),
        field_column(f("poi"), rows, sort="descending" if order == "value" else None),
        field_column(f("score"), rows),
        field_column(f("tier"), rows, sort="ascending" if order == "tier" else None,
                     shade=lambda d: tier_class(d.get("tier"))),
        field_column(f("rank_low"), rows),
        *(Column(f(key).label, text_cell(text), False, f(key).title) for key, text in (
            ("poi_tasks", poi_tasks_text), ("rank_without", rank_without_text),
            ("outside_anchors", outside_text))),
        Column(f("n_tasks").label, num_cell(tasks_text, lambda r: r["n_tasks"]), True,
               f("n_tasks").title),
        field_column(f("tier1_tasks"), rows),
        *(field_column(x, rows) for x in extra_fields(rows, FIELDS["overall"], "overall")),
        Column(failed.label, num_cell(failed_text, lambda r: r["n_failed"],
                                      lambda r: "failed" if r["n_failed"] else None), True,
               failed.title),
        Column(prov.label, lambda r: provenance_cell(r, []), False, prov.title),
    ]


def overall_tab(page: PageData) -> Markup:
    """The Overall tab: one table per profile, scorers as rows."""
    rows = page.overall_rows
    keys = [k for k in FIELDS["overall"] if k not in ("scorer", "provenance")]
    profiles = sorted({r["profile"] for r in rows})
    orders = {p: row_order([r for r in rows if r["profile"] == p], "poi", True)
              for p in profiles}
    intro = "One row per scorer and profile. "
    if "tier" in orders.values():
        intro += ("Rows are ordered by tier (tier 1 first), then by the headline within a tier. ")
    parts = [tag("h2", "Overall")]
    if not rows:
        parts.append(tag("p", "No quality-track records in this release.", class_="empty"))
    for profile in profiles:
        prows = [r for r in rows if r["profile"] == profile]
        parts.append(table(overall_columns(page, prows, orders[profile]), prows,
                           f"profile {profile}: {order_text(orders[profile], 'the headline')}",
                           page.row_attrs))
    outside = outside_overall(page.board) + overall_notes(page.board)
    if outside:
        parts.append(tag("ul", concat(tag("li", line) for line in outside), class_="meta"))
    # The legend follows the tables, so that the first screen holds the answer.
    parts.append(page.field_legend(
        "overall", keys, [("highlighted row", "Tier 1."),
                          ("shaded tier", "The darker, the better the tier (tier 1 darkest).")],
        intro + "Click a header to sort; hover a header for its meaning."))
    return tag("section", concat(parts), id="overall", class_="tab")
