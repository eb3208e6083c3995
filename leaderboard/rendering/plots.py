"""PNG plots of a :class:`~leaderboard.method.aggregate.Board` (matplotlib, Agg canvas, no pyplot
state).

- ``grid__<profile>__<task>__<grid>.png``: the grid (e.g. OOD error over length x sigma) averaged
  over seeds, one panel per scorer, one colour scale for all panels (log when all values are
  positive and span more than two decades).
- ``bars__<profile>__<task>__<metric>.png``: mean and 95% CI per scorer, coloured by tier (one
  hue, dark to light: :mod:`.palette`), the baseline's mean dashed; points, not bars from zero,
  for a metric whose range does not start at zero (a perplexity).
- small multiples (:func:`panel_plot`): one panel per scorer with the baseline in every panel,
  the tuning sensitivity and the learning curves (``tuning_section``, ``curves_section``).
- ``normalized__<profile>.png``: scorer x task heatmap of the normalized headline scores on the
  tasks' fixed anchors, coloured clipped to [0, 1], written unclipped (▽ below 0, △ above 1).
- ``cost__<cost task>__<metric>__<profile>.png``: quality score against a cost metric (log axis
  when every cost is positive), every point named, labels kept apart with leader lines.
- from ``bench_scorers`` records (``scorebench bench scorers --lengths``): forward+backward time
  and peak memory against the sequence length, log-log, per (B, H, D) (:func:`plot_scaling`).

Files are byte-identical for identical boards: fixed size and dpi, and no software/date metadata.
"""
from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colors as mcolors
from matplotlib import ticker as mticker
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..method.anchors import bounds
from ..method.grids import data_grids
from .palette import tier_colour
from .text import outside_mark

DPI = 100
# What a plot shows, as its caption says it on the page and in the README.
CAPTIONS = {
    "tuning": ("{task}: the validation metric against the learning rate, mean over the tuning "
               "seeds (the best over the other swept settings at each rate), one panel per "
               "scorer with the baseline in grey in every panel; a star marks the chosen rate."),
    "curves": ("{task}: the validation metric {metric} during training, mean over seeds with its "
               "95% t band clipped to the metric's range, one panel per scorer with the baseline "
               "in grey in every panel."),
    "bars": ("{task} · {metric}: mean and 95% CI per scorer, coloured by tier (darker = better "
             "tier), the baseline's mean dashed ({better} is better), profile {profile}."),
    "normalized": ("Normalized headline score of every scorer on every task, profile {profile}: "
                   "the mean over seeds on the task's fixed anchors (0 = its floor, chance or "
                   "the trivial predictor; 1 = its ceiling, perfect). The colour is clipped to "
                   "[0, 1], as the overall clips a task score; the numbers are unclipped, ▽ "
                   "below 0, △ above 1."),
}
PNG_METADATA = {"Software": None}
MAX_TICKS = 6


def _opt(x):
    """None for a missing value (None, NaN, pd.NA), else the value."""
    return None if x is None or pd.isna(x) else x


def safe_name(*parts: str) -> str:
    return "__".join(re.sub(r"[^A-Za-z0-9_.+-]+", "-", str(p)).strip("-") or "x" for p in parts)


def _save(fig: Figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=DPI, metadata=PNG_METADATA)


