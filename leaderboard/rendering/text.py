"""How one value is written, the same in the markdown release and on the page: numbers, p-values,
intervals, failures and provenance, the texts of a row's cells, the marks on a scorer and on a
normalized score outside [0, 1], the numbers of a column (one format per column, so decimals line
up, and the raw value each numeric cell sorts by), a record's strings escaped for markdown, and
the mark of a note under a table."""
from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

TRACK_TITLES = {"icl": "In-context learning (ICL)", "decoder": "Decoder LM",
                "encoder": "Encoder LM", "probe": "Probes", "cost": "Cost"}

BELOW_FLOOR = "▽"
ABOVE_CEILING = "△"
NOT_LEARNED = "‡"
# A row's verdict against the baseline as one mark (the front page's task columns, the page's
# headline matrices): better, worse, uninformative; anything else is no verdict.
VERDICT_MARKS = {"better": "▲", "worse": "▼", "uninformative": "–"}
NO_VERDICT = "·"
VERDICT_WORDS = {
    VERDICT_MARKS["better"]: "significantly better than the baseline by at least the minimum "
                             "effect",
    VERDICT_MARKS["worse"]: "significantly worse than the baseline by at least the minimum effect",
    VERDICT_MARKS["uninformative"]: "uninformative at this profile",
    NO_VERDICT: "no verdict (not significant, a tie or within resolution)"}


def verdict_legend(baseline: str) -> str:
    """What the marks against the baseline mean, in one sentence (the front page's table and the
    README's matrices)."""
    return (f"{VERDICT_MARKS['better']} / {VERDICT_MARKS['worse']} significantly better / worse "
            f"than {baseline} by at least the metric's minimum effect, {NO_VERDICT} no verdict "
            f"(not significant, a tie or within resolution), {VERDICT_MARKS['uninformative']} "
            "uninformative at this profile")


def missing(x: Any) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def num(x: Any) -> str:
    """4 significant digits; n/a for a missing value."""
    return "n/a" if missing(x) else f"{float(x):.4g}"


def steps(x: float) -> str:
    """A step count (or a mean of them) to the nearest step, with thousands separators."""
    return f"{x:,.0f}"


