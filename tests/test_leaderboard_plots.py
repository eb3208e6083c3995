"""Plot layout: the cost plot names every point without overlapping labels (log axis), the bar
plot mentions hatching only when a bar is hatched, and grid titles do not collide. Checked on the
drawn figure (Agg renderer), from the text boxes matplotlib itself measures."""
from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from leaderboard.rendering import plots


@pytest.fixture
def figures(monkeypatch):
    """The figures the plot functions save, instead of files."""
    saved = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: saved.append((fig, path)))
    return saved


def boxes(fig, texts):
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    return [Text.get_window_extent(t, renderer) for t in texts]  # the text, not its arrow


def overlap(a, b) -> bool:
    return a.x0 < b.x1 and a.x1 > b.x0 and a.y0 < b.y1 and a.y1 > b.y0


def row(scorer, mean, **kw):
    base = {"profile": "cpu", "track": "cost", "task": "bench_scorers", "metric": "fwd_bwd_ratio",
            "direction": "lower", "headline": True, "scorer": scorer, "n": 3, "mean": mean,
            "ci_low": mean * 0.9, "ci_high": mean * 1.1, "tier": 1, "survivors_only": False}
    return {**base, **kw}


def test_cost_plot_labels_do_not_overlap(figures):
    # Three scorers on one spot, a far outlier and a long name at the right edge (the issue's
    # case), on a log axis.
    names = ["ssa", "ssa_gpt2", "stablemax", "softmax", "temperature_softmax", "sigmoid",
             "entmax_bisect_with_a_long_name"]
    cost = [1.10, 1.11, 1.12, 1.0, 1.01, 1.3, 20.0]
    score = [0.730, 0.731, 0.733, 0.62, 0.62, 0.68, 0.60]
    board = SimpleNamespace(
        rows=pd.DataFrame([row(n, c) for n, c in zip(names, cost)]),
        overall=pd.DataFrame([{"profile": "cpu", "scorer": n, "score": s}
                              for n, s in zip(names, score)]))
    assert len(plots.cost_plots(board, Path("unused"))) == 1
    (fig, path), = figures
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and path.name == "cost__bench_scorers__fwd_bwd_ratio__cpu.png"
    labels = [t for t in ax.texts]
    assert sorted(t.get_text() for t in labels) == sorted(names)
    label_boxes = boxes(fig, labels)
    for a, b in itertools.combinations(label_boxes, 2):
        assert not overlap(a, b), (a, b)
    figure_box = fig.bbox
    for box in label_boxes:
        assert figure_box.x0 <= box.x0 and box.x1 <= figure_box.x1
    # A label moved off its point's row is joined to it by a leader line.
    for t in labels:
        dy = t.xyann[1]
        assert (t.arrow_patch is not None) == (dy != 0)


def test_bar_plot_mentions_hatching_only_when_drawn(figures):
    for survivors in (False, True):
        rows = [row("softmax", 1.0, track="icl"), row("ssa", 1.2, track="icl",
                                                        survivors_only=survivors)]
        plots.bar_plots(SimpleNamespace(rows=pd.DataFrame(rows)), Path("unused"))
        fig, _ = figures[-1]
        label = fig.axes[0].get_xlabel()
        assert ("hatched" in label) == survivors, label


def test_grid_titles_have_room(figures):
    grids = [{"profile": "cpu", "task": "icl_linear", "grid": "mse_T41", "scorer": f"scorer_{i}_long",
              "rows_name": "sigma_x", "cols_name": "sigma", "rows": [1, 2], "cols": [1, 2],
              "values": [[1.0, 2.0], [3.0, 4.0]], "n": 3} for i in range(6)]
    plots.grid_plots(SimpleNamespace(grids=pd.DataFrame(grids)), Path("unused"))
    (fig, _), = figures
    titled = [ax for ax in fig.axes if ax.get_title()]
    sup, *titles = boxes(fig, [fig._suptitle] + [ax.title for ax in titled])
    assert len(titles) == 6
    for box in titles:
        assert not overlap(sup, box)
    for a, b in itertools.combinations(titles, 2):
        assert not overlap(a, b)


