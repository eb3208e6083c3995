"""The :class:`Board`: the aggregated leaderboard as tidy pandas frames, and its JSON form.

``Board.to_dict()`` is the release's ``results.json`` and every renderer (markdown, plots, HTML)
reads a Board, so all of them show the same numbers. Each frame's columns are declared once here,
with the kind that fixes the JSON type of every cell.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

FORMAT_VERSION = 1
# Tracks whose headline metrics enter the overall; probe and cost tables are descriptive: no
# better/worse words, tiers or ranks, never in the overall.
OVERALL_TRACKS = ("icl", "decoder", "encoder")
DESCRIPTIVE_TRACKS = ("probe", "cost")

# Column name -> kind, for every frame of the Board; the kind fixes the JSON type of each cell.
ROW_COLUMNS = {
    "profile": "str", "track": "str", "task": "str", "task_version": "int", "metric": "str",
    "direction": "str", "headline": "bool", "scorer": "str", "scorer_name": "str",
    "scorer_version": "int", "scorer_kwargs": "json",
    "n": "int", "mean": "float", "std": "float", "ci_low": "float", "ci_high": "float",
    "ci_method": "str", "n_items": "int", "seeds": "json", "values": "json",
    "ci_items_low": "float", "ci_items_high": "float",
    "n_cells": "int", "n_ok": "int", "n_failed": "int", "failures": "json", "n_skipped": "int",
    "n_na": "int", "na_reason": "str", "n_null": "int", "survivors_only": "bool",
    "floor": "float", "ceiling": "float", "log_scale": "bool", "min_effect": "float",
    "min_effect_rule": "str", "delta_vs_baseline": "float", "p_vs_baseline": "float",
    "p_vs_baseline_holm": "float", "p_vs_baseline_bh": "float", "p_signflip": "float", "n_paired": "int", "sd_paired": "float",
    "detectable_vs_baseline": "float", "vs_baseline": "str",
    "tier": "int", "rank_low": "int", "rank_high": "int",
    "date": "str", "git_sha": "json", "hardware": "json", "harness_version": "json",
    "normalized": "float", "informative": "bool", "informative_reason": "str",
    "degenerate": "str", "stand_in_for": "str", "not_learned": "str", "cell_ids": "json",
}
OVERALL_COLUMNS = {
    "profile": "str", "scorer": "str", "poi": "float", "poi_low": "float", "poi_high": "float",
    "poi_tasks": "json", "score": "float", "ci_low": "float", "ci_high": "float",
    "n_tasks": "int", "tasks_failed": "int", "tasks_skipped": "int", "tier1_tasks": "int",
    "tier": "int", "rank_low": "int", "rank_high": "int",
    "n_cells": "int", "n_failed": "int", "failures": "json",
    "date": "str", "git_sha": "json", "hardware": "json",
    "rank_without": "json", "outside_anchors": "json",
    "metrics_na": "json",
}
FAILED_CELL_COLUMNS = {
    "profile": "str", "track": "str", "task": "str", "scorer": "str", "seed": "int",
    "status": "str", "step": "int", "message": "str", "path": "str", "date": "str",
    "git_sha": "str", "hardware": "str",
}
SUPERSEDED_COLUMNS = {
    "task": "str", "task_version": "int", "scorer": "str", "scorer_version": "int",
    "profile": "str", "n_cells": "int", "reason": "str",
}
PROBLEM_COLUMNS = {"path": "str", "reason": "str", "skipped": "bool"}
TASK_SCORE_COLUMNS = {"profile": "str", "task": "str", "scorer": "str", "score": "float",
                      "score_unclipped": "float", "poi": "float"}
OVERALL_TASK_COLUMNS = {"profile": "str", "task": "str", "metrics": "json", "share": "float",
                        "score_share": "float"}
GRID_COLUMNS = {
    "profile": "str", "task": "str", "grid": "str", "scorer": "str", "rows_name": "str",
    "cols_name": "str", "rows": "json", "cols": "json", "values": "json", "n": "int",
}
CLAIM_COLUMNS = {
    "id": "str", "claim": "str", "source": "str", "profile": "str", "scorer": "str",
    "baseline": "str", "task": "str", "metric": "str", "direction": "str", "paper": "str",
    "verdict": "str", "effect": "float", "ci_low": "float", "ci_high": "float", "p": "float",
    "p_raw": "float", "test": "str", "n_seeds": "int", "detectable": "float",
    "min_effect": "float", "role": "str", "reason": "str", "alpha_corrected": "float",
}
FRAMES = {"rows": ROW_COLUMNS, "overall": OVERALL_COLUMNS, "failed_cells": FAILED_CELL_COLUMNS,
          "superseded": SUPERSEDED_COLUMNS, "problems": PROBLEM_COLUMNS,
          "task_scores": TASK_SCORE_COLUMNS, "grids": GRID_COLUMNS, "claims": CLAIM_COLUMNS,
          "overall_tasks": OVERALL_TASK_COLUMNS}


def ran(row: dict) -> bool:
    """Whether a row's scorer ran its task: not every one of its cells was skipped."""
    return row["n_skipped"] < row["n_cells"]


