"""Reading result records: every ``*.json`` and ``*.json.gz`` under a results directory (except its
``releases/``, where ``scorebench publish`` writes by default), validated against schema 1.

The schema check is the harness's own (``leaderboard.loading.schema.validate_record``, standard
library only), so the leaderboard and the writer agree on what a record is. A record that fails it
is reported (file and reason) and skipped; a record whose per-item outcomes cannot be used (null
items) keeps its metrics and the problem is reported. Nothing raises on a bad file.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .choice import stopping_blocks
from .schema import (CELL_FIELDS, FAILURES, RECORD_SUFFIXES, REPORT, TRACKS, Cell, RecordError,
                     read_record_text, records_version, validate_record)

RELEASES_SUBDIR = "releases"  # publish's default output inside a results directory
DEFAULT_MIN_EFFECT = 1e-6


@dataclass
class Problem:
    """A record (or part of one) the leaderboard could not use, and why."""

    path: str
    reason: str
    skipped: bool = True  # False: the record was kept without the part named in ``reason``


@dataclass(frozen=True, kw_only=True)
class Record(Cell):
    """One validated result record (schema: docs/records.md): its cell's fields (:class:`Cell`,
    ``role`` "sweep" never on the board, "tuned" at a chosen point) and what the cell gave."""

    path: str
    cell_id: str
    status: str
    message: str
    step: int | None
    metrics: dict[str, float]  # NaN where the record has null
    metric_specs: dict[str, dict]
    grids: dict[str, dict]
    items: dict[str, np.ndarray]
    provenance: dict[str, Any] = field(default_factory=dict)
    anchors: dict[str, dict] = field(default_factory=dict)  # extra["anchors"]: metric -> floor/ceiling
    digest: str = ""  # the first 16 hex digits of the SHA-256 of the record's JSON text
    tuning: dict | None = None        # the record's ``tuning`` object (suite/tuning.py)
    validation: dict | None = None    # extra["validation"]: the validation metric and its curve
    scorer_parameters: dict = field(default_factory=dict)  # extra["scorer_parameters"]
    not_applicable: dict[str, str] = field(default_factory=dict)  # metric -> why it is n/a
    stopping: list[dict] = field(default_factory=list)   # the stopping rule's blocks (choice.py)

    @property
    def records_version(self) -> int:
        return records_version({"provenance": self.provenance})

    @property
    def scorer_label(self) -> str:
        return scorer_label(self.scorer, self.scorer_kwargs)

    @property
    def config_key(self) -> str:
        """The setting the record belongs to: its config, except that the keys a tuning
        protocol chose per scorer give way to the grid they were chosen from (scorers tuned on
        one grid are one setting)."""
        grid = (self.tuning or {}).get("base_grid")
        if self.role != "tuned" or not isinstance(grid, dict):
            return json.dumps(self.config, sort_keys=True, separators=(",", ":"))
        config = {k: v for k, v in self.config.items() if k not in grid}
        return json.dumps({"config": config, "tuning_grid": grid}, sort_keys=True,
                          separators=(",", ":"))

    @property
    def date(self) -> str:
        stamp = self.provenance.get("finished") or self.provenance.get("started") or ""
        return str(stamp)[:10] if stamp else "unknown"

    @property
    def git_sha(self) -> str:
        sha = str(self.provenance.get("git_sha") or "unknown")[:12]
        return sha + ("-dirty" if self.provenance.get("git_dirty") else "")

    @property
    def hardware(self) -> str:
        """The machine, and on a CPU the vector kernels torch ran there where the record names
        them (``provenance.cpu_capability``): CPU training is bit-identical only within one."""
        name = str(self.provenance.get("hardware") or self.provenance.get("device") or "unknown")
        capability = self.provenance.get("cpu_capability")
        cpu = self.provenance.get("device") == "cpu"
        return f"{name} ({capability})" if capability and cpu else name


def scorer_label(scorer: str, kwargs: dict) -> str:
    """``ssa`` or, with keyword arguments, ``ssa(n=2)`` (keys sorted): one leaderboard row each."""
    if not kwargs:
        return scorer
    inner = ",".join(f"{k}={json.dumps(kwargs[k], sort_keys=True)}" for k in sorted(kwargs))
    return f"{scorer}({inner})"


def _number(value) -> float:
    return math.nan if value is None else float(value)


def _grid(grid: dict) -> dict:
    """A validated grid with null values as NaN."""
    return {"rows_name": str(grid["rows_name"]), "cols_name": str(grid["cols_name"]),
            "rows": list(grid["rows"]), "cols": list(grid["cols"]),
            "values": [[_number(v) for v in row] for row in grid["values"]]}


def parse_record(data: Any, path: str) -> tuple[Record, list[Problem]]:
    """Validate one decoded record against the harness's schema (``leaderboard.loading.schema``,
    pure standard library) and the leaderboard's own needs; raises :class:`RecordError` if it cannot
    be used.

    Per-item lists can hold tens of thousands of numbers per record, which the harness's
    element-by-element check is slow for; they are checked here with numpy under the same rules
    (keyed by a metric, a list of finite numbers whose mean is the metric) and the rest of the
    record by ``validate_record``."""
    if isinstance(data, dict) and isinstance(data.get("items"), dict):
        raw_items = data["items"]
        validate_record({**data, "items": {}})
    else:
        raw_items = {}
        validate_record(data)
    cell = data["cell"]
    if cell["track"] not in TRACKS:
        raise RecordError(f"cell.track {cell['track']!r} is not one of {', '.join(TRACKS)}")
    problems: list[Problem] = []
    metrics = {str(k): _number(v) for k, v in data["metrics"].items()}
    anchors = _anchors(data["extra"].get("anchors"), metrics, path, problems)
    not_applicable = _not_applicable(data["extra"], metrics, path, problems)
    for name in not_applicable:
        metrics.pop(name, None)
        anchors.pop(name, None)
    items = {}
    for name, outcomes in raw_items.items():
        if name in not_applicable:
            continue
        values = _items_array(name, outcomes, metrics)
        reason = _item_problem(name, values, metrics)
        if reason:
            problems.append(Problem(path, f"{reason}; items of {name!r} left out "
                                          "(seed-level statistics only)", skipped=False))
        else:
            items[name] = values
    record = Record(**{k: cell[k] for k in CELL_FIELDS}, role=cell.get("role", REPORT),
                    path=path, cell_id=data["cell_id"], status=data["status"], message=data["message"], step=data["step"],
                    metrics=metrics,
                    metric_specs={k: metric_spec(v) for k, v in data["metric_specs"].items()},
                    grids={k: _grid(g) for k, g in data["grids"].items()},
                    items=items, provenance=data["provenance"],
                    anchors=anchors, not_applicable=not_applicable,
                    tuning=data.get("tuning"),
                    validation=_dict_or_none(data["extra"].get("validation")),
                    scorer_parameters=_dict_or_none(data["extra"].get("scorer_parameters")) or {},
                    stopping=stopping_blocks(data["extra"]))
    return record, problems


def _dict_or_none(value: Any) -> dict | None:
    return value if isinstance(value, dict) else None


def metric_spec(spec: dict) -> dict:
    """A record's metric declaration with the defaults of records written before the anchors
    existed: no floor or ceiling (the metric stays out of the overall), linear scale, and a
    minimum effect of 1e-6 (relative to the baseline's mean)."""
    min_effect = spec.get("min_effect")
    return {"direction": spec["direction"], "headline": spec["headline"],
            "floor": None if spec.get("floor") is None else float(spec["floor"]),
            "ceiling": None if spec.get("ceiling") is None else float(spec["ceiling"]),
            "log_scale": bool(spec.get("log_scale", False)),
            "min_effect": DEFAULT_MIN_EFFECT if min_effect is None else float(min_effect)}


def _not_applicable(extra: dict, metrics: dict[str, float], path: str,
                    problems: list[Problem]) -> dict[str, str]:
    """``extra["not_applicable"]`` as {metric: reason}, for metrics the record leaves out or
    reports as null (either is then n/a, not a failure). An entry that is not a metric name mapped
    to a reason, or that names a metric with a value, is reported and left out.

    decoder_lm records of task version 1 written before the task used it kept the reason for a
    context multiple the scorer cannot read in ``extra["context_perplexity"]["failed"]``
    ({"2x": reason}) beside a null ``heldout_perplexity_2x``; those read the same way."""
    raw = extra.get("not_applicable")
    context = extra.get("context_perplexity")
    failed = context.get("failed") if isinstance(context, dict) else None
    if raw is None and isinstance(failed, dict):
        raw = {f"heldout_{kind}_{multiple}": reason for multiple, reason in failed.items()
               for kind in ("perplexity", "bits_per_byte")}
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(Problem(path, "extra.not_applicable must map a metric to why it is n/a; "
                                      "left out", skipped=False))
        return {}
    out: dict[str, str] = {}
    for name, reason in raw.items():
        if not isinstance(reason, str) or not reason:
            problems.append(Problem(path, f"extra.not_applicable {name!r} must give the reason "
                                          "as text; left out", skipped=False))
        elif name in metrics and not math.isnan(metrics[name]):
            problems.append(Problem(path, f"extra.not_applicable names {name!r}, which the "
                                          "record reports; its value is used", skipped=False))
        else:
            out[name] = reason
    return out


def _anchors(raw: Any, metrics: dict[str, float], path: str,
             problems: list[Problem]) -> dict[str, dict]:
    """``extra["anchors"]`` as {metric: {"floor": x, "ceiling": y}} (either key optional); an
    entry that is not of that form is reported and left out (the declared anchors apply)."""
    if raw is None:
        return {}
    out: dict[str, dict] = {}
    entries = raw.items() if isinstance(raw, dict) else [("", raw)]
    for name, anchor in entries:
        ok = (name in metrics and isinstance(anchor, dict)
              and set(anchor) <= {"floor", "ceiling"}
              and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                      and math.isfinite(v) for v in anchor.values()))
        if ok:
            out[name] = {k: float(v) for k, v in anchor.items()}
        else:
            problems.append(Problem(path, f"extra.anchors {name!r} must map a metric of the "
                                          "record to {'floor': number, 'ceiling': number}; "
                                          "left out (the declared anchors apply)", skipped=False))
    return out