def log_x_ticks(ax, subs: tuple[float, ...] = (1.0, 2.0, 5.0)) -> None:
    """A log x axis labelled at 1, 2 and 5 times each power of ten, in plain numbers (the minor
    labels of a short span overlap)."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(mticker.LogLocator(subs=subs))
    ax.xaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(mticker.NullFormatter())


# A panel's own scorer, and the baseline drawn under it in every panel.
SCORER_STYLE = {"color": "#1f5fa8", "lw": 1.4, "zorder": 3}
BASELINE_STYLE = {"color": "#9a9a9a", "lw": 1.0, "zorder": 2}
PANEL_COLUMNS = 4


def within(ax, low: float, high: float, axis: str = "y") -> None:
    """Keep an axis's limits inside [low, high], with a margin of 3% of the span shown so that
    a point on a bound stays visible."""
    get, set_ = (ax.get_ylim, ax.set_ylim) if axis == "y" else (ax.get_xlim, ax.set_xlim)
    lo, hi = get()
    lo, hi = max(lo, low), min(hi, high)
    pad = 0.03 * (hi - lo)
    set_(lo - pad if lo == low else lo, hi + pad if hi == high else hi)


def panel_plot(outdir: Path, kind: str, key: str, labels: list[str],
               draw: Callable[[Any, str, dict], None], *, baseline: str, xlabel: str,
               ylabel: str, title: str, value_bounds: tuple[float, float] = (-math.inf, math.inf),
               log_x: bool = True, legend: tuple = ()) -> Path:
    """Small multiples, ``<kind>__<key>.png`` in ``outdir``: one panel per label (the baseline
    first), ``draw(ax, label, style)`` drawing a label's series; every other panel draws the
    baseline under its own scorer. Shared axes, the y axis inside ``value_bounds``, the legend
    (the two styles and ``legend``'s extra handles) above the panels, outside them."""
    labels = sorted(labels, key=lambda s: (s != baseline, s))
    ncols = min(PANEL_COLUMNS, len(labels))
    nrows = math.ceil(len(labels) / ncols)
    width, height = max(2.9 * ncols + 0.9, 8.0), 2.0 * nrows + 1.5   # room for the legend
    fig = Figure(figsize=(width, height), dpi=DPI)
    fig.subplots_adjust(left=0.8 / width, right=1 - 0.2 / width, bottom=0.65 / height,
                        top=1 - 1.0 / height, wspace=0.1, hspace=0.45)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True).ravel()
    for ax, label in zip(axes, labels):
        if label != baseline and baseline in labels:
            draw(ax, baseline, BASELINE_STYLE)
        draw(ax, label, SCORER_STYLE)
        ax.set_title(label, fontsize=8, pad=3)
        ax.grid(True, lw=0.3, alpha=0.5)
        ax.tick_params(labelsize=7, labelbottom=True)
    for ax in axes[len(labels):]:
        ax.set_axis_off()
    if log_x:
        log_x_ticks(axes[0], subs=(1.0,))
    within(axes[0], *value_bounds)
    handles = [Line2D([], [], **SCORER_STYLE, label="the panel's scorer"),
               Line2D([], [], **BASELINE_STYLE, label=f"{baseline} (in every panel)"),
               *legend]
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=8,
               frameon=False, bbox_to_anchor=(0.5, 1 - 0.42 / height))
    fig.suptitle(title, fontsize=10, y=1 - 0.08 / height, va="top")
    fig.supxlabel(xlabel, fontsize=9, y=0.08 / height, va="bottom")
    fig.supylabel(ylabel, fontsize=9, x=0.08 / width, ha="left")
    path = Path(outdir) / f"{safe_name(kind, key)}.png"
    _save(fig, path)
    return path


def _margins(fig: Figure, left_chars: int, bottom_in: float = 0.55, top_in: float = 0.35,
             right_in: float = 0.25) -> None:
    """Fixed margins in inches (cheaper than a layout engine): room for labels of
    ``left_chars`` characters on the left."""
    w, h = fig.get_size_inches()
    left_in = 0.25 + 0.065 * left_chars
    fig.subplots_adjust(left=left_in / w, right=1 - right_in / w, bottom=bottom_in / h,
                        top=1 - top_in / h)


def _ticks(labels: list) -> tuple[list[int], list[str]]:
    step = max(1, math.ceil(len(labels) / MAX_TICKS))
    idx = list(range(0, len(labels), step))
    return idx, [f"{labels[i]:g}" if isinstance(labels[i], (int, float)) else str(labels[i])
                 for i in idx]


def _norm(values: list[np.ndarray]):
    finite = np.concatenate([v[np.isfinite(v)].ravel() for v in values]) if values else np.array([])
    if finite.size == 0:
        return mcolors.Normalize(0, 1)
    lo, hi = float(finite.min()), float(finite.max())
    if lo > 0 and hi / lo > 100:
        return mcolors.LogNorm(lo, hi)
    return mcolors.Normalize(lo, hi if hi > lo else lo + 1)


