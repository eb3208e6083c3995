"""The answer of a release in a few sentences and one compact table: the front page
(LEADERBOARD.md) and ``scorebench summary``.

The sentences say which scorers share the top tier of the overall's headline, where the baseline
stands, what the headline rests on, per task its leader and whether that leader beats the
baseline, and per task trained to convergence how many scorers reach its target on every seed,
whose seeds split, which never reach it within the cap, and how fast the baseline and the fastest
reach it. The table has one row per scorer: its headline rank interval, the headline with its
interval, and per task of the board one mark against the baseline on the task's first headline
metric: ▲ better, ▼ worse, · no verdict (n.s., tie or within resolution), – uninformative at the
profile, n/a the scorer cannot run it, not run where it has no record of the task yet.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..method.board import DESCRIPTIVE_TRACKS
from ..method.convergence import unconverged
from .text import (NOT_LEARNED, column_format, interval, markdown_text, mean_text, missing,
                   not_learned_mark, steps, verdict_legend, verdict_mark)


def _records(frame) -> list[dict]:
    return frame.to_dict(orient="records")


def _num(x: Any, digits: int = 2) -> str:
    return "n/a" if missing(x) else f"{x:.{digits}f}"


def task_headlines(board) -> dict[tuple[str, str], str]:
    """(profile, task) -> the metric the front page shows for the task: the first headline
    metric of the overall, else the task's first headline metric."""
    out: dict[tuple[str, str], str] = {}
    for t in _records(board.overall_tasks):
        if t["metrics"]:
            out[(t["profile"], t["task"])] = t["metrics"][0]
    for r in _records(board.rows):
        key = (r["profile"], r["task"])
        if r["headline"] and r["track"] not in DESCRIPTIVE_TRACKS and key not in out:
            out[key] = r["metric"]
    return out


def sentences(board) -> list[str]:
    """The release's answer, per profile, in plain sentences."""
    baseline = board.meta.get("baseline", "softmax")
    overall = _records(board.overall)
    heads = task_headlines(board)
    rows = {(r["profile"], r["task"], r["metric"], r["scorer"]): r for r in _records(board.rows)}
    out = []
    for profile in sorted({r["profile"] for r in overall}):
        prows = [r for r in overall if r["profile"] == profile and not missing(r["tier"])]
        if not prows:
            continue
        top = [r["scorer"] for r in prows if r["tier"] == 1]
        tiers = max(r["tier"] for r in prows)
        headline = (f"the probability of beating {baseline}, averaged over tasks"
                    if any(not missing(r.get("poi")) for r in prows)
                    else "the normalized score")
        out.append(f"At the {profile} profile, " + (
            f"{top[0]} alone of {len(prows)} scorers is in the top tier" if len(top) == 1 else
            f"{len(top)} of {len(prows)} scorers share the top tier")
            + f" of the headline ({headline}; {tiers} tiers)"
            + ("." if len(top) == 1 else f": {', '.join(top)}."))
        base = next((r for r in prows if r["scorer"] == baseline), None)
        if base is not None:
            above = [r["scorer"] for r in prows
                     if not missing(r.get("poi_low")) and r["poi_low"] > 0.5]
            below = [r["scorer"] for r in prows
                     if not missing(r.get("poi_high")) and r["poi_high"] < 0.5]
            out.append(f"{baseline} is in tier {base['tier']} (rank "
                       f"{interval(base['rank_low'], base['rank_high'], integer=True)}); "
                       + (f"{len(above)} scorer{'s' * (len(above) != 1)} beat"
                          f"{'s' * (len(above) == 1)} it on the headline with an interval above "
                          f"0.5 ({', '.join(above)})" if above
                          else "no scorer's headline interval lies above 0.5")
                       + f", {len(below)} lie{'s' * (len(below) == 1)} below it with an "
                       "interval below 0.5 (each interval on its own; the tiers and ranks come "
                       "from tests corrected for the many comparisons).")
        rests = [r for r in _records(board.overall_tasks) if r["profile"] == profile]
        if rests:
            shares = ", ".join(f"{r['task']} {r['share']:.0%}" for r in
                               sorted(rests, key=lambda r: -(r["share"] or 0))
                               if not missing(r["share"]))
            out.append(f"The headline rests on 1 task, {rests[0]['task']}." if len(rests) == 1
                       else f"The headline rests on {len(rests)} tasks, each weighing "
                            f"1/{len(rests)}; their shares of its spread across scorers: {shares}.")
        uninformative = {line.split(" (")[0] for line in board.meta.get("uninformative", [])
                         if f"({profile})" in line}
        outside = sorted(t for (p, t) in heads
                         if p == profile and not any(r["task"] == t for r in rests))
        left_out = [t for t in outside if f"{t}/{heads[(profile, t)]}" in uninformative]
        run_by = defaultdict(set)                   # task -> the scorers with records of it
        for (p, t, _, scorer), r in rows.items():
            if p == profile and r["n"] > 0:
                run_by[t].add(scorer)
        pending = [t for t in outside if t not in left_out]
        alone = [t for t in pending if run_by[t] == {baseline}]
        if left_out:
            out.append(f"Uninformative at this profile, so out of the headline: "
                       f"{', '.join(left_out)} (the baseline does not clear the task's trivial "
                       "predictor).")
        if alone:
            out.append(f"No verdict yet on {', '.join(alone)}: only {baseline} has records there "
                       "so far, so out of the headline.")
        if len(pending) > len(alone):
            out.append("Not in the headline until every scorer has records of it: " + ", ".join(
                f"{t} ({len(run_by[t])} of {len(prows)} scorers so far)"
                for t in pending if t not in alone) + ".")
        for (p, task), metric in sorted(heads.items()):
            if p != profile or task in left_out or task in alone:
                continue
            mrows = [r for (pp, t, m, _), r in rows.items()
                     if pp == profile and t == task and m == metric and r["n"] > 0]
            if not mrows or mrows[0].get("informative") is False:
                continue
            sign = 1.0 if mrows[0]["direction"] == "higher" else -1.0
            lead = max(mrows, key=lambda r: (sign * r["mean"], r["scorer"] == baseline))
            verdict = lead.get("vs_baseline") or ""
            if lead["scorer"] == baseline:
                said = "no scorer's mean is better"
            elif baseline not in run_by[task]:
                said = f"no verdict: {baseline} has no records of it yet"
            elif verdict == "better":
                said = f"significantly better than {baseline} by more than the minimum effect"
            else:
                said = f"not significantly better than {baseline} ({verdict or 'no verdict'})"
            among = f" ({len(run_by[task])} scorers so far)" if task in pending else ""
            out.append(f"{task}{among}: best mean {metric} {lead['scorer']} "
                       f"({lead['mean']:.4g}), {said}.")
            if baseline in run_by[task]:
                out.append(_verdicts_sentence(
                    rows, profile, task, baseline,
                    (board.meta.get("neighbours") or {}).get(task) or {}))
        out += [_reliability_sentence(task, c, baseline)
                for task, c in sorted((board.meta.get("convergence") or {}).items())
                if (profile, task) in heads and c["scorers"]]
    return out


