"""The tuning protocol: one grid per task, the same for every scorer, searched on tuning seeds and
scored on the task's validation metric; the reporting cells run at the chosen point.

A profile's ``[tuning]`` table::

    [tuning]
    seeds = [1000, 1001]        # tuning seeds (a count n means 1000 .. 1000+n-1); disjoint from
                                # the reporting seeds of [run] seeds / --seeds
    max_extensions = 2          # how many steps the grid may grow past each edge of each axis
    bimodal = ["icl_mqar"]      # tasks whose seeds either learn or stay on a plateau: tuned on
    bimodal_seeds = 4           # these seeds and judged by the fraction reaching the task's target
    bimodal_screen = 2          # every rate screened on the first 2; the chosen one runs the rest
    unlearned_grows = "low"     # a bimodal grid where no seed reaches the target grows that way,
    unlearned_extensions = 3    # up to 3 steps (default: max_extensions)
    ties = {icl_mqar = 0.01}    # task -> tolerance within which two rates are a tie
    [tuning.grid.icl_mqar]      # config key -> values; the points are the product of the axes
    lr = [2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3]
    [tuning.grid.encoder_mlm]
    lr = [2.5e-4, 5e-4, 1e-3, 2e-3]
    weight_decay = [0.0, 0.1]

``enabled = false`` turns a table inherited from another profile off. Tasks without a grid run
untuned at the profile's config.

The sweep cells and the choice made from them: :mod:`leaderboard.loading.choice`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from leaderboard.loading.choice import Choice, Rule

from .profiles import Profile, ProfileError


@dataclass(frozen=True)
class Tuning:
    """A profile's resolved ``[tuning]``: tuning seeds, the growth cap and a grid per task, the
    bimodal tasks (with their own tuning seeds) and the tie tolerances."""

    seeds: tuple[int, ...]
    max_extensions: int
    grids: dict[str, dict[str, tuple[float, ...]]]
    origin: Callable[[str], str] = field(default=lambda key: "profile", compare=False)
    bimodal: tuple[str, ...] = ()
    bimodal_seeds: tuple[int, ...] = ()
    ties: dict[str, float] = field(default_factory=dict)
    bimodal_screen: int = 0
    unlearned_grows: str | None = None
    unlearned_extensions: int | None = None

    def seeds_for(self, task: str) -> tuple[int, ...]:
        return self.bimodal_seeds if task in self.bimodal else self.seeds

    def all_seeds(self) -> list[int]:
        return sorted({*self.seeds, *(self.bimodal_seeds if self.bimodal else ())})

    def rule(self, task: str, direction: str, target: float | None) -> Rule:
        """The rule that judges ``task``'s rates (``target``: the task's, for a bimodal task)."""
        if task in self.bimodal and target is None:
            raise ProfileError(f"{self.origin('bimodal')}: [tuning] bimodal names {task!r}, "
                               f"whose config has no target; set [tasks.{task}] target (the "
                               f"validation level a seed must reach)")
        bimodal = task in self.bimodal
        return Rule(direction, self.ties.get(task, 0.0), target if bimodal else None,
                    (self.bimodal_screen or None) if bimodal else None,
                    self.unlearned_grows if bimodal else None,
                    self.unlearned_extensions if bimodal else None)


def parse_tuning(profile: Profile) -> Tuning | None:
    """The profile's tuning protocol, or None when it has none (or ``enabled = false``). The
    table is checked by its declaration when the profile loads (:class:`suite.tables.
    TuningSettings`); here each grid: an empty one, a non-number or a repeated value is an error
    naming the key and the profile file. Unknown or untunable task config keys, and values the
    task's declaration does not allow, are found by :func:`suite.cells.expand`, which resolves
    every point."""
    settings = profile.tuning
    if settings is None or not settings.enabled:
        return None
    where = profile.origin
    grids: dict[str, dict[str, tuple[float, ...]]] = {}
    for task, axes in settings.grid.items():
        if not axes:
            raise ProfileError(f"{where(f'tuning.grid.{task}')}: [tuning.grid.{task}] is empty; "
                               f"give at least one config key with a list of values "
                               f"(e.g. lr = [1e-4, 3e-4, 1e-3, 3e-3])")
        grids[task] = {key: _axis(values, f"{where(f'tuning.grid.{task}.{key}')}: "
                                          f"[tuning.grid.{task}] {key}")
                       for key, values in axes.items()}
    return Tuning(seeds=tuple(settings.seed_list), max_extensions=settings.max_extensions,
                  grids=grids, origin=lambda key: where(f"tuning.{key}"),
                  bimodal=tuple(settings.bimodal),
                  bimodal_seeds=tuple(settings.seeds_for(settings.bimodal[0]))
                  if settings.bimodal else (),
                  ties=dict(settings.ties), bimodal_screen=settings.bimodal_screen,
                  unlearned_grows=settings.unlearned_grows,
                  unlearned_extensions=settings.unlearned_extensions)


def _axis(values: Any, where: str) -> tuple[float, ...]:
    if not isinstance(values, list) or not values:
        raise ProfileError(f"{where} must be a non-empty list of numbers, got {values!r}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               for v in values):
        raise ProfileError(f"{where} must hold finite numbers only, got {values!r}")
    if len(set(values)) != len(values):
        raise ProfileError(f"{where} repeats a value: {values!r}")
    return tuple(sorted(values))


def record_block(choice: Choice, base: dict, metric: str, rule: Rule,
                 sweep_cells: list[str]) -> dict:
    """The ``tuning`` object of a reporting cell's record (docs/records.md)."""
    return {
        "role": "report", "point": dict(choice.chosen) if choice.chosen else None,
        "grid": {k: list(v) for k, v in choice.axes.items()},
        "base_grid": {k: list(v) for k, v in base.items()},
        "selection_metric": metric, "direction": rule.direction,
        "rule": rule.text(), "scores": dict(choice.scores),
        "rate_scores": dict(choice.rate_scores), "at_edge": list(choice.at_edge),
        "extensions": choice.extensions, "sweep_cells": sorted(sweep_cells),
        **({"rule_params": rule.params(), "rate_reached": dict(choice.rate_reached)}
           if rule.text() != Rule(rule.direction).text() else {}),
    }