def grid_plots(board, outdir: Path) -> list[Path]:
    grids = board.grids.to_dict(orient="records")
    keys = sorted({(g["profile"], g["task"], g["grid"]) for g in grids})
    alike = {(g["profile"], g["task"], g["grid"]): g | {"scorer": "every scorer"}
             for g in data_grids(grids)}
    paths = []
    for profile, task, name in keys:
        panels = [alike[(profile, task, name)]] if (profile, task, name) in alike else sorted(
            (g for g in grids if (g["profile"], g["task"], g["grid"]) == (profile, task, name)),
            key=lambda g: g["scorer"])
        values = [np.array([[np.nan if v is None else v for v in row] for row in g["values"]],
                           dtype=np.float64) for g in panels]
        ncols = min(4, len(panels))
        nrows = math.ceil(len(panels) / ncols)
        height = 2.6 * nrows + 0.5
        width = 3.4 * ncols + 1.0
        fig = Figure(figsize=(width, height), dpi=DPI)
        fig.subplots_adjust(left=max(0.06, 0.6 / width), right=0.9, bottom=0.55 / height,
                            top=1 - 0.95 / height, wspace=0.4, hspace=0.65)
        axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False).ravel())
        norm = _norm(values)
        image = None
        for ax, g, v in zip(axes, panels, values):
            image = ax.imshow(np.ma.masked_invalid(v), origin="lower", aspect="auto",
                              cmap="viridis", norm=norm, interpolation="nearest")
            ax.set_title(f"{g['scorer']} (n={g['n']})", fontsize=9)
            xi, xl = _ticks(g["cols"])
            yi, yl = _ticks(g["rows"])
            ax.set_xticks(xi, xl, fontsize=7)
            ax.set_yticks(yi, yl, fontsize=7)
            ax.set_xlabel(g["cols_name"], fontsize=8)
            ax.set_ylabel(g["rows_name"], fontsize=8)
        for ax in axes[len(panels):]:
            ax.set_axis_off()
        if image is not None:
            fig.colorbar(image, ax=list(axes), shrink=0.8, label=name)
        fig.suptitle(f"{task} [{profile}]: {name}, mean over seeds", fontsize=11,
                     y=1 - 0.2 / height, va="top")
        path = outdir / f"{safe_name('grid', profile, task, name)}.png"
        _save(fig, path)
        paths.append(path)
    return paths


def bar_plots(board, outdir: Path) -> list[Path]:
    """Per headline metric: each scorer's mean with its 95% CI, coloured by tier (one hue, dark
    to light), the baseline's mean a dashed line; bars from the metric's zero, or points with
    their intervals for a metric on a log scale or whose range does not start at zero (a
    perplexity)."""
    rows = [r for r in board.rows.to_dict(orient="records") if r["headline"] and r["n"]]
    keys = sorted({(r["profile"], r["task"], r["metric"]) for r in rows})
    baseline = getattr(board, "meta", {}).get("baseline", "softmax")
    paths = []
    for profile, task, metric in keys:
        sel = [r for r in rows if (r["profile"], r["task"], r["metric"]) == (profile, task, metric)]
        tiers = [None if _opt(r["tier"]) is None else int(r["tier"]) for r in sel]
        sign = -1.0 if sel[0]["direction"] == "higher" else 1.0
        order = sorted(range(len(sel)), key=lambda i: (tiers[i] if tiers[i] is not None
                                                       else math.inf, sign * sel[i]["mean"],
                                                       sel[i]["scorer"]))
        sel, tiers = [sel[i] for i in order], [tiers[i] for i in order]
        means = np.array([r["mean"] for r in sel], dtype=np.float64)
        lo = np.array([_nan(r["ci_low"]) for r in sel], dtype=np.float64)
        hi = np.array([_nan(r["ci_high"]) for r in sel], dtype=np.float64)
        err = np.vstack([np.where(np.isnan(lo), 0, means - lo),
                         np.where(np.isnan(hi), 0, hi - means)])
        labels = [f"{r['scorer']} (tier {t})" if t is not None else f"{r['scorer']} (no tier)"
                  for r, t in zip(sel, tiers)]
        low, high = bounds(metric, sel[0]["direction"], None)
        points = bool(_opt(sel[0].get("log_scale"))) or low > 0
        fig = Figure(figsize=(7.0, 0.3 * len(sel) + 1.4), dpi=DPI)
        _margins(fig, max(map(len, labels)), bottom_in=0.7)
        ax = fig.subplots()
        y = np.arange(len(sel))
        colours = [tier_colour(t) for t in tiers]
        hatched = False
        if points:
            survivors = [bool(_opt(r["survivors_only"])) for r in sel]
            hatched = any(survivors)
            ax.errorbar(means, y, xerr=err, fmt="none", ecolor="black", capsize=3, lw=1)
            ax.scatter(means, y, c=["white" if s else c for s, c in zip(survivors, colours)],
                       s=36, zorder=3, edgecolors=colours, linewidths=1.2)
        else:
            bars = ax.barh(y, means, xerr=err, color=colours, ecolor="black", capsize=3)
            for bar, r in zip(bars, sel):
                if _opt(r["survivors_only"]):
                    bar.set_hatch("//")
                    hatched = True
        base = next((r["mean"] for r in sel if r["scorer"] == baseline), None)
        if base is not None:
            ax.axvline(base, color=BASELINE_STYLE["color"], ls="--", lw=1, zorder=1)
        ax.set_yticks(y, labels, fontsize=8)
        for tick, r in zip(ax.get_yticklabels(), sel):
            if r["scorer"] == baseline:
                tick.set_fontweight("bold")
        ax.invert_yaxis()
        if points and bool(_opt(sel[0].get("log_scale"))) and np.all(means > 0):
            log_x_ticks(ax)
        within(ax, low, high, "x")
        arrow = "lower is better" if sel[0]["direction"] == "lower" else "higher is better"
        shape = "points: mean" if points else "bars: mean"
        ax.set_xlabel(f"{metric} ({arrow})\n{shape}, whiskers: 95% CI"
                      + (f", dashed: {baseline}" if base is not None else "")
                      + (f", {'hollow' if points else 'hatched'}: survivors only" if hatched
                         else ""), fontsize=8)
        ax.set_title(f"{task} [{profile}]: colour = tier, darker is better", fontsize=10)
        path = outdir / f"{safe_name('bars', profile, task, metric)}.png"
        _save(fig, path)
        paths.append(path)
    return paths


