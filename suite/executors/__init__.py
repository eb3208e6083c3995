"""Executors by name: ``local`` ships here; other engines register the same way.

    @register_executor("ray")
    class RayExecutor:
        @classmethod
        def add_arguments(cls, parser): ...          # optional: extra `scorebench run` options
        @classmethod
        def from_args(cls, args, *, workers, plugins): ...   # build from the parsed CLI options

An executor module imports its engine (ray, submitit) inside its functions, so that listing and
the CLI work without the optional extra installed; it is imported below to register.
"""
from __future__ import annotations

import difflib

from .base import Event, Executor, ExecutorError, Progress, Started

_EXECUTORS: dict[str, type] = {}


def register_executor(name: str):
    """Class decorator registering an executor class under ``name``."""

    def decorator(cls: type) -> type:
        if name in _EXECUTORS and _EXECUTORS[name].__qualname__ != cls.__qualname__:
            raise ExecutorError(f"executor {name!r} is already registered by "
                                f"{_EXECUTORS[name].__module__}.{_EXECUTORS[name].__qualname__}")
        cls.name = name
        _EXECUTORS[name] = cls
        return cls

    return decorator


def get_executor_class(name: str) -> type:
    if name not in _EXECUTORS:
        close = difflib.get_close_matches(name, list(_EXECUTORS), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise ExecutorError(f"unknown executor {name!r}.{hint} Available: "
                            f"{', '.join(sorted(_EXECUTORS))}.")
    return _EXECUTORS[name]


def list_executors() -> list[str]:
    return sorted(_EXECUTORS)


def create_executor(name: str, **options) -> Executor:
    return get_executor_class(name)(**options)


from . import local, ray, slurm  # noqa: E402,F401  (register "local", "ray", "slurm")

__all__ = ["Event", "Executor", "ExecutorError", "Progress", "Started", "create_executor",
           "get_executor_class", "list_executors", "register_executor"]
