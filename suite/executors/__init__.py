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

from registry import Registry

from .base import Event, Executor, ExecutorError, Progress, Started

EXECUTORS: Registry[type] = Registry("executor", error=ExecutorError,
                                     listing="Available: {names}.")


def register_executor(name: str):
    """Class decorator registering an executor class under ``name``."""
    return EXECUTORS.decorator(name, set_name=True)


def get_executor_class(name: str) -> type:
    return EXECUTORS.get(name)


def list_executors() -> list[str]:
    return EXECUTORS.names()


def create_executor(name: str, **options) -> Executor:
    return get_executor_class(name)(**options)


from . import local, ray, slurm  # noqa: E402,F401  (register "local", "ray", "slurm")

__all__ = ["Event", "Executor", "ExecutorError", "Progress", "Started", "create_executor",
           "get_executor_class", "list_executors", "register_executor"]
