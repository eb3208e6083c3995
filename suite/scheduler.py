"""The loop between planned cells, the result store and an executor.

For each cell: skip it when its record exists (unless ``rerun`` says otherwise, or the record is
stale: written by an older harness, ``leaderboard.loading.schema.RECORDS_VERSION``), claim it, hand
it to the executor, write the record it returns, release the claim. Only this loop writes records,
so whatever engine runs the cells, a record on disk is complete and a killed run loses only the
cells in flight.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from leaderboard.loading.schema import HARNESS_FAILURES, RECORDS_VERSION, stale_reason

from .cells import PlannedCell
from .executors import Event, Executor
from .runner import CellJob, run_cell
from .store import ResultStore

RERUN_CHOICES = ("failed", "all")
# follow_up(current) -> more planned cells; current(cell) -> the record of cell this run counts
FollowUp = Callable[[Callable[..., "dict | None"]], "list[PlannedCell]"]


class Reporter(Protocol):
    """Receives what happens during a run (``suite.progress.RichReporter`` draws it)."""

    def planned(self, jobs: list[CellJob], resumed: list[dict]) -> None: ...

    def event(self, event: Event) -> None: ...

    def finished(self, job: CellJob, record: dict) -> None: ...

    def note(self, text: str) -> None: ...


class NullReporter:
    def planned(self, jobs, resumed): pass

    def event(self, event): pass

    def finished(self, job, record): pass

    def note(self, text): pass


@dataclass
class RunSummary:
    """What a run did. ``records``: written by this run; ``resumed``: records already there;
    ``elsewhere``: cells another live run holds; ``not_run``: left out after ``--fail-fast``."""

    records: list[dict] = field(default_factory=list)
    resumed: list[dict] = field(default_factory=list)
    elsewhere: list[CellJob] = field(default_factory=list)
    not_run: list[CellJob] = field(default_factory=list)
    stopped_early: bool = False
    wall_time_s: float = 0.0

    @property
    def failed(self) -> list[dict]:
        return [r for r in self.records if r["status"] in HARNESS_FAILURES]

    def count(self, status: str) -> int:
        return sum(1 for r in self.records if r["status"] == status)


def should_rerun(record: dict, rerun: str | None) -> bool:
    if rerun is None:
        return False
    if rerun == "all":
        return True
    if rerun == "failed":
        return record["status"] in HARNESS_FAILURES
    raise ValueError(f"--rerun must be one of {RERUN_CHOICES}, got {rerun!r}")


def make_jobs(planned: list[PlannedCell], store: ResultStore,
              time_limit_s: float | None, fast: str = "off") -> list[CellJob]:
    return [CellJob(p.cell, p.skip_reason, time_limit_s,
                    str(store.root.resolve() / ".work" / p.cell.task / p.cell.scorer / p.cell.id),
                    fast=fast, tuning=p.tuning)
            for p in planned]


def run_cells(planned: list[PlannedCell], store: ResultStore, executor: Executor, *,
              rerun: str | None = None, fail_fast: bool = False,
              time_limit_s: float | None = None, reporter: Reporter | None = None,
              poll_s: float = 1.0, fast: str = "off",
              follow_up: FollowUp | None = None) -> RunSummary:
    """Run the cells of ``planned`` that need running; return what happened.

    ``follow_up(current)``, when given, is asked for more cells at the start and after every
    record written (the tuning protocol's further sweep points and its reporting cells, which
    depend on the records of earlier cells); ``current(cell)`` is the record of ``cell`` that this
    run counts (None while the cell is still to run here). Cells already seen are ignored."""
    reporter = reporter or NullReporter()
    t0, run_started = time.perf_counter(), time.time()
    summary = RunSummary()
    pending: deque[CellJob] = deque()
    seen: set[str] = set()
    stale = 0

    def add(cells: list[PlannedCell], first: bool = False) -> list[CellJob]:
        """Queue the cells not seen yet; ``first``: ahead of those queued (a follow-up's cells
        complete a sweep or its reporting cells, so a run stopped early holds whole scorers)."""
        nonlocal stale
        new = []
        for job in make_jobs([p for p in cells if p.cell.id not in seen], store, time_limit_s,
                             fast):
            if job.cell_id in seen:
                continue
            seen.add(job.cell_id)
            record = store.existing(job.cell)
            is_stale = record is not None and stale_reason(record) is not None
            if record is not None and not should_rerun(record, rerun) and not is_stale:
                summary.resumed.append(record)
            else:
                stale += is_stale
                new.append(job)
        if first:
            pending.extendleft(reversed(new))
        else:
            pending.extend(new)
        return new

    def done_meanwhile(job: CellJob) -> dict | None:
        """A record another run wrote after this run started (never rerun that one)."""
        record = store.existing(job.cell)
        if record is None:
            return None
        fresh = Path(store.path_of(job.cell)).stat().st_mtime >= run_started
        keep = not should_rerun(record, rerun) and not stale_reason(record)
        return record if fresh or keep else None

    def current(cell) -> dict | None:
        return None if cell.id in running else done_meanwhile(CellJob(cell))

    running: set[str] = set()

    def ask_follow_up() -> list[CellJob]:
        if follow_up is None:
            return []
        return add(follow_up(current), first=True)

    add(planned)
    ask_follow_up()
    for warning in store.warnings:
        reporter.note(warning)
    if stale:
        reporter.note(f"{stale} record(s) older than the harness (records version < "
                      f"{RECORDS_VERSION}) run again")
    reporter.planned(list(pending), summary.resumed)

    def save(job: CellJob, record: dict, claim) -> None:
        if job.tuning is not None and "tuning" not in record:
            record["tuning"] = job.tuning
        store.write(record)
        store.release(claim)
        running.discard(job.cell_id)
        summary.records.append(record)
        reporter.finished(job, record)
        if fail_fast and record["status"] in HARNESS_FAILURES:
            summary.stopped_early = True
        more = ask_follow_up()
        if more:
            added = getattr(reporter, "added", None)
            if added is not None:
                added(more)

    claims: dict[str, object] = {}
    store.start_heartbeat()
    try:
        while pending or executor.in_flight():
            while pending and not summary.stopped_early and executor.free_slots() > 0:
                job = pending.popleft()
                claim = store.claim(job.cell)
                if claim is None:
                    summary.elsewhere.append(job)
                    continue
                record = done_meanwhile(job)
                if record is not None:
                    store.release(claim)
                    summary.resumed.append(record)
                    continue
                running.add(job.cell_id)
                if job.skip_reason:
                    save(job, run_cell(job), claim)
                    continue
                claims[job.cell_id] = claim
                executor.submit(job)
            if summary.stopped_early:
                summary.not_run.extend(pending)
                pending.clear()
                if executor.in_flight():
                    reporter.note(f"--fail-fast: stopping {executor.in_flight()} cell(s) "
                                  f"in flight")
                    executor.cancel()
                break
            if not executor.in_flight():
                continue
            for job, record in executor.wait(poll_s, reporter.event):
                save(job, record, claims.pop(job.cell_id))
        still_elsewhere = []
        for job in summary.elsewhere:
            record = done_meanwhile(job)
            if record is not None:
                summary.resumed.append(record)
            else:
                still_elsewhere.append(job)
        summary.elsewhere = still_elsewhere
    finally:
        if claims:
            executor.cancel()
        executor.close()
        store.release_all()
        store.stop_heartbeat()
        summary.wall_time_s = time.perf_counter() - t0
    return summary
