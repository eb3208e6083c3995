"""A training task for the tuning-protocol tests: its validation metric is a known function of
the learning rate, the weight decay and the seed, so the right choice is known in advance."""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

from tasks import Metric, RunContext, Task, TaskResult, TrainingFailure, register_task
from tasks.config import TaskConfig, setting
from tasks.validation import Curve, Validation

TASK = "suite_test_tuned"
TUNING_SEED_FLOOR = 1000   # seeds below are reporting seeds in these tests


def validation_score(lr: float, weight_decay: float, best_lr: float) -> float:
    """Peaks at lr = best_lr and weight_decay = 0: exp(-(log2(lr / best_lr))^2) - weight_decay."""
    return math.exp(-math.log2(lr / best_lr) ** 2) - weight_decay


@register_task(TASK)
class TunedTask(Task):
    """Validation value: ``validation_score`` at tuning seeds; at reporting seeds it peaks at
    ``4 x best_lr`` instead, so a choice that read reporting cells would move. The curve is
    ``value x (step / steps)^e``, e = 1/4 for sparsemax and 1 otherwise (sparsemax learns
    faster)."""

    version = 1
    track = "probe"
    metrics = {"score": Metric("higher", headline=True, description="reported score")}
    validation = Validation("val_score", "higher", "a known function of the point")

    @dataclass
    class Config(TaskConfig):
        steps: int = setting(8, ge=1, role="steps")
        lr: float = setting(1e-3, gt=0, tunable=True, role="rate")
        weight_decay: float = setting(0.0, ge=0, tunable=True)
        best_lr: float = 1e-3
        diverge_at_or_above: float = 1.0   # lr at or above this: TrainingFailure("diverged")
        eval_shift: float = 0.0            # moves the reported items only
        log: str = ""                      # "run <sweep|report> <scorer> <seed> <lr>" per cell
        interrupt_marker: str = ""         # while it exists: delete it and raise KeyboardInterrupt
        sleep_s: float = 0.0               # after logging, before the result
        target: float | None = None        # set: a stopping block, reached when value >= target

    def run(self, scorer, scorer_kwargs, seed, config, ctx: RunContext) -> TaskResult:
        if config.interrupt_marker and os.path.exists(config.interrupt_marker):
            os.remove(config.interrupt_marker)
            raise KeyboardInterrupt
        if config.log:
            with open(config.log, "a") as f:
                f.write(f"run {'sweep' if ctx.sweep else 'report'} {scorer} {seed} "
                        f"{config.lr:g}\n")
        time.sleep(config.sleep_s)
        if config.lr >= config.diverge_at_or_above:
            raise TrainingFailure("diverged", 3, f"lr={config.lr:g} diverged")
        best = config.best_lr if seed >= TUNING_SEED_FLOOR else 4 * config.best_lr
        value = validation_score(config.lr, config.weight_decay, best) + 1e-6 * (seed % 7)
        curve = Curve(config.steps, 4)
        power = 0.25 if scorer == "sparsemax" else 1.0
        for step in range(1, config.steps + 1):
            curve.maybe(step, lambda: value * (step / config.steps) ** power)
        extra = {"validation": self.validation.block(value, 4, curve)}
        if config.target is not None:
            extra["train"] = {"stopping": {
                "cap": config.steps, "stop_step": config.steps, "eval_every": 1,
                "best_value": value, "curve": {"step": list(curve.step), "value": list(curve.value)},
                "target": config.target,
                "target_step": config.steps if value >= config.target else None}}
        if ctx.sweep:
            return TaskResult(metrics={}, extra=extra, step=config.steps)
        items = [value + config.eval_shift + 0.1 * i for i in range(-1, 2)]
        return TaskResult(metrics={"score": sum(items) / 3}, items={"score": items}, extra=extra,
                          step=config.steps)


@register_task(TASK + "_twin")
class TwinTask(TunedTask):
    """A second task of the same kind, for the order in which a run takes two tuned tasks."""
