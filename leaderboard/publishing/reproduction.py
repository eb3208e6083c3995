"""Whether a committed release reproduces (``publish --check``): republish it in memory from the
records it names and compare with its results.json byte for byte; where they differ, which records
changed (by the digests in ``meta.records``) and the rows they feed, or, field by field, the
numbers that moved."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..loading.records import LoadedRecords, load_records
from ..method import stats
from .release import (WITHOUT_RECORDS_FILE, ReleaseError, check_release_name, earlier_release,
                      list_releases, read_results_text, release_board, releases_without_records,
                      results_path, unclean_records)

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


@dataclass
class Reproduction:
    """The outcome of republishing a committed release from its records."""

    release: str
    ok: bool
    message: str


def reproduce(results_dir: str | Path, releases_dir: str | Path,
              release: str | None = None) -> Reproduction:
    """Aggregate ``results_dir`` as ``release`` (default: the newest release in ``releases_dir``)
    with the method constants its results.json names, and compare with that results.json byte
    for byte. Writes nothing; renders no plots. Records from a dirty tree fail it; a release
    listed in ``WITHOUT_RECORDS.txt`` is reported and passes."""
    if release is None:
        found = list_releases(releases_dir)
        if not found:
            raise ReleaseError(f"{releases_dir} holds no release (no */results.json.gz); publish "
                               "one first or pass --out DIR")
        release = found[0][0].name
    path = results_path(Path(releases_dir) / check_release_name(release))
    if release in releases_without_records(releases_dir):
        return Reproduction(release, True,
                            f"release {release} was published before its records were "
                            f"committed ({Path(releases_dir) / WITHOUT_RECORDS_FILE}); nothing "
                            "to reproduce")
    try:
        committed = read_results_text(path.parent)
        meta = json.loads(committed)["meta"]
    except FileNotFoundError:
        raise ReleaseError(f"{path} does not exist; name a published release") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ReleaseError(f"{path}: not a readable leaderboard results.json: {exc}") from None
    if not Path(results_dir).is_dir():
        return Reproduction(release, False,
                            f"release {release} has no records: {results_dir} does not exist. "
                            "Commit the records behind it, or list a release older than the "
                            f"records in the repository in {WITHOUT_RECORDS_FILE}")
    loaded = load_records(results_dir)
    unclean = unclean_records(loaded)
    if unclean:
        return Reproduction(release, False,
                            f"release {release}: {len(unclean)} record(s) in {results_dir} were "
                            f"not run from a clean, committed tree (e.g. {unclean[0]}); a "
                            "committed release takes only clean records")
    kwargs = {k: meta[k] for k in ("baseline", "n_boot", "alpha") if k in meta}
    kwargs["tuning_rule"] = next((t["rule"] for t in meta.get("tuning", {}).values()
                                  if "rule" in t), None)
    kwargs["ranges"] = {task: c["range"] for task, c in meta.get("convergence", {}).items()
                        if "range" in c}
    if "changes" in meta:
        kwargs["earlier"] = earlier_release(releases_dir, meta["changes"]["against"])
    loaded, later = as_published(loaded, json.loads(committed))
    again = release_board(loaded, release, **kwargs).to_json()
    n_used = meta.get("n_used", "?")
    note = (f"; {len(later)} record file(s) committed after it are not in it (e.g. {later[0]}): "
            "the next release takes them" if later else "")
    if again == committed:
        return Reproduction(release, True, f"release {release}: {path} reproduced byte for byte "
                                           f"from {n_used} records in {results_dir}{note}")
    return _explain(release, path, results_dir, json.loads(committed), json.loads(again))


def as_published(loaded: LoadedRecords, committed: dict) -> tuple[LoadedRecords, list[str]]:
    """The records a committed release names (``meta.records``; a record it names that is now
    missing or changed still shows as a difference), and the paths of record files committed
    after it, which a later release takes. A release without ``meta.records`` takes them all."""
    named = committed["meta"].get("records")
    if named is None:
        return loaded, []
    known = set(named) | {p["path"] for p in committed.get("problems", [])}
    kept = LoadedRecords([r for r in loaded.records if r.path in named],
                         [p for p in loaded.problems if p.path in known],
                         [r for r in loaded.sweeps if r.path in named])
    later = sorted({r.path for r in loaded.records + loaded.sweeps if r.path not in named}
                   | {p.path for p in loaded.problems if p.path not in known})
    return kept, later


def _explain(release: str, path: Path, results_dir, old: dict, new: dict,
             shown: int = 10) -> Reproduction:
    """Why a republish differs from the committed results.json: records that changed (and the
    rows they feed), or, from the same records, the fields whose numbers moved and by how much."""
    head = f"release {release}: {path} differs from a republish of {results_dir}"
    old_records = old["meta"].pop("records", None)
    new_records = new["meta"].pop("records", {})
    diffs = differences(old, new)
    first = "\n  ".join(str(d) for d in diffs[:shown])
    more = f"\n  ... and {len(diffs) - shown} more" if len(diffs) > shown else ""
    changes = record_changes(old_records, new_records) if old_records is not None else None
    if changes:
        listed = [f"{kind} {p}" for kind, paths in (("added", changes.added),
                                                     ("removed", changes.removed),
                                                     ("changed", changes.changed))
                  for p in paths]
        rows = rows_of_records(changes.paths, old.get("rows", []) + new.get("rows", []))
        return Reproduction(release, False, (
            f"{head}: {len(listed)} record(s) differ from those it was published from:\n  "
            + "\n  ".join(listed[:shown]) + (f"\n  ... and {len(listed) - shown} more"
                                            if len(listed) > shown else "")
            + f"\nThe rows they feed ({len(rows)}): " + ", ".join(rows[:shown])
            + (" ..." if len(rows) > shown else "")
            + (f"\nFirst differing fields:\n  {first}{more}" if diffs else "")
            + "\nCommit the records the release was published from, or publish the release "
              "again from the committed records."))
    if diffs and all(d.relative is not None and d.relative <= stats.REPRODUCE_RTOL
                     for d in diffs):
        worst = max(diffs, key=lambda d: d.relative)
        return Reproduction(release, True, (
            f"release {release}: {path} reproduced from the same records to the promised relative "
            f"{stats.REPRODUCE_RTOL:g}: {len(diffs)} number(s) differ in their last digits "
            f"(largest: {worst}); a library's arithmetic, not the records"))
    if changes is None:   # a release from before record digests: judge by the per-seed values
        same_records = not any(d.path.startswith("rows[") and (".values" in d.path
                                                                or ".seeds" in d.path)
                               for d in diffs)
    else:
        same_records = True
    cause = ("The records are the same, so the arithmetic differs: the statistics code or a "
             "library moved these numbers beyond the promised relative "
             f"{stats.REPRODUCE_RTOL:g}. If that change is intended, publish the release again "
             "from the committed records." if same_records else
             "The per-seed values differ: the records changed after the release was published, "
             "or were not committed with it; publish the release again from the committed "
             "records.")
    return Reproduction(release, False, f"{head}; {len(diffs)} field(s) differ:\n  {first}{more}"
                                        f"\n{cause}")