def _items_array(name: str, outcomes: Any, metrics: dict[str, float]) -> np.ndarray | None:
    """The items as float64, or None when they hold a non-number (null, text). Raises
    :class:`RecordError` where the harness's schema would: not keyed by a metric, not a list,
    NaN/inf, or a mean that differs from the metric."""
    if name not in metrics:
        raise RecordError(f"items.{name}: items are keyed by metric name and {name!r} is not a "
                          f"metric of this record (metrics: {sorted(metrics)})")
    if not isinstance(outcomes, list):
        raise RecordError(f"items.{name} must be a list of per-item outcomes")
    raw = np.array(outcomes) if outcomes else np.zeros(0)
    if raw.dtype.kind not in "biuf":
        return None
    values = raw.astype(np.float64)
    if not np.isfinite(values).all():
        raise RecordError(f"items.{name} holds NaN or inf; NaN/inf are not JSON, write null and "
                          "say why in `message` or `extra`")
    metric = metrics[name]
    if values.size and not math.isnan(metric):
        mean = math.fsum(values) / values.size
        if not math.isclose(mean, metric, rel_tol=1e-5, abs_tol=1e-8):
            raise RecordError(f"items.{name}: the mean of the {values.size} items is {mean!r} but "
                              f"metrics.{name} is {metric!r}; they must agree")
    return values


