"""A task's config: a dataclass whose declaration is its validation (:mod:`registry.settings`).

    @dataclass
    class MQARConfig(TaskConfig):
        lr: float = setting(1e-3, gt=0, tunable=True, role="rate")
        eval_lengths: tuple[int, ...] = setting((128, 256, 512), ge=1, nonempty=True)

        def check(self):                      # relations between fields
            if self.train_len not in self.eval_lengths: raise ConfigError(...)

A profile's ``[tasks.<name>]`` table overrides the fields; the tuning protocol (:mod:`suite.tuning`)
sweeps only fields declared ``tunable``, and reads a learning rate (``role="rate"``) and a
training length (``role="steps"``) from the declaration. A plugin task's plain dataclass gets the
type checks through :func:`check_fields`.
"""
from __future__ import annotations

from dataclasses import dataclass

from registry.settings import (Declaration, Settings, SettingError, check_fields, coerce_value,
                               declaration, keys_with_role, setting, tunable_keys)

from .registry import TaskError

__all__ = ["ConfigError", "Declaration", "TaskConfig", "check_fields", "coerce_value",
           "declaration", "keys_with_role", "setting", "tunable_keys"]


class ConfigError(TaskError, SettingError):
    """A config value that breaks its declaration; ``key`` names the field (None: a relation
    between fields)."""


@dataclass
class TaskConfig(Settings):
    """Base of the shipped tasks' configs: built means checked."""

    error = ConfigError