def curve_entry(scorers, metric="val_accuracy", dense=False):
    steps = [1, 10, 100, 1000]
    return {"profile": "cpu", "metric": metric, "direction": "higher", "reach": 0.9,
            "baseline": "softmax", "baseline_final": None if dense else 0.95, "dense": dense,
            **({"target": 0.8} if dense else {}),
            "scorers": {s: {"seeds": 3, "step": steps, "mean": [0.1, 0.4, 0.9, 0.97],
                            "lo": [-0.2, 0.1, 0.7, 0.9], "hi": [0.3, 0.7, 1.1, 1.2],
                            "final": 0.97, "stop_step": 600 if dense else None}
                        for s in scorers}}


def test_a_scorer_whose_seeds_split_is_drawn_seed_by_seed(figures):
    """No mean line or band for it: one thin line a seed, dotted where it never reaches the
    target; the other scorers and the baseline keep their mean and band."""
    from leaderboard.rendering import curves_section

    entry = curve_entry(["softmax", "cosformer", "ssa"], dense=True)
    entry["scorers"]["cosformer"]["seed_curves"] = [
        {"seed": 0, "reached": True, "value": [0.1, 0.5, 0.95, 0.96]},
        {"seed": 1, "reached": False, "value": [0.1, 0.2, 0.3, 0.3]}]
    curves_section.render({"icl_mqar": entry}, Path("unused"))
    (fig, _), = figures
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible() and ax.axison}

    def drawn(ax, color):
        return [(list(line.get_ydata()), line.get_linestyle()) for line in ax.lines
                if line.get_color() == color and len(line.get_xdata()) == 4]

    scorer = curves_section.SCORER_STYLE["color"]
    assert drawn(panels["cosformer"], scorer) == [([0.1, 0.5, 0.95, 0.96], "-"),
                                                  ([0.1, 0.2, 0.3, 0.3], ":")]
    assert drawn(panels["ssa"], scorer) == [([0.1, 0.4, 0.9, 0.97], "-")]
    # the baseline's band under cosformer's panel, none of cosformer's own
    assert len(panels["cosformer"].collections) == 1 and len(panels["ssa"].collections) == 2
    assert "split seeds one by one" in fig._suptitle.get_text()
    legend, = fig.legends
    assert any("seeds split" in t.get_text() for t in legend.get_texts())


@pytest.mark.parametrize("dense", [False, True])
def test_learning_curves_are_small_multiples_inside_the_metrics_range(figures, dense):
    """One panel per scorer, softmax drawn in every other panel, accuracy on [0, 1] (bands
    clipped), the legend outside every axes; a dense curve marks the median stop step."""
    from leaderboard.rendering import curves_section

    scorers = ["ssa", "softmax", "relu", "sigmoid", "sparsemax"]
    curves_section.render({"icl_mqar": curve_entry(scorers, dense=dense)}, Path("unused"))
    (fig, path), = figures
    assert path.name == "curves__icl_mqar.png"
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert [ax.get_title() for ax in panels] == ["softmax", "relu", "sigmoid", "sparsemax", "ssa"]
    for ax in panels:
        assert len(ax.lines) >= (1 if ax.get_title() == "softmax" else 2)
        lo, hi = ax.get_ylim()
        assert -0.05 <= lo and hi <= 1.05, (lo, hi)
        for band in ax.collections:
            ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
            assert ys.min() >= 0 and ys.max() <= 1
        assert ax.get_legend() is None
        stops = [line for line in ax.lines if list(line.get_xdata()) == [600, 600]]
        assert bool(stops) == dense
        # the dotted reference: the task's target where it declares one, else 0.9 of the
        # baseline's final
        level = 0.8 if dense else 0.9 * 0.95
        assert [line for line in ax.lines if list(line.get_ydata()) == [level, level]]
    assert ax.get_xscale() == ("linear" if dense else "log")
    legend, = fig.legends
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    legend_box = legend.get_window_extent(canvas.get_renderer())
    for ax in panels:
        assert not overlap(legend_box, ax.get_window_extent(canvas.get_renderer()))


