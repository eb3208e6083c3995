"""The task registry: ``@register_task``, ``create_task``, ``list_tasks`` (one
:class:`registry.Registry`)."""
from __future__ import annotations

from registry import Registry


class TaskError(ValueError):
    """An unknown task or a malformed task configuration; the message says how to fix it."""


TASKS: Registry[type] = Registry("task", error=TaskError, listing="Known tasks: {names}.")


def register_task(name: str):
    """Class decorator registering a :class:`tasks.base.Task` subclass under ``name``."""
    return TASKS.decorator(name, set_name=True)


def get_task_class(name: str) -> type:
    return TASKS.get(name)


def create_task(name: str):
    return get_task_class(name)()


def list_tasks(pattern: str = "*") -> list[str]:
    return TASKS.names(pattern)


def scoped():
    """Tasks registered inside the block are unregistered when it ends (for tests)."""
    return TASKS.scoped()
