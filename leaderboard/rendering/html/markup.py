"""Safe HTML: every string is escaped unless it is :class:`Markup`, and :func:`tag` escapes any
child or attribute that is not."""
from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from typing import Any


class Markup(str):
    """HTML that is already safe; :func:`tag` inserts it unchanged."""


def esc(value: Any) -> Markup:
    """``value`` as HTML text (``& < > " '`` escaped) unless it is already :class:`Markup`."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def _attrs(attrs: Mapping[str, Any]) -> str:
    """Attribute names: a trailing ``_`` is dropped and ``_`` becomes ``-`` (``class_``,
    ``data_sort``). None or False leaves the attribute out; True writes it bare."""
    out = []
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        key = key.rstrip("_").replace("_", "-")
        out.append(f" {key}" if value is True else f' {key}="{esc(value)}"')
    return "".join(out)


def tag(name: str, *children: Any, **attrs: Any) -> Markup:
    return Markup(f"<{name}{_attrs(attrs)}>{concat(children)}</{name}>")


def void(name: str, **attrs: Any) -> Markup:
    return Markup(f"<{name}{_attrs(attrs)}>")


def concat(children: Iterable[Any], sep: str = "") -> Markup:
    return Markup(sep.join(esc(c) for c in children))


def code_text(text: str) -> Markup:
    """Docstring text as HTML: ````x```` becomes ``<code>x</code>``, everything else escaped."""
    parts = re.split(r"``(.+?)``", text or "")
    return concat(tag("code", p) if i % 2 else esc(p) for i, p in enumerate(parts))


def slug(*parts: Any) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9_.]+", "-", str(p)).strip("-") for p in parts)
