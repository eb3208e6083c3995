"""What differs between a committed results.json and a republish of its records: the records
(by the digests in ``meta.records``) and, field by field, the numbers (``publish --check``)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# The fields that name a row of a results.json table, in the order they are shown.
IDENTITY = ("profile", "task", "metric", "grid", "id", "scorer", "seed", "path")


@dataclass(frozen=True)
class Difference:
    """One field of results.json that a republish changed."""

    path: str
    committed: Any
    republished: Any

    @property
    def relative(self) -> float | None:
        """|a - b| / max(|a|, |b|) for two numbers (0 for equal ones), else None."""
        a, b = self.committed, self.republished
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)):
            return None
        scale = max(abs(a), abs(b))
        return abs(a - b) / scale if scale and math.isfinite(scale) else math.inf

    def __str__(self) -> str:
        rel = self.relative
        size = "" if rel is None else f" (relative difference {rel:.2g})"
        return f"{self.path}: committed {self.committed!r}, republished {self.republished!r}{size}"


def differences(committed: Any, republished: Any, path: str = "") -> list[Difference]:
    """Every leaf that differs, with a readable path: list rows are matched by their identity
    fields (``rows[icl_linear/mse/ssa].ci_low``) where those are unique, else by position."""
    if isinstance(committed, dict) and isinstance(republished, dict):
        out = []
        for key in list(committed) + [k for k in republished if k not in committed]:
            sub = f"{path}.{key}" if path else str(key)
            if key not in committed or key not in republished:
                out.append(Difference(sub, committed.get(key, "<absent>"),
                                      republished.get(key, "<absent>")))
            else:
                out.extend(differences(committed[key], republished[key], sub))
        return out
    if isinstance(committed, list) and isinstance(republished, list):
        return _list_differences(committed, republished, path)
    if committed == republished and type(committed) is type(republished):
        return []
    return [Difference(path, committed, republished)]


def _row_key(row: Any) -> str | None:
    if not isinstance(row, dict):
        return None
    parts = [str(row[f]) for f in IDENTITY if f in row]
    return "/".join(parts) if parts else None


def _list_differences(old: list, new: list, path: str) -> list[Difference]:
    old_keys, new_keys = [_row_key(r) for r in old], [_row_key(r) for r in new]
    keyed = (None not in old_keys + new_keys and len(set(old_keys)) == len(old_keys)
             and len(set(new_keys)) == len(new_keys))
    if not keyed:
        out = []
        for i in range(max(len(old), len(new))):
            a = old[i] if i < len(old) else "<absent>"
            b = new[i] if i < len(new) else "<absent>"
            out.extend(differences(a, b, f"{path}[{i}]"))
        return out
    old_rows, new_rows = dict(zip(old_keys, old)), dict(zip(new_keys, new))
    out = []
    for key in old_keys + [k for k in new_keys if k not in old_rows]:
        out.extend(differences(old_rows.get(key, "<absent>"), new_rows.get(key, "<absent>"),
                               f"{path}[{key}]"))
    return out


@dataclass(frozen=True)
class RecordChanges:
    """Record files added, removed or changed since a release was published."""

    added: list[str]
    removed: list[str]
    changed: list[str]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    @property
    def paths(self) -> list[str]:
        return sorted(self.added + self.removed + self.changed)


def record_changes(committed: dict[str, str], republished: dict[str, str]) -> RecordChanges:
    """Compare two ``meta.records`` maps (record path -> digest)."""
    return RecordChanges(
        added=sorted(set(republished) - set(committed)),
        removed=sorted(set(committed) - set(republished)),
        changed=sorted(p for p in set(committed) & set(republished)
                       if committed[p] != republished[p]))


def rows_of_records(paths: list[str], rows: list[dict]) -> list[str]:
    """``task/metric/scorer`` of each results.json row fed by a record at one of ``paths`` (the
    harness's layout ``<task>/<scorer>/<cell>.json``)."""
    cells = {tuple(p.split("/")[:2]) for p in paths if p.count("/") >= 2}
    return sorted({f"{r['task']}/{r['metric']}/{r['scorer']}" for r in rows
                   if (r.get("task"), r.get("scorer_name")) in cells
                   or (r.get("task"), r.get("scorer")) in cells})
