"""Regressions between releases (the nightly's ``REGRESSIONS.md``): which metrics moved beyond
their seed noise.

Rule, for each row (profile, task, metric, scorer) of the current release, against the newest
earlier release that has the row with a value (so a row absent or empty for some nights is still
compared with its last known value, and the report names that release):

    Δ = mean_now - mean_before,    se = sqrt(std_before² / n_before + std_now² / n_now)

The row *moved* when |Δ| > max(z · se, rtol · max(|mean_before|, |mean_now|)) (defaults z = 3,
rtol = 1e-4; the relative floor keeps bit-level jitter of deterministic metrics, whose std is 0,
from counting). A move in the metric's worse direction is a **regression**, in its better
direction an **improvement**. Rows with fewer than two seeds on either side have no std: they are
*untested* unless their mean is unchanged. More failed cells (diverged, nan, oom, timeout, error,
null metric) for a (task, scorer) than the newest earlier release that has the pair is also a
regression. A row of the previous release that the current one lacks is *missing* and is an alert
(a hole is never silent); a row absent now and already absent from the previous release is listed
as *still missing* (it alerted the night it vanished); a row seen in no earlier release is *new*.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import pandas as pd

from ..method.board import Board
from ..rendering.markdown_layout import table
from ..rendering.text import arrow, markdown_text, num

Z_THRESHOLD = 3.0
RELATIVE_FLOOR = 1e-4
KEY = ("profile", "task", "metric", "scorer")


@dataclass
class Comparison:
    previous: str
    current: str
    z: float
    rtol: float
    rows: pd.DataFrame  # one per row present in both, with status
    failure_changes: list[dict] = field(default_factory=list)
    new: list[tuple] = field(default_factory=list)
    missing: list[tuple] = field(default_factory=list)
    still_missing: list[tuple] = field(default_factory=list)

    @property
    def regressions(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == "regression"]

    @property
    def improvements(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == "improvement"]

    @property
    def failure_regressions(self) -> list[dict]:
        return [f for f in self.failure_changes if f["now"] > f["before"]]

    @property
    def has_regression(self) -> bool:
        return len(self.regressions) > 0 or bool(self.failure_regressions)

    @property
    def has_alert(self) -> bool:
        """A regression, or a row that vanished since the previous release."""
        return self.has_regression or bool(self.missing)


def _missing(x) -> bool:
    return x is None or pd.isna(x)


def classify(before: dict, now: dict, z: float = Z_THRESHOLD, rtol: float = RELATIVE_FLOOR) -> dict:
    """The comparison of one row between two releases (see the module docstring)."""
    m0, m1 = before["mean"], now["mean"]
    out = {"before": m0, "now": m1, "delta": math.nan, "se": math.nan, "z": math.nan,
           "status": "untested"}
    if _missing(m0) or _missing(m1):
        return out
    delta = float(m1) - float(m0)
    out["delta"] = delta
    floor = rtol * max(abs(m0), abs(m1))
    testable = (before["n"] >= 2 and now["n"] >= 2
                and not _missing(before["std"]) and not _missing(now["std"]))
    if not testable:
        out["status"] = "unchanged" if abs(delta) <= floor else "untested"
        return out
    se = math.sqrt(before["std"] ** 2 / before["n"] + now["std"] ** 2 / now["n"])
    out["se"] = se
    out["z"] = abs(delta) / se if se > 0 else (math.inf if delta else 0.0)
    if abs(delta) <= max(z * se, floor):
        out["status"] = "within noise" if delta else "unchanged"
        return out
    better = delta > 0 if now["direction"] == "higher" else delta < 0
    out["status"] = "improvement" if better else "regression"
    return out


def _keyed(board: Board) -> dict[tuple, dict]:
    return {tuple(r[k] for k in KEY): r for r in board.rows.to_dict(orient="records")}


def compare(previous: Board | Sequence[Board], current: Board, z: float = Z_THRESHOLD,
            rtol: float = RELATIVE_FLOOR) -> Comparison:
    """``previous``: the earlier release, or the earlier releases oldest first (the last one is
    the previous release; older ones supply rows it lacks)."""
    history = [previous] if isinstance(previous, Board) else list(previous)
    if not history:
        raise ValueError("compare: give at least one earlier release")
    named = [(b.meta.get("release", "?"), _keyed(b)) for b in history]
    last_name, last = named[-1]
    now = _keyed(current)
    earlier = set().union(*(rows_ for _, rows_ in named))
    return Comparison(last_name, current.meta.get("release", "?"), z, rtol,
                      _compared_rows(named, now, z, rtol), _failure_changes(named, now),
                      new=sorted(set(now) - earlier), missing=sorted(set(last) - set(now)),
                      still_missing=sorted(earlier - set(last) - set(now)))


def _newest_with(named: list[tuple[str, dict]], key: tuple, has) -> tuple[str, dict] | None:
    """The newest earlier release (name, row) that has the row ``key`` and ``has(row)``."""
    for name, rows in reversed(named):
        if key in rows and has(rows[key]):
            return name, rows[key]
    return None


def _compared_rows(named: list[tuple[str, dict]], now: dict[tuple, dict], z: float,
                   rtol: float) -> pd.DataFrame:
    """Each current row against the newest earlier release that has it with a value."""
    last_name = named[-1][0]
    rows = []
    for key in sorted(now):
        found = (_newest_with(named, key, lambda r: not _missing(r["mean"]))
                 or _newest_with(named, key, lambda r: True))
        if found is None:
            continue
        name, b = found
        c = now[key]
        notes = [] if name == last_name else [f"vs {name} (absent or empty in {last_name})"]
        if b["task_version"] != c["task_version"]:
            notes.append(f"task v{b['task_version']} → v{c['task_version']}")
        if b["scorer_version"] != c["scorer_version"]:
            notes.append(f"scorer v{b['scorer_version']} → v{c['scorer_version']}")
        if b["n"] != c["n"]:
            notes.append(f"n {b['n']} → {c['n']}")
        rows.append({**dict(zip(KEY, key)), "direction": c["direction"], "headline": c["headline"],
                     "against": name, **classify(b, c, z, rtol), "note": "; ".join(notes)})
    columns = [*KEY, "direction", "headline", "against", "before", "now", "delta", "se", "z",
               "status", "note"]
    return pd.DataFrame(rows, columns=columns)


def _failure_changes(named: list[tuple[str, dict]], now: dict[tuple, dict]) -> list[dict]:
    """Per (profile, task, scorer): failed cells now against the newest earlier release that has
    the pair, where the count changed."""
    failures = []
    seen = set()
    for key in sorted(now):
        cell = (key[0], key[1], key[3])
        if cell in seen:
            continue
        seen.add(cell)
        found = _newest_with(named, key, lambda r: True)
        if found is None:
            continue
        name, before_row = found
        b = before_row["n_failed"] + before_row["n_null"]
        c = now[key]["n_failed"] + now[key]["n_null"]
        if b != c:
            failures.append({"profile": key[0], "task": key[1], "scorer": key[3], "before": int(b),
                             "now": int(c), "against": name,
                             "failures_before": before_row["failures"],
                             "failures_now": now[key]["failures"]})
    return failures


def _rows_table(frame: pd.DataFrame) -> str:
    body = [[markdown_text(r["task"]), r["profile"], f"{markdown_text(r['metric'])} "
             f"{arrow(r['direction'])}", markdown_text(r["scorer"]),
             num(r["before"]), num(r["now"]), f"{r['delta']:+.4g}", num(r["se"]),
             num(r["z"]), markdown_text(r["note"])] for r in frame.to_dict(orient="records")]
    return table(body, ["task", "profile", "metric", "scorer", "before", "now", "Δ", "se", "|z|",
                        "note"])


def report(comparison: Comparison) -> str:
    """The regression report as markdown."""
    c = comparison
    status = c.rows["status"].value_counts().to_dict() if len(c.rows) else {}
    verdict = ("REGRESSION" if c.has_regression else "ROWS MISSING" if c.missing
               else "No regression")
    lines = [f"# Regression report: {c.current} vs {c.previous}", "",
             f"**{verdict}**: "
             f"{len(c.regressions)} metric(s) worse beyond seed noise, "
             f"{len(c.failure_regressions)} (task, scorer) with more failed cells, "
             f"{len(c.improvements)} improvement(s); "
             f"{status.get('within noise', 0)} within noise, {status.get('unchanged', 0)} "
             f"unchanged, {status.get('untested', 0)} untested (fewer than two seeds), "
             f"{len(c.new)} new, {len(c.missing)} missing (alert) and {len(c.still_missing)} "
             f"still missing row(s).", "",
             f"Rule: Δ = mean now - mean before, se = sqrt(std_before²/n_before + std_now²/n_now); "
             f"a row moved when |Δ| > max({c.z:g}·se, {c.rtol:g}·max(|before|, |now|)). Worse "
             f"in the metric's declared direction = regression. More failed cells for a (task, "
             f"scorer) = regression. Each row is compared with the newest earlier release that "
             f"has it; a row of {c.previous} that is gone now is an alert.", ""]
    lines += ["## Rows missing (alert)", ""]
    lines += ([f"- missing: {k[1]} [{k[0]}] {k[2]} {k[3]}" for k in c.missing] if c.missing
              else ["None."])
    lines += ["", "## Regressions", "", _rows_table(c.regressions) if len(c.regressions) else "None.",
              ""]
    lines += ["## More failed cells", ""]
    if c.failure_regressions:
        lines.append(table([[markdown_text(f["task"]), f["profile"], markdown_text(f["scorer"]),
                             str(f["before"]), str(f["now"]), markdown_text(f["failures_now"])]
                            for f in c.failure_regressions],
                           ["task", "profile", "scorer", "failed before", "failed now", "now"]))
    else:
        lines.append("None.")
    lines += ["", "## Improvements", "",
              _rows_table(c.improvements) if len(c.improvements) else "None.", ""]
    if c.new or c.still_missing:
        lines += ["## Rows added or gone earlier", ""]
        lines += [f"- new: {k[1]} [{k[0]}] {k[2]} {k[3]}" for k in c.new]
        lines += [f"- still missing: {k[1]} [{k[0]}] {k[2]} {k[3]}" for k in c.still_missing]
    return "\n".join(lines).rstrip() + "\n"


def first_report(current: str) -> str:
    return (f"# Regression report: {current}\n\nNo earlier nightly release to compare with; "
            "this release is the baseline of the next one.\n")
