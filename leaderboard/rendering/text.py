"""How one value is written, the same in the markdown release and on the page: numbers, p-values,
intervals, failures and provenance, the texts of a row's cells, the marks on a scorer and on a
normalized score outside [0, 1], and the numbers of a page column (one format per column, so
decimals line up, and the raw value each numeric cell sorts by)."""
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


def missing(x: Any) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def num(x: Any) -> str:
    """4 significant digits; n/a for a missing value."""
    return "n/a" if missing(x) else f"{float(x):.4g}"


def pval(p: Any) -> str:
    if missing(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def cell_text(text: Any) -> str:
    """Text safe inside a markdown table cell: one line, pipes escaped."""
    s = "" if missing(text) else str(text)
    return " ".join(s.split()).replace("|", "\\|")


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



def mean_text(row: dict) -> str:
    if not row["n"]:
        if row["n_failed"] + row["n_null"]:
            return "all failed"
        return f"n/a: {row['na_reason']}" if row.get("na_reason") else "n/a"
    text = num(row["mean"])
    if not missing(row["ci_low"]):
        text += " " + interval(row["ci_low"], row["ci_high"])
    return text + (" †" if row["survivors_only"] else "")


def verdict_mark(row: dict) -> str:
    """A row's mark against the baseline: ▲ better, ▼ worse, – uninformative, · no verdict."""
    return VERDICT_MARKS.get(row.get("vs_baseline"), NO_VERDICT)


def tier_text(row: dict) -> str:
    return "n/a" if missing(row["tier"]) else str(row["tier"])


def poi_text(row: dict) -> str:
    """An overall row's headline, the probability of improvement, and its interval."""
    text = num(row["poi"])
    if not missing(row["poi_low"]):
        text += " " + interval(row["poi_low"], row["poi_high"])
    return text


def score_text(row: dict) -> str:
    """An overall row's normalized score and its CI."""
    text = num(row["score"])
    if not missing(row["ci_low"]):
        text += " " + interval(row["ci_low"], row["ci_high"])
    return text


def tasks_text(row: dict, skipped: dict | None = None) -> str:
    """The tasks an overall row is over; a task the scorer cannot run is named, outside it, and
    so is a headline metric it cannot report, which its task score leaves out."""
    text = str(row["n_tasks"])
    if row["tasks_failed"]:
        text += f" ({row['tasks_failed']} all failed)"
    if row["tasks_skipped"]:
        names = (skipped or {}).get((row["profile"], row["scorer"]))
        text += f" (+{row['tasks_skipped']} n/a" + (f": {', '.join(names)})" if names else ")")
    na = [f"{task}/{metric}" for task, metrics in sorted((row.get("metrics_na") or {}).items())
          for metric in metrics]
    if na:
        text += f" (n/a: {', '.join(na)})"
    return text


def failed_text(row: dict) -> str:
    text = f"{row['n_failed']}/{row['n_cells']}"
    if row["failures"]:
        text += f" ({failures_text(row['failures'])})"
    return text


def delta_text(row: dict, baseline: str) -> str:
    if row["scorer"] == baseline:
        return "baseline"
    if missing(row["delta_vs_baseline"]):
        return "n/a"
    label = row["vs_baseline"]
    return f"{row['delta_vs_baseline']:+.4g}" + (f" ({label})" if label else "")


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


def scorer_text(row: dict) -> str:
    return str(row["scorer"]) + (f" {NOT_LEARNED}" if row.get("not_learned") else "")


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


def claim_verdict_text(row: dict) -> str:
    verdict, reason = row["verdict"], row.get("reason") or ""
    if verdict == "not run":
        return "not run at this profile" + (f" ({reason})" if reason else "")
    if verdict == "uninformative":
        return f"uninformative at this profile ({reason})"
    if verdict == "premise absent":
        return f"premise absent at this profile ({reason})"
    if verdict in ("degenerate", "not supported") and reason:
        return f"{verdict} ({reason})"
    return verdict



def sort_key(x: Any) -> str:
    """The ``data-sort`` value of a numeric cell: the number as Python prints it, "" if missing."""
    return "" if missing(x) else repr(float(x))


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

