"""The task registry: ``@register_task``, ``create_task``, ``list_tasks``."""
from __future__ import annotations

import contextlib
import difflib
import fnmatch

_TASKS: dict[str, type] = {}


class TaskError(ValueError):
    """An unknown task or a malformed task configuration; the message says how to fix it."""


def register_task(name: str):
    """Class decorator registering a :class:`tasks.base.Task` subclass under ``name``."""

    def decorator(cls: type) -> type:
        if name in _TASKS and _TASKS[name].__qualname__ != cls.__qualname__:
            raise TaskError(f"task {name!r} is already registered by {_TASKS[name].__module__}."
                            f"{_TASKS[name].__qualname__}")
        cls.name = name
        _TASKS[name] = cls
        return cls

    return decorator


def get_task_class(name: str) -> type:
    if name not in _TASKS:
        close = difflib.get_close_matches(name, list(_TASKS), n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise TaskError(f"unknown task {name!r}.{hint} Known tasks: {', '.join(sorted(_TASKS))}.")
    return _TASKS[name]


def create_task(name: str):
    return get_task_class(name)()


def list_tasks(pattern: str = "*") -> list[str]:
    patterns = [p.strip() for p in pattern.split(",") if p.strip()]
    return sorted(n for n in _TASKS if any(fnmatch.fnmatchcase(n, p) for p in patterns))


@contextlib.contextmanager
def scoped():
    """Tasks registered inside the block are unregistered when it ends (for tests)."""
    saved = dict(_TASKS)
    try:
        yield
    finally:
        _TASKS.clear()
        _TASKS.update(saved)
