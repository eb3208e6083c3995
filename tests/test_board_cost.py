"""scripts/board_cost.py: a board's CPU and wall hours per task and role, from its records."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from leaderboard_fakes import make_record, write_record

from leaderboard.loading.records import load_records
from leaderboard.loading.selection import current

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "board_cost.py"


@pytest.fixture(scope="module")
def board_cost():
    spec = importlib.util.spec_from_file_location("board_cost", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(seed, cpu, wall, *, role="report", finished="2026-12-05T10:00:00+00:00"):
    record = make_record("icl_mqar", "softmax", seed, {"error": 0.1},
                         config={"n_layer": 2, "lr": 1e-3}, finished=finished)
    if role == "sweep":
        record["cell"]["role"] = "sweep"
        record["tuning"] = {"role": "sweep", "point": {"lr": 1e-3}}
        from leaderboard.loading.schema import cell_id
        record["cell_id"] = cell_id(record["cell"])
    record["provenance"]["wall_time_s"] = wall
    if cpu is not None:
        record["provenance"]["cpu_time_s"] = cpu
    return record


def test_the_cost_sums_cpu_and_wall_hours_per_role_and_counts_cells_without_cpu_time(
        tmp_path, board_cost):
    write_record(tmp_path, timed(0, 3600.0, 5400.0))
    write_record(tmp_path, timed(1, None, 1800.0))                      # from before cpu_time_s
    write_record(tmp_path, timed(1000, 1800.0, 1800.0, role="sweep"))
    write_record(tmp_path, timed(2, 7200.0, 7200.0, finished="2026-12-01T00:00:00+00:00"))
    loaded = current(load_records(tmp_path))
    rows = {r["role"]: r for r in board_cost.costs(loaded, since="2026-12-05")}
    assert rows["report"] == {"task": "icl_mqar", "role": "report", "cells": 2, "cpu_h": 1.0,
                              "no_cpu": 1, "wall_h": 2.0}
    assert rows["sweep"]["cells"] == 1 and rows["sweep"]["cpu_h"] == 0.5
    everything = board_cost.costs(loaded)
    assert sum(r["cpu_h"] for r in everything) == 3.5
    assert board_cost.costs(loaded, tasks={"icl_linear"}) == []
