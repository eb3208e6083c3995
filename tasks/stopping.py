"""The stopping rule of a training task's converged mode (``stop = "converged"``).

The validation metric is evaluated every ``eval_every`` optimizer steps and at the cap. An
evaluation improves when it beats the best value so far by more than ``tolerance`` (in the
metric's units, in its direction); the best state is the state of the last improvement, and the
first evaluation is the first best. Training stops, with reason ``"converged"``, once ``patience``
evaluations in a row have not improved, or with ``patience_fraction`` f > 0 once the evaluations
without a gain are also at least f of all evaluations so far (f = 0.5: the run has trained twice
as long as it took to reach its best, the wait scaling with the scorer's own pace, so that a slow
but steady climb is not cut as a fast learner's noise would be), counted only once the run has
``learned``: its metric has passed ``learned_at`` (when the task declares that level; otherwise
once it improved on its first evaluation). A model still on its initial plateau trains on.
Otherwise it stops at the cap, with reason ``"cap"``, and a run that never learned reads "not
learned within the cap".

The speed of a run is the first evaluated step at which its metric reached ``target`` (the task's
declared level; None when it never did): a run is judged on the dense curve, not on its end.
"""
from __future__ import annotations

import math
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
    learned_at: float | None = None
    target: float | None = None
    passed_step: int | None = None   # the first evaluation at or past learned_at
    target_step: int | None = None   # the first evaluation at or past target
    patience_fraction: float = 0.0   # the wait's share of the evaluations so far, where longer

    @classmethod
    def of(cls, settings, direction: str) -> Plateau:
        """The rule of ``settings``, anything with the five settings as attributes (``patience``,
        ``tolerance``, ``learned_at``, ``target``, ``patience_fraction``: a task's config, a
        script's arguments), for a metric in ``direction``."""
        return cls(direction, settings.patience, settings.tolerance, learned_at=settings.learned_at,
                   target=settings.target, patience_fraction=settings.patience_fraction)

    def observe(self, step: int, value: float | None) -> bool:
        """Record the metric after ``step`` optimizer steps; True when it is the new best."""
        value = finite(value)
        self.step.append(int(step))
        self.value.append(value)
        if value is not None:
            if self.passed_step is None and self.reaches(value, self.learned_at):
                self.passed_step = int(step)
            if self.target_step is None and self.reaches(value, self.target):
                self.target_step = int(step)
        if value is not None and (self.best_value is None or self.improves(value)):
            self.best_step, self.best_value, self.stale = int(step), value, 0
            return True
        self.stale += 1
        return False

    def reaches(self, value: float, level: float | None) -> bool:
        """Whether ``value`` is at or past ``level`` in the metric's direction (never for None)."""
        if level is None:
            return False
        return value >= level if self.direction == "higher" else value <= level

    def improves(self, value: float) -> bool:
        gain = value - self.best_value if self.direction == "higher" else self.best_value - value
        return gain > self.tolerance

    @property
    def learned(self) -> bool:
        """Whether the metric passed ``learned_at`` (without one: ever improved on its first
        evaluation)."""
        if self.learned_at is not None:
            return self.passed_step is not None
        return self.best_step is not None and self.best_step != self.step[0]

    def wait(self) -> int:
        """The evaluations without a gain that end the run now: ``patience``, or
        ``patience_fraction`` of the evaluations so far where that is more."""
        return max(self.patience, math.ceil(self.patience_fraction * len(self.step)))

    def done(self) -> bool:
        if self.learned_at is not None:
            since = sum(s > self.passed_step for s in self.step) if self.learned else 0
            return since >= self.patience and self.stale >= self.wait()
        return self.learned and self.stale >= self.wait()

    def block(self, cap: int, eval_every: int, items: int) -> dict:
        """The record's ``stopping`` block of a training run that has ended."""
        return {"rule": CONVERGED, "patience": self.patience,
                **({"patience_fraction": self.patience_fraction} if self.patience_fraction else {}),
                "tolerance": self.tolerance,
                "eval_every": eval_every, "cap": cap, "stop_step": self.step[-1] if self.step else 0,
                "reason": CONVERGED if self.done() else CAP, "learned": self.learned,
                "best_step": self.best_step, "best_value": self.best_value,
                **({} if self.learned_at is None else {"learned_at": self.learned_at}),
                **({} if self.target is None else {"target": self.target,
                                                   "target_step": self.target_step}),
                "curve": {"step": list(self.step), "value": list(self.value), "items": items}}


def replay(rule: Plateau, curve: dict, first_step: int = 0) -> int | None:
    """Feed a recorded dense ``curve`` (a stopping block's) to ``rule`` until it stops the run,
    not before ``first_step``: that step, or None when it does not stop within the curve."""
    for step, value in zip(curve["step"], curve["value"]):
        rule.observe(step, value)
        if rule.done() and step >= first_step:
            return step
    return None


def due(steps_done: int, eval_every: int, cap: int) -> bool:
    """Whether converged mode evaluates after ``steps_done`` optimizer steps."""
    return steps_done % eval_every == 0 or steps_done == cap
