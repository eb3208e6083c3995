"""The learning curves of a release (``meta["curves"]``, :mod:`leaderboard.method.curves`) as
plots, one per task, and as the README's table of final values, the step each scorer reaches
the declared fraction of the baseline's final value (or the task's target, where its stopping rule
declares one) and, on a dense curve, its median stop step. A scorer whose seeds split on the
target is drawn seed by seed, not as a mean that no seed follows."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from ..method.anchors import bounds
from .markdown_layout import block, fitted, wrap
from .plots import CAPTIONS, SCORER_STYLE, panel_plot
from .text import markdown_text, number_format, steps

SEED_LW = 0.8   # one seed's curve, where a scorer's seeds split on the target
SPLIT_NOTE = ("A scorer whose seeds split on the target (some reach it, some never do) is drawn "
              "seed by seed, dotted where a seed never reaches it: the mean of such seeds is a "
              "curve none of them follows.")


def render(curves: dict | None, outdir: Path) -> list[Path]:
    """``curves__<task>.png``: the validation metric against the training step, the mean over
    seeds with its 95% band clipped to the metric's range, one panel per scorer with the baseline
    in every panel; a dense curve (the stopping rule's, every few steps) on a linear axis with
    each scorer's median stop step marked, the log-spaced one on a log axis."""
    paths = []
    for key, c in sorted((curves or {}).items()):
        if not c["scorers"]:
            continue
        low, high = bounds(c["metric"], c["direction"], None)
        extra = []
        if _reference(c) is not None:
            extra.append(Line2D([], [], color="0.4", lw=0.8, ls=":", label=(
                f"the target, {c['target']:g}" if c.get("target") is not None
                else f"{c['reach']:g} of {c['baseline']}'s final")))
        if c.get("dense"):
            extra.append(Line2D([], [], color=SCORER_STYLE["color"], lw=0.8, ls="--",
                                label="median stop step"))
        if _has_split(c):
            extra.append(Line2D([], [], color=SCORER_STYLE["color"], lw=SEED_LW, ls=":",
                                label="seeds split: each seed (dotted: never at the target)"))
        paths.append(panel_plot(
            outdir, "curves", key, list(c["scorers"]),
            lambda ax, label, style: _draw(ax, c, label, style, low, high),
            baseline=c["baseline"], xlabel="training step",
            ylabel=f"{c['metric']} ({c['direction']} is better)",
            title=f"{key}: validation metric during training (mean over seeds, 95% band"
                  f"{'; split seeds one by one' if _has_split(c) else ''})",
            value_bounds=(low, high), log_x=not c.get("dense"), legend=tuple(extra)))
    return paths


def _draw(ax, c: dict, label: str, style: dict, low: float, high: float) -> None:
    s = c["scorers"][label]
    if "seed_curves" in s:
        for seed in s["seed_curves"]:
            ax.plot(s["step"], seed["value"], **{**style, "lw": SEED_LW},
                    ls="-" if seed["reached"] else ":")
    else:
        ax.plot(s["step"], s["mean"], **style)
        band = [np.clip(np.array(s[k], dtype=float), low, high) for k in ("lo", "hi")]
        ax.fill_between(s["step"], *band, color=style["color"], alpha=0.15, lw=0,
                        zorder=style["zorder"] - 1)
    if s.get("stop_step") is not None:
        ax.axvline(s["stop_step"], color=style["color"], lw=0.8, ls="--")
    level = _reference(c)
    if label == c["baseline"] and level is not None:
        ax.axhline(level, color="0.4", lw=0.8, ls=":")


def _reference(c: dict) -> float | None:
    """The dotted level of a task's panels: its target, else the declared fraction of the
    baseline's final value."""
    if c.get("target") is not None:
        return c["target"]
    if c["baseline_final"] is None:
        return None
    return (c["reach"] * c["baseline_final"] if c["direction"] == "higher"
            else c["baseline_final"] / c["reach"])


def _has_split(c: dict) -> bool:
    return any("seed_curves" in s for s in c["scorers"].values())


def _reach(s: dict) -> str:
    """The first step the mean reaches the reference; for split seeds, how many reach it."""
    if "seed_curves" in s:
        reached = sum(seed["reached"] for seed in s["seed_curves"])
        return f"seeds split: {reached} of {len(s['seed_curves'])} reach it"
    return "–" if s.get("reach_step") is None else steps(s['reach_step'])


def _finite(x) -> bool:
    return x is not None and bool(np.isfinite(x))


def _num(x, fmt=lambda x: f"{x:.4g}") -> str:
    return fmt(x) if _finite(x) else "–"


def markdown(curves: dict | None, plots: list[str]) -> str:
    if not curves:
        return ""
    lines = ["## Learning curves", "",
             wrap("Every training task scores its validation metric at about 8 log-spaced steps "
                  "on a small validation subset (tasks/validation.py); below, per scorer, the "
                  "final validation value (every validation item, mean over seeds) and the first "
                  "of those steps at which the mean curve reaches the declared fraction of the "
                  "baseline's final curve value (– : never)."
                  + (" A task trained to convergence shows instead the stopping rule's curve, "
                     "evaluated every few steps to the stop, a seed that stopped standing at its "
                     "best value after it, the best validation value (the reported "
                     "checkpoint's), each scorer's median stop step, and the first step at "
                     "which the mean curve reaches the target its speed and reliability are "
                     "measured at (the speed column of \"Level, speed and reliability\" is the "
                     "mean of each seed's own step)."
                     if any(c.get("dense") for c in curves.values()) else "")
                  + (" " + SPLIT_NOTE if any(_has_split(c) for c in curves.values()) else "")),
             ""]
    for key, c in sorted(curves.items()):
        rule = ("≥ {r:g} x" if c["direction"] == "higher" else "≤ 1/{r:g} x").format(r=c["reach"])
        dense = c.get("dense")
        metric = markdown_text(c["metric"])
        reach = (f"first step the mean reaches the target {c['target']:g}"
                 if c.get("target") is not None
                 else f"first step {rule} {markdown_text(c['baseline'])}'s final")
        headers = ["scorer", "seeds", f"{'best' if dense else 'final'} {metric}", reach] + (
            ["median stop step"] if dense else [])
        finals = number_format([s["final"] for s in c["scorers"].values() if _finite(s["final"])])
        body = [[markdown_text(label), str(s["seeds"]), _num(s["final"], finals),
                 _reach(s)]
                + ([_num(s.get("stop_step"), steps)] if dense else [])
                for label, s in sorted(c["scorers"].items())]
        lines += [f"### {markdown_text(key)} ({metric}, {c['direction']} is better)", ""]
        lines += block(fitted(body, headers))
        caption = CAPTIONS["curves"].format(task=key, metric=c["metric"])
        lines += [f"![{key}: learning curves]({p})\n\n"
                  f"*{caption}{' ' + SPLIT_NOTE if _has_split(c) else ''}*"
                  for p in plots if Path(p).name.startswith("curves__" + key.replace("/", "-"))]
        lines.append("")
    return "\n".join(lines)