def _nan(x) -> float:
    return np.nan if _opt(x) is None else float(x)


def normalized_plots(board, outdir: Path) -> list[Path]:
    scores = board.task_scores.to_dict(orient="records")
    order = {r["scorer"]: i for i, r in enumerate(board.overall.to_dict(orient="records"))}
    paths = []
    for profile in sorted({r["profile"] for r in scores}):
        sel = [r for r in scores if r["profile"] == profile]
        tasks = sorted({r["task"] for r in sel})
        scorers = sorted({r["scorer"] for r in sel}, key=lambda s: (order.get(s, math.inf), s))
        matrix = np.full((len(scorers), len(tasks)), np.nan)
        raw = np.full((len(scorers), len(tasks)), np.nan)
        for r in sel:
            i, j = scorers.index(r["scorer"]), tasks.index(r["task"])
            matrix[i, j] = r["score"]
            unclipped = _opt(r.get("score_unclipped"))
            raw[i, j] = r["score"] if unclipped is None else unclipped
        left_chars = max(map(len, scorers))
        width = 1.1 * len(tasks) + 0.25 + 0.065 * left_chars + 1.3
        fig = Figure(figsize=(max(width, 4.0), 0.3 * len(scorers) + 1.6), dpi=DPI)
        _margins(fig, left_chars, right_in=1.3, bottom_in=0.3 + 0.035 * max(map(len, tasks)))
        ax = fig.subplots()
        w, h = fig.get_size_inches()
        box = ax.get_position()
        cax = fig.add_axes((1 - 1.1 / w, box.y0, 0.15 / w, box.height))
        image = ax.imshow(np.ma.masked_invalid(matrix), cmap="RdYlGn", vmin=0, vmax=1,
                          aspect="auto", interpolation="nearest")
        for i in range(len(scorers)):
            for j in range(len(tasks)):
                if np.isfinite(raw[i, j]):
                    mark = outside_mark(raw[i, j])
                    ax.text(j, i, f"{raw[i, j]:.2f}" + (f" {mark}" if mark else ""),
                            ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(scorers)), scorers, fontsize=8)
        fig.colorbar(image, cax=cax).set_label("normalized score\n(0 = floor, 1 = ceiling)",
                                               fontsize=8)
        ax.set_title(f"normalized headline scores [{profile}]", fontsize=10)
        path = outdir / f"{safe_name('normalized', profile)}.png"
        _save(fig, path)
        paths.append(path)
    return paths


