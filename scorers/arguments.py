"""Keyword arguments of a scorer class: which it accepts (with defaults) and an instance from them,
with an error naming the accepted ones for any other."""
from __future__ import annotations

import inspect
from typing import Any

# Keyword arguments every scorer accepts: the context the Attention layer passes on.
CONTEXT_KWARGS = ("num_heads", "max_len")


def class_parameters(cls: type) -> dict[str, Any]:
    """The keyword-only arguments of ``cls`` and of the classes it derives from, with defaults."""
    params: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if "__init__" not in vars(klass):
            continue
        for p in inspect.signature(klass.__init__).parameters.values():
            if p.name != "self" and p.kind is p.KEYWORD_ONLY:
                params[p.name] = p.default
    return params


def unknown_arguments(cls: type, kwargs: dict[str, Any]) -> str | None:
    """None when ``cls`` accepts every key of ``kwargs``; else the message naming what it does."""
    accepted = class_parameters(cls)
    unknown = sorted(set(kwargs) - set(accepted))
    if not unknown:
        return None
    own = sorted(set(accepted) - set(CONTEXT_KWARGS))
    return (f"scorer {cls.name!r} got unknown parameter(s) {unknown}; it accepts "
            f"{own or 'no parameters of its own'} (plus the context {list(CONTEXT_KWARGS)}).")
