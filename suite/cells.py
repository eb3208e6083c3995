"""Cells: one (task@version, scorer@version + kwargs, profile, seed, config) each, and their ids.

``expand`` turns a profile (and command-line selections) into the list of cells to run, in the
order seed -> task -> scorer, so that a run stopped early holds complete paired comparisons for the
first seeds. The task's config is resolved in full (defaults plus profile overrides), so a changed
default changes the ``cell_id``; the fields a config calls inert (``Settings.inert``: the settings
of a mode that is off) are left out, so adding such a mode changes no cell.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from leaderboard.loading.schema import Cell, canonical_json
from registry.settings import effective

from .profiles import Profile, ProfileError

@dataclass(frozen=True)
class PlannedCell:
    """A cell and, when the task cannot run the scorer, why (recorded with status ``skipped``);
    ``tuning``: the record's ``tuning`` object (suite/tuning.py) of a tuned or sweep cell."""

    cell: Cell
    skip_reason: str | None = None
    tuning: dict | None = None


def resolve_config(task, overrides: dict[str, Any], source=lambda key: "overrides") -> dict:
    """The task's full config as a JSON object: its defaults with ``overrides`` applied, checked
    by the task's Config declaration (:mod:`tasks.config`), less its inert fields.

    ``source(key)`` says where an override came from, for error messages."""
    from tasks import TaskError

    try:
        config = effective(task.config(overrides, source=source))
    except TaskError as e:
        raise ProfileError(str(e)) from None
    try:
        return json.loads(canonical_json(config))
    except (TypeError, ValueError) as e:
        raise ProfileError(f"task {task.name!r}: its Config must hold JSON values (numbers, "
                           f"strings, booleans, lists): {e}") from None


def config_object(task, config: dict):
    """The task's Config dataclass from a cell's JSON config."""
    return task.config(config, source=f"cell config of task {task.name!r}")


def _split(spec: list[str] | str) -> list[str]:
    parts = spec if isinstance(spec, list) else spec.split(",")
    return [p.strip() for p in parts if p.strip()]


def resolve_tasks(spec: list[str] | str) -> list[str]:
    """Task names from names or wildcards; an unknown name is a "did you mean" error. A bare
    ``*`` leaves out the tasks that run only when asked (``Task.on_request``: the benches)."""
    from tasks import TaskError, get_task_class, list_tasks

    names: list[str] = []
    for part in _split(spec):
        if any(c in part for c in "*?["):
            found = list_tasks(part)
            if part == "*":
                found = [n for n in found if not get_task_class(n).on_request]
            if not found:
                raise TaskError(f"no task matches {part!r}; `scorebench ls tasks` lists them")
        else:
            found = [get_task_class(part).name]
        names += [n for n in found if n not in names]
    return names


def expand(profile: Profile, *, tasks: str | None = None, scorers: str | None = None,
           seeds: list[int] | None = None) -> list[PlannedCell]:
    """The cells of ``profile``; ``tasks``/``scorers``/``seeds`` replace the profile's choice."""
    import scorers as scorer_registry
    from scorers.arguments import CONTEXT_KWARGS
    from tasks import TaskError, create_task

    for name in profile.task_overrides:
        try:
            create_task(name)
        except TaskError as e:
            raise ProfileError(f"{profile.origin(f'tasks.{name}')}: section [tasks.{name}]: "
                               f"{e}") from None
    task_names = resolve_tasks(tasks if tasks is not None else profile.tasks)
    scorer_spec = scorers if scorers is not None else profile.scorers
    scorer_names = scorer_registry.resolve_scorers(",".join(_split(scorer_spec)))
    kwargs_by_scorer: dict[str, dict] = {}
    for name, kwargs in profile.scorer_kwargs.items():
        try:
            canonical = scorer_registry.canonical_name(name)
        except scorer_registry.ScorerError as e:
            raise ProfileError(f"{profile.origin(f'scorer_kwargs.{name}')}: section "
                               f"[scorer_kwargs.{name}]: {e}") from None
        accepted = set(scorer_registry.scorer_parameters(canonical))
        accepted -= set(CONTEXT_KWARGS)
        unknown = sorted(set(kwargs) - accepted)
        if unknown:
            first = f"scorer_kwargs.{name}.{unknown[0]}"
            raise ProfileError(f"{profile.origin(first)}: [scorer_kwargs.{name}] unknown key(s) "
                               f"{unknown}; scorer {canonical!r} accepts {sorted(accepted)}")
        kwargs_by_scorer[canonical] = json.loads(canonical_json(kwargs))

    def config_of(name: str) -> dict:
        return resolve_config(create_task(name), profile.task_overrides.get(name, {}),
                              lambda key: profile.origin(f"tasks.{name}.{key}"))

    # Every [tasks.*] section is checked, also those of tasks not selected for this run.
    configs = {name: config_of(name) for name in [*task_names, *profile.task_overrides]}
    task_objects = {name: create_task(name) for name in task_names}

    planned = []
    for seed in (seeds if seeds is not None else profile.seeds):
        for name in task_names:
            task = task_objects[name]
            for scorer in scorer_names:
                cell = Cell(
                    task=name, task_version=int(task.version), track=task.track,
                    scorer=scorer,
                    scorer_version=int(scorer_registry.get_scorer_class(scorer).version),
                    scorer_kwargs=kwargs_by_scorer.get(scorer, {}), profile=profile.name,
                    seed=int(seed), config=configs[name],
                )
                planned.append(PlannedCell(cell, task.skip_reason(scorer)))
    return planned
