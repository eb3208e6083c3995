"""The Claims tab: each claim of a paper judged on the release's records."""
from __future__ import annotations

from ..columns import CLAIM_FIELDS
from .context import PageData
from .markup import Markup, concat, slug, tag
from .tables import Column, extra_fields, field_column, legend, table, text_cell

VERDICTS = ("supported", "not supported", "contradicted", "uninformative", "degenerate", "not run")


def claims_tab(page: PageData) -> Markup:
    """The Claims tab: one row per judged claim, scorer and profile."""
    claims = list(page.data.get("claims") or [])
    counts = {v: sum(c.get("verdict") == v for c in claims) for v in VERDICTS}
    parts = [tag("h2", "Claims"), legend(
        [(f.label, f.title) for f in CLAIM_FIELDS.values()],
        "Each row tests one claim of a paper on this release's records, with the same "
        "statistics as the tracks. Verdicts: " + ", ".join(
            f"{n} {v}" for v, n in counts.items()) + ".")]
    parts.append(table(_columns(claims), claims, "Claims in results.json order",
                       lambda r: {"data_scorer": r.get("scorer") or ""})
                 if claims else tag("p", "No claims were evaluated for this release.",
                                    class_="empty"))
    return tag("section", concat(parts), id="claims", class_="tab")


def _columns(claims: list[dict]) -> list[Column]:
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
    return columns
