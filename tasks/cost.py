"""The cost track as tasks: ``bench_scorers`` and ``bench_train``, one scorer per cell.

The measurements are ``tasks.bench``'s (see its doc): a cell times its scorer and its baseline
(softmax through SDPA for ``bench_scorers``, the softmax backbone for ``bench_train``) interleaved
round by round in the same process, so the ratio does not depend on other cells. The device
measured is part of the config (and so of the cell): timings of one device say nothing of another.

Both tasks run only when asked (``on_request``): a bare ``*`` in a profile's or the command line's
task list leaves them out, ``--tasks bench_*`` or their names select them. Their timings depend on
the machine and its load, unlike the quality tracks, and a profile meant to reproduce findings
should not spend its time on them.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from .base import Metric, RunContext, Task, TaskResult
from .bench import (BenchError, ScorerBenchConfig, TrainBenchConfig, bench_scorers, bench_train,
                    scorer_metric_names, scorer_outcome, train_metric_names, train_outcome)
from .registry import TaskError, register_task


@contextlib.contextmanager
def _threads(n: int):
    """``torch.set_num_threads(n)`` for the block (0: unchanged), then the previous count."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class BenchConfigError(TaskError, BenchError):
    """A cost task's config value that breaks its declaration."""


@dataclass
class BenchScorersConfig(ScorerBenchConfig):
    error = BenchConfigError


@dataclass
class BenchTrainConfig(TrainBenchConfig):
    error = BenchConfigError


def _metrics(names: dict[str, tuple[bool, str]], what: str) -> dict[str, Metric]:
    return {name: Metric(direction, headline=headline, description=f"{what}: {name}")
            for name, (headline, direction) in names.items()}


def _device(config) -> torch.device:
    device = torch.device(config.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TaskError(f"this cell measures device {config.device!r}, but no GPU is visible; "
                        f"run it on a GPU machine or set device = \"cpu\" in the task's config")
    return device


def _result(outcome) -> TaskResult:
    if outcome.error:
        raise RuntimeError(outcome.error)
    extra = dict(outcome.extra)
    if outcome.notes:
        extra["notes"] = outcome.notes
    return TaskResult(metrics=outcome.metrics, extra=extra)


def _run_bench(task: str, bench, outcome, scorer: str, scorer_kwargs: dict, config) -> TaskResult:
    """One bench cell: ``bench([scorer], config)`` on the config's device and threads, as a result."""
    if scorer_kwargs:
        raise TaskError(f"{task} measures each scorer with its default arguments; "
                        f"remove [scorer_kwargs] for this task")
    _device(config)
    with _threads(config.threads):
        return _result(outcome(bench([scorer], config), scorer))


@register_task("bench_scorers")
class BenchScorers(Task):
    """Forward + backward of the scorer's attend (as shipped and fast), ratio to softmax SDPA."""

    version = 2
    track = "cost"
    on_request = True
    Config = BenchScorersConfig

    def metrics_for(self, config) -> dict[str, Metric]:
        return _metrics(scorer_metric_names(config), "forward + backward")

    def run(self, scorer: str, scorer_kwargs: dict, seed: int, config, ctx: RunContext):
        return _run_bench(self.name, bench_scorers, scorer_outcome, scorer, scorer_kwargs, config)


@register_task("bench_train")
class BenchTrain(Task):
    """Training-step time of each backbone with the scorer, ratio to the softmax backbone."""

    version = 2
    track = "cost"
    on_request = True
    Config = BenchTrainConfig

    def metrics_for(self, config) -> dict[str, Metric]:
        return _metrics(train_metric_names(config), "training step")

    def run(self, scorer: str, scorer_kwargs: dict, seed: int, config, ctx: RunContext):
        return _run_bench(self.name, bench_train, train_outcome, scorer, scorer_kwargs, config)


BenchScorers.metrics = BenchScorers().metrics_for(BenchScorersConfig())  # of the default config
BenchTrain.metrics = BenchTrain().metrics_for(BenchTrainConfig())
