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
   swept before anything is chosen; on a bimodal task only when some tuning seed reached the
   target at the chosen rate. Where no tuning seed reached the target at any rate, the choice is
   a tie on the plateau: a rule with ``unlearned`` ("low" or "high") then grows the learning-rate
   axes past that edge instead, up to ``unlearned_steps`` steps past it (default: the same cap),
   since a scorer on the plateau at every rate of the grid may learn only past it; without
   ``unlearned`` the grid stays as it is;
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

On a task whose outcome is bimodal (a seed either leaves its plateau or does not; the profile
declares which, ``[tuning] bimodal``), step 1 judges a rate first by the fraction of its tuning
cells whose validation metric reached the task's ``target``, then by their median, since one
seed's failure is what the rate is judged on there and a worst cell on the plateau would rank a
rate at which nothing learns above one at which one seed in four does not. Where a task declares a
tie tolerance (``[tuning] ties``), rates whose scores lie within it of the best are a tie, broken
by the area under the validation curve (the mean validation value over training up to the cap:
the rate that learns sooner), never by a difference below the seeds' noise.

A bimodal task may screen its rates (``[tuning] bimodal_screen``, :attr:`Rule.screen`): steps 1-3
run on the first ``screen`` tuning seeds only; the rate the screen chooses then runs every tuning
seed, and so does any other rate whose screen reached the target on a larger fraction of its
seeds than the confirmed rates do on all of theirs, until none is left; the choice is step 1-2's
over the confirmed rates on every seed (:func:`confirmed`). Where no screened seed reached the
target, nothing is confirmed and the screen's choice stands. A rate that cannot be chosen so
never runs its other seeds: on MQAR those are cells that train to the cap on the plateau.

The same records always give the same choice, so a resumed run chooses again what it chose before;
the reporting cells of a (task, scorer) wait until its sweep is complete.
"""
from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, Collection, NamedTuple

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
    rate_reached: dict[str, float] = field(default_factory=dict)   # rate -> fraction at target
    cells: list[tuple[Point, int]] = field(default_factory=list)   # (point, leading seeds) needed
    tied: list[str] = field(default_factory=list)   # the rates the area chose among (a tie)

    @property
    def complete(self) -> bool:
        return not self.pending


class Trial(NamedTuple):
    """One tuning cell as the rule sees it: its status, its validation value, whether it reached
    the task's target and the area under its validation curve (None: not known)."""

    status: str
    value: float | None
    reached: bool | None = None
    area: float | None = None


Cells = list[tuple]      # a Trial, or (status, validation value), per tuning seed