def _clean(value: Any, kind: str) -> Any:
    """A cell value as the plain JSON type of its column (NaN, NA and None become None)."""
    if value is None or value is pd.NA or (isinstance(value, (float, np.floating))
                                           and math.isnan(value)):
        return None
    if kind == "json":
        return _json_value(value)
    if kind == "int":
        return int(value)
    if kind == "float":
        value = float(value)
        return value if math.isfinite(value) else None
    if kind == "bool":
        return bool(value)
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_json_value(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


_DTYPES = {"int": "Int64", "float": "float64", "bool": "boolean", "str": object, "json": object}


def to_frame(rows: Iterable[dict], columns: dict[str, str]) -> pd.DataFrame:
    """A frame with one dtype per column kind: nullable Int64 / boolean, float64 (NaN), object."""
    data = [{c: _clean(r.get(c), kind) for c, kind in columns.items()} for r in rows]
    frame = pd.DataFrame(data, columns=list(columns), dtype=object)
    return frame.astype({c: _DTYPES[kind] for c, kind in columns.items()})


@dataclass
class Board:
    """The aggregated leaderboard: tidy frames (one row per observation) plus release metadata.

    rows:         one per (profile, task, metric, scorer): statistics, failures, provenance.
    overall:      one per (profile, scorer): normalized quality score, tier, rank interval.
    failed_cells: one per cell that did not finish ``ok`` (skipped included) or has a null metric.
    superseded:   records left out because a newer task or scorer version exists.
    problems:     files (or parts) that could not be used, and why.
    task_scores:  per (profile, quality task, scorer): the normalized headline score of the overall.
    grids:        per (profile, task, grid, scorer): the grid averaged over ``ok`` seeds.
    claims:       per (paper claim, scorer, profile): the verdict
                  (see :mod:`leaderboard.method.claims`).
    overall_tasks: per (profile, task of the overall): its metrics and its share of the spread.
    meta:         release name, record counts, date range, git shas, hardware, method constants.
    """

    meta: dict
    rows: pd.DataFrame
    overall: pd.DataFrame
    failed_cells: pd.DataFrame
    superseded: pd.DataFrame
    problems: pd.DataFrame
    task_scores: pd.DataFrame
    grids: pd.DataFrame
    claims: pd.DataFrame
    overall_tasks: pd.DataFrame = field(
        default_factory=lambda: to_frame([], OVERALL_TASK_COLUMNS))

    def to_dict(self) -> dict:
        """The JSON document of the release (``results.json``): plain types, NaN as null."""
        out = {"format": "scorebench-leaderboard", "format_version": FORMAT_VERSION,
               "meta": _json_value(self.meta)}
        for name, columns in FRAMES.items():
            frame = getattr(self, name)
            if name == "claims" and frame.empty:
                continue   # a release that holds no claim's metric judges nothing
            out[name] = [{c: _clean(row[c], kind) for c, kind in columns.items()}
                         for row in frame.to_dict(orient="records")]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=False, ensure_ascii=False,
                          allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict) -> "Board":
        if data.get("format") != "scorebench-leaderboard":
            raise ValueError("not a scorebench leaderboard results.json (no 'format' field)")
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"results.json format_version {data.get('format_version')!r}; this "
                             f"scorebench reads {FORMAT_VERSION}")
        frames = {name: to_frame(data.get(name, []), columns)
                  for name, columns in FRAMES.items()}
        return cls(meta=dict(data.get("meta", {})), **frames)

    def with_release(self, release: str) -> "Board":
        frames = {name: getattr(self, name) for name in FRAMES}
        return Board(meta={**self.meta, "release": release}, **frames)


