"""The tuning protocol of a release (``meta["tuning"]``, :mod:`leaderboard.method.tuning`) drawn and
tabulated: per task, the validation metric against the learning rate, one panel per scorer with
the baseline in every panel (the best value over the other axes at each rate; a failed point is a
gap); the README's method paragraph (the protocol and its cost in cells) and its table of chosen
points."""
from __future__ import annotations

import os

from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from ..loading.choice import SELECTION_RULE, point_label, rate_of
from ..method.anchors import bounds
from ..method.tuning import RATE_KEY, RATE_KEYS, point_key
from .markdown_layout import block, fitted, wrap
from .plots import CAPTIONS, SCORER_STYLE, panel_plot
from .text import markdown_text, number_format


def rate_lines(task: dict) -> dict[str, tuple[list[float], list[float | None]]]:
    """Per scorer: the learning rates and, at each, the best mean validation value over the other
    axes (None where every point at that rate failed)."""
    better = max if task["direction"] == "higher" else min
    out = {}
    for label, s in task["scorers"].items():
        by_rate: dict[float, list[float | None]] = defaultdict(list)
        for p in s["points"]:
            rate = p["point"].get(RATE_KEY)
            if rate is not None:
                by_rate[float(rate)].append(p["mean"])
        rates = sorted(by_rate)
        out[label] = (rates, [better([v for v in by_rate[x] if v is not None])
                              if any(v is not None for v in by_rate[x]) else None
                              for x in rates])
    return out


def render(tuning: dict | None, outdir: Path, baseline: str = "softmax") -> list[Path]:
    """``tuning__<task>.png``: validation metric against learning rate, one panel per scorer
    with the baseline in every panel, each scorer's chosen rate starred."""
    paths = []
    for task, t in sorted((tuning or {}).items()):
        lines = rate_lines(t)
        if not any(rates for rates, _ in lines.values()):
            continue
        star = Line2D([], [], color=SCORER_STYLE["color"], marker="*", ms=10, ls="none",
                      label="chosen rate")
        paths.append(panel_plot(
            outdir, "tuning", task, list(lines), lambda ax, label, style: _draw(
                ax, t, label, *lines[label], style), baseline=baseline,
            xlabel="learning rate",
            ylabel=f"{t['metric']} ({t['direction']} is better), mean over tuning seeds",
            title=f"{task}: validation metric against learning rate",
            value_bounds=bounds(t["metric"], t["direction"], None), legend=(star,)))
    return paths


def _draw(ax, t: dict, label: str, rates: list, values: list, style: dict) -> None:
    y = [np.nan if v is None else v for v in values]
    ax.plot(rates, y, marker="o", ms=3, **style)
    chosen = (t["scorers"][label].get("chosen") or {}).get(RATE_KEY)
    if chosen is not None and chosen in rates and values[rates.index(chosen)] is not None:
        ax.plot([chosen], [values[rates.index(chosen)]], marker="*", ms=10, ls="none",
                color=style["color"], zorder=style["zorder"] + 1)


def _value(x, fmt) -> str:
    return "–" if x is None else fmt(x)


def method_text(tuning: dict | None) -> str:
    """The protocol as this release ran it, and its cost in cells."""
    if not tuning:
        return ""
    sweep = sum(t["cells"]["sweep"] for t in tuning.values())
    report = sum(t["cells"]["report"] for t in tuning.values())
    grids = "; ".join(f"{task}: " + " x ".join(f"{k} {{{', '.join(f'{v:g}' for v in vals)}}}"
                                               for k, vals in t["grid"].items())
                      for task, t in sorted(tuning.items()))
    return (
        "**Tuning.** Every scorer gets the same grid on each tuned task, grown past an edge by "
        "one rule below (the values swept for any scorer: " + grids + "), trained "
        f"as the task's reporting cells are on tuning seeds {_seeds_text(tuning)}, which no "
        "reporting cell uses, and "
        "scored on the task's validation metric: in distribution, on validation data disjoint "
        "from the reported evaluation items (fresh draws for the ICL tasks and MQAR, held-out "
        "documents or sentences outside the reported evaluation for the language models). "
        + _rule_text(tuning) + " A chosen point on an edge of the grid grows it by one step that "
        "way (the ratio of the two edge values) up to the profile's cap, the same rule for every "
        "scorer; a scorer whose best is still on an edge is flagged. The reporting cells run at "
        "the chosen point on the reporting seeds, and every number on the board comes from "
        "them. " + (f"Cost: {sweep} sweep cells for {report} reporting cells "
                    f"({sweep / report:.1f} sweep cells per reporting cell)." if report else
                    f"Cost so far: {sweep} sweep cells; no reporting cell yet."))


def _seeds_text(tuning: dict) -> str:
    """The tuning seeds most tasks ran, and those of the tasks that ran others (a bimodal task
    tunes on more)."""
    runs = {task: sorted(t["tuning_seeds"]) for task, t in sorted(tuning.items())}
    common = Counter(map(tuple, runs.values())).most_common(1)[0][0]
    other = [f"{task}: {seeds}" for task, seeds in runs.items() if tuple(seeds) != common]
    return f"{list(common)}" + (f" ({'; '.join(other)})" if other else "")


