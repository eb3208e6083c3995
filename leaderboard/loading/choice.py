"""The choice of the tuning protocol (:mod:`suite.tuning`).

Sweep cells (``Cell.role = "sweep"``) train at the task's full budget on every tuning seed at
every point and record the task's validation metric (``Task.validation``; fresh validation data,
never the reported evaluation items). The choice is a pure function of those records, made in two
steps, the learning rate first:

1. a learning rate is judged by its worst tuning cell: the worst validation value over every
   point at that rate (every value of the other axes) and every tuning seed; a rate with a cell
   that did not end ``ok`` (diverged, nan, error, ...) or has no value has no score and is never
   chosen. The learning rates are the axes whose task declares them ``role="rate"``
   (:mod:`registry.settings`); in a grid without one every point is its own rate;
2. the best rate is the one whose worst cell is best; at that rate, the chosen point is the one
   with the best mean over the tuning seeds (ties, in both steps: the first in grid order);
3. when the chosen point lies on an edge of an axis that can grow there (the two values nearest
   that edge are > 0) and the axis has grown fewer than ``max_extensions`` steps past that edge,
   the axis gains one value past it, at the ratio of those two values, and the new points are
   swept before anything is chosen;
4. otherwise that point is chosen; a chosen point still on a growable edge is flagged
   ``at_edge``. No scored rate: the scorer's reporting cells are recorded ``skipped`` with the
   reason ("every point of the tuning grid failed").

Why the rate is judged by its worst cell: with two tuning seeds, a rate at the edge of a scorer's
stable range shows itself as one cell that trained badly while its neighbours did well, and the
reporting seeds at that rate then blow up as often as not (on the cpu profile's decoder, a point
whose two tuning seeds were both fine, next to a weight decay at the same rate with one seed
0.46 nats worse, gave held-out perplexities of 273-511 on its 5 reporting seeds, against 220-228
at the point this rule chooses). A mean over two seeds hides that; the rate's worst cell does not.
Where a rate's cells agree, its worst cell is close to its mean, so the rule moves a choice mostly
where cells disagree.

The same records always give the same choice, so a resumed run chooses again what it chose before;
the reporting cells of a (task, scorer) wait until its sweep is complete.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable, Collection

# Named in every reporting record's ``tuning`` block, so that a release tells which rule chose.
SELECTION_RULE = "worst cell at the rate, then best mean"
SIGNIFICANT_DIGITS = 6


def round_value(value: float) -> float:
    """A grid value rounded to 6 significant digits, so that a grown axis holds the same
    numbers wherever it is computed."""
    return float(f"{float(value):.{SIGNIFICANT_DIGITS}g}")


# --------------------------------------------------------------------------------- points

Point = dict[str, float]


def points(axes: dict[str, tuple[float, ...]]) -> list[Point]:
    """Every point of the grid, in grid order (the product of the axes, each ascending)."""
    keys = list(axes)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(axes[k] for k in keys))]


def point_label(point: Point) -> str:
    return ",".join(f"{k}={v:g}" for k, v in point.items())


def grows(axis: tuple[float, ...], side: str) -> bool:
    """Whether ``axis`` can grow past its ``side`` ("low" or "high") edge: the two values nearest
    it are both > 0 (a geometric step)."""
    if len(axis) < 2:
        return False
    pair = axis[:2] if side == "low" else axis[-2:]
    return pair[0] > 0 and pair[1] > 0


def grown(axis: tuple[float, ...], side: str) -> tuple[float, ...]:
    """``axis`` with one more value past its ``side`` edge, at the ratio of the two values there."""
    if side == "low":
        return (round_value(axis[0] * axis[0] / axis[1]), *axis)
    return (*axis, round_value(axis[-1] * axis[-1] / axis[-2]))


def extensions(base: tuple[float, ...], axis: tuple[float, ...]) -> dict[str, int]:
    """How many values ``axis`` has past each edge of ``base``."""
    return {"low": sum(v < base[0] for v in axis), "high": sum(v > base[-1] for v in axis)}


@dataclass
class Choice:
    """Where the sweep of one (task, scorer) stands: ``pending`` lists the points still without a
    record on some tuning seed; otherwise ``chosen`` is the point (None: every rate failed)."""

    axes: dict[str, tuple[float, ...]]
    scores: dict[str, float | None]         # point label -> mean validation metric (None: failed)
    pending: list[Point]
    chosen: Point | None = None
    at_edge: list[str] = field(default_factory=list)   # "lr:high" ...
    extensions: dict[str, dict[str, int]] = field(default_factory=dict)
    rate_scores: dict[str, float | None] = field(default_factory=dict)  # rate label -> worst cell

    @property
    def complete(self) -> bool:
        return not self.pending


Cells = list[tuple[str, float | None]]      # (status, validation value) per tuning seed


def _ok_values(cells: Cells) -> list[float] | None:
    """The values of cells that all ended ``ok`` with a finite value; None otherwise."""
    if any(s != "ok" or v is None or not math.isfinite(v) for s, v in cells):
        return None
    return [v for _, v in cells]


def point_score(cells: Cells) -> float | None:
    """The mean validation metric over the tuning seeds; None when a seed failed or has no value."""
    values = _ok_values(cells)
    return None if values is None else math.fsum(values) / len(values)


def rate_of(point: Point, rates: Collection[str]) -> Point:
    """The coordinates of ``point`` on the learning-rate axes ``rates`` (the whole point when its
    grid has none)."""
    return {k: v for k, v in point.items() if k in rates} or dict(point)


def rate_score(cells: Cells, direction: str) -> float | None:
    """The worst validation value of the cells at one rate; None when any of them failed."""
    values = _ok_values(cells)
    if values is None:
        return None
    return min(values) if direction == "higher" else max(values)


@dataclass
class Pick:
    """Steps 1 and 2 of the rule over one swept grid: each point's mean, each rate's worst cell
    and the point they choose (None: every rate has a failed cell)."""

    scores: dict[str, float | None]
    rate_scores: dict[str, float | None]
    best: Point | None


def pick(grid: list[Point], found: dict[str, Cells], direction: str, *,
         rates: Collection[str]) -> Pick:
    """The rule's choice over ``grid`` (in grid order), with the cells of every point in
    ``found`` (point label -> cells) and the learning-rate axes ``rates``."""
    sign = 1.0 if direction == "higher" else -1.0
    scores = {point_label(p): point_score(found[point_label(p)]) for p in grid}
    at_rate: dict[str, list[Point]] = {}
    for p in grid:
        at_rate.setdefault(point_label(rate_of(p, rates)), []).append(p)
    rate_scores = {rate: rate_score([c for p in members for c in found[point_label(p)]],
                                    direction)
                   for rate, members in at_rate.items()}
    scored = [rate for rate in at_rate if rate_scores[rate] is not None]
    if not scored:
        return Pick(scores, rate_scores, None)
    best_rate = max(scored, key=lambda r: sign * rate_scores[r])   # ties: the first
    best = max(at_rate[best_rate], key=lambda p: sign * scores[point_label(p)])
    return Pick(scores, rate_scores, best)


def choose(base: dict[str, tuple[float, ...]], direction: str, max_extensions: int,
           lookup: Callable[[Point], Cells | None], *, rates: Collection[str]) -> Choice:
    """Run the protocol's choice over the records that ``lookup`` finds; ``rates``: the
    learning-rate axes.

    ``lookup(point)`` gives the (status, validation value) of each tuning seed's record at that
    point, or None while some seed has no record. Pure: the same records, the same choice."""
    if direction not in ("higher", "lower"):
        raise ValueError(f"direction must be 'higher' or 'lower', got {direction!r}")
    axes = {k: tuple(v) for k, v in base.items()}
    while True:
        grid = points(axes)
        found = {point_label(p): lookup(p) for p in grid}
        pending = [p for p in grid if found[point_label(p)] is None]
        counts = {k: extensions(base[k], axes[k]) for k in axes}
        if pending:
            scores = {label: point_score(cells) for label, cells in found.items()
                      if cells is not None}
            return Choice(axes, scores, pending, extensions=counts)
        chosen = pick(grid, found, direction, rates=rates)
        best = chosen.best
        if best is None:
            return Choice(axes, chosen.scores, [], None, extensions=counts,
                          rate_scores=chosen.rate_scores)
        edges = [(k, side) for k in axes for side in ("low", "high")
                 if grows(axes[k], side)
                 and best[k] == (axes[k][0] if side == "low" else axes[k][-1])]
        growable = [(k, side) for k, side in edges if counts[k][side] < max_extensions]
        if growable:
            for k, side in growable:
                axes[k] = grown(axes[k], side)
            continue
        return Choice(axes, chosen.scores, [], best,
                      at_edge=[f"{k}:{side}" for k, side in edges], extensions=counts,
                      rate_scores=chosen.rate_scores)