def test_tuning_panels_star_each_chosen_rate(figures):
    from leaderboard.rendering import tuning_section

    points = lambda best: [{"point": {"lr": lr}, "mean": 0.9 if lr == best else 0.5}  # noqa: E731
                           for lr in (1e-3, 2e-3, 4e-3)]
    tuning = {"icl_mqar": {"metric": "val_accuracy", "direction": "higher", "scorers": {
        s: {"points": points(best), "chosen": {"lr": best}}
        for s, best in (("softmax", 2e-3), ("ssa", 4e-3))}}}
    tuning_section.render(tuning, Path("unused"))
    (fig, _), = figures
    panels = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in panels] == ["softmax", "ssa"]
    stars = [line for line in panels[1].lines if line.get_marker() == "*"]
    assert sorted(float(line.get_xdata()[0]) for line in stars) == [2e-3, 4e-3]
    assert panels[1].get_ylim()[1] <= 1.05


def test_bars_mark_the_baseline_and_perplexity_is_points_with_intervals(figures):
    rows = [row(s, m, track="decoder", task="decoder_lm", metric="heldout_perplexity_1x",
                tier=t, ci_low=m - 5, ci_high=m + 5, log_scale=True)
            for s, m, t in (("softmax", 260.0, 2), ("ssa", 210.0, 1), ("relu", 300.0, 3))]
    plots.bar_plots(SimpleNamespace(rows=pd.DataFrame(rows), meta={"baseline": "softmax"}),
                    Path("unused"))
    (fig, _), = figures
    ax = fig.axes[0]
    assert not ax.patches                      # no bars from zero
    assert ax.get_xlim()[0] > 150
    dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert [list(line.get_xdata()) for line in dashed] == [[260.0, 260.0]]
    assert "dashed: softmax" in ax.get_xlabel()
    bold = [t.get_text() for t in ax.get_yticklabels() if t.get_fontweight() == "bold"]
    assert bold == ["softmax (tier 2)"]
    # Tiers read in order: each tier darker than the next.
    from matplotlib.colors import to_rgb
    from leaderboard.rendering.palette import tier_colour
    lightness = [sum(to_rgb(tier_colour(t))) for t in (1, 2, 3, 4, 5, 6)]
    assert lightness == sorted(lightness)
    # An error rate keeps its bars, inside [0, 1].
    plots.bar_plots(SimpleNamespace(rows=pd.DataFrame([
        row("softmax", 0.5, track="icl", metric="error", ci_low=0.0, ci_high=1.0)])),
        Path("unused"))
    ax = figures[-1][0].axes[0]
    assert ax.patches and -0.05 <= ax.get_xlim()[0] and ax.get_xlim()[1] <= 1.05


def test_a_grid_of_the_evaluation_items_is_drawn_once_and_a_scorers_grid_per_scorer(figures):
    """distractor_rate is the same for every scorer at its seeds: one panel; the same values
    under an undeclared name stay one panel per scorer."""
    def grid(name, scorer, n=5):
        return {"profile": "cpu", "task": "icl_mqar", "grid": name, "scorer": scorer,
                "rows_name": "pairs", "cols_name": "length", "rows": [2, 4], "cols": [64, 128],
                "values": [[0.04, 0.09], [0.05, None]], "n": n}

    scorers = ("cosformer", "softmax", "sparsemax")
    grids = [grid(name, s) for name in ("distractor_rate", "accuracy") for s in scorers]
    plots.grid_plots(SimpleNamespace(grids=pd.DataFrame(grids)), Path("unused"))
    panels = {path.name: [ax.get_title() for ax in fig.axes if ax.get_title()]
              for fig, path in figures}
    assert panels["grid__cpu__icl_mqar__distractor_rate.png"] == ["every scorer (n=5)"]
    assert len(panels["grid__cpu__icl_mqar__accuracy.png"]) == 3
