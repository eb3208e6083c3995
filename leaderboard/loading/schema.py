"""The result record: one JSON document per cell. The schema is documented in ``docs/records.md``.

This module is pure standard library (no torch), so the leaderboard can validate records with it.
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
# The harness version of a record (``provenance.records_version``; absent in a record: 0), bumped
# when a change outside every task and scorer (the runner, seeding, evaluation code the tasks
# share) changes what a cell's record holds. Task and scorer changes bump their own versions, which
# are part of the cell id. A record older than this is stale: `scorebench run` runs its cell again
# and a release lists it as superseded, never mixed with newer ones.
RECORDS_VERSION = 1
RECORD_SUFFIXES = (".json", ".json.gz")

TRACKS = ("icl", "decoder", "encoder", "probe", "cost")
STATUSES = ("ok", "diverged", "nan", "oom", "timeout", "error", "skipped")
# Training failures are results of the cell's numerics, reproducible from the seed; the leaderboard
# counts them against the scorer.
TRAINING_FAILURES = ("diverged", "nan")
# Outcomes of the harness or the machine: `--rerun failed` reruns these and `--fail-fast` stops
# on them.
HARNESS_FAILURES = ("error", "oom", "timeout")
# Every status that is neither ok nor skipped.
FAILURES = TRAINING_FAILURES + HARNESS_FAILURES

PROVENANCE_FIELDS = {
    "git_sha": (str, type(None)), "git_dirty": (bool, type(None)), "harness_version": str,
    "packages": dict, "device": str, "hardware": str, "host": str, "dtype": str,
    "wall_time_s": (int, float), "peak_memory_mb": (int, float, type(None)),
    "started": str, "finished": str,
}
RECORD_FIELDS = ("schema_version", "cell_id", "cell", "status", "message", "step", "metrics",
                 "metric_specs", "grids", "items", "extra", "provenance")
# Present only in the records of the tuning protocol (suite/tuning.py): the point, the grid, the
# selection metric and the sweep cells.
OPTIONAL_RECORD_FIELDS = ("tuning",)
GRID_FIELDS = ("rows_name", "cols_name", "rows", "cols", "values")


REPORT, SWEEP, TUNED = "report", "sweep", "tuned"
ROLES = (REPORT, SWEEP, TUNED)
# The scorer every verdict is against (``scorebench publish --baseline`` names another).
BASELINE = "softmax"


@dataclass(frozen=True)
class Cell:
    """The ``cell`` object of a record; its canonical JSON hashes to the ``cell_id``."""

    task: str
    task_version: int
    track: str
    scorer: str
    scorer_version: int
    scorer_kwargs: dict
    profile: str
    seed: int
    config: dict
    # "report" (the default, left out of the JSON so that untuned cells keep their ids),
    # "sweep": a cell of the tuning protocol's sweep (suite/tuning.py), scored on the validation
    # metric, or "tuned": a reporting cell at the point its sweep chose
    role: str = REPORT

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"cell role must be one of {ROLES}, got {self.role!r}")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        if self.role == REPORT:
            del d["role"]
        return json.loads(canonical_json(d))

    @classmethod
    def from_dict(cls, d: dict) -> "Cell":
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [n for n in names if n not in d and n != "role"]
        unknown = sorted(set(d) - set(names))
        if missing or unknown:
            raise ValueError(f"cell: missing field(s) {missing}, unknown field(s) {unknown}")
        return cls(**{n: d[n] for n in names if n in d})

    @property
    def is_sweep(self) -> bool:
        return self.role == SWEEP

    @property
    def id(self) -> str:
        return cell_id(self.to_dict())

    @property
    def label(self) -> str:
        kw = ",".join(f"{k}={v}" for k, v in sorted(self.scorer_kwargs.items()))
        rates = ",".join(f"{k}={self.config[k]:g}" for k in sorted(self.config)
                         if k in ("lr", "weight_decay"))
        role = f" ({self.role} {rates})" if self.role != REPORT else ""
        return f"{self.task} {self.scorer}{f'({kw})' if kw else ''} seed {self.seed}{role}"


# The fields of a record's ``cell`` object and their types: the fields of :class:`Cell`. ``role``
# is present only in the cells of the tuning protocol ("sweep" or "tuned"); an untuned cell
# leaves it out, so its id does not change.
CELL_FIELDS = {f.name: {"str": str, "int": int, "dict": dict}[f.type]
               for f in dataclasses.fields(Cell) if f.name != "role"}
OPTIONAL_CELL_FIELDS = {"role": str}
CELL_ROLES = (SWEEP, TUNED)


class RecordError(ValueError):
    """A record does not follow the schema of ``docs/records.md``; the message names the field."""


def canonical_json(obj: Any) -> str:
    """Sorted keys, no whitespace, no NaN/inf: the same object always gives the same string."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def cell_id(cell: dict) -> str:
    """First 16 hex digits of the sha256 of the cell's canonical JSON."""
    return hashlib.sha256(canonical_json(cell).encode("utf-8")).hexdigest()[:16]


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_finite(obj, where: str) -> None:
    if isinstance(obj, float) and not math.isfinite(obj):
        raise RecordError(f"{where} is {obj}; NaN/inf are not JSON, write null and say why in "
                          f"`message` or `extra`")
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, str):
                raise RecordError(f"{where} has a non-string key {k!r}")
            _check_finite(v, f"{where}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _check_finite(v, f"{where}[{i}]")
    elif not (obj is None or isinstance(obj, (str, bool, int, float))):
        raise RecordError(f"{where} has a value of type {type(obj).__name__}, which is not JSON")


def _check_type(value, types, where: str) -> None:
    allowed = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool) and bool not in allowed:
        raise RecordError(f"{where} must be {_names(types)}, got a bool")
    if not isinstance(value, types):
        raise RecordError(f"{where} must be {_names(types)}, got {type(value).__name__} {value!r}")


