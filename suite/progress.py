"""What ``scorebench run`` shows: a progress bar with ETA, one line per finished cell (with the
cells done, failed and left and the expected finish time, readable in a plain log), a summary."""
from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta, timezone

from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID,
                           TextColumn, TimeElapsedColumn)
from rich.table import Table

from leaderboard.loading.schema import HARNESS_FAILURES

from .estimate import cell_seconds
from .executors import Event, Progress as CellProgress, Started
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
            MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.fields[left]}"),
            console=self.console, transient=True)
        self.overall: TaskID | None = None
        self.rows: dict[str, TaskID] = {}
        self.tally = Tally()

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def planned(self, jobs: list[CellJob], resumed: list[dict]) -> None:
        if resumed:
            self.console.print(f"{len(resumed)} cell(s) already have a record and are skipped "
                               f"(--rerun failed|all runs them again)")
        self.overall = self.progress.add_task("[bold]cells", total=len(jobs), left="")
        prior: dict[str, list[float]] = {}
        for record in resumed:
            seconds = cell_seconds(record.get("provenance", {}))
            if record.get("status") == "ok" and seconds:
                prior.setdefault(record["cell"]["task"], []).append(seconds)
        self.tally.start([_timed_task(job) for job in jobs], prior)
        self.console.print(f"{len(jobs)} cell(s) to run; started {self.tally.clock(time.time())}")

    def added(self, jobs: list[CellJob]) -> None:
        """More cells to run than planned: the tuning protocol's further sweep points and its
        reporting cells, known once the sweep's records are."""
        self.tally.add([_timed_task(job) for job in jobs])
        if self.overall is not None:
            self.progress.update(self.overall, total=self.tally.total)
        self.console.print(f"{len(jobs)} more cell(s) to run (tuning: sweep points or reporting "
                           f"cells now known)")

    def event(self, event: Event) -> None:
        if isinstance(event, Started):
            self.tally.started(event.job.cell_id)
            self.rows[event.job.cell_id] = self.progress.add_task(
                f"  {escape(event.job.cell.label)} [dim]{escape(event.worker)}", total=None,
                left="")
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
        self.tally.finished(_timed_task(job), wall, status in HARNESS_FAILURES, job.cell_id)
        self.console.print(f"[dim]{self.tally.line()}[/]")
        if self.overall is not None:
            self.progress.update(self.overall, left=self.tally.time_left())

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]{escape(text)}")


def _timed_task(job: CellJob) -> str | None:
    """The task whose cell times a job's cell shares; None for a cell skipped without running."""
    return None if job.skip_reason else job.cell.task


class Tally:
    """Cells done, failed and left, and the expected finish. Cells of one task cost alike and
    those of different tasks do not (a decoder cell takes minutes, an ICL cell seconds), so the
    time left is, per task, its cells left times the mean wall time of its cells finished in
    this run (before the first: of its records the run resumed, else of every cell finished),
    divided by the cells the run has kept busy at once so far (the wall times of the cells
    finished and the time so far of those running, over the time elapsed: with two workers, 2
    from the first cell that finishes). A cell given as task None (skipped: it never runs)
    counts as done but costs no time."""

    def __init__(self, clock=time.time):
        self.now = clock
        self.total = self.done = self.failed = 0
        self.t0 = 0.0
        self.left: Counter[str | None] = Counter()
        self.walls: dict[str, list[float]] = {}
        self.prior: dict[str, float] = {}
        self.running: dict[str, float] = {}     # cell id -> when it started

    def start(self, tasks: list[str | None], prior: dict[str, list[float]] | None = None) -> None:
        """``tasks``: the task of each cell to run; ``prior``: cell times of earlier records
        (:func:`suite.estimate.cell_seconds`), by task."""
        self.total, self.done, self.failed, self.t0 = len(tasks), 0, 0, self.now()
        self.left, self.walls = Counter(tasks), {}
        self.prior = {task: sum(ws) / len(ws) for task, ws in (prior or {}).items() if ws}

    def add(self, tasks: list[str | None]) -> None:
        self.total += len(tasks)
        self.left.update(tasks)

    def started(self, cell_id: str) -> None:
        self.running[cell_id] = self.now()

    def finished(self, task: str | None, wall_s: float, failed: bool,
                 cell_id: str | None = None) -> None:
        self.running.pop(cell_id, None)
        self.done += 1
        self.failed += int(failed)
        self.left[task] -= 1
        if task is not None:
            self.walls.setdefault(task, []).append(wall_s)

    @staticmethod
    def clock(t: float) -> str:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    def eta(self) -> float | None:
        now = self.now()
        walls = [w for ws in self.walls.values() for w in ws]
        if sum(walls) <= 0 or now <= self.t0:
            return None
        overall = sum(walls) / len(walls)
        per_task = {task: sum(ws) / len(ws) for task, ws in self.walls.items()}
        busy = (sum(walls) + sum(now - t for t in self.running.values())) / (now - self.t0)
        left = sum(n * per_task.get(task, self.prior.get(task, overall))
                   for task, n in self.left.items() if n > 0 and task is not None)
        return now + left / busy

    def time_left(self) -> str:
        """The time left as the live bar shows it: ``ETA h:mm:ss``, or empty while unknown."""
        eta = self.eta()
        return "" if eta is None else f"ETA {timedelta(seconds=round(eta - self.now()))}"

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
