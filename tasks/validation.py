"""The validation metric of a training task: what the tuning protocol (suite/tuning.py) selects
on and what the learning curve tracks.

In distribution, and on validation data disjoint from the items the task reports: fresh draws
from the stream ``(cell seed, task, "validation", ...)`` for the ICL tasks and MQAR (the reported
evaluation draws from other streams, and sweep cells run on tuning seeds no reporting cell has);
held-out documents or sentences outside the reported evaluation for the language models.

The learning curve evaluates the metric after :func:`curve_steps` optimizer steps (about 8,
log-spaced, the last one the final step) on the first ``curve_items`` validation items; the
record keeps it in ``extra["validation"]`` (docs/records.md).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

CURVE_POINTS = 8


@dataclass(frozen=True)
class Validation:
    """A task's declaration: the metric's name and direction, and ``reach``: the release reports
    the first curve step at which a scorer reaches ``reach`` x the baseline's final value
    (``direction = "higher"``) or ``baseline final / reach`` (``"lower"``)."""

    metric: str
    direction: str
    description: str
    reach: float = 0.9

    def __post_init__(self):
        if self.direction not in ("higher", "lower"):
            raise ValueError(f"validation direction must be 'higher' or 'lower', got "
                             f"{self.direction!r}")
        if not 0 < self.reach <= 1:
            raise ValueError(f"validation reach must lie in (0, 1], got {self.reach!r}")

    def block(self, value: float | None, items: int, curve: "Curve") -> dict:
        """The record's ``extra["validation"]``."""
        return {"metric": self.metric, "direction": self.direction, "reach": self.reach,
                "value": finite(value), "items": int(items), "curve": curve.as_dict()}


def finite(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def even_steps(total: int, points: int) -> list[int]:
    """``points`` evenly spaced step counts ending at ``total`` (fewer when total < points)."""
    return sorted({max(1, round(total * i / points)) for i in range(1, points + 1)}) \
        if total >= 1 and points > 0 else []


def curve_steps(total: int, points: int = CURVE_POINTS) -> list[int]:
    """About ``points`` log-spaced step counts from 1 to ``total`` (both included, no repeats)."""
    if total < 1:
        return []
    steps = {max(1, min(total, round(total ** (i / (points - 1))))) for i in range(points)}
    return sorted(steps | {total})


class Curve:
    """The validation metric at the steps of :func:`curve_steps` and, with ``even`` > 0, at
    ``even`` evenly spaced steps to ``total`` (every ``total / even`` steps: dense where training
    ends); ``maybe(step, evaluate)`` after every optimizer step evaluates when ``step`` (steps
    done) is one of them."""

    def __init__(self, total: int, items: int, points: int = CURVE_POINTS, even: int = 0):
        self.steps_due = set(curve_steps(total, points)) | set(even_steps(total, even))
        self.items = int(items)
        self.step: list[int] = []
        self.value: list[float | None] = []

    def maybe(self, step: int, evaluate: Callable[[], float]) -> None:
        if step in self.steps_due:
            self.step.append(int(step))
            self.value.append(finite(evaluate()))

    def as_dict(self) -> dict:
        return {"step": list(self.step), "value": list(self.value), "items": self.items}

    @staticmethod
    def from_dict(d: dict) -> "Curve":
        out = Curve(0, int(d.get("items", 0)))
        out.step, out.value = list(d.get("step", [])), list(d.get("value", []))
        return out

    @staticmethod
    def mean(curves: list["Curve"]) -> "Curve":
        """The pointwise mean of curves taken at the same steps (the quantifiers' two models),
        over the steps every curve reached (a model may stop training early)."""
        out = Curve(0, sum(c.items for c in curves))
        out.step = list(curves[0].step[:min(len(c.step) for c in curves)])
        for i in range(len(out.step)):
            values = [c.value[i] for c in curves]
            out.value.append(None if any(v is None for v in values)
                             else sum(values) / len(values))
        return out
