"""The Plots tab: the release's plots grouped by track, each with a caption that says what it
shows."""
from __future__ import annotations

from ...loading.schema import TRACKS
from ...method.grids import data_grids
from ..plots import CAPTIONS, safe_name
from ..text import TRACK_TITLES
from .context import PageData
from .markup import Markup, concat, tag, void
from .tables import better, legend


def plot_captions(page: PageData) -> dict[str, tuple[str, str]]:
    """Plot file stem -> (group, caption), for every plot the board can produce."""
    out: dict[str, tuple[str, str]] = {}
    profiles = sorted({r["profile"] for r in page.overall_rows})
    for p in profiles:
        out[safe_name("normalized", p)] = ("overall", CAPTIONS["normalized"].format(profile=p))
    for r in page.rows:
        p, t, m = r["profile"], r["task"], r["metric"]
        out[safe_name("bars", p, t, m)] = (r["track"], CAPTIONS["bars"].format(
            task=t, metric=m, better=better(r["direction"]), profile=p))
        if r["track"] == "cost":
            for q in profiles:
                out[safe_name("cost", t, m, q)] = (
                    "cost", f"Overall quality score (profile {q}, higher is better) against "
                            f"{t} · {m} ({better(r['direction'])} is better), log axis.")
    track_of = {r["task"]: r["track"] for r in page.rows}
    for task in page.meta.get("tuning") or {}:
        out[safe_name("tuning", task)] = (track_of.get(task, "other"),
                                          CAPTIONS["tuning"].format(task=task))
    for key, c in (page.meta.get("curves") or {}).items():
        out[safe_name("curves", key)] = (track_of.get(key.rsplit("/", 1)[-1], "other"),
                                         CAPTIONS["curves"].format(task=key, metric=c["metric"]))
    alike = {(g["profile"], g["task"], g["grid"]) for g in data_grids(page.data.get("grids", []))}
    for g in page.data.get("grids", []):
        p, t, name = g["profile"], g["task"], g["grid"]
        whose = ("the same for every scorer (the evaluation items')" if (p, t, name) in alike
                 else "per scorer")
        out[safe_name("grid", p, t, name)] = (
            track_of.get(t, "other"), f"{t} · {name}: mean over seeds {whose}, over "
                                      f"{g['rows_name']} × {g['cols_name']}, profile {p}.")
    return out


def plots_tab(page: PageData) -> Markup:
    """The Plots tab: every plot of the release, grouped by track, with its caption."""
    parts = [tag("h2", "Plots"), legend([
        ("normalized", "Heat map of the normalized headline scores behind the overall."),
        ("bars", "Mean (bar, or point where the metric's range does not start at zero) and "
                 "95% CI (whiskers) per scorer, coloured by tier (darker = better tier); the "
                 "baseline's mean dashed."),
        ("tuning, curves", "One panel per scorer, the baseline in grey in every panel."),
        ("grids", "A task's grid of results (e.g. error over length and noise), one panel "
                  "per scorer, one colour scale; one panel for a grid of the evaluation items, "
                  "the same for every scorer."),
        ("cost", "Overall quality against a cost metric (log axis)."),
    ], "Grouped by track; click a plot to open it full size.", "Legend: the kinds of plot")]
    if not page.plots:
        parts.append(tag("p", "This release has no plots.", class_="empty"))
    captions = plot_captions(page)
    groups: dict[str, list[Markup]] = {}
    for plot in page.plots:
        stem = plot.rsplit("/", 1)[-1].removesuffix(".png")
        group, caption = captions.get(stem, ("other", "Plot: " + " · ".join(
            s.replace("_", " ") for s in stem.split("__"))))
        groups.setdefault(group, []).append(tag(
            "figure", tag("a", void("img", src=plot, alt=caption), href=plot, class_="zoom"),
            tag("figcaption", caption)))
    titles = {"overall": "Overall", **TRACK_TITLES, "other": "Other"}
    for group in ["overall", *TRACKS, "other"]:
        if group in groups:
            parts.append(tag("h3", titles[group]))
            parts.append(tag("div", concat(groups[group]), class_="plots"))
    return tag("section", concat(parts), id="plots", class_="tab")
