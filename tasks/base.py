"""What a task is: a config dataclass, declared metrics, and ``run`` for one cell.

A task owns its data, its backbone (built from a scorer name), its training loop and its
evaluation. ``run`` returns a :class:`TaskResult`; a training run that blows up raises
:class:`TrainingFailure`, which the harness records as status ``nan`` or ``diverged``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch

from registry.settings import SettingError, build

from .registry import TaskError
from .validation import Validation

HEADLINE_KEY = "headline_metrics"  # the optional Config field choosing a profile's headline metrics


@dataclass(frozen=True)
class Metric:
    """A metric's declaration: which direction is better, whether it is a headline number, and
    the fixed anchors of its normalized score.

    ``floor`` is the trivial predictor or chance (score 0) and ``ceiling`` perfect (score 1);
    the normalized score is ``clip((x - floor) / (ceiling - floor), 0, 1)``, on ``log(x)`` when
    ``log_scale`` (perplexity). An anchor that depends on the cell's data (the unigram
    perplexity of its corpus, the zero predictor's MSE) is reported by the cell in
    ``TaskResult.extra["anchors"][metric] = {"floor": ..., "ceiling": ...}`` and overrides the
    declared one. ``min_effect`` is the smallest difference, relative to the baseline's mean
    (absolute when that mean is 0), that can be called better or worse; the leaderboard holds
    each metric to the larger of it and its practical size (``leaderboard/method/resolution.py``),
    and a significant difference below that reads "within resolution".
    """

    direction: str  # "lower" or "higher"
    headline: bool = False
    description: str = ""
    floor: float | None = None
    ceiling: float | None = None
    log_scale: bool = False
    min_effect: float = 1e-6

    def __post_init__(self):
        if self.direction not in ("lower", "higher"):
            raise ValueError(f"metric direction must be 'lower' or 'higher', got {self.direction!r}")
        if self.min_effect < 0:
            raise ValueError(f"metric min_effect must be >= 0, got {self.min_effect!r}")

    def spec(self) -> dict:
        """The declaration as it is written into a record's ``metric_specs``."""
        return {"direction": self.direction, "headline": bool(self.headline), "floor": self.floor,
                "ceiling": self.ceiling, "log_scale": self.log_scale, "min_effect": self.min_effect}


class TrainingFailure(Exception):
    """Training ended early: ``status`` is ``nan`` or ``diverged``, ``step`` the step it happened."""

    def __init__(self, status: str, step: int, message: str):
        super().__init__(message)
        self.status = status
        self.step = step
        self.message = message


@dataclass
class TaskResult:
    """What one cell produced.

    metrics: scalar metrics, keys declared in ``Task.metrics``.
    grids:   named 2-D results, ``{"axes": {"rows": name, "cols": name}, "rows": [...],
             "cols": [...], "values": [[...]]}``.
    items:   per-item outcomes for paired tests, ``{metric: [value per item]}``; the mean of the
             list is the metric (same item order for every scorer at a given seed).
    extra:   anything else worth keeping (learned scorer parameters, loss curve), JSON-serializable.
    step:    the number of optimizer steps taken (None for tasks without training).
    """

    metrics: dict[str, float]
    grids: dict[str, dict] = field(default_factory=dict)
    items: dict[str, list] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    step: int | None = None


