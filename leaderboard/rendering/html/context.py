"""The data of one release's page and the pieces its tabs share: labels of results.json fields,
the scorer cell and column, the attributes of a row, a legend of fields, the problems' wording."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...method.board import Board
from ..columns import FIELDS, Field
from ..text import missing
from .markup import Markup, tag
from .tables import Column, legend, provenance_text


class PageData:
    """What every part of one release's page reads: its results.json (as a dict), plots, the
    other releases and the scorers' metadata, and the pieces the tabs share."""

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

    def scorer_info(self, label: str) -> Mapping[str, Any] | None:
        return self.scorers.get(self.scorer_name.get(label, label))

    def scorer_cell(self, label: str) -> Markup:
        info = self.scorer_info(label)
        title = None
        if info:
            title = " · ".join(str(x) for x in (info.get("family"), info.get("description"))
                               if x)
        return tag("td", tag("span", label, class_="name"), class_="scorer", title=title or None)

    def scorer_column(self, frame: str = "rows") -> Column:
        f = self.field(frame, "scorer")
        return Column(f.label, lambda r: self.scorer_cell(r["scorer"]), False, f.title, "scorer")

    def row_attrs(self, row: dict) -> dict:
        tier = row.get("tier")
        return {"data_scorer": row["scorer"], "title": provenance_text(row),
                "class_": "tier1" if not missing(tier) and tier == 1 else None}

    def field_legend(self, frame: str, keys: Iterable[str], extra: Iterable[tuple] = (),
                     intro: str | None = None) -> Markup:
        return legend([(self.field(frame, k).label, self.field(frame, k).title) for k in keys]
                      + list(extra), intro)

    def problem_summary(self) -> str:
        """The one wording of the release's problems, in the header and the Failures tab."""
        problems = list(self.data.get("problems", []))
        n_skip = sum(bool(p.get("skipped")) for p in problems)
        files = len({p.get("path") for p in problems})
        return (f"{len(problems)} problem{'s' * (len(problems) != 1)} in {files} record "
                f"file{'s' * (files != 1)} ({len(problems) - n_skip} partly used, {n_skip} "
                "skipped)")
