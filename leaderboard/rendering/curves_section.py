"""The learning curves of a release (``meta["curves"]``, :mod:`leaderboard.method.curves`) as
plots, one per task, and as the README's table of final values and the step each scorer reaches
the declared fraction of the baseline's final value."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .plots import log_x_plot, series_style


def render(curves: dict | None, outdir: Path) -> list[Path]:
    """``curves__<task>.png``: the validation metric against the training step (log axis), the
    mean over seeds with its 95% band, one line per scorer."""
    paths = []
    for key, c in sorted((curves or {}).items()):
        if not c["scorers"]:
            continue
        paths.append(log_x_plot(
            outdir, "curves", key, lambda ax: _draw(ax, c), "training step",
            f"{c['metric']} ({c['direction']} is better)",
            f"{key}: validation metric during training (mean over seeds, 95% band)"))
    return paths


def _draw(ax, c: dict) -> None:
    for i, (label, s) in enumerate(sorted(c["scorers"].items())):
        style = series_style(i)
        ax.plot(s["step"], s["mean"], lw=1.2, label=label, **style)
        ax.fill_between(s["step"], s["lo"], s["hi"], color=style["color"], alpha=0.15, lw=0)
    if c["baseline_final"] is not None:
        level = (c["reach"] * c["baseline_final"] if c["direction"] == "higher"
                 else c["baseline_final"] / c["reach"])
        ax.axhline(level, color="0.4", lw=0.8, ls=":",
                   label=f"{c['reach']:g} of {c['baseline']}'s final")


def _num(x) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{x:.4g}"


def markdown(curves: dict | None, plots: list[str]) -> str:
    if not curves:
        return ""
    lines = ["## Learning curves", "",
             "Every training task scores its validation metric at about 8 log-spaced steps on a "
             "small validation subset (tasks/validation.py); below, per scorer, the final "
             "validation value (every validation item, mean over seeds) and the first of those "
             "steps at which the mean curve reaches the declared fraction of the baseline's "
             "final curve value (– : never).", ""]
    for key, c in sorted(curves.items()):
        rule = ("≥ {r:g} x" if c["direction"] == "higher" else "≤ 1/{r:g} x").format(r=c["reach"])
        lines += [f"### {key} ({c['metric']}, {c['direction']} is better)", "",
                  f"| scorer | seeds | final {c['metric']} | first step {rule} "
                  f"{c['baseline']}'s final |", "|---|---|---|---|"]
        for label, s in sorted(c["scorers"].items()):
            step = s.get("reach_step")
            lines.append(f"| {label} | {s['seeds']} | {_num(s['final'])} | "
                         f"{'–' if step is None else step} |")
        lines.append("")
        lines += [f"![{key}: learning curves]({p})\n\n*Learning curves of {key}: validation "
                  f"{c['metric']} against training step, mean over seeds, one line per scorer.*"
                  for p in plots if Path(p).name.startswith("curves__" + key.replace("/", "-"))]
        lines.append("")
    return "\n".join(lines)