def _place_labels(fig: Figure, ax, pts: list[tuple[float, float, str]],
                  fontsize: float = 7.0) -> None:
    """Name every point without overlaps: each label takes the first free spot among right of
    its point, left of it, then a row higher or lower, and so on (points count as taken); a
    label off its point's row is joined to it by a leader line. Sizes are estimated from the
    font size, in pixels of the fixed-size figure (no renderer needed)."""
    box = ax.get_window_extent()
    h = fontsize * DPI / 72 * 1.3
    char = fontsize * DPI / 72 * 0.6
    pixels = [tuple(ax.transData.transform((x, y))) for x, y, _ in pts]
    taken = [(px - 4, px + 4, py - 4, py + 4) for px, py in pixels]

    def free(x0, x1, y0, y1):
        inside = x0 >= box.x0 and x1 <= box.x1 and y0 >= box.y0 and y1 <= box.y1
        return inside and not any(x0 < b1 and x1 > b0 and y0 < c1 and y1 > c0
                                  for b0, b1, c0, c1 in taken)

    order = sorted(range(len(pts)), key=lambda i: (-pixels[i][1], pixels[i][0]))
    for i in order:
        (x, y, name), (px, py) = pts[i], pixels[i]
        w = char * len(name)
        spot = None
        for step in range(0, 12):
            for dy in ((0,) if step == 0 else (step * h, -step * h)):
                for right in (True, False):
                    x0 = px + 6 if right else px - 6 - w
                    if free(x0, x0 + w, py + dy - h / 2, py + dy + h / 2):
                        spot = (x0, dy, right)
                        break
                if spot:
                    break
            if spot:
                break
        if spot is None:
            spot = (px + 6, 0.0, True)
        x0, dy, right = spot
        taken.append((x0, x0 + w, py + dy - h / 2, py + dy + h / 2))
        dx = (x0 if right else x0 + w) - px
        ax.annotate(name, (x, y), xytext=(dx * 72 / DPI, dy * 72 / DPI),
                    textcoords="offset points", fontsize=fontsize, va="center",
                    ha="left" if right else "right", annotation_clip=False,
                    arrowprops=dict(arrowstyle="-", color="#888888", linewidth=0.6,
                                    shrinkA=0, shrinkB=3) if dy else None)


def cost_plots(board, outdir: Path) -> list[Path]:
    rows = [r for r in board.rows.to_dict(orient="records")
            if r["track"] == "cost" and r["headline"] and r["n"]]
    overall = board.overall.to_dict(orient="records")
    paths = []
    for task, metric in sorted({(r["task"], r["metric"]) for r in rows}):
        cost = {r["scorer"]: r["mean"] for r in rows if (r["task"], r["metric"]) == (task, metric)}
        for profile in sorted({r["profile"] for r in overall}):
            pts = [(cost[o["scorer"]], o["score"], o["scorer"]) for o in overall
                   if o["profile"] == profile and o["scorer"] in cost
                   and _opt(o["score"]) is not None]
            if not pts:
                continue
            pts.sort(key=lambda p: p[2])
            fig = Figure(figsize=(7.0, 5.0), dpi=DPI)
            _margins(fig, 6, bottom_in=0.6)
            ax = fig.subplots()
            xs = np.array([p[0] for p in pts], dtype=np.float64)
            ys = np.array([p[1] for p in pts], dtype=np.float64)
            log = bool(np.all(xs > 0))
            if log:
                log_x_ticks(ax)
                lo, hi = float(xs.min()), float(xs.max())
                span = max(math.log10(hi / lo), 0.3)
                ax.set_xlim(lo / 10 ** (0.08 * span), hi * 10 ** (0.08 * span))
            ylo, yhi = float(ys.min()), float(ys.max())
            pad = max(yhi - ylo, 0.05)
            ax.set_ylim(ylo - 0.08 * pad, yhi + 0.12 * pad)
            ax.grid(True, which="both", color="#e5e5e5", linewidth=0.6)
            ax.set_axisbelow(True)
            ax.scatter(xs, ys, color="#1b9e77", s=24, zorder=3)
            _place_labels(fig, ax, pts)
            ax.set_xlabel(f"{task}: {metric}" + (" (log scale)" if log else ""))
            ax.set_ylabel(f"overall quality score [{profile}]")
            ax.set_title("cost vs quality: up is better quality, left is cheaper", fontsize=10)
            path = outdir / f"{safe_name('cost', task, metric, profile)}.png"
            _save(fig, path)
            paths.append(path)
    return paths


