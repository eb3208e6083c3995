"""A task's config: a dataclass whose declaration is its validation.

    @dataclass
    class MQARConfig(TaskConfig):
        lr: float = setting(1e-3, gt=0, tunable=True)
        eval_lengths: tuple[int, ...] = setting((128, 256, 512), ge=1, nonempty=True)

        def check(self):                      # relations between fields
            if self.train_len not in self.eval_lengths: raise ConfigError(...)

A field's annotation is its type: ``int``, ``float``, ``bool``, ``str``, or ``tuple[T, ...]`` of
one of those (``list`` for free-form values). :func:`setting` declares what the value may be:
bounds ``ge``/``gt``/``le``/``lt`` and ``choices`` (for a tuple, on every element; a function
when the choices are a registry that can grow), ``nonempty``
for a tuple, and ``tunable``: the tuning protocol (:mod:`suite.tuning`) may sweep the field. Only
optimizer settings are tunable, so every point of a grid trains at the same budget.

Building a config, from a profile or directly, checks every field against its declaration (ints
become floats for float fields, lists tuples for tuple fields), then :meth:`TaskConfig.check`.
A plugin task's plain dataclass gets the type checks through :func:`check_fields`.
"""
from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from typing import Any, Callable

from .registry import TaskError

DECLARATION = "scorebench"   # the dataclass field metadata key of a Declaration


class ConfigError(TaskError):
    """A config value that breaks its declaration; ``key`` names the field (None: a relation
    between fields)."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


BOUNDS = (("ge", operator.ge, ">="), ("gt", operator.gt, ">"), ("le", operator.le, "<="),
          ("lt", operator.lt, "<"))


@dataclass(frozen=True)
class Declaration:
    """What a field's value may be, beyond its type (see the module docstring)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple | Callable[[], tuple] | None = None   # a callable: a registry that can grow
    nonempty: bool = False
    tunable: bool = False

    def check(self, key: str, value: Any) -> None:
        if isinstance(value, tuple) and self.nonempty and not value:
            raise ConfigError(f"config key {key!r} must not be empty", key)
        choices = self.choices() if callable(self.choices) else self.choices
        for item in value if isinstance(value, tuple) else (value,):
            if choices is not None and item not in choices:
                raise ConfigError(f"config key {key!r} must be one of {list(choices)}, got "
                                  f"{item!r}", key)
            for name, holds, text in BOUNDS:
                bound = getattr(self, name)
                if bound is not None and not holds(item, bound):
                    raise ConfigError(f"config key {key!r} must be {text} {bound}, got {item!r}",
                                      key)


def setting(default: Any, **declared) -> Any:
    """A config field with its :class:`Declaration` (bounds, choices, nonempty, tunable)."""
    return dataclasses.field(default=default, metadata={DECLARATION: Declaration(**declared)})


def declaration(f: dataclasses.Field) -> Declaration:
    return f.metadata.get(DECLARATION, Declaration())


def tunable_keys(config_class: type) -> list[str]:
    """The fields the tuning protocol may sweep."""
    return [f.name for f in dataclasses.fields(config_class) if declaration(f).tunable]


TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string"}
PLURAL_WORDS = {"int": "integers", "float": "numbers", "bool": "booleans", "str": "strings"}


def _kind(f: dataclasses.Field) -> str:
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))


def coerce_value(f: dataclasses.Field, value: Any) -> Any:
    """``value`` checked against the annotation of the field ``f`` and normalized (lists ->
    tuples, ints -> floats, integral floats -> ints); a mismatch is a :class:`ConfigError`."""
    kind = _kind(f)
    if kind.startswith("tuple"):
        inner = kind[kind.index("[") + 1:].split(",")[0].strip() if "[" in kind else "any"
        wrong = ConfigError(f"config key {f.name!r} must be a list of "
                            f"{PLURAL_WORDS.get(inner, 'values')}, got {value!r}", f.name)
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            raise wrong
        try:
            return tuple(_scalar(v, inner) for v in value)
        except TypeError:
            raise wrong from None
    if kind == "list" and not isinstance(value, (list, tuple)):
        raise ConfigError(f"config key {f.name!r} must be a list, got {value!r}", f.name)
    try:
        return _scalar(value, kind)
    except TypeError:
        raise ConfigError(f"config key {f.name!r} must be {TYPE_WORDS[kind]}, got {value!r}",
                          f.name) from None


def _scalar(value: Any, kind: str) -> Any:
    if kind == "bool":
        if not isinstance(value, bool):
            raise TypeError
        return value
    if kind not in TYPE_WORDS:
        return value
    if isinstance(value, bool):
        raise TypeError
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if not isinstance(value, int):
            raise TypeError
        return value
    if kind == "float":
        if not isinstance(value, (int, float)):
            raise TypeError
        return float(value)
    if not isinstance(value, str):
        raise TypeError
    return value


def check_fields(cfg) -> None:
    """Check every field of the config dataclass ``cfg`` against its type and declaration and
    store the normalized value."""
    for f in dataclasses.fields(cfg):
        value = coerce_value(f, getattr(cfg, f.name))
        declaration(f).check(f.name, value)
        object.__setattr__(cfg, f.name, value)


@dataclass
class TaskConfig:
    """Base of the shipped tasks' configs: built means checked (:func:`check_fields`, then
    :meth:`check`)."""

    def __post_init__(self):
        check_fields(self)
        self.check()

    def check(self) -> None:
        """Relations between fields; raise :class:`ConfigError`. Subclasses extend it."""
