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
from .runner import CellJob, drop_checkpoints, run_cell
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
    t0 = time.perf_counter()
    run = CellRun(store, executor, reporter or NullReporter(), rerun=rerun, fail_fast=fail_fast,
                  time_limit_s=time_limit_s, fast=fast, follow_up=follow_up)
    run.plan(planned)
    store.start_heartbeat()
    try:
        run.loop(poll_s)
        run.settle_elsewhere()
    finally:
        run.close()
        run.summary.wall_time_s = time.perf_counter() - t0
    return run.summary


class CellRun:
    """The state of one :func:`run_cells`: the queue of jobs, the cells seen, the cells running
    here and the claims held for them, and the summary it fills."""

    def __init__(self, store: ResultStore, executor: Executor, reporter: Reporter, *,
                 rerun: str | None, fail_fast: bool, time_limit_s: float | None, fast: str,
                 follow_up: FollowUp | None):
        self.store, self.executor, self.reporter = store, executor, reporter
        self.rerun, self.fail_fast, self.follow_up = rerun, fail_fast, follow_up
        self.time_limit_s, self.fast = time_limit_s, fast
        self.started = time.time()
        self.summary = RunSummary()
        self.pending: deque[CellJob] = deque()
        self.seen: set[str] = set()
        self.running: set[str] = set()
        self.claims: dict[str, object] = {}
        self.stale = 0

    def add(self, cells: list[PlannedCell], first: bool = False) -> list[CellJob]:
        """Queue the cells not seen yet; ``first``: ahead of those queued (a follow-up's cells
        complete a sweep or its reporting cells, so a run stopped early holds whole scorers)."""
        new = []
        for job in make_jobs([p for p in cells if p.cell.id not in self.seen], self.store,
                             self.time_limit_s, self.fast):
            if job.cell_id in self.seen:
                continue
            self.seen.add(job.cell_id)
            record = self.store.existing(job.cell)
            is_stale = record is not None and stale_reason(record) is not None
            if record is not None and not should_rerun(record, self.rerun) and not is_stale:
                self.summary.resumed.append(record)
            else:
                self.stale += is_stale
                new.append(job)
        if first:
            self.pending.extendleft(reversed(new))
        else:
            self.pending.extend(new)
        return new

    def done_meanwhile(self, job: CellJob) -> dict | None:
        """A record another run wrote after this run started (never rerun that one)."""
        record = self.store.existing(job.cell)
        if record is None:
            return None
        fresh = Path(self.store.path_of(job.cell)).stat().st_mtime >= self.started
        keep = not should_rerun(record, self.rerun) and not stale_reason(record)
        return record if fresh or keep else None

    def current(self, cell) -> dict | None:
        return None if cell.id in self.running else self.done_meanwhile(CellJob(cell))

    def ask_follow_up(self) -> list[CellJob]:
        if self.follow_up is None:
            return []
        return self.add(self.follow_up(self.current), first=True)

    def plan(self, planned: list[PlannedCell]) -> None:
        """Queue ``planned`` and the follow-up's first cells, and tell the reporter."""
        self.add(planned)
        self.ask_follow_up()
        for warning in self.store.warnings:
            self.reporter.note(warning)
        if self.stale:
            self.reporter.note(f"{self.stale} record(s) older than the harness (records version < "
                               f"{RECORDS_VERSION}) run again")
        self.reporter.planned(list(self.pending), self.summary.resumed)

    def save(self, job: CellJob, record: dict, claim) -> None:
        if job.tuning is not None and "tuning" not in record:
            record["tuning"] = job.tuning
        self.store.write(record)
        if record["status"] not in HARNESS_FAILURES:   # a failed cell's rerun goes on from them
            drop_checkpoints(job.workdir)
        self.store.release(claim)
        self.running.discard(job.cell_id)
        self.summary.records.append(record)
        self.reporter.finished(job, record)
        if self.fail_fast and record["status"] in HARNESS_FAILURES:
            self.summary.stopped_early = True
        more = self.ask_follow_up()
        if more:
            added = getattr(self.reporter, "added", None)
            if added is not None:
                added(more)

    def start_free(self) -> None:
        """Claim and start queued cells while the executor has free slots; a cell another run
        holds or has finished meanwhile is set aside, a skipped one is recorded here."""
        while (self.pending and not self.summary.stopped_early
               and self.executor.free_slots() > 0):
            job = self.pending.popleft()
            claim = self.store.claim(job.cell)
            if claim is None:
                self.summary.elsewhere.append(job)
                continue
            record = self.done_meanwhile(job)
            if record is not None:
                self.store.release(claim)
                self.summary.resumed.append(record)
                continue
            self.running.add(job.cell_id)
            if job.skip_reason:
                self.save(job, run_cell(job), claim)
                continue
            self.claims[job.cell_id] = claim
            self.executor.submit(job)

    def stop(self) -> None:
        """After --fail-fast stopped the run: the queued cells are not run, those in flight
        cancelled."""
        self.summary.not_run.extend(self.pending)
        self.pending.clear()
        if self.executor.in_flight():
            self.reporter.note(f"--fail-fast: stopping {self.executor.in_flight()} cell(s) "
                               f"in flight")
            self.executor.cancel()

    def loop(self, poll_s: float) -> None:
        while self.pending or self.executor.in_flight():
            self.start_free()
            if self.summary.stopped_early:
                self.stop()
                break
            if not self.executor.in_flight():
                continue
            for job, record in self.executor.wait(poll_s, self.reporter.event):
                self.save(job, record, self.claims.pop(job.cell_id))

    def settle_elsewhere(self) -> None:
        """The cells another run held: resumed where it has written their record since."""
        still_elsewhere = []
        for job in self.summary.elsewhere:
            record = self.done_meanwhile(job)
            if record is not None:
                self.summary.resumed.append(record)
            else:
                still_elsewhere.append(job)
        self.summary.elsewhere = still_elsewhere

    def close(self) -> None:
        if self.claims:
            self.executor.cancel()
        self.executor.close()
        self.store.release_all()
        self.store.stop_heartbeat()
