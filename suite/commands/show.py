"""``scorebench show CELL_ID``: print one record (a unique prefix of the id is enough)."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def register(sub, common):
    p = sub.add_parser("show", parents=[common], help="print the record of one cell")
    p.add_argument("cell_id", metavar="CELL_ID", help="the cell's id, or a unique prefix of it")
    p.add_argument("--results", default="results", metavar="DIR",
                   help="results directory (default ./results)")
    p.add_argument("--board", default="leaderboard", metavar="DIR",
                   help="the board whose committed records (DIR/records) are searched when "
                        "--results has no match (default ./leaderboard)")
    p.add_argument("--json", action="store_true", help="print the raw JSON record")
    p.set_defaults(func=run)


def _fmt(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _find(cell_id: str, results: Path, board_records: Path) -> tuple[Path, Path | None]:
    """The record of ``cell_id`` (or a unique prefix) under ``results``, else under the board's
    records; and the board's records directory when it was found there."""
    from leaderboard.loading.schema import RecordError

    from ..store import NoSuchRecord, ResultStore

    try:
        return ResultStore(results).find(cell_id), None
    except NoSuchRecord:
        if not board_records.is_dir() or board_records.resolve() == results.resolve():
            raise
    try:
        return ResultStore(board_records).find(cell_id), board_records
    except NoSuchRecord:
        raise RecordError(f"no record with cell id {cell_id!r} under {results} or the board's "
                          f"records {board_records}; pass --results DIR (or --board DIR) if "
                          "the record is elsewhere") from None


def run(args) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ..progress import STYLE
    from leaderboard.loading.schema import RecordError
    from ..store import ResultStore

    try:
        path, found_in = _find(args.cell_id, Path(args.results), Path(args.board) / "records")
        record = ResultStore.load(path)
    except RecordError as e:
        raise SystemExit(f"scorebench show: {e}") from None
    if found_in:
        print(f"scorebench show: not under {args.results}; found in the board's records, "
              f"{found_in}", file=sys.stderr if args.json else sys.stdout)
    console = Console()
    if args.json:
        console.print_json(json.dumps(record))
        return 0

    cell, prov = record["cell"], record["provenance"]
    status = record["status"]
    console.print(f"[bold]{record['cell_id']}[/]  {escape(str(path))}")
    console.print(f"status [{STYLE.get(status, 'white')}]{status}[/]"
                  + (f" at step {record['step']}" if record["step"] is not None else ""))
    if record["message"]:
        console.print(escape(record["message"].rstrip()))

    head = Table(title="cell", show_header=False, show_edge=False)
    for k in ("task", "task_version", "track", "scorer", "scorer_version", "scorer_kwargs",
              "profile", "seed"):
        head.add_row(k, escape(json.dumps(cell[k]) if isinstance(cell[k], dict) else str(cell[k])))
    head.add_row("config", escape(json.dumps(cell["config"], sort_keys=True)))
    console.print(head)

    if record["metrics"]:
        metrics = Table(title="metrics", show_edge=False)
        for c in ("metric", "value", "better", "headline", "items"):
            metrics.add_column(c)
        for name, value in record["metrics"].items():
            spec = record["metric_specs"].get(name, {})
            n_items = len(record["items"].get(name, []))
            metrics.add_row(name, _fmt(value), spec.get("direction", "?"),
                            "yes" if spec.get("headline") else "",
                            str(n_items) if n_items else "")
        console.print(metrics)

    for name, grid in record["grids"].items():
        table = Table(title=f"grid {name}: {grid['rows_name']} (rows) x {grid['cols_name']}",
                      show_edge=False)
        table.add_column(f"{grid['rows_name']} \\ {grid['cols_name']}")
        for c in grid["cols"]:
            table.add_column(_fmt(c), justify="right")
        for r, row in zip(grid["rows"], grid["values"], strict=True):
            table.add_row(_fmt(r), *(_fmt(v) for v in row))
        console.print(table)

    if record["extra"]:
        text = json.dumps(record["extra"], sort_keys=True)
        console.print("[bold]extra[/] " + escape(text if len(text) < 2000 else
                                                 text[:2000] + " ... (--json prints it all)"))

    p = Table(title="provenance", show_header=False, show_edge=False)
    for k, v in prov.items():
        p.add_row(k, escape(", ".join(f"{a} {b}" for a, b in v.items()) if isinstance(v, dict)
                            else _fmt(v)))
    console.print(p)
    return 0