def _item_problem(name: str, values: np.ndarray | None, metrics: dict[str, float]) -> str | None:
    """Why the items of ``name`` cannot be used for paired statistics, or None."""
    if math.isnan(metrics[name]):
        return f"metric {name!r} is null"
    if values is None:
        return f"items {name!r} contains a non-number (null is not allowed in items)"
    if not values.size:
        return f"items {name!r} is empty"
    return None


@dataclass
class LoadedRecords:
    records: list[Record]
    problems: list[Problem]
    # the tuning protocol's sweep cells (suite/tuning.py): read by leaderboard.method.tuning, never
    # aggregated with the reporting cells
    sweeps: list[Record] = field(default_factory=list)


def load_records(results_dir: str | Path) -> LoadedRecords:
    """Every ``*.json`` and ``*.json.gz`` under ``results_dir`` (recursively, in sorted order;
    hidden files and directories such as the harness's ``.work/`` excluded, and the top-level
    ``releases/``), parsed and validated. Paths in records and problems are relative to
    ``results_dir`` (POSIX separators)."""
    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"results directory {str(root)!r} does not exist; run "
                                "`scorebench run` first or pass --results DIR")
    records, problems, sweeps = [], [], []
    for file in sorted(p for suffix in RECORD_SUFFIXES for p in root.rglob(f"*{suffix}")):
        rel = file.relative_to(root).as_posix()
        parts = Path(rel).parts
        if any(part.startswith(".") for part in parts):
            continue  # the harness's scratch space (.work/) and temporary files
        if len(parts) > 1 and parts[0] == RELEASES_SUBDIR:
            continue
        try:
            text = read_record_text(file)
            data = json.loads(text)
        except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append(Problem(rel, f"not readable as JSON: {exc}"))
            continue
        try:
            record, partial = parse_record(data, rel)
        except RecordError as exc:
            problems.append(Problem(rel, str(exc)))
            continue
        record = replace(record, digest=hashlib.sha256(text.encode("utf-8")).hexdigest()[:16])
        (sweeps if record.role == "sweep" else records).append(record)
        problems.extend(partial)
    return LoadedRecords(records, problems, sweeps)


def provenance_lists(records: list[Record]) -> dict:
    """The provenance a row of ``records`` shows: the latest date, and every git sha, hardware and
    harness version among them."""
    return {"date": max((r.date for r in records), default="unknown"),
            "git_sha": sorted({r.git_sha for r in records}),
            "hardware": sorted({r.hardware for r in records}),
            "harness_version": sorted({str(r.provenance.get("harness_version", "unknown"))
                                       for r in records})}


def failure_counts(records: list[Record]) -> dict[str, int]:
    """Failure status -> how many of ``records`` ended so (statuses with none left out)."""
    counts = Counter(r.status for r in records)
    return {s: counts[s] for s in FAILURES if counts[s]}


def load_records_from(results_dirs: str | Path | list) -> LoadedRecords:
    """:func:`load_records` of one results directory, or of several merged (a user's records
    beside the committed ones); with several, each path starts with its directory as given."""
    if isinstance(results_dirs, (str, Path)):
        return load_records(results_dirs)
    merged = LoadedRecords([], [], [])
    for directory in results_dirs:
        loaded = load_records(directory)
        prefix = Path(directory).as_posix().rstrip("/") + "/"
        merged.records += [replace(r, path=prefix + r.path) for r in loaded.records]
        merged.sweeps += [replace(r, path=prefix + r.path) for r in loaded.sweeps]
        merged.problems += [replace(p, path=prefix + p.path) for p in loaded.problems]
    return merged