def _names(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join("null" if t is type(None) else t.__name__ for t in types)


def validate_grid(name: str, grid: Any) -> None:
    where = f"grids.{name}"
    if not isinstance(grid, dict):
        raise RecordError(f"{where} must be an object with keys {list(GRID_FIELDS)}")
    missing = [k for k in GRID_FIELDS if k not in grid]
    unknown = sorted(set(grid) - set(GRID_FIELDS))
    if missing or unknown:
        raise RecordError(f"{where}: missing keys {missing}, unknown keys {unknown}; a grid has "
                          f"exactly {list(GRID_FIELDS)}")
    for k in ("rows", "cols", "values"):
        _check_type(grid[k], list, f"{where}.{k}")
    if len(grid["values"]) != len(grid["rows"]):
        raise RecordError(f"{where}: {len(grid['values'])} rows of values for "
                          f"{len(grid['rows'])} row labels")
    for i, row in enumerate(grid["values"]):
        if not isinstance(row, list) or len(row) != len(grid["cols"]):
            raise RecordError(f"{where}.values[{i}] must be a list of {len(grid['cols'])} values "
                              f"(one per column label)")
        for j, v in enumerate(row):
            if v is not None and not _is_number(v):
                raise RecordError(f"{where}.values[{i}][{j}] must be a number or null, got {v!r}")


def validate_items(items: dict, metrics: dict) -> None:
    """Each items list is keyed by a metric name and its mean equals the metric (numbers only)."""
    for name, outcomes in items.items():
        if name not in metrics:
            raise RecordError(f"items.{name}: items are keyed by metric name and {name!r} is not "
                              f"a metric of this record (metrics: {sorted(metrics)})")
        if not isinstance(outcomes, list):
            raise RecordError(f"items.{name} must be a list of per-item outcomes")
        value = metrics[name]
        numeric = [float(x) for x in outcomes if _is_number(x) or isinstance(x, bool)]
        if value is None or not outcomes or len(numeric) != len(outcomes):
            continue
        mean = math.fsum(numeric) / len(numeric)
        if not math.isclose(mean, value, rel_tol=1e-5, abs_tol=1e-8):
            raise RecordError(f"items.{name}: the mean of the {len(outcomes)} items is {mean!r} "
                              f"but metrics.{name} is {value!r}; they must agree")


def validate_record(record: Any) -> dict:
    """Check ``record`` against the schema; return it, or raise :class:`RecordError`."""
    if not isinstance(record, dict):
        raise RecordError(f"a record is a JSON object, got {type(record).__name__}")
    missing = [k for k in RECORD_FIELDS if k not in record]
    unknown = sorted(set(record) - set(RECORD_FIELDS) - set(OPTIONAL_RECORD_FIELDS))
    if missing:
        raise RecordError(f"record is missing field(s) {missing}")
    if unknown:
        raise RecordError(f"record has unknown field(s) {unknown}")
    if record["schema_version"] != SCHEMA_VERSION:
        raise RecordError(f"schema_version is {record['schema_version']!r}; this harness reads "
                          f"version {SCHEMA_VERSION}")
    cell = record["cell"]
    _check_type(cell, dict, "cell")
    missing = [k for k in CELL_FIELDS if k not in cell]
    unknown = sorted(set(cell) - set(CELL_FIELDS) - set(OPTIONAL_CELL_FIELDS))
    if missing or unknown:
        raise RecordError(f"cell: missing field(s) {missing}, unknown field(s) {unknown}")
    for k, t in CELL_FIELDS.items():
        _check_type(cell[k], t, f"cell.{k}")
    if "role" in cell and cell["role"] not in CELL_ROLES:
        raise RecordError(f"cell.role {cell['role']!r} is not one of {list(CELL_ROLES)} (an "
                          f"untuned cell has no role field)")
    if "tuning" in record:
        _check_type(record["tuning"], dict, "tuning")
        _check_finite(record["tuning"], "tuning")
    _check_finite(cell, "cell")
    if cell_id(cell) != record["cell_id"]:
        raise RecordError(f"cell_id {record['cell_id']!r} does not match the cell (its hash is "
                          f"{cell_id(cell)!r}); the cell was edited after the run")
    if record["status"] not in STATUSES:
        raise RecordError(f"status {record['status']!r} is not one of {list(STATUSES)}")
    _check_type(record["message"], str, "message")
    _check_type(record["step"], (int, type(None)), "step")
    for k in ("metrics", "metric_specs", "grids", "items", "extra", "provenance"):
        _check_type(record[k], dict, k)
    for k in ("metrics", "grids", "items", "extra", "provenance"):
        _check_finite(record[k], k)
    for name, value in record["metrics"].items():
        if value is not None and not _is_number(value):
            raise RecordError(f"metrics.{name} must be a number or null, got {value!r}")
    for name, spec in record["metric_specs"].items():
        if (not isinstance(spec, dict) or spec.get("direction") not in ("lower", "higher")
                or not isinstance(spec.get("headline"), bool)):
            raise RecordError(f"metric_specs.{name} must be {{'direction': 'lower'|'higher', "
                              f"'headline': true|false}}, got {spec!r}")
        for key in ("floor", "ceiling", "min_effect"):
            if spec.get(key) is not None and not _is_number(spec[key]):
                raise RecordError(f"metric_specs.{name}.{key} must be a number or null, "
                                  f"got {spec[key]!r}")
    undeclared = sorted(set(record["metrics"]) - set(record["metric_specs"]))
    if undeclared:
        raise RecordError(f"metrics {undeclared} have no entry in metric_specs")
    for name, grid in record["grids"].items():
        validate_grid(name, grid)
    validate_items(record["items"], record["metrics"])
    prov = record["provenance"]
    missing = [k for k in PROVENANCE_FIELDS if k not in prov]
    if missing:
        raise RecordError(f"provenance is missing field(s) {missing}")
    for k, t in PROVENANCE_FIELDS.items():
        _check_type(prov[k], t, f"provenance.{k}")
    return record


def dumps(record: dict) -> str:
    """The record as indented JSON (keys in schema order); refuses NaN/inf."""
    return json.dumps(record, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def dumps_compact(record: dict) -> str:
    """The record as one line of JSON (keys in schema order); refuses NaN/inf."""
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n"


def gzip_bytes(text: str) -> bytes:
    """``text`` gzipped with no timestamp or file name: the same text gives the same bytes."""
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def read_record_text(path: str | Path) -> str:
    """The JSON text of a record file, ``.json`` or gzipped ``.json.gz``."""
    path = Path(path)
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8")


def is_record_file(path: str | Path) -> bool:
    return Path(path).name.endswith(RECORD_SUFFIXES)


def records_version(record: dict) -> int:
    """The harness version a record was written by (0 when it predates the key)."""
    value = record.get("provenance", {}).get("records_version", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def stale_reason(record: dict) -> str | None:
    """Why ``record`` is older than this harness, or None when it is current."""
    version = records_version(record)
    if version < RECORDS_VERSION:
        return (f"records version {version} < {RECORDS_VERSION} (written by an older harness; "
                f"RECORDS_VERSION in leaderboard/loading/schema.py)")
    return None
