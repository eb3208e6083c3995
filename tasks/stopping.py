"""The stopping rule of a training task's converged mode (``stop = "converged"``).

The validation metric is evaluated every ``eval_every`` optimizer steps and at the cap. An
evaluation improves when it beats the best value so far by more than ``tolerance`` (in the
metric's units, in its direction); the best state is the state of the last improvement, and the
first evaluation is the first best. Training stops, with reason ``"converged"``, once ``patience``
evaluations in a row have not improved, counted only after a first improvement: a model still on
its initial plateau trains on. Otherwise it stops at the cap, with reason ``"cap"``; a cell whose
metric never improved on its first evaluation has not ``learned`` within the cap.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .validation import finite

STEPS, CONVERGED = "steps", "converged"
STOP_MODES = (STEPS, CONVERGED)
CAP = "cap"


@dataclass
class Plateau:
    """The rule's state over the evaluations of one training run."""

    direction: str   # "higher" or "lower": the validation metric's
    patience: int
    tolerance: float
    step: list[int] = field(default_factory=list)
    value: list[float | None] = field(default_factory=list)
    best_step: int | None = None
    best_value: float | None = None
    stale: int = 0   # evaluations since the last improvement

    def observe(self, step: int, value: float | None) -> bool:
        """Record the metric after ``step`` optimizer steps; True when it is the new best."""
        value = finite(value)
        self.step.append(int(step))
        self.value.append(value)
        if value is not None and (self.best_value is None or self.improves(value)):
            self.best_step, self.best_value, self.stale = int(step), value, 0
            return True
        self.stale += 1
        return False

    def improves(self, value: float) -> bool:
        gain = value - self.best_value if self.direction == "higher" else self.best_value - value
        return gain > self.tolerance

    @property
    def learned(self) -> bool:
        """Whether the metric ever improved on its first evaluation."""
        return self.best_step is not None and self.best_step != self.step[0]

    def done(self) -> bool:
        return self.learned and self.stale >= self.patience

    def block(self, cap: int, eval_every: int, items: int) -> dict:
        """The record's ``stopping`` block of a training run that has ended."""
        return {"rule": CONVERGED, "patience": self.patience, "tolerance": self.tolerance,
                "eval_every": eval_every, "cap": cap, "stop_step": self.step[-1] if self.step else 0,
                "reason": CONVERGED if self.done() else CAP, "learned": self.learned,
                "best_step": self.best_step, "best_value": self.best_value,
                "curve": {"step": list(self.step), "value": list(self.value), "items": items}}


def due(steps_done: int, eval_every: int, cap: int) -> bool:
    """Whether converged mode evaluates after ``steps_done`` optimizer steps."""
    return steps_done % eval_every == 0 or steps_done == cap
