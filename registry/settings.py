"""Settings: a dataclass whose declaration is its validation, for every table of a profile.

    @dataclass
    class MQARConfig(Settings):
        lr: float = setting(1e-3, gt=0, tunable=True, role="rate")
        eval_lengths: tuple[int, ...] = setting((128, 256, 512), ge=1, nonempty=True)

        def check(self):                      # relations between fields
            if self.train_len not in self.eval_lengths: raise SettingError(...)

A field's annotation is its type: ``int``, ``float``, ``bool``, ``str``, ``tuple[T, ...]`` or
``dict[str, T]`` of one of those (``list`` and ``dict`` for free-form values), or alternatives
``A | B`` (the first that fits). :func:`setting` declares what the value may be: bounds
``ge``/``gt``/``le``/``lt`` and ``choices`` (for a tuple or a dict, on every element; a function
when the choices are a registry that can grow), ``nonempty`` for a tuple, ``tunable``: the tuning
protocol may sweep the field (optimizer settings only, so every point of a grid trains at the same
budget), ``role``: what the setting is to the code that reads it (``"rate"``: a learning rate,
``"steps"``: a training length), and ``off_at_default``: the default switches the setting's
feature off, so at its default the field changes nothing.

Building a settings object checks every field against its declaration (ints become floats for
float fields, lists tuples for tuple fields), then :meth:`Settings.check`. :func:`build` makes one
from a table of a profile and words every error in one form, naming the file, the table and the
key. A plain dataclass gets the same checks through :func:`check_fields`. :func:`effective`
gives the fields that change what runs: all but those :meth:`Settings.inert` names (by default the
``off_at_default`` fields at their default), so a setting added switched off leaves every existing
table's identity as it was.
"""
from __future__ import annotations

import dataclasses
import difflib
import operator
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

DECLARATION = "scorebench"   # the dataclass field metadata key of a Declaration
RATE, STEPS = "rate", "steps"
ROLES = (RATE, STEPS)


class SettingError(ValueError):
    """A value that breaks its declaration; ``key`` names the field (None: a relation between
    fields)."""

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
    role: str | None = None
    off_at_default: bool = False

    def __post_init__(self):
        if self.role is not None and self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")

    def allowed(self) -> tuple | None:
        return self.choices() if callable(self.choices) else self.choices

    def check(self, key: str, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, (tuple, dict)) and self.nonempty and not value:
            raise SettingError(f"config key {key!r} must not be empty", key)
        choices = self.allowed()
        items = value.values() if isinstance(value, dict) else (
            value if isinstance(value, tuple) else (value,))
        for item in items:
            if choices is not None and item not in choices:
                raise SettingError(f"config key {key!r} must be one of {list(choices)}, got "
                                   f"{item!r}", key)
            for name, holds, text in BOUNDS:
                bound = getattr(self, name)
                if bound is not None and not holds(item, bound):
                    raise SettingError(f"config key {key!r} must be {text} {bound}, got "
                                       f"{item!r}", key)


def setting(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING,
            **declared) -> Any:
    """A field with its :class:`Declaration` (bounds, choices, nonempty, tunable, role); without
    a default the field is required."""
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata={DECLARATION: Declaration(**declared)})


def declaration(f: dataclasses.Field) -> Declaration:
    return f.metadata.get(DECLARATION, Declaration())


def declared(cls: type, key: str) -> Declaration:
    """The declaration of ``cls``'s field ``key``."""
    return declaration(next(f for f in dataclasses.fields(cls) if f.name == key))


def default(cls: type, key: str) -> Any:
    """The default of ``cls``'s field ``key``."""
    f = next(f for f in dataclasses.fields(cls) if f.name == key)
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def tunable_keys(cls: type) -> list[str]:
    """The fields the tuning protocol may sweep."""
    return [f.name for f in dataclasses.fields(cls) if declaration(f).tunable]


def keys_with_role(cls: type, role: str) -> list[str]:
    """The fields declared with ``role`` (``"rate"``, ``"steps"``)."""
    return [f.name for f in dataclasses.fields(cls) if declaration(f).role == role]


# ------------------------------------------------------------------------------- types

TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
              "list": "a list", "dict": "a table"}
PLURAL_WORDS = {"int": "integers", "float": "numbers", "bool": "booleans", "str": "strings",
                "list": "lists", "dict": "tables"}


def _kind(f: dataclasses.Field) -> str:
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))


def _inner(kind: str) -> str:
    """The element type of ``tuple[T, ...]`` or the value type of ``dict[str, T]``."""
    if "[" not in kind:
        return "any"
    args = kind[kind.index("[") + 1:kind.rindex("]")]
    return (args.split(",")[0] if kind.startswith("tuple") else args.split(",", 1)[1]).strip()


