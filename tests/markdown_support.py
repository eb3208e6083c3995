"""A reader of the markdown views (the release README, LEADERBOARD.md) as a person reads them:
the github tables under each heading, their cells with markdown's escapes undone, and the
numbered notes under each table."""
from __future__ import annotations

import html
import re

NOTE = re.compile(r"- ([⁰¹²³⁴⁵⁶⁷⁸⁹]+) (.*)")


def markdown_tables(text: str) -> dict[str, list[dict]]:
    """Heading (of any level, without its #s) -> its tables in order, each {"headers": [...],
    "rows": [header -> cell text], "notes": {mark: text}}: the notes are the list items that
    follow the table and begin with a mark, their wrapped lines joined."""
    out: dict[str, list[dict]] = {}
    heading, lines = None, text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("|") and i + 1 < len(lines) and set(lines[i + 1]) <= set("|-: "):
            headers = cells(line)
            table = {"headers": headers, "rows": [], "notes": {}}
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                table["rows"].append(dict(zip(headers, cells(lines[i]))))
                i += 1
            i = _notes(lines, i, table["notes"])
            out.setdefault(heading, []).append(table)
            continue
        i += 1
    return out


def _notes(lines: list[str], i: int, notes: dict[str, str]) -> int:
    """Read the notes from line ``i`` on (blank lines and other list items between them are
    passed over, up to the next table, heading or paragraph); returns where reading stopped."""
    while i < len(lines) and not lines[i].startswith(("|", "#")):
        line = lines[i]
        if line and not line.startswith(("- ", "  ")):
            break
        found = NOTE.match(line)
        i += 1
        if found:
            text = [found.group(2)]
            while i < len(lines) and lines[i].startswith("  "):
                text.append(lines[i].strip())
                i += 1
            notes[found.group(1)] = unescape(" ".join(text))
    return i


def cells(line: str) -> list[str]:
    """The cells of a table line, markdown's escapes undone."""
    out, current, escaped = [], "", False
    for ch in line.strip()[1:-1]:
        if escaped:
            current += ch
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "|":
            out.append(html.unescape(current.strip()))
            current = ""
        else:
            current += ch
    out.append(html.unescape(current.strip()))
    return out


def unescape(text: str) -> str:
    """Markdown text as a renderer shows it: backslash escapes and entities undone."""
    return html.unescape(re.sub(r"\\(.)", r"\1", text))


def row(table: dict, first: str) -> dict:
    """The row of ``table`` whose first cell is ``first``."""
    key = table["headers"][0]
    return next(r for r in table["rows"] if r[key] == first)


def mark_of(cell: str) -> str:
    """The note mark (superscript digits) at the end of a cell."""
    return re.search(r"[⁰¹²³⁴⁵⁶⁷⁸⁹]+", cell).group(0)


def merged(tables: list[dict]) -> dict[str, dict]:
    """First cell -> the row's cells over ``tables`` (one table split by its columns, each part
    beginning with the same first column)."""
    out: dict[str, dict] = {}
    for table in tables:
        key = table["headers"][0]
        for r in table["rows"]:
            out.setdefault(r[key], {}).update(r)
    return out
