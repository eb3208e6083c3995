"""The cells of a tuned run: sweep cells first, then each (task, scorer)'s reporting cells at the
point its sweep chose (the protocol is in :mod:`suite.tuning` and
:mod:`leaderboard.loading.choice`).

``plan_run`` expands a profile as :func:`suite.cells.expand` does and, for every task with a grid
in ``[tuning]``, replaces its reporting cells by the sweep cells of the grid; the scheduler asks
:meth:`TuningPlan.follow_up` for more cells after every record (grown grids, then the reporting
cells of complete sweeps).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from leaderboard.loading.choice import (Choice, Point, choose, grown, grows, point_label,
                                        points, stopping_blocks, trial)
from leaderboard.loading.schema import BASELINE, SWEEP, TUNED, Cell
from registry.settings import RATE, keys_with_role

from .cells import PlannedCell, expand, resolve_config
from .profiles import Profile, ProfileError
from .tuning import Tuning, parse_tuning, record_block

ALL_FAILED = "every point of the tuning grid failed"


@dataclass
class Tuned:
    """One (task, scorer) under the protocol: the template of its cells (the profile's config)
    and its reporting seeds."""

    template: Cell
    seeds: list[int]


@dataclass
class TuningPlan:
    """The sweeps of a run; ``follow_up`` gives the cells whose turn has come."""

    profile: Profile
    tuning: Tuning
    tuned: dict[tuple[str, str], Tuned]
    metrics: dict[str, tuple[str, str]]     # task -> (validation metric, direction)
    rates: dict[str, list[str]] = field(default_factory=dict)   # task -> its role="rate" keys
    configs: dict[tuple[str, str], dict] = field(default_factory=dict)

    def config(self, task: str, point: Point) -> dict:
        key = (task, point_label(point))
        if key not in self.configs:
            overrides = {**self.profile.task_overrides.get(task, {}), **point}
            grid_keys = set(point)

            def source(k: str) -> str:
                if k in grid_keys:
                    return f"{self.tuning.origin(f'grid.{task}.{k}')} [tuning.grid.{task}]"
                return (self.profile.origin(f"tasks.{task}.{k}") if k else
                        f"{self.profile.origin(f'tuning.grid.{task}')} [tuning.grid.{task}]")

            from tasks import create_task

            self.configs[key] = resolve_config(create_task(task), overrides, source)
        return self.configs[key]

    def sweep_cell(self, tuned: Tuned, point: Point, seed: int) -> Cell:
        return dataclasses.replace(tuned.template, role=SWEEP, seed=int(seed),
                                   config=self.config(tuned.template.task, point))

    def sweep_planned(self, tuned: Tuned, point: Point, seed: int) -> PlannedCell:
        task = tuned.template.task
        metric, _ = self.metrics[task]
        return PlannedCell(self.sweep_cell(tuned, point, seed), None,
                           {"role": "sweep", "point": dict(point), "selection_metric": metric})

    def seeds(self, tuned: Tuned) -> tuple[int, ...]:
        return self.tuning.seeds_for(tuned.template.task)

    def rule(self, tuned: Tuned):
        task = tuned.template.task
        return self.tuning.rule(task, self.metrics[task][1], tuned.template.config.get("target"))

    def choice(self, tuned: Tuned, current: Callable[[Cell], dict | None]) -> Choice:
        task = tuned.template.task

        def lookup(point: Point):
            return [self.trial(tuned, point, seed, current) for seed in self.seeds(tuned)]

        return choose(self.tuning.grids[task], self.metrics[task][1], self.tuning.max_extensions,
                      lookup, rates=self.rates[task], rule=self.rule(tuned))

    def trial(self, tuned: Tuned, point: Point, seed: int,
              current: Callable[[Cell], dict | None]):
        """The rule's view of the sweep cell's record (None: no record)."""
        record = current(self.sweep_cell(tuned, point, seed))
        if record is None:
            return None
        extra = record.get("extra", {})
        return trial(record["status"], (extra.get("validation") or {}).get("value"),
                     stopping_blocks(extra))

    def follow_up(self, current: Callable[[Cell], dict | None]) -> list[PlannedCell]:
        """The sweep cells of every grid as it stands (grown where the records say so) and the
        reporting cells of every complete sweep."""
        out = []
        for tuned in self.tuned.values():
            choice = self.choice(tuned, current)
            out += [self.sweep_planned(tuned, p, s) for p, s in self.needed(tuned, choice)]
            if choice.complete:
                out += self.reporting(tuned, choice)
        return out

    def needed(self, tuned: Tuned, choice: Choice) -> list[tuple[Point, int]]:
        """The (point, seed) of every sweep cell the choice needs as it stands."""
        seeds = self.seeds(tuned)
        return [(p, s) for p, n in choice.cells for s in seeds[:n]]

    def reporting(self, tuned: Tuned, choice: Choice) -> list[PlannedCell]:
        task = tuned.template.task
        metric, _ = self.metrics[task]
        sweep_ids = [self.sweep_cell(tuned, p, s).id for p, s in self.needed(tuned, choice)]
        block = record_block(choice, self.tuning.grids[task], metric, self.rule(tuned), sweep_ids)
        if choice.chosen is None:
            reason = (f"{ALL_FAILED} ({len(sweep_ids)} sweep cells; `scorebench show` prints "
                      f"them)")
            return [PlannedCell(dataclasses.replace(tuned.template, seed=s, role=TUNED), reason,
                                block) for s in tuned.seeds]
        config = self.config(task, choice.chosen)
        return [PlannedCell(dataclasses.replace(tuned.template, seed=s, config=config,
                                                role=TUNED), None, block)
                for s in tuned.seeds]

    def base_sweep(self) -> list[PlannedCell]:
        """The sweep cells of the grids as the profile declares them (before any growth), on the
        seeds that screen them, one scorer after another, the baseline first (so that a run
        stopped part-way has the scorers it finished beside it): with the follow-ups queued
        first, a run finishes a scorer before it starts the next, and a worker its last cells
        leave idle takes the next one's."""
        scorers = list(dict.fromkeys(scorer for _, scorer in self.tuned))
        scorers.sort(key=lambda scorer: scorer != BASELINE)
        ordered = sorted(self.tuned.items(), key=lambda item: scorers.index(item[0][1]))
        return [self.sweep_planned(t, p, s) for _, t in ordered
                for p in points(self.tuning.grids[t.template.task])
                for s in self.seeds(t)[:self.rule(t).screen or None]]


@dataclass
class RunPlan:
    """What ``scorebench run`` runs: ``planned`` (untuned cells and the declared sweep) and the
    tuning plan that adds the rest as records arrive (None without ``[tuning]``)."""

    planned: list[PlannedCell]
    tuning: TuningPlan | None = None
    pending_reports: list[PlannedCell] = field(default_factory=list)  # for a dry run

    def follow_up(self):
        return None if self.tuning is None else self.tuning.follow_up


def check_tunable(tuning: Tuning, task: str) -> None:
    """Every axis of the task's grid is a field its Config declares tunable (tasks.config), so
    that no grid changes a cell's budget or data."""
    from tasks import get_task_class
    from tasks.config import tunable_keys

    allowed = tunable_keys(get_task_class(task).Config)
    for key in tuning.grids[task]:
        if key not in allowed:
            raise ProfileError(
                f"{tuning.origin(f'grid.{task}.{key}')}: [tuning.grid.{task}] {key}: task "
                f"{task!r} does not declare {key!r} tunable; its tunable keys: "
                f"{', '.join(allowed) or 'none'} (a Config field declares it with "
                f"setting(default, tunable=True), tasks/config.py)")


def plan_run(profile: Profile, *, tasks: str | None = None, scorers: str | None = None,
             seeds: list[int] | None = None, tune: bool = True) -> RunPlan:
    """The cells of ``profile`` (see :func:`suite.cells.expand`), tuned as its ``[tuning]`` says
    unless ``tune`` is False."""
    from tasks import get_task_class

    planned = expand(profile, tasks=tasks, scorers=scorers, seeds=seeds)
    tuning = parse_tuning(profile) if tune else None
    if tuning is None:
        return RunPlan(planned)
    metrics, rates = {}, {}
    for task in tuning.grids:
        try:
            cls = get_task_class(task)
        except Exception as e:  # noqa: BLE001 - a TaskError naming the task and the choices
            raise ProfileError(f"{tuning.origin(f'grid.{task}')}: [tuning.grid.{task}]: {e}") \
                from None
        if cls.validation is None:
            raise ProfileError(f"{tuning.origin(f'grid.{task}')}: [tuning.grid.{task}]: task "
                               f"{task!r} does not train and declares no validation metric; "
                               f"remove its grid")
        metrics[task] = (cls.validation.metric, cls.validation.direction)
        rates[task] = keys_with_role(cls.Config, RATE)
    reporting_seeds = sorted({p.cell.seed for p in planned if p.cell.task in tuning.grids})
    overlap = sorted(set(reporting_seeds) & set(tuning.all_seeds()))
    if overlap:
        raise ProfileError(f"{tuning.origin('seeds')}: [tuning] seeds {tuning.all_seeds()} share "
                           f"seed(s) {overlap} with the reporting seeds {reporting_seeds}; the "
                           f"choice must never see a reporting seed: pick disjoint seeds")
    plan = TuningPlan(profile, tuning, {}, metrics, rates)
    for task in tuning.bimodal:            # a bimodal task names its target
        tuning.rule(task, metrics[task][1], plan.config(task, {}).get("target"))
    for task in tuning.grids:              # every point resolves (unknown keys, bad values)
        for point in points(tuning.grids[task]):
            plan.config(task, point)
        check_tunable(tuning, task)
    untuned, pending = [], []
    for p in planned:
        key = (p.cell.task, p.cell.scorer)
        if p.cell.task not in tuning.grids or p.skip_reason:
            untuned.append(p)
            continue
        if key not in plan.tuned:
            plan.tuned[key] = Tuned(dataclasses.replace(p.cell, seed=0), [])
        plan.tuned[key].seeds.append(p.cell.seed)
        pending.append(p)
    return RunPlan(untuned + plan.base_sweep(), plan, pending)


IF_UNLEARNED = "sweep (grown grid: only where no screened seed reaches the target)"


def unlearned_growth(tp: TuningPlan, tuned: Tuned, choice: Choice,
                     current: Callable[[Cell], dict | None]) -> list[Point]:
    """The points a screened bimodal grid still grows by where no screened seed reaches the
    target (``[tuning] unlearned_grows``): none once a seed of the sweep has reached it."""
    rule = tp.rule(tuned)
    side = rule.unlearned
    if not side or choice.complete:
        return []
    if any((t := tp.trial(tuned, p, seed, current)) and t.reached
           for p, n in choice.cells for seed in tp.seeds(tuned)[:n]):
        return []
    axes = dict(choice.axes)
    for k in tp.rates[tuned.template.task]:
        for _ in range(rule.unlearned_limit(tp.tuning.max_extensions)
                       - choice.extensions[k][side]):
            if grows(axes[k], side):
                axes[k] = grown(axes[k], side)
    return [p for p in points(axes) if p not in points(choice.axes)]


def dry_run_cells(plan: RunPlan, current: Callable[[Cell], dict | None]
                  ) -> list[tuple[PlannedCell, str]]:
    """Every cell a run of ``plan`` would hold as the records stand, with a note: untuned cells,
    the sweep (grown where the records say so), the reporting cells of complete sweeps, and, for
    the sweeps still running, their reporting cells at the profile's config (their point is not
    known yet; the time of a cell does not depend on it)."""
    out = [(p, "") for p in plan.planned if not p.cell.is_sweep]
    if plan.tuning is None:
        return out
    tp = plan.tuning
    for tuned in tp.tuned.values():
        choice = tp.choice(tuned, current)
        base = points(tp.tuning.grids[tuned.template.task])
        for p, s in tp.needed(tuned, choice):
            note = "sweep" if p in base else "sweep (grown grid)"
            out.append((tp.sweep_planned(tuned, p, s), note))
        screen = tp.rule(tuned).screen
        if screen and not choice.complete and all(n <= screen for _, n in choice.cells):
            middle = base[len(base) // 2]
            out += [(tp.sweep_planned(tuned, middle, s),
                     "sweep (confirmation: expected at one rate, once a screened seed learns)")
                    for s in tp.seeds(tuned)[screen:]]
            out += [(tp.sweep_planned(tuned, p, s), IF_UNLEARNED)
                    for p in unlearned_growth(tp, tuned, choice, current)
                    for s in tp.seeds(tuned)[:screen]]
        if choice.complete:
            label = point_label(choice.chosen) if choice.chosen else "none: every point failed"
            out += [(r, f"report at {label}") for r in tp.reporting(tuned, choice)]
        else:
            out += [(PlannedCell(dataclasses.replace(tuned.template, seed=s, role=TUNED)),
                     "report, after its sweep (point not chosen yet)") for s in tuned.seeds]
    return out
