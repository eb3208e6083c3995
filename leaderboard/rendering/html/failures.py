"""The Failures tab: the cells that did not finish ok, the problems found in records and the
records superseded by newer versions."""
from __future__ import annotations

from ..text import missing
from .context import PageData
from .markup import Markup, concat, tag
from .tables import Column, legend, num_cell, table, text_cell


def failures_tab(page: PageData) -> Markup:
    """The Failures tab: failed and skipped cells, problems in records, superseded records."""
    failed = list(page.data.get("failed_cells", []))
    problems = list(page.data.get("problems", []))
    superseded = list(page.data.get("superseded", []))
    parts = [tag("h2", "Failed and skipped cells"), legend(
        [("failed cells", f"{len(failed)}: cells that did not finish ok or lack a metric; "
                          "they count as failures in the tracks."),
         ("problems", f"{page.problem_summary()}; partly used: the named values are left "
                     "out, the rest is used; skipped: not used at all."),
         ("superseded records", f"{len(superseded)}: older task or scorer versions, not "
                                "used.")])]
    parts.append(table(_failed_columns(page), failed, None,
                       lambda r: {"data_scorer": r["scorer"],
                                  "title": f"{r['path']} · git {r['git_sha']} · "
                                           f"{r['hardware']}"})
                 if failed else tag("p", "None: every cell finished ok.", class_="empty"))
    parts.append(tag("h2", f"Problems in records ({len(problems)})"))
    parts.append(_problems_table(problems))
    parts.append(tag("h2", f"Superseded records ({len(superseded)})"))
    parts.append(_superseded_table(superseded))
    return tag("section", concat(parts), id="failures", class_="tab")


def _failed_columns(page: PageData) -> list[Column]:
    return [Column("profile", text_cell(lambda r: r["profile"]), title="Suite profile."),
            Column("task", text_cell(lambda r: r["task"]), title="Task of the cell."),
            page.scorer_column(),
            Column("seed", num_cell(lambda r: str(r["seed"]), lambda r: r["seed"]), True,
                   "Seed of the cell."),
            Column("status", text_cell(lambda r: r["status"], "failed"),
                   title="How the cell ended (diverged, nan, oom, timeout, error, "
                         "skipped) or null for a missing metric."),
            Column("step", num_cell(lambda r: "" if missing(r["step"]) else str(r["step"]),
                                    lambda r: r["step"]), True,
                   "Training step where it stopped."),
            Column("message", text_cell(lambda r: r["message"], "message"),
                   title="The record's own message."),
            Column("date", text_cell(lambda r: r["date"]), title="Date of the record.")]


def _problems_table(problems: list[dict]) -> Markup:
    if not problems:
        return tag("p", "None.", class_="empty")
    return table([Column("file", text_cell(lambda r: r["path"]),
                         title="Record file, relative to the results directory."),
                  Column("effect", text_cell(
                      lambda r: "skipped" if r["skipped"] else "partly used"),
                      title="skipped: not used; partly used: the values named in "
                            "the reason are left out, the rest is used."),
                  Column("reason", text_cell(lambda r: r["reason"], "message"),
                         title="What is wrong and what was left out.")],
                 problems)


SUPERSEDED_HEADERS = (
    ("task", "task", "Task."),
    ("task v", "task_version", "Task version of the records."),
    ("scorer", "scorer", "Scorer."),
    ("scorer v", "scorer_version", "Scorer version."),
    ("profile", "profile", "Suite profile."),
    ("cells", "n_cells", "Cells in the superseded records."),
    ("why", "reason", "Which newer version replaces them."),
)


def _superseded_table(superseded: list[dict]) -> Markup:
    if not superseded:
        return tag("p", "None.", class_="empty")
    return table([Column(h, text_cell(lambda r, k=k: r[k]), h in ("task v", "scorer v", "cells"),
                         t) for h, k, t in SUPERSEDED_HEADERS], superseded)