def _rule_text(tuning: dict) -> str:
    """How the points were chosen; with the rule named, the scorers whose point it would not
    choose from their sweep records."""
    if not any("rule" in t for t in tuning.values()):
        return ("A point's score is its mean over the tuning seeds; a point where a seed "
                "diverged or failed is never chosen.")
    text = ("The learning rate is chosen first, by its worst tuning cell (over the tuning seeds "
            "and every value of the other axes at that rate; a rate with a cell that diverged or "
            "failed is never chosen), then the point with the best mean over the tuning seeds "
            "at that rate: a rate where one cell trained badly sits at the edge of the scorer's "
            "stable range, which a mean over the tuning seeds hides. The release recomputes "
            "each choice from the sweep records.")
    own = [f"{task}: {_task_rule(t)}" for task, t in sorted(tuning.items())
           if t.get("rule") not in (None, SELECTION_RULE)]
    if own:
        text += (" Where a task declares it (seeds that either learn or stay on a plateau, a tie "
                 "tolerance), its rule is its own: " + "; ".join(own) + ".")
    other = sorted(f"{label} ({task}: the rule chooses {_label(s['rule_choice'])})"
                   for task, t in tuning.items() for label, s in t["scorers"].items()
                   if s["complete"] and s.get("rule_choice") not in (None, s["chosen"]))
    if other:
        text += (" Reported at a point an earlier rule chose, not the rule's: " + "; ".join(other)
                 + "; a run under the current rule reports them at its own choice.")
    tied = {task: [f"{label} ({_tied_text(s)})" for label, s in sorted(t["scorers"].items())
                   if s.get("tied") and s["chosen"] == s.get("rule_choice")]
            for task, t in sorted(tuning.items())}
    tied = [f"{task}: {', '.join(names)}" for task, names in tied.items() if names]
    if tied:
        text += (" Where rates tie, the area under the validation curve chooses among them: the "
                 "rate whose validation curve improved fastest. The scorers whose rate a tie "
                 "decided, with how many of their scored rates tied: " + "; ".join(tied) + ".")
    return text


def _tied_text(s: dict) -> str:
    scored = [rate for rate, score in s["rate_scores"].items() if score is not None]
    return (f"all {len(scored)}" if len(s["tied"]) == len(scored)
            else f"{len(s['tied'])} of {len(scored)}")


def _task_rule(t: dict) -> str:
    """A task's rule; where its scorers' records name several, the clauses they share and each
    one's further clauses with its scorers (each whole where they share none)."""
    if "rules" not in t:
        return t["rule"]
    clauses = {text: text.split("; ") for text in t["rules"]}
    shared = os.path.commonprefix(list(clauses.values()))
    if not shared:
        return " / ".join(f"{text} ({', '.join(labels)})" for text, labels in t["rules"].items())
    return "; ".join(shared) + " (for " + "; for ".join(
        f"{', '.join(labels)}: " + ("; ".join(clauses[text][len(shared):]) or "no more")
        for text, labels in t["rules"].items()) + ")"


def _label(point: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in point.items())


def markdown(tuning: dict | None, plots: list[str]) -> str:
    """The release's tuning section: method paragraph, chosen points, sensitivity plots."""
    if not tuning:
        return ""
    lines = ["## Tuning", "", wrap(method_text(tuning)), ""]
    for task, t in sorted(tuning.items()):
        targeted = any(s.get("rate_reached") for s in t["scorers"].values())
        headers = ["scorer", "chosen point", "validation at it (mean)",
                   "at its rate: seeds at the target, median" if targeted
                   else "worst cell at its rate",
                   "best on an edge", "points ok / failed", "learned parameters"]
        rows = []
        for label, s in sorted(t["scorers"].items()):
            chosen = s["chosen"]
            if s["all_failed"]:
                point, value = "every point failed", None
            elif chosen is None:
                point, value = "sweep not complete", None
            else:
                point = ", ".join(f"{k}={v:g}" for k, v in sorted(chosen.items()))
                value = next((p["mean"] for p in s["points"]
                              if point_key(p["point"]) == point_key(chosen)), None)
            rate = point_label(rate_of(chosen, RATE_KEYS)) if chosen else None
            worst = (s.get("rate_scores") or {}).get(rate)
            reached = (s.get("rate_reached") or {}).get(rate)
            ok = sum(p["ok"] for p in s["points"])
            failed = sum(p["failed"] for p in s["points"])
            learned = ", ".join(f"{k} {v:.3g}" for k, v in s["learned"].items()) or "–"
            edge = ", ".join(s["at_edge"]) or "no"
            rows.append((label, point, value, worst, reached, edge, f"{ok} / {failed}", learned))
        fmt = number_format([x for r in rows for x in r[2:4] if x is not None])
        body = [[markdown_text(label), markdown_text(point), _value(value, fmt),
                 (f"{reached:.0%}, " if reached is not None else "") + _value(worst, fmt),
                 markdown_text(edge), counts, markdown_text(learned)]
                for label, point, value, worst, reached, edge, counts, learned in rows]
        lines += [f"### {markdown_text(task)}: chosen points ({markdown_text(t['metric'])}, "
                  f"{t['direction']} is better)", "",
                  "Learned parameters: each learned scorer parameter, the mean over the reporting "
                  "seeds.", ""] + block(fitted(body, headers))
        mine = [p for p in plots if Path(p).name.startswith(f"tuning__{task}")]
        lines += [f"![{task}: validation metric against learning rate]({p})\n\n"
                  f"*{CAPTIONS['tuning'].format(task=task)}*" for p in mine]
        lines += [""] if mine else []
    return "\n".join(lines)