def _verdicts_sentence(rows: dict, profile: str, task: str, baseline: str,
                       near: dict[str, dict[str, str]]) -> str:
    """Who is significantly better and who worse than the baseline (by at least the minimum
    effect) on each informative headline metric of a task; a verdict whose sign does not hold at
    every neighbouring learning rate (``near``: the release's ``meta.neighbours`` of the task)
    is named apart, "rate-sensitive: ..."."""
    per_metric: dict[str, dict[str, list[str]]] = {}
    for (p, t, metric, scorer), r in rows.items():
        if (p, t) == (profile, task) and r["headline"] and r["n"] > 0 and scorer != baseline \
                and r.get("informative") is not False:
            found = per_metric.setdefault(metric, {"better": [], "worse": []})
            if r.get("vs_baseline") in found:
                found[r["vs_baseline"]].append(scorer)

    def named(metric: str, names: list[str]) -> str:
        sensitive = {n for n in names
                     if (near.get(n) or {}).get(metric, "").startswith("rate-sensitive")}
        held = ", ".join(sorted(set(names) - sensitive))
        apart = f"rate-sensitive: {', '.join(sorted(sensitive))}" if sensitive else ""
        return "; ".join(part for part in (held, apart) if part)

    parts = [f"{metric} " + (", ".join(f"{kind} ({named(metric, names)})"
                                       for kind, names in found.items() if names)
                             or "none better or worse")
             for metric, found in per_metric.items()]
    meaning = (" Rate-sensitive: the verdict's sign does not hold at every neighbouring learning "
               "rate." if any("rate-sensitive" in part for part in parts) else "")
    return f"{task} against {baseline}, by headline metric: {'; '.join(parts)}.{meaning}"


def _intervals_overlap(a: dict, b: dict) -> bool:
    """Whether two speeds' intervals (``lo``, ``hi``) overlap; False where either has none (one
    seed reached the target)."""
    if any(missing(s.get(end)) for s in (a, b) for end in ("lo", "hi")):
        return False
    return not (a["hi"] < b["lo"] or b["hi"] < a["lo"])


