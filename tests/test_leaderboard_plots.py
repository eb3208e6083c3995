"""Plot layout: the cost plot names every point without overlapping labels (log axis), the bar
plot mentions hatching only when a bar is hatched, and grid titles do not collide. Checked on the
drawn figure (Agg renderer), from the text boxes matplotlib itself measures."""
from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

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