@dataclass(frozen=True)
class Rule:
    """Step 1's judgement of a rate (the module docstring): the worst cell, or with ``target`` the
    fraction of cells reaching it and then the median; ``tie``: the tolerance within which two
    rates' scores are a tie, broken by the area under the validation curve; ``screen``: how many
    leading tuning seeds screen every rate before the chosen rate runs the rest (with a target
    only; :func:`confirmed`); ``unlearned``: the edge ("low" or "high") past which the rate axes
    grow when no tuning seed reaches the target at any rate (with a target only), at most
    ``unlearned_steps`` steps past the profile's grid (None: as many as any growth)."""

    direction: str
    tie: float = 0.0
    target: float | None = None
    screen: int | None = None
    unlearned: str | None = None
    unlearned_steps: int | None = None

    def text(self) -> str:
        """The rule as each reporting record names it."""
        if self.target is None and not self.tie:
            return SELECTION_RULE
        first = (f"most tuning seeds reaching {self.target:g}, then the median"
                 if self.target is not None else "worst cell at the rate")
        tie = (f", rates within {self.tie:g} a tie broken by the area under the validation "
               f"curve" if self.tie else "")
        screen = (f"; every rate screened on {self.screen} tuning seeds, the chosen one (and any "
                  f"screened better than it turns out) confirmed on the rest" if self.screen
                  else "")
        steps = f" (up to {self.unlearned_steps} steps)" if self.unlearned_steps else ""
        unlearned = (f"; a grid on which no tuning seed reaches {self.target:g} grows past its "
                     f"{self.unlearned}est rate{steps}" if self.unlearned and self.target is not None
                     else "")
        return f"{first}{tie}, then best mean{screen}{unlearned}"

    def unlearned_limit(self, max_extensions: int) -> int:
        """How many steps past the profile's grid an unlearned grid may grow."""
        return self.unlearned_steps or max_extensions

    def params(self) -> dict:
        return {"tie": self.tie, **({} if self.target is None else {"target": self.target}),
                **({"screen": self.screen} if self.screen else {}),
                **({"unlearned": self.unlearned} if self.unlearned else {}),
                **({"unlearned_steps": self.unlearned_steps} if self.unlearned_steps else {})}

    @classmethod
    def of(cls, direction: str, params: dict | None) -> Rule:
        """The rule a reporting record's ``tuning`` block names (``rule_params``)."""
        params = params or {}
        return cls(direction, float(params.get("tie", 0.0)), params.get("target"),
                   params.get("screen"), params.get("unlearned"), params.get("unlearned_steps"))

    def score(self, cells: Cells) -> tuple[float, float] | None:
        """The rate's score, larger is better: (fraction reaching the target or 0, the signed
        median or worst value); None when any cell failed."""
        values = _ok_values(cells)
        if values is None:
            return None
        sign = 1.0 if self.direction == "higher" else -1.0
        if self.target is None:
            return 0.0, sign * (min(values) if sign > 0 else max(values))
        reached = [bool(Trial(*c).reached) for c in cells]
        return sum(reached) / len(reached), sign * statistics.median(values)

    def area(self, cells: Cells) -> float | None:
        """The mean signed area under the cells' validation curves (None when one is unknown)."""
        areas = [Trial(*c).area for c in cells]
        if any(a is None for a in areas):
            return None
        sign = 1.0 if self.direction == "higher" else -1.0
        return sign * math.fsum(areas) / len(areas)


def stopping_blocks(extra: dict | None) -> list[dict]:
    """The ``stopping`` blocks of a record's trained models (``extra["train"]["stopping"]``, or one
    per model under ``extra["train"][name]``); none under a fixed step count."""
    train = (extra or {}).get("train") or {}
    if "stopping" in train:
        return [train["stopping"]]
    return [m["stopping"] for m in train.values() if isinstance(m, dict) and "stopping" in m]


