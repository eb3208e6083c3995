"""The notes under a table, shared by the markdown and HTML views: the legend of the marks on
normalized scores outside [0, 1] and on scorers that did not learn a task in distribution, the
lines that say why a metric gets no verdict, the tasks the overall leaves out and what it rests
on."""
from __future__ import annotations

import math

import numpy as np

from ..method.board import DESCRIPTIVE_TRACKS, ran
from ..method.grids import DATA_GRIDS
from .text import ABOVE_CEILING, BELOW_FLOOR, NOT_LEARNED, missing


def legend(rows: list[dict]) -> list[str]:
    """The legend of the marks that ``rows`` carry: ▽ / △ for a normalized score outside [0, 1],
    ‡ for a scorer that did not clearly learn its task; nothing where they carry none."""
    z = [r["normalized"] for r in rows if not missing(r.get("normalized"))]
    outside = ([f"{BELOW_FLOOR} normalized score below 0 (worse than the floor: chance, the "
                "trivial predictor)"] if any(v < 0 for v in z) else []) + (
               [f"{ABOVE_CEILING} normalized score above 1"] if any(v > 1 for v in z) else [])
    text = (f"{'; '.join(outside)}; shown as they are, clipped to [0, 1] only inside the "
            "overall." if outside else "")
    if any(r.get("not_learned") for r in rows):
        text += (f" {NOT_LEARNED} the scorer did not clearly learn the task in distribution (its "
                 "in-distribution metric is not clearly above the floor by the rule the "
                 "baseline's informativeness uses).")
    return [text.strip()] if text else []


def metric_note(rows: list[dict]) -> str | None:
    """Why the rows of one (profile, task, metric) get no verdict, or which headline a stand-in
    replaces; None when there is nothing to say."""
    first = rows[0]
    where = f"{first['task']} / {first['metric']} ({first['profile']})"
    if first.get("informative") is False:
        return f"{where}: **uninformative**, no better/worse, tier or rank: " \
               f"{first.get('informative_reason') or ''}"
    metric_level = [r.get("degenerate") for r in rows]
    if metric_level and all(metric_level) and len(set(metric_level)) == 1:
        return f"{where}: **degenerate**, no better/worse, tier or rank: {metric_level[0]}"
    pairs = [r for r in rows if r.get("degenerate")]
    notes = []
    if first.get("stand_in_for"):
        notes.append(f"{where}: headline here; {first.get('informative_reason') or ''}")
    if pairs:
        notes.append(f"{where}: degenerate against the baseline for "
                     + "; ".join(r["degenerate"] for r in pairs))
    return " — ".join(notes) or None


def metric_notes(rows: list[dict]) -> list[str]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["profile"], r["task"], r["metric"]), []).append(r)
    return [note for group in groups.values() if (note := metric_note(group))]


def not_learned_notes(rows: list[dict]) -> list[str]:
    seen: dict[tuple, set] = {}
    for r in rows:
        if r.get("not_learned"):
            seen.setdefault((r["profile"], r["task"], r["not_learned"]), set()).add(r["scorer"])
    return [f"{task} ({profile}): {NOT_LEARNED} did not clearly learn it in distribution "
            f"({metric} not clearly above its floor): {', '.join(sorted(scorers))}"
            for (profile, task, metric), scorers in sorted(seen.items())]


# A task whose share of the headline's spread exceeds this gets a line saying why.
DOMINANT_SHARE = 0.5


def _dominant_task_line(profile: str, task_row: dict, rows: list[dict], board) -> str:
    """Why one task carries most of the headline's spread: its values spread across scorers
    more than the others' (each task's weight is 1/K; its reach is not its spread)."""
    values: dict[str, list[float]] = {r["task"]: [] for r in rows}
    for r in board.task_scores.to_dict(orient="records"):
        if r["profile"] == profile and r["task"] in values and not missing(r.get("poi")):
            values[r["task"]].append(r["poi"])
    spread = {t: float(np.std(v)) for t, v in values.items() if v}
    others = ", ".join(f"{t} {sd:.2f}" for t, sd in sorted(spread.items())
                       if t != task_row["task"])
    return (f"{task_row['task']} carries {task_row['share']:.0%} of the headline's spread "
            f"({profile}) although it weighs 1/{len(rows)}: its P(better) varies most across "
            f"scorers, and in step with the headline (sd across scorers "
            f"{spread.get(task_row['task'], math.nan):.2f}; {others})")


def rests_on_lines(board) -> list[str]:
    """Per profile: the overall's tasks with their metrics and share of the overall's spread."""
    frame = getattr(board, "overall_tasks", None)
    if frame is None or frame.empty:
        return []
    by_profile: dict[str, list[dict]] = {}
    for r in frame.to_dict(orient="records"):
        by_profile.setdefault(r["profile"], []).append(r)
    out = []
    for profile, rows in sorted(by_profile.items()):
        parts = [f"{r['task']} ({', '.join(r['metrics'] or [])}) "
                 + ("n/a" if missing(r["share"]) else f"{r['share']:.0%}")
                 + ("" if missing(r.get("score_share")) else
                    f" (normalized score: {r['score_share']:.0%})") for r in rows]
        out.append(f"The overall ({profile}) rests on: {'; '.join(parts)} of its headline's "
                   "spread across scorers (each task's share of its variance)")
        out += [_dominant_task_line(profile, r, rows, board) for r in rows
                if len(rows) > 1 and not missing(r["share"]) and r["share"] > DOMINANT_SHARE]
    return out


def track_notes(rows: list[dict]) -> list[str]:
    """The notes under a track's table, as plain text (no markdown emphasis)."""
    notes = metric_notes(rows) + not_learned_notes(rows)
    return [n.replace("**", "") for n in notes] + legend(rows)


def overall_notes(board) -> list[str]:
    """The overall's uninformative metrics and what it rests on, as plain text."""
    return [f"{line}; uninformative, so not in the overall"
            for line in board.meta.get("uninformative", [])] + rests_on_lines(board)


def outside_overall(board) -> list[str]:
    """One line per (profile, quality task) that the overall leaves out: run by some scorers."""
    in_overall = {(r["profile"], r["task"]) for r in board.task_scores.to_dict(orient="records")}
    run_by: dict[tuple[str, str], set] = {}
    informative_heads: set[tuple[str, str]] = set()
    for r in board.rows.to_dict(orient="records"):
        if r["track"] not in DESCRIPTIVE_TRACKS and ran(r):
            run_by.setdefault((r["profile"], r["task"]), set()).add(r["scorer"])
            if r["headline"] and r.get("informative") is not False:
                informative_heads.add((r["profile"], r["task"]))
    run_by = {k: v for k, v in run_by.items() if k in informative_heads}   # the rest: uninformative
    return [f"{task} ({profile}): run by {', '.join(sorted(scorers))} only, so shown in its "
            f"track and not in the overall" for (profile, task), scorers in sorted(run_by.items())
            if (profile, task) not in in_overall and any(
                p == profile for p, _ in in_overall)]


def data_grid_caption(g: dict) -> str:
    """The sentence above a data grid's table (leaderboard.method.grids.data_grids)."""
    return (f"**{g['task']} data** ({g['profile']}): `{g['grid']}`, {DATA_GRIDS[g['grid']]}. "
            f"Drawn per seed, so the same for every scorer: the mean over {g['n']} seeds, "
            f"identical in the records of the {g['scorers']} scorers that have {g['n']}.")
