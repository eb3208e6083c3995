"""How the markdown views lay out what they show, so that a person can read the file as text:
github tables of at most :data:`MAX_COLUMNS` columns and :data:`MAX_LINE` characters (a wider
one is split into several over the same leading columns), text too long for a cell as numbered
notes under its table, and prose wrapped."""
from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

from tabulate import tabulate

from .text import markdown_text, note_mark

MAX_COLUMNS = 10
MAX_LINE = 200
WRAP = 100


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """A github table of ``rows`` as they are (no number parsing)."""
    return tabulate([list(r) for r in rows], headers=list(headers), tablefmt="github",
                    disable_numparse=True)


def width(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def fitted(rows: Sequence[Sequence[str]], headers: Sequence[str], keep: int = 1,
           groups: Sequence[Sequence[int]] | None = None) -> list[str]:
    """The table of ``rows``, or, where it would have more than :data:`MAX_COLUMNS` columns or
    a line over :data:`MAX_LINE` characters, several tables over consecutive runs of its columns,
    each beginning with the first ``keep`` columns (the row's name). ``groups``: column indices
    kept in one table where they fit together (e.g. a task's metrics); by default each column."""
    groups = [list(g) for g in groups] if groups else [[i] for i in range(keep, len(headers))]

    def part(columns: list[int]) -> str:
        picked = list(range(keep)) + columns
        return table([[r[i] for i in picked] for r in rows], [headers[i] for i in picked])

    def fits(columns: list[int]) -> bool:
        return keep + len(columns) <= MAX_COLUMNS and width(part(columns)) <= MAX_LINE

    units = [unit for g in groups for unit in ([g] if fits(g) else [[i] for i in g])]
    out: list[str] = []
    current: list[int] = []
    for unit in units:
        if current and not fits(current + unit):
            out.append(part(current))
            current = []
        current += unit
    out.append(part(current))
    return out


class Notes:
    """Numbered notes under one table, for text too long for a cell: :meth:`mark` gives a
    text's mark (the same text, the same number), :meth:`items` the notes, marks first."""

    def __init__(self):
        self.texts: list[str] = []

    def mark(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return note_mark(self.texts.index(text) + 1)

    def items(self) -> list[str]:
        return [f"{note_mark(i)} {text}" for i, text in enumerate(self.texts, 1)]


# A wrapped line that begins like this would start a list, a quote, a heading or a table.
BLOCK_START = re.compile(r"([-+*>#|=]|\d+[.)])(\s|$)")


def wrap(text: str, bullet: str = "") -> str:
    """``text`` as a markdown paragraph (or list item) wrapped at :data:`WRAP` characters, never
    inside a code span; a line that would begin like a block of its own stays on the line
    before."""
    kept = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\0"), text)
    lines = textwrap.wrap(kept, WRAP, initial_indent=bullet, subsequent_indent=" " * len(bullet),
                          break_long_words=False, break_on_hyphens=False)
    out = lines[:1]
    for line in lines[1:]:
        if BLOCK_START.match(line.lstrip()):
            out[-1] += " " + line.lstrip()
        else:
            out.append(line)
    return "\n".join(out).replace("\0", " ")


def bullets(lines: Sequence[str]) -> list[str]:
    """Plain-text ``lines`` (a record's strings among them) as a wrapped markdown list, escaped
    (``**`` emphasis kept), and a blank line after it; nothing when there are none."""
    return [wrap(markdown_text(line), "- ") for line in lines] + ([""] if lines else [])


def block(parts: Sequence[str]) -> list[str]:
    """Tables (or paragraphs) one after the other, each followed by a blank line."""
    return [line for p in parts for line in (p, "")]
