"""What ``scorebench run`` shows: a progress bar with ETA, one line per finished cell (with the
cells done, failed and left and the expected finish time, readable in a plain log), a summary."""
from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta, timezone

from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID,
                           TextColumn, TimeElapsedColumn, TimeRemainingColumn)
from rich.table import Table

from .executors import Event, Progress as CellProgress, Started
from .records import HARNESS_FAILURES
from .runner import CellJob, failure_reason
from .scheduler import RunSummary

STYLE = {"ok": "green", "skipped": "dim", "nan": "yellow", "diverged": "yellow",
         "oom": "red", "timeout": "red", "error": "red"}


class RichReporter:
    """A live progress display: the overall bar (done / total, elapsed, ETA) and a row per cell
    running, with the task's own progress where it reports one."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console()
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
            MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=self.console, transient=True)
        self.overall: TaskID | None = None
        self.rows: dict[str, TaskID] = {}
        self.tally = Tally()

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def planned(self, to_run: int, resumed: int) -> None:
        if resumed:
            self.console.print(f"{resumed} cell(s) already have a record and are skipped "
                               f"(--rerun failed|all runs them again)")
        self.overall = self.progress.add_task("[bold]cells", total=to_run)
        self.tally.start(to_run)
        self.console.print(f"{to_run} cell(s) to run; started {self.tally.clock(time.time())}")

    def added(self, count: int) -> None:
        """More cells to run than planned: the tuning protocol's further sweep points and its
        reporting cells, known once the sweep's records are."""
        self.tally.total += count
        if self.overall is not None:
            self.progress.update(self.overall, total=self.tally.total)
        self.console.print(f"{count} more cell(s) to run (tuning: sweep points or reporting "
                           f"cells now known)")

    def event(self, event: Event) -> None:
        if isinstance(event, Started):
            self.rows[event.job.cell_id] = self.progress.add_task(
                f"  {escape(event.job.cell.label)} [dim]{escape(event.worker)}", total=None)
        elif isinstance(event, CellProgress) and event.cell_id in self.rows:
            self.progress.update(self.rows[event.cell_id], completed=event.done,
                                 total=event.total)

    def finished(self, job: CellJob, record: dict) -> None:
        row = self.rows.pop(job.cell_id, None)
        if row is not None:
            self.progress.remove_task(row)
        if self.overall is not None:
            self.progress.advance(self.overall)
        status = record["status"]
        reason = failure_reason(record) if status != "ok" else ""
        wall = record["provenance"]["wall_time_s"]
        self.console.print(
            f"[{STYLE.get(status, 'white')}]{status:>8}[/] {escape(job.cell.label)} "
            f"[dim]{wall:.1f} s {job.cell_id}[/]" + (f"  {escape(reason)}" if reason else ""))
        self.tally.finished(status in HARNESS_FAILURES)
        self.console.print(f"[dim]{self.tally.line()}[/]")

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]{escape(text)}")


class Tally:
    """Cells done, failed and left, and the expected finish: now + left x (elapsed / done), the
    run's own throughput so far (so it accounts for the workers running at once)."""

    def __init__(self, clock=time.time):
        self.now = clock
        self.total = self.done = self.failed = 0
        self.t0 = 0.0

    def start(self, total: int) -> None:
        self.total, self.done, self.failed, self.t0 = total, 0, 0, self.now()

    def finished(self, failed: bool) -> None:
        self.done += 1
        self.failed += int(failed)

    @staticmethod
    def clock(t: float) -> str:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    def eta(self) -> float | None:
        if not self.done:
            return None
        now = self.now()
        return now + (self.total - self.done) * (now - self.t0) / self.done

    def line(self) -> str:
        left = max(self.total - self.done, 0)
        eta = self.eta()
        when = "finished" if not left else (
            f"expected finish {self.clock(eta)} (in {timedelta(seconds=round(eta - self.now()))})"
            if eta is not None else "expected finish unknown")
        return (f"progress: {self.done}/{self.total} cells done, {self.failed} failed, "
                f"{left} left; {when}")


def print_summary(console: Console, summary: RunSummary, results: str) -> None:
    """Counts by status, the reason of every cell that did not finish ok, and the wall time."""
    counts = Counter(r["status"] for r in summary.records)
    table = Table(title="this run", show_edge=False)
    table.add_column("status")
    table.add_column("cells", justify="right")
    for status in ("ok", "skipped", "nan", "diverged", "oom", "timeout", "error"):
        if counts.get(status):
            table.add_row(f"[{STYLE[status]}]{status}", str(counts[status]))
    if summary.resumed:
        table.add_row("[dim]had a record already", str(len(summary.resumed)))
    if summary.elsewhere:
        table.add_row("[dim]running in another run", str(len(summary.elsewhere)))
    if summary.not_run:
        table.add_row("[dim]not run (--fail-fast)", str(len(summary.not_run)))
    console.print(table)

    bad = [r for r in summary.records if r["status"] not in ("ok", "skipped")]
    if bad:
        failures = Table(title="cells that did not finish ok", show_edge=False)
        for c in ("cell", "task", "scorer", "seed", "status", "reason"):
            failures.add_column(c, overflow="fold")
        for r in bad:
            style = STYLE.get(r["status"], "white")
            failures.add_row(r["cell_id"], r["cell"]["task"], r["cell"]["scorer"],
                             str(r["cell"]["seed"]), f"[{style}]{r['status']}",
                             escape(failure_reason(r)))
        console.print(failures)
        if any(r["status"] in HARNESS_FAILURES for r in bad):
            console.print(f"`scorebench show CELL --results {results}` prints a record in full; "
                          f"`--rerun failed` runs error/oom/timeout cells again.")
    console.print(f"{len(summary.records)} cell(s) run, records in {results}; "
                  f"took {summary.wall_time_s:.1f} s")