def render_all(board, outdir: Path) -> list[Path]:
    """Every plot of the board into ``outdir``; returns the paths in a stable order."""
    outdir = Path(outdir)
    return (normalized_plots(board, outdir) + bar_plots(board, outdir)
            + grid_plots(board, outdir) + cost_plots(board, outdir))


def scaling_series(records: list[dict]) -> dict[tuple[int, int, int], dict[str, list]]:
    """From ``bench_scorers`` records: {(B, H, D): {scorer: [(L, ms, MB), ...]}} for every
    (B, H, D) measured at two lengths or more; SDPA appears as ``"softmax (SDPA)"``. ms and MB
    are the scorer's best variant (the fast form where it has one)."""
    series: dict[tuple[int, int, int], dict[str, dict[int, tuple]]] = {}
    for r in records:
        if r.get("status") != "ok":
            continue
        for shape in r["cell"]["config"].get("shapes", []):
            b, h, length, d = shape
            label = "x".join(str(x) for x in shape)   # the metric names' suffix, BxHxLxD
            m = r["metrics"]
            group = series.setdefault((b, h, d), {})
            if f"fwd_bwd_ms_{label}" in m:
                group.setdefault(r["cell"]["scorer"], {})[length] = (
                    m[f"fwd_bwd_ms_{label}"], m.get(f"peak_mem_mb_{label}"))
            ref = r["extra"].get("reference_ms", {}).get(label)
            if ref:
                mem = r["extra"].get("reference_peak_mb", {}).get(label)
                group.setdefault("softmax (SDPA)", {})[length] = (statistics.median(ref), mem)
    return {key: {name: sorted((length, *v) for length, v in points.items())
                  for name, points in group.items()}
            for key, group in series.items()
            if len({length for points in group.values() for length in points}) >= 2}


def loglog_slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log y against log x (cost ~ L^slope), None under two points."""
    pts = [(x, y) for x, y in points if x and y and x > 0 and y > 0]
    if len(pts) < 2:
        return None
    return float(np.polyfit(np.log([x for x, _ in pts]), np.log([y for _, y in pts]), 1)[0])


def plot_scaling(records: list[dict], path) -> list:
    """Log-log plots of forward+backward time and peak memory against L, one line per scorer
    (its fitted slope in the legend), one PNG per (B, H, D) group: ``path`` with ``_BxHxD``
    before the suffix when there are several groups. Returns the files written."""
    path = Path(path)
    groups = scaling_series(records)
    written = []
    for (b, h, d), by_scorer in groups.items():
        fig = Figure(figsize=(12, 5.5))
        axes = fig.subplots(1, 2)
        for name, points in sorted(by_scorer.items()):
            style = dict(linestyle="--", color="black", linewidth=2) if "SDPA" in name else {}
            for ax, col in ((axes[0], 1), (axes[1], 2)):
                xy = [(p[0], p[col]) for p in points if p[col]]
                if len(xy) < 2:
                    continue
                slope = loglog_slope(xy)
                ax.plot([x for x, _ in xy], [y for _, y in xy], marker="o", markersize=3,
                        label=f"{name} (slope {slope:.2f})", **style)
        for ax, what in ((axes[0], "forward+backward time (ms, median)"),
                         (axes[1], "peak memory (MB)")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("sequence length L")
            ax.set_ylabel(what)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6, ncol=2)
        fig.suptitle(f"cost against length, B={b} H={h} D={d} (log-log: slope 1 = linear, "
                     f"2 = quadratic)")
        out = path if len(groups) == 1 else path.with_name(f"{path.stem}_{b}x{h}x{d}{path.suffix}")
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, format="png", dpi=110)
        written.append(out)
    return written
