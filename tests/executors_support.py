"""Shared helpers of the executor tests (``tests/test_executors_*.py``)."""
from __future__ import annotations

from pathlib import Path

from suite_support import loaded_plugin

PLUGIN = Path(__file__).with_name("executors_plugin_tasks.py").resolve()
TASK = "executors_test_attention"


def plugin_tasks():
    """Register the executor test tasks for the duration of a test, then restore the registries."""
    return loaded_plugin(PLUGIN)


def plan(task: str = TASK, scorers=("softmax",), seeds=(0,), **overrides):
    """Planned cells of ``task`` with ``overrides`` of its config."""
    from suite.cells import Cell, PlannedCell, resolve_config

    import scorers as registry
    from tasks import create_task

    t = create_task(task)
    config = resolve_config(t, overrides)
    return [PlannedCell(Cell(task=task, task_version=int(t.version), track=t.track, scorer=s,
                             scorer_version=int(registry.get_scorer_class(s).version),
                             scorer_kwargs={}, profile="test", seed=int(seed), config=config))
            for seed in seeds for s in scorers]


def job(task: str = TASK, scorer: str = "softmax", seed: int = 0, **overrides):
    from suite.runner import CellJob

    return CellJob(plan(task, (scorer,), (seed,), **overrides)[0].cell)


def results(store) -> dict:
    """{cell_id: record} of a result store."""
    return {r["cell_id"]: r for _, r in store.records()}


def same_outcome(a: dict, b: dict) -> bool:
    """Two records of the same cell agree on everything the cell computed."""
    return all(a[k] == b[k] for k in ("cell_id", "cell", "status", "step", "metrics", "items",
                                      "grids", "metric_specs"))
