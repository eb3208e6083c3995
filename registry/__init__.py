"""One registry class for everything scorebench looks up by name: scorers, tasks, executors and
the scorers' fast forms.

    SCORERS = Registry("scorer", error=ScorerError,
                       listing="`scorebench ls scorers` lists all {count} scorers.")
    SCORERS.register("ssa", SSA, aliases=("scaled_signed_averaging",))
    SCORERS.get("sofmax")   # ScorerError: unknown scorer 'sofmax'. Did you mean: softmax? ...

A name maps to one object; aliases resolve to names. Registering a taken name again is an error
unless the object comes from the same definition (a plugin file imported twice), which replaces
it. :meth:`Registry.freeze` closes a registry; :meth:`Registry.scoped` undoes what a block
registered (tests, one-off plugins). It depends on nothing of scorebench, so every layer
(scorers, tasks, suite) may import it.
"""
from __future__ import annotations

import contextlib
import difflib
import fnmatch
import inspect
import sys
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


def definition(obj) -> str:
    """Where ``obj`` (a class or function) is defined: ``module.qualname (file:line)``."""
    try:
        file = inspect.getsourcefile(obj) or "?"
        line = inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        file, line = getattr(sys.modules.get(obj.__module__), "__file__", "?"), 0
    return f"{obj.__module__}.{obj.__qualname__} ({file}:{line})"


def _same_definition(a, b) -> bool:
    """The same class or function, possibly imported twice under two module names."""
    if a is b:
        return True
    where_a, where_b = definition(a), definition(b)
    return (a.__qualname__ == b.__qualname__
            and where_a[where_a.index(" ("):] == where_b[where_b.index(" ("):])


class Registry(Generic[T]):
    """Objects by name. ``kind`` names them in messages ("scorer"); ``error`` is the exception
    raised for an unknown or taken name; ``listing`` ends the unknown-name message, formatted
    with ``names`` (the sorted names, comma-separated) and ``count``."""

    def __init__(self, kind: str, *, error: type[Exception] = KeyError,
                 listing: str = "Known: {names}."):
        self.kind = kind
        self.error = error
        self.listing = listing
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        self._frozen = False

    # registering

    def register(self, name: str, obj: T, *, aliases: tuple[str, ...] | list[str] = ()) -> T:
        """Register ``obj`` under ``name`` and ``aliases``; returns ``obj``."""
        if self._frozen:
            raise self.error(f"the {self.kind} registry is frozen; {name!r} cannot be added")
        for key in (name, *aliases):
            owner = self._items.get(self._aliases.get(key, key))
            if owner is not None and not _same_definition(owner, obj):
                raise self.error(
                    f"{self.kind} name {key!r} is already registered by {definition(owner)}; "
                    f"cannot register it again for {definition(obj)}. Pick another name.")
        self._items[name] = obj
        for alias in aliases:
            self._aliases[alias] = name
        return obj

    def decorator(self, name: str, *, aliases: tuple[str, ...] | list[str] = (),
                  set_name: bool = False) -> Callable[[T], T]:
        """``@registry.decorator("name")``: :meth:`register` as a class decorator; with
        ``set_name`` the class's ``name`` attribute becomes the registered name."""
        def register(obj: T) -> T:
            self.register(name, obj, aliases=aliases)
            if set_name:
                obj.name = name
            return obj

        return register

    def freeze(self) -> None:
        """No more registrations (lookups go on)."""
        self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    @contextlib.contextmanager
    def scoped(self) -> Iterator[Registry[T]]:
        """What is registered inside the block is unregistered when it ends."""
        saved = dict(self._items), dict(self._aliases), self._frozen
        try:
            yield self
        finally:
            self._items.clear()
            self._items.update(saved[0])
            self._aliases.clear()
            self._aliases.update(saved[1])
            self._frozen = saved[2]

    # looking up

    def canonical(self, name: str) -> str:
        """The registered name of ``name`` or of the alias ``name``; an unknown name is an error
        with the closest names ("did you mean")."""
        if name in self._items:
            return name
        if name in self._aliases:
            return self._aliases[name]
        close = self.suggest(name)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        listing = self.listing.format(names=", ".join(sorted(self._items)),
                                      count=len(self._items))
        raise self.error(f"unknown {self.kind} {name!r}.{hint} {listing}")

    def get(self, name: str) -> T:
        return self._items[self.canonical(name)]

    def suggest(self, name: str, n: int = 3) -> list[str]:
        """Up to ``n`` registered names or aliases close to ``name``."""
        return difflib.get_close_matches(name, sorted([*self._items, *self._aliases]), n=n,
                                         cutoff=0.5)

    def names(self, pattern: str = "*") -> list[str]:
        """Sorted names matching an fnmatch pattern (comma-separated patterns allowed)."""
        patterns = [p.strip() for p in pattern.split(",") if p.strip()]
        return sorted(n for n in self._items if any(fnmatch.fnmatchcase(n, p) for p in patterns))

    def origin(self, name: str) -> str:
        """Where the object registered as ``name`` is defined (``module.qualname (file:line)``)."""
        return definition(self.get(name))

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._aliases

    def __iter__(self) -> Iterator[str]:
        """Names in registration order."""
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[tuple[str, T]]:
        """(name, object) in registration order."""
        return list(self._items.items())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self)} entries{', frozen' if self._frozen else ''})"