def pval(p: Any) -> str:
    if missing(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


# A record's strings (scorer names and labels, kwargs, messages, reasons) come from user code:
# written into markdown, ``&``, ``<`` and ``>`` become entities (no raw HTML reaches a renderer
# that passes HTML through) and the characters that would end a table cell, open a code span or
# a link are backslash-escaped.
MARKDOWN_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
MARKDOWN_ESCAPED = "\\|`[]"


def markdown_text(text: Any) -> str:
    """A string from a record as markdown text, safe in a table cell and in prose: one line,
    ``& < >`` as entities, ``\\ | ` [ ]`` backslash-escaped. Every markdown view writes
    record-provided strings through this."""
    s = " ".join(("" if missing(text) else str(text)).split())
    return "".join(MARKDOWN_ENTITIES.get(c) or ("\\" + c if c in MARKDOWN_ESCAPED else c)
                   for c in s)


SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def note_mark(number: int) -> str:
    """The mark of a numbered note under a table: the number in superscript digits."""
    return str(number).translate(SUPERSCRIPT)


def short_shas(shas: Iterable[str]) -> str:
    out = []
    for sha in shas or []:
        dirty = sha.endswith("-dirty")
        out.append(sha.removesuffix("-dirty")[:7] + ("+dirty" if dirty else ""))
    return ", ".join(out) or "unknown"


def joined(values: Iterable[str]) -> str:
    return "; ".join(values or []) or "unknown"


def failures_text(failures: dict | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in (failures or {}).items()) or "0"


def interval(lo: Any, hi: Any, integer: bool = False) -> str:
    if missing(lo) or missing(hi):
        return "n/a"
    if integer:
        return f"{int(lo)}" if lo == hi else f"{int(lo)}-{int(hi)}"
    return f"[{num(lo)}, {num(hi)}]"


def value_text(d: dict, key: str, lo: str, hi: str, fmt: Callable[[float], str] = num) -> str:
    """``d[key]`` and its interval ``[d[lo], d[hi]]`` in one format (``fmt``, the column's);
    n/a when missing."""
    if missing(d.get(key)):
        return "n/a"
    text = fmt(d[key])
    if not missing(d.get(lo)) and not missing(d.get(hi)):
        text += f" [{fmt(d[lo])}, {fmt(d[hi])}]"
    return text


def mean_text(row: dict, fmt: Callable[[float], str] = num, na: str = "") -> str:
    """A row's mean with its interval, † over surviving seeds only; "all failed", or n/a
    followed by ``na`` (a note's mark), without a value."""
    if not row["n"]:
        return "all failed" if row["n_failed"] + row["n_null"] else "n/a" + na
    return (value_text(row, "mean", "ci_low", "ci_high", fmt)
            + (" †" if row["survivors_only"] else ""))


def arrow(direction: str | None) -> str:
    """Which way a metric is better: ↓ lower, ↑ higher."""
    return "↓" if direction == "lower" else "↑"


def verdict_mark(row: dict) -> str:
    """A row's mark against the baseline: ▲ better, ▼ worse, – uninformative, · no verdict."""
    return VERDICT_MARKS.get(row.get("vs_baseline"), NO_VERDICT)


def tier_text(row: dict) -> str:
    return "n/a" if missing(row["tier"]) else str(row["tier"])


def tasks_text(row: dict, skipped: dict | None = None,
               note: Callable[[str], str] | None = None) -> str:
    """The tasks an overall row is over; a task the scorer cannot run is named, outside it, and
    so is a headline metric it cannot report, which its task score leaves out. With ``note`` (a
    text -> its note's mark), the names go into a note and the cell keeps its mark."""
    def named(head: str, names: list[str], what: str) -> str:
        if not names:
            return head
        if note:
            return head + note(f"n/a: {', '.join(names)} ({what})")
        return f"{head}: {', '.join(names)}"

    text = str(row["n_tasks"])
    if row["tasks_failed"]:
        text += f" ({row['tasks_failed']} all failed)"
    if row["tasks_skipped"]:
        names = (skipped or {}).get((row["profile"], row["scorer"])) or []
        text += " (" + named(f"+{row['tasks_skipped']} n/a", names,
                             "every cell skipped: the scorer cannot run the task") + ")"
    na = [f"{task}/{metric}" for task, metrics in sorted((row.get("metrics_na") or {}).items())
          for metric in metrics]
    if na:
        text += " (" + named("n/a", na, "a headline metric the scorer cannot report, left out "
                                        "of its task score") + ")"
    return text


def failed_text(row: dict) -> str:
    text = f"{row['n_failed']}/{row['n_cells']}"
    if row["failures"]:
        text += f" ({failures_text(row['failures'])})"
    return text


def delta_text(row: dict, baseline: str, fmt: Callable[[float], str] = num) -> str:
    """A row's difference to the baseline, signed, in ``fmt`` (the column's), with its word."""
    if row["scorer"] == baseline:
        return "baseline"
    if missing(row["delta_vs_baseline"]):
        return "n/a"
    label = row["vs_baseline"]
    return signed(fmt(row["delta_vs_baseline"])) + (f" ({label})" if label else "")


def signed(text: str) -> str:
    """A formatted difference with its sign: "+" before one that has none."""
    return text if text.startswith("-") else "+" + text


def outside_mark(z: Any) -> str:
    if missing(z):
        return ""
    return BELOW_FLOOR if z < 0 else ABOVE_CEILING if z > 1 else ""


def normalized_text(row: dict) -> str:
    """A row's mean normalized score, unclipped, with its mark ('n/a' without anchors)."""
    z = row.get("normalized")
    if missing(z):
        return "n/a"
    mark = outside_mark(z)
    return f"{z:.3f}" + (f" {mark}" if mark else "")


def not_learned_mark(row: dict) -> str:
    """' ‡' after a row's value or scorer where the scorer did not clearly learn the task."""
    return f" {NOT_LEARNED}" if row.get("not_learned") else ""


def scorer_text(row: dict) -> str:
    return str(row["scorer"]) + not_learned_mark(row)


def rank_without_text(row: dict) -> str:
    ranks = row.get("rank_without") or {}
    return ", ".join(f"{task} {rank}" for task, rank in sorted(ranks.items())) or "n/a"


def poi_tasks_text(row: dict) -> str:
    values = row.get("poi_tasks") or {}
    return ", ".join(f"{task} {p:.2f}" for task, p in sorted(values.items())
                     if p is not None) or "n/a"


def outside_text(row: dict) -> str:
    tasks = row.get("outside_anchors") or {}
    return ", ".join(f"{task} {z:.3g} {outside_mark(z)}" for task, z in sorted(tasks.items())
                     if z is not None) or "none"


# The verdicts that a claim's reason explains, and how each reads.
CLAIM_VERDICT_WORDS = {"not run": "not run at this profile",
                       "uninformative": "uninformative at this profile",
                       "premise absent": "premise absent at this profile",
                       "degenerate": "degenerate", "not supported": "not supported"}


def claim_verdict_text(row: dict, note: Callable[[str], str]) -> str:
    """A claim's verdict, followed where it has a reason by ``note(reason)`` (a note's mark)."""
    verdict, reason = row["verdict"], row.get("reason") or ""
    if verdict not in CLAIM_VERDICT_WORDS:
        return verdict
    return CLAIM_VERDICT_WORDS[verdict] + (note(reason) if reason else "")


def sort_key(x: Any) -> str:
    """The ``data-sort`` value of a numeric cell: the number as Python prints it, "" if missing."""
    return "" if missing(x) else repr(float(x))


def column_format(rows: Iterable[dict], key: str, lo: str | None = None,
                  hi: str | None = None) -> Callable[[float], str]:
    """The one number format of the column of ``key`` over ``rows``; with ``lo`` and ``hi``, the
    column shows an interval and its widths count (:func:`number_format`)."""
    rows = list(rows)
    widths = ([None if missing(r.get(lo)) or missing(r.get(hi)) else r[hi] - r[lo] for r in rows]
              if lo and hi else [])
    return number_format([r.get(key) for r in rows], widths)


def number_format(values: Iterable[Any], widths: Iterable[Any] = ()) -> Callable[[float], str]:
    """One format for every number of a column, so decimals line up: three significant digits
    of the median magnitude and two of the narrowest interval (``widths``), at most 6 decimals;
    scientific with 2 decimals when the largest magnitude is below 1e-3 or from 1e6 on."""
    mags = [abs(float(v)) for v in values if not missing(v) and float(v) != 0]
    if not mags:
        return lambda x: f"{x:.2f}"
    top = max(mags)
    if top < 1e-3 or top >= 1e6:
        return lambda x: f"{x:.2e}"
    places = 2 - math.floor(math.log10(statistics.median(mags)))
    spans = [float(w) for w in widths if not missing(w) and float(w) > 0]
    if spans:
        places = max(places, 1 - math.floor(math.log10(min(spans))))
    places = min(max(places, 0), 6)
    return lambda x: f"{x:.{places}f}"


def decimals(text: str) -> set[int]:
    """The decimal places of every number in ``text`` (digits after the point, before any
    exponent)."""
    return {len(m) for m in re.findall(r"\d\.(\d+)", text)}