@dataclass
class RunContext:
    """Where and how a cell runs; given by the harness."""

    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    workdir: Path | None = None  # a directory for checkpoints and caches of this cell
    progress: Callable[[int, int], None] | None = None  # progress(done, total)
    # Split every training batch into this many micro-batches (the same effective batch); the
    # harness doubles it for the one retry after an out-of-memory (Task.supports_accumulation).
    accumulation: int = 1
    # The scorers' fast paths in training (``[run] fast``: "auto" or "off"), applied by
    # tasks.training.prepare_model, which notes the path each scorer ran in ``fast_paths``.
    fast: str = "off"
    fast_paths: dict[str, str] = field(default_factory=dict)
    # A sweep cell of the tuning protocol (suite/tuning.py): the task records its validation
    # metric and curve and may leave out the reported evaluation.
    sweep: bool = False
    # The CPU and wall seconds that earlier, interrupted processes spent training this cell, as
    # its checkpoints kept them (tasks/resume.py); the harness adds them to the record's times.
    resumed: dict[str, float] = field(default_factory=dict)
    # The machine, as records name it (``provenance.hardware``): a checkpoint resumes only on one
    # of the same name, as two CPUs of one vector capability can still round differently (their
    # BLAS takes another path on another vendor's CPU).
    hardware: str | None = None

    def report(self, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(done, total)


class Task:
    """Base class of every task. Subclasses set ``Config``, ``metrics``, ``track`` and ``version``."""

    name: ClassVar[str] = "?"
    version: ClassVar[int] = 1
    track: ClassVar[str] = "icl"
    supports_accumulation: ClassVar[bool] = False  # honours RunContext.accumulation
    # Run only when asked: a bare "*" in a task list leaves the task out (the cost track's benches)
    on_request: ClassVar[bool] = False
    Config: ClassVar[type]
    metrics: ClassVar[dict[str, Metric]] = {}
    # A training task's validation metric (tasks/validation.py): the tuning protocol selects on
    # it and every cell records its learning curve; None for a task without training.
    validation: ClassVar[Validation | None] = None

    def config(self, overrides: dict[str, Any] | None = None, *,
               source: str | Callable[[str], str] = "profile"):
        """The task's Config with ``overrides`` applied, checked by its declaration
        (:mod:`tasks.config`). An unknown key or a value its field does not allow is a TaskError
        that starts with ``source`` (or ``source(key)``: where that key was written)."""
        where = source if callable(source) else (lambda key: source)
        table = f"tasks.{self.name}"
        try:
            cfg = build(self.Config, dict(overrides or {}), table=table,
                        origin=lambda key: where(key or ""))
        except SettingError as e:
            raise TaskError(str(e)) from None
        except TaskError as e:
            raise TaskError(f"{where('')}: [{table}] {e}") from None
        self.metric_specs(cfg, source=where(HEADLINE_KEY))
        return cfg

    def metrics_for(self, config) -> dict[str, Metric]:
        """The metrics a cell of ``config`` declares (``metrics`` unless they depend on it)."""
        return self.metrics

    def metric_specs(self, config, *, source: str = "config") -> dict[str, dict]:
        """A record's ``metric_specs``: the metrics a cell of ``config`` (the Config dataclass)
        declares. A Config with a ``headline_metrics`` field lets a profile choose its headlines:
        a non-empty list replaces the declared headline set (e.g. a metric that cannot separate
        scorers at the profile's size is left out)."""
        metrics = self.metrics_for(config)
        chosen = list(getattr(config, HEADLINE_KEY, None) or ())
        if chosen:
            unknown = sorted(set(chosen) - set(metrics))
            if unknown:
                raise TaskError(f"{source}: {HEADLINE_KEY} of task {self.name!r} names unknown "
                                f"metric(s) {unknown}; choose among: {', '.join(sorted(metrics))}")
            metrics = {n: dataclasses.replace(m, headline=n in chosen) for n, m in metrics.items()}
        return {name: m.spec() for name, m in metrics.items()}

    def skip_reason(self, scorer: str) -> str | None:
        """Why this task cannot run ``scorer`` (e.g. a causal-only scorer in an encoder, or a
        scorer whose class names the ``tracks`` it runs on), or None."""
        from scorers import get_scorer_class

        tracks = getattr(get_scorer_class(scorer), "tracks", None)
        if tracks and self.track not in tracks:
            return (f"scorer {scorer!r} runs on the {', '.join(tracks)} track only; task "
                    f"{self.name!r} is on the {self.track} track")
        return None

    def run(self, scorer: str, scorer_kwargs: dict[str, Any], seed: int, config: Any,
            ctx: RunContext) -> TaskResult:
        raise NotImplementedError


def micro_batches(batch_size: int, accumulation: int) -> list[slice]:
    """``accumulation`` consecutive slices that cover a batch of ``batch_size`` rows (sizes differ
    by at most one). Weight each micro-batch's mean loss by its share of the rows."""
    if not 1 <= accumulation <= batch_size:
        raise TaskError(f"cannot split a batch of {batch_size} into {accumulation} micro-batches "
                        f"(accumulation must be between 1 and the batch size)")
    bounds = [i * batch_size // accumulation for i in range(accumulation + 1)]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