def _words(kind: str) -> str:
    if kind.startswith("tuple"):
        return f"a list of {PLURAL_WORDS.get(_inner(kind), 'values')}"
    if kind.startswith("dict["):
        return f"a table of {PLURAL_WORDS.get(_inner(kind), 'values')}"
    return TYPE_WORDS.get(kind, kind)


def _alternatives(kind: str) -> list[str]:
    """``A | B`` split at the top level (not inside brackets)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(kind):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "|" and depth == 0:
            out.append(kind[start:i].strip())
            start = i + 1
    return [*out, kind[start:].strip()]


def coerce_value(f: dataclasses.Field, value: Any) -> Any:
    """``value`` checked against the annotation of the field ``f`` and normalized (lists ->
    tuples, ints -> floats, integral floats -> ints); a mismatch is a :class:`SettingError`."""
    kinds = [k for k in _alternatives(_kind(f)) if k != "None"]
    if value is None and len(kinds) < len(_alternatives(_kind(f))):
        return None
    for kind in kinds:
        try:
            return _typed(value, kind)
        except TypeError:
            continue
    words = " or ".join(_words(k) for k in kinds)
    raise SettingError(f"config key {f.name!r} must be {words}, got {value!r}", f.name)


def _typed(value: Any, kind: str) -> Any:
    if kind.startswith("tuple"):
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            raise TypeError
        return tuple(_typed(v, _inner(kind)) for v in value)
    if kind.startswith("dict"):
        if not isinstance(value, dict):
            raise TypeError
        return {k: _typed(v, _inner(kind)) for k, v in value.items()}
    if kind == "list":
        if not isinstance(value, (list, tuple)):
            raise TypeError
        return value
    return _scalar(value, kind)


def _scalar(value: Any, kind: str) -> Any:
    if kind == "bool":
        if not isinstance(value, bool):
            raise TypeError
        return value
    if kind not in ("int", "float", "str"):
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


def check_fields(obj) -> None:
    """Check every field of the dataclass ``obj`` against its type and declaration and store the
    normalized value."""
    for f in dataclasses.fields(obj):
        value = coerce_value(f, getattr(obj, f.name))
        declaration(f).check(f.name, value)
        object.__setattr__(obj, f.name, value)


@dataclass
class Settings:
    """Base of a declared table: built means checked (:func:`check_fields`, then :meth:`check`);
    a value its declaration does not allow is an ``error``."""

    error: ClassVar[type[SettingError]] = SettingError

    def __post_init__(self):
        try:
            check_fields(self)
            self.check()
        except SettingError as e:
            if isinstance(e, self.error):
                raise
            raise self.error(str(e), e.key) from None

    def check(self) -> None:
        """Relations between fields; raise :class:`SettingError`. Subclasses extend it."""

    def inert(self) -> tuple[str, ...]:
        """The fields whose values change nothing, given the others: the ``off_at_default`` fields
        at their default. Subclasses extend it (e.g. with the settings of a mode that is off)."""
        return tuple(f.name for f in dataclasses.fields(self) if declaration(f).off_at_default
                     and getattr(self, f.name) == default(type(self), f.name))


def effective(obj) -> dict[str, Any]:
    """The fields of the dataclass ``obj`` as a dict (``dataclasses.asdict``), less those its
    :meth:`Settings.inert` names (a plain dataclass: none)."""
    inert = set(obj.inert()) if isinstance(obj, Settings) else set()
    return {k: v for k, v in dataclasses.asdict(obj).items() if k not in inert}


# ------------------------------------------------------------------------------- tables


def unknown_key(key: str, allowed: list[str]) -> str:
    """The words for a key a table does not declare, with the closest declared key."""
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key {key!r}{hint}; allowed keys: {', '.join(allowed)}"


def build(cls: type, values: dict[str, Any], *, table: str,
          origin: Callable[[str | None], str], error: type[Exception] = SettingError):
    """``cls`` built from the profile table ``[table]`` (``""``: the file's top level) holding
    ``values``. Every error is an ``error`` worded ``<file>: [<table>] <what is wrong>``;
    ``origin(key)`` names the file that set ``key`` (None: the table as a whole)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    place = f"[{table}]" if table else "the top level:"
    for key in values:
        if key not in fields:
            raise error(f"{origin(key)}: {place} {unknown_key(key, list(fields))}")
    missing = [name for name, f in fields.items() if name not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise error(f"{origin(None)}: {place} is missing {missing} (and nothing it extends "
                    f"sets it)")
    try:
        obj = cls(**{k: coerce_value(fields[k], v) for k, v in values.items()})
        if not isinstance(obj, Settings):
            check_fields(obj)
    except SettingError as e:
        raise error(f"{origin(e.key)}: {place} {e}") from None
    return obj