def _reliability_sentence(task: str, c: dict, baseline: str) -> str:
    """A task trained to convergence: who reaches its target on every seed, whose seeds split,
    who never does within the cap, and the baseline's and the fastest scorer's mean steps."""
    scorers = c["scorers"]
    every = {label: s for label, s in scorers.items() if s["reached"] == s["seeds"]}
    split = [f"{label} ({s['reached']}/{s['seeds']})" for label, s in sorted(scorers.items())
             if s["split"]]
    never = sorted(label for label, s in scorers.items() if not s["reached"])
    cut = sorted(label for label, s in scorers.items() if 2 * unconverged(s) > s["seeds"])
    text = (f"{task}, trained until its validation metric converges (target {c['target']:g}, "
            f"cap {steps(c['cap'])} steps): {len(every)} of {len(scorers)} scorers reach"
            f"{'es' * (len(every) == 1)} the target on every seed")
    if split:
        text += f"; seeds split for {', '.join(split)}"
    if never:
        text += f"; no seed reaches it within the cap for {', '.join(never)}"
    if cut:
        text += (f"; most seeds at the cap unconverged (their level perhaps not reached) for "
                 f"{', '.join(cut)}")
    text += "."
    if every:
        mean = {label: s["speed"]["mean"] for label, s in every.items()}
        order = sorted(mean, key=lambda label: (mean[label], label))
        fastest = order[0]
        if fastest == baseline:     # beside the fastest: the baseline, or the next after it
            other = order[1] if len(order) > 1 else None
        else:
            other = baseline if baseline in mean else None
        base = ""
        if other is not None:
            overlap = _intervals_overlap(every[fastest]["speed"], every[other]["speed"])
            base = (f"; {'next ' * (fastest == baseline)}{other} {steps(mean[other])}"
                    + (", their 95% intervals overlapping" if overlap else ""))
        text += (f" Fewest steps to the target of them, mean over seeds: {fastest} "
                 f"({steps(mean[fastest])}{base})." if len(mean) > 1 else
                 f" Steps to the target, mean over seeds: {fastest} ({steps(mean[fastest])}).")
    return text


def front_table(board, profile: str, links: dict[str, str]) -> list[str]:
    """The compact overall table of one profile as markdown lines; ``links``: task -> the link of
    its section in the release README (reference links, defined under the table)."""
    baseline = board.meta.get("baseline", "softmax")
    heads = task_headlines(board)
    tasks = sorted(t for (p, t) in heads if p == profile)
    verdicts = {(r["task"], r["scorer"]): r for r in _records(board.rows)
                if r["profile"] == profile and heads.get((profile, r["task"])) == r["metric"]}
    formats = {t: column_format([r for r in verdicts.values() if r["task"] == t], "mean")
               for t in tasks}
    names = {t: markdown_text(t) for t in tasks}
    header = ["rank", "scorer", f"P(better than {markdown_text(baseline)}) [95% CI]"] + [
        f"[{names[t]}]" if t in links else names[t] for t in tasks]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    unrun = unlearned = False
    for r in _records(board.overall):
        if r["profile"] != profile:
            continue
        rank = interval(r["rank_low"], r["rank_high"], integer=True)
        poi = (f"{_num(r['poi'])} [{_num(r['poi_low'])}, {_num(r['poi_high'])}]"
               if not missing(r["poi"]) else "n/a")
        scorer = markdown_text(r["scorer"])
        cells = [rank, f"**{scorer}**" if r["tier"] == 1 else scorer, poi]
        for t in tasks:
            row = verdicts.get((t, r["scorer"]))
            if row is None:
                cells.append("not run")
                unrun = True
            elif row["n"] == 0:
                cells.append(mean_text(row))
            else:
                mark = "" if r["scorer"] == baseline else f" {verdict_mark(row)}"
                unlearned = unlearned or bool(row.get("not_learned"))
                cells.append(formats[t](row["mean"]) + not_learned_mark(row) + mark)
        lines.append("| " + " | ".join(cells) + " |")
    metric_names = ", ".join(f"{names[t]}: {markdown_text(heads[(profile, t)])}" for t in tasks)
    lines += ["", f"Bold: tier 1 of the headline. Task columns: the mean of the task's first "
              f"headline metric ({metric_names}), {verdict_legend(markdown_text(baseline))}, "
              "n/a the scorer cannot run the task" + (
                  ", not run: no record of the scorer on the task in this release" if unrun
                  else "") + (f", {NOT_LEARNED} the scorer did not clearly learn the task in "
                              "distribution" if unlearned else "") + ".", ""]
    lines += [f"[{names[t]}]: {links[t]}" for t in tasks if t in links]
    return lines
