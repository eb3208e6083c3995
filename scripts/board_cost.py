"""What a board cost: the CPU and wall hours of its current records, per task and role.

    python scripts/board_cost.py leaderboard/records [--since 2026-12-05]

A record's CPU time (``provenance.cpu_time_s``, with the time of earlier processes where a cell
resumed from a training checkpoint) is what the cell cost on one core; its wall time grows with
the other jobs on a shared host. Records from before the CPU time was kept count in the wall
column only, and the table says how many cells lack it. ``--since`` keeps the records that
finished on or after a date (a re-run's), ``--tasks`` some tasks.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabulate import tabulate  # noqa: E402

from leaderboard.loading.records import load_records  # noqa: E402
from leaderboard.loading.selection import current  # noqa: E402


def costs(loaded, since: str = "", tasks: set[str] | None = None) -> list[dict]:
    """One row per (task, role): cells, CPU hours and the cells without a CPU time, wall hours."""
    rows: dict[tuple[str, str], dict] = defaultdict(
        lambda: {"cells": 0, "cpu_h": 0.0, "no_cpu": 0, "wall_h": 0.0})
    for r in [*loaded.records, *loaded.sweeps]:
        if (tasks and r.task not in tasks) or str(r.provenance.get("finished", "")) < since:
            continue
        row = rows[(r.task, r.role if r.role == "sweep" else "report")]
        row["cells"] += 1
        row["wall_h"] += float(r.provenance.get("wall_time_s") or 0) / 3600
        cpu = r.provenance.get("cpu_time_s")
        if cpu is None:
            row["no_cpu"] += 1
        else:
            row["cpu_h"] += float(cpu) / 3600
    return [{"task": task, "role": role, **row} for (task, role), row in sorted(rows.items())]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--since", default="", help="records finished on or after this date")
    parser.add_argument("--tasks", default="", help="comma-separated tasks (default: all)")
    args = parser.parse_args(argv)
    rows = costs(current(load_records(args.results)), args.since,
                 set(filter(None, args.tasks.split(","))) or None)
    total = {"task": "all", "role": "", **{k: sum(r[k] for r in rows)
                                          for k in ("cells", "cpu_h", "no_cpu", "wall_h")}}
    print(tabulate(rows + [total], headers="keys", floatfmt=".2f", tablefmt="github"))


if __name__ == "__main__":
    main()
