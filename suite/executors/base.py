"""The executor protocol: the engine that runs cells. Persistence stays outside it.

The scheduler (``suite.scheduler``) claims a cell, hands its :class:`~suite.runner.CellJob` to
the executor with ``submit`` while ``free_slots()`` is positive, and collects finished records with
``wait``; it alone writes records and releases claims, so switching engines never loses work and
resume works across engines. A job is JSON (``CellJob.to_json``), and so is a record: an engine
that runs cells elsewhere (Ray, SLURM) ships JSON both ways and runs ``suite.runner.run_cell``
there.

Live events (``Started``, ``Progress``) go to the ``on_event`` callback given to ``wait``; an
engine that cannot observe them simply does not send them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, runtime_checkable

from ..runner import CellJob, failed_record


@dataclass(frozen=True)
class Started:
    """A cell began running on ``worker`` (e.g. ``"worker 1 (GPU 1)"``)."""

    job: CellJob
    worker: str


@dataclass(frozen=True)
class Progress:
    """The task reported ``done`` of ``total`` units of work (``RunContext.progress``)."""

    cell_id: str
    done: int
    total: int


Event = Started | Progress
EventCallback = Callable[[Event], None]


class ExecutorError(RuntimeError):
    """The engine itself failed (not a cell); the message says what to fix."""


@runtime_checkable
class Executor(Protocol):
    """What the scheduler needs from an engine.

    - ``free_slots()``: how many more jobs can start now; the scheduler submits (and claims)
      no more than that, so that claims are taken just before a cell runs.
    - ``submit(job)``: start ``job`` (or queue it on the engine's side).
    - ``wait(timeout, on_event)``: block until at least one job finished or ``timeout`` seconds
      passed; return the finished ``(job, record)`` pairs. A job whose worker died yields a record
      with status ``error`` (or ``oom`` / ``timeout`` when the engine knows), never silence.
    - ``in_flight()``: jobs submitted and not yet returned by ``wait``.
    - ``cancel()``: stop every job in flight and forget it (``--fail-fast``, Ctrl-C); the
      scheduler releases their claims.
    - ``close()``: release the engine's resources (idempotent).
    """

    name: str

    def free_slots(self) -> int: ...

    def submit(self, job: CellJob) -> None: ...

    def wait(self, timeout: float | None = None,
             on_event: EventCallback | None = None) -> list[tuple[CellJob, dict]]: ...

    def in_flight(self) -> int: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...


def declared_gpus(task_name: str) -> float:
    """GPUs a cell of ``task_name`` asks for: the task class's ``gpus`` attribute (default 1)."""
    from tasks import get_task_class

    value = float(getattr(get_task_class(task_name), "gpus", 1.0))
    if value < 0:
        raise ExecutorError(f"task {task_name!r} declares gpus={value}; it must be >= 0")
    return value


def overdue_record(job: CellJob, started_at: float, now: float, kill_grace_s: float,
                   stopped_by: str, **record_kwargs) -> dict | None:
    """The ``timeout`` record of a cell that has run past its time limit plus ``kill_grace_s``
    (measured on ``time.monotonic``), or None while it has time left. ``stopped_by`` names what the
    engine then does to it ("its worker was killed"); ``record_kwargs`` go to ``failed_record``."""
    limit = job.time_limit_s
    if not limit or now - started_at <= limit + kill_grace_s:
        return None
    return failed_record(job, "timeout", f"the cell ran past its time limit of {limit:g} s and did "
                         f"not stop; {stopped_by} {kill_grace_s:g} s later",
                         wall_time_s=now - started_at, **record_kwargs)
