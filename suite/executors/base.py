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

from ..runner import CellJob


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
