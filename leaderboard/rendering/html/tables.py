"""Sortable tables: columns, cells, legends, the column of a results.json field, and the order
rows come in."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..columns import Field
from ..text import column_format, interval, joined, missing, pval, short_shas, sort_key
from .markup import Markup, concat, tag

# Numeric fields that are parts of a shown column or bookkeeping (never an extra column).
NOT_EXTRA = {
    "rows": {"task_version", "scorer_version", "std", "n_items", "n_cells", "n_ok", "n_failed",
             "n_skipped", "n_null", "p_vs_baseline", "n_paired", "ci_low", "ci_high",
             "rank_high", "ci_items_high", "n_na", "floor", "ceiling", "min_effect",
             "sd_paired", "detectable_vs_baseline"},
    "overall": {"ci_low", "ci_high", "poi_low", "poi_high", "rank_high", "tasks_failed",
                "tasks_skipped", "n_cells"},
    "claims": {"ci_low", "ci_high"},
}


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


def provenance_text(row: dict) -> str:
    return (f"date {row['date']} · harness {short_shas(row['git_sha'])} · "
            f"hardware {joined(row['hardware'])}")


def provenance_cell(row: dict, extra: list[str]) -> Markup:
    lines = [f"hardware: {joined(row['hardware'])}",
             f"git: {', '.join(row['git_sha'] or []) or 'unknown'}", *extra]
    summary = f"{row['date']} · {short_shas(row['git_sha'])}"
    return tag("td", tag("details", tag("summary", summary),
                         concat(tag("div", line) for line in lines)), class_="prov")


def row_order(rows: list[dict], key: str, higher: bool) -> str | None:
    """How ``rows`` are ordered as results.json gives them: "tier" (tier, then ``key`` best
    first), "value" (``key`` best first), or None (neither)."""
    def value(r):
        x = r.get(key)
        return math.inf if missing(x) else (-x if higher else x)

    def tier(r):
        return math.inf if missing(r.get("tier")) else r["tier"]

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
                 mark: Callable[[dict], Markup | None] = lambda d: None,
                 shade: Callable[[dict], str | None] = lambda d: None, **kwargs) -> Column:
    """The column of a numeric :class:`Field` over ``rows`` (``get`` picks the dict the field is
    read from; None gives an empty cell), with one number format for the whole column; ``mark``
    adds markup after a cell's value and ``shade`` its classes, both from that dict."""
    src = [d for d in map(get, rows) if d is not None]
    fmt = (column_format(src, field.key, *((field.lo, field.hi) if field.fmt == "ci" else ()))
           if field.decimals is None else lambda x: f"{x:.{field.decimals}f}")

    def text(d: dict) -> Markup | str:
        x = d.get(field.key)
        if field.fmt == "ci":
            if "n" in d and d.get("n") == 0:
                if (d.get("n_failed") or 0) + (d.get("n_null") or 0):
                    return "all failed"
                return tag("span", "n/a", title=d["na_reason"]) if d.get("na_reason") else "n/a"
            if missing(x):
                return "n/a"
            out = [tag("span", fmt(x), class_="v")]
            if not missing(d.get(field.lo)) and not missing(d.get(field.hi)):
                out.append(tag("span", f"[{fmt(d[field.lo])}, {fmt(d[field.hi])}]",
                               class_="ci"))
            if d.get("survivors_only"):
                out.append(tag("span", "†", class_="mark", title="over surviving seeds only"))
            return concat(out, " ")
        if field.fmt == "rank":
            return interval(d.get(field.lo), d.get(field.hi), True)
        if missing(x):
            return "n/a"
        if field.fmt == "p":
            return pval(x)
        if field.fmt == "int":
            return str(int(x))
        return fmt(float(x))

    def cell(r: dict) -> Markup:
        d = get(r)
        if d is None:
            return tag("td", "—", class_="num none", data_sort="")
        extra = mark(d)
        return tag("td", concat([text(d), extra], " ") if extra else text(d),
                   class_=" ".join(filter(None, ["num", shade(d)])),
                   data_sort=sort_key(d.get(field.key)))

    return Column(label or field.label, cell, True, title or field.title, **kwargs)