def curve_area(block: dict) -> float | None:
    """The mean validation value over the evaluations up to the cap, the best value standing for
    those after the stop (the state training ended in); None without a finite curve."""
    values = [v for v in block["curve"]["value"] if v is not None]
    if not values or block.get("best_value") is None:
        return None
    after = max(0, (block["cap"] - block["stop_step"]) // block["eval_every"])
    return (math.fsum(values) + after * block["best_value"]) / (len(values) + after)


def reached_target(blocks: list[dict]) -> bool | None:
    """Whether every model of a record reached its target; None when a block declares none."""
    if not blocks or any("target" not in b for b in blocks):
        return None
    return all(b.get("target_step") is not None for b in blocks)


def trial(status: str, value: float | None, blocks: list[dict]) -> Trial:
    """The rule's view of a sweep record: its status and validation value, and from its stopping
    ``blocks`` whether every model reached the target and the mean area under their curves."""
    reached = reached_target(blocks)
    areas = [curve_area(b) for b in blocks]
    area = (math.fsum(areas) / len(areas)) if areas and None not in areas else None
    return Trial(status, value, reached, area)


def _ok_values(cells: Cells) -> list[float] | None:
    """The values of cells that all ended ``ok`` with a finite value; None otherwise."""
    trials = [Trial(*c) for c in cells]
    if any(t.status != "ok" or t.value is None or not math.isfinite(t.value) for t in trials):
        return None
    return [t.value for t in trials]


def point_score(cells: Cells) -> float | None:
    """The mean validation metric over the tuning seeds; None when a seed failed or has no value."""
    values = _ok_values(cells)
    return None if values is None else math.fsum(values) / len(values)


def rate_of(point: Point, rates: Collection[str]) -> Point:
    """The coordinates of ``point`` on the learning-rate axes ``rates`` (the whole point when its
    grid has none)."""
    return {k: v for k, v in point.items() if k in rates} or dict(point)


@dataclass
class Pick:
    """Steps 1 and 2 of the rule over one swept grid: each point's mean, each rate's worst cell
    and the point they choose (None: every rate has a failed cell)."""

    scores: dict[str, float | None]
    rate_scores: dict[str, float | None]
    best: Point | None
    rate_reached: dict[str, float] = field(default_factory=dict)   # rate -> fraction at target
    tied: list[str] = field(default_factory=list)   # the rates the area chose among (a tie)


def pick(grid: list[Point], found: dict[str, Cells], direction: str, *,
         rates: Collection[str], rule: Rule | None = None) -> Pick:
    """The rule's choice over ``grid`` (in grid order), with the cells of every point in
    ``found`` (point label -> cells) and the learning-rate axes ``rates``."""
    rule = rule or Rule(direction)
    sign = 1.0 if direction == "higher" else -1.0
    scores = {point_label(p): point_score(found[point_label(p)]) for p in grid}
    at_rate: dict[str, list[Point]] = {}
    for p in grid:
        at_rate.setdefault(point_label(rate_of(p, rates)), []).append(p)
    cells = {rate: [c for p in members for c in found[point_label(p)]]
             for rate, members in at_rate.items()}
    judged = {rate: rule.score(cells[rate]) for rate in at_rate}
    rate_scores = {rate: None if j is None else sign * j[1] for rate, j in judged.items()}
    scored = [rate for rate in at_rate if judged[rate] is not None]
    if not scored:
        return Pick(scores, rate_scores, None)
    best_rate = max(scored, key=lambda r: judged[r])   # ties: the first
    tied: list[str] = []
    if rule.tie:
        within = [r for r in scored if judged[r][0] == judged[best_rate][0]
                  and judged[r][1] >= judged[best_rate][1] - rule.tie]
        areas = {r: rule.area(cells[r]) for r in within}
        if len(within) > 1 and all(a is not None for a in areas.values()):
            best_rate, tied = max(within, key=lambda r: areas[r]), within
    best = max(at_rate[best_rate], key=lambda p: sign * scores[point_label(p)])
    return Pick(scores, rate_scores, best,
                {r: j[0] for r, j in judged.items() if j is not None} if rule.target is not None
                else {}, tied)


def choose(base: dict[str, tuple[float, ...]], direction: str, max_extensions: int,
           lookup: Callable[[Point], list | None], *, rates: Collection[str],
           rule: Rule | None = None) -> Choice:
    """Run the protocol's choice over the records that ``lookup`` finds; ``rates``: the
    learning-rate axes.

    ``lookup(point)`` gives, per tuning seed in order, the cell of its record at that point (a
    :class:`Trial` or (status, validation value)) or None where that seed has none; or None when
    no seed has one. With ``rule.screen`` every rate is screened on that many leading seeds first
    and only the chosen rate runs the rest (:func:`confirmed`). Pure: the same records, the same
    choice."""
    if direction not in ("higher", "lower"):
        raise ValueError(f"direction must be 'higher' or 'lower', got {direction!r}")
    rule = rule or Rule(direction)
    axes = {k: tuple(v) for k, v in base.items()}
    while True:
        grid = points(axes)
        found = {point_label(p): lookup(p) for p in grid}
        width = rule.screen or max((len(c) for c in found.values() if c), default=0)
        needed = [(p, width) for p in grid]
        counts = {k: extensions(base[k], axes[k]) for k in axes}
        pending = _missing(needed, found)
        if pending or not width:
            return Choice(axes, _scores(found, width), pending or grid, extensions=counts,
                          cells=needed)
        screened = {label: cells[:width] for label, cells in found.items()}
        chosen = pick(grid, screened, direction, rates=rates, rule=rule)
        best = chosen.best
        if best is None:
            return Choice(axes, chosen.scores, [], None, extensions=counts,
                          rate_scores=chosen.rate_scores, cells=needed)
        edges, limit = _growth(axes, best, chosen, rule, rates, max_extensions)
        growable = [(k, side) for k, side in edges if counts[k][side] < limit]
        if growable:
            for k, side in growable:
                axes[k] = grown(axes[k], side)
            continue
        break
    if rule.screen:
        needed, chosen, pending = confirmed(grid, found, chosen, rule, rates, needed)
        if pending:
            return Choice(axes, chosen.scores, pending, extensions=counts, cells=needed)
        best = chosen.best
    edges = _edges(axes, best)
    return Choice(axes, chosen.scores, [], best,
                  at_edge=[f"{k}:{side}" for k, side in edges], extensions=counts,
                  rate_scores=chosen.rate_scores, rate_reached=chosen.rate_reached,
                  cells=needed, tied=chosen.tied)


def confirmed(grid: list[Point], found: dict[str, list | None], screen: Pick, rule: Rule,
              rates: Collection[str], needed: list[tuple[Point, int]]
              ) -> tuple[list[tuple[Point, int]], Pick, list[Point]]:
    """The confirmation stage of a screened choice. The rate the screen chooses runs every tuning
    seed when a screened seed reached the target there; so does every other rate whose screen
    reached it more often than the confirmed rates do on every seed, until none is left (and every
    rate the screen scored, where each confirmed one failed a cell on the other seeds). The
    choice is the rule's over the confirmed rates on every seed. Where no screened seed reached
    the target, the screen's choice stands (every rate is on its plateau: nothing to confirm).
    Gives the cells needed, the pick and the points still missing a seed."""
    at_rate: dict[str, list[Point]] = {}
    for p in grid:
        at_rate.setdefault(point_label(rate_of(p, rates)), []).append(p)
    reach = screen.rate_reached
    first = point_label(rate_of(screen.best, rates))
    if not reach.get(first):
        return needed, screen, []
    full = max(len(c) for c in found.values() if c)
    chosen, joining = [], [first]
    while joining:
        chosen += joining
        members = [p for r in chosen for p in at_rate[r]]
        labels = {point_label(p) for p in members}
        needed = [(p, full if point_label(p) in labels else n) for p, n in needed]
        pending = _missing([(p, full) for p in members], found)
        if pending:
            return needed, screen, pending
        picked = pick(members, found, rule.direction, rates=rates, rule=rule)
        if picked.best is None:        # every confirmed rate failed a cell: confirm the rest
            joining = [r for r in at_rate if r not in chosen and r in reach]
            continue
        level = max(picked.rate_reached.values())
        joining = [r for r in at_rate if r not in chosen and reach.get(r, 0.0) > level]
    return needed, Pick({**screen.scores, **picked.scores},
                        {**screen.rate_scores, **picked.rate_scores}, picked.best,
                        {**reach, **picked.rate_reached},
                        picked.tied if len(chosen) > 1 else screen.tied), []


def _growth(axes: dict[str, tuple[float, ...]], best: Point, chosen: Pick, rule: Rule,
            rates: Collection[str], max_extensions: int) -> tuple[list[tuple[str, str]], int]:
    """The (axis, side) edges step 3 grows past and the most steps past the profile's grid it
    grows there: the edges ``best`` lies on, up to ``max_extensions``; on a bimodal task only
    where a tuning seed reached the target at its rate, and where none did at any rate, the rate
    axes' ``rule.unlearned`` edge, up to ``rule.unlearned_steps``."""
    if rule.target is None or chosen.rate_reached.get(point_label(rate_of(best, rates))):
        return _edges(axes, best), max_extensions
    if rule.unlearned and not any(chosen.rate_reached.values()):
        return ([(k, rule.unlearned) for k in rate_of(best, rates)
                 if grows(axes[k], rule.unlearned)], rule.unlearned_limit(max_extensions))
    return [], 0


def _edges(axes: dict[str, tuple[float, ...]], best: Point) -> list[tuple[str, str]]:
    """The (axis, side) edges ``best`` lies on where its axis could grow."""
    return [(k, side) for k in axes for side in ("low", "high")
            if grows(axes[k], side) and best[k] == (axes[k][0] if side == "low" else axes[k][-1])]


def _missing(needed: list[tuple[Point, int]], found: dict[str, list | None]) -> list[Point]:
    """The points of ``needed`` (point, leading seeds) without a record on one of those seeds."""
    out = []
    for p, n in needed:
        cells = found[point_label(p)]
        if cells is None or len(cells) < n or any(c is None for c in cells[:n]):
            out.append(p)
    return out


def _scores(found: dict[str, list | None], width: int) -> dict[str, float | None]:
    """Each point's mean over its leading ``width`` seeds, where they all have records."""
    return {label: point_score(cells[:width]) for label, cells in found.items()
            if cells and len(cells) >= width and None not in cells[:width]}
