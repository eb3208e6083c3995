"""The Ray executor (``--executor ray``, extra ``scorebench[ray]``): one Ray task per cell.

Without ``--ray-address`` it starts an embedded local cluster (no dashboard, its temporary files
under ``<cache>/ray``) and stops it on close; with an address it joins that cluster. Each cell asks
for ``num_gpus`` from its task's declaration (class attribute ``gpus``, default 1) when the
cluster has GPUs, or the fraction given by ``--ray-gpus-per-cell`` (e.g. 0.25 packs four small ICL
cells on one GPU), and for the CPU threads it will use.

Cells travel as JSON and come back as JSON records; the scheduler writes them with the same atomic
writer as every engine, so resume works across engines. Failures:

- a cell's own failures (NaN, divergence, errors, out-of-memory, its time limit) are records made
  by ``run_cell`` and are never retried by Ray (``retry_exceptions=False``); out-of-memory gets the
  one retry of ``suite.executors.remote``;
- a lost worker or node (the process died, the node went away) is a system failure: Ray runs the
  cell again, up to ``--ray-max-retries`` times, then the cell is recorded as ``error``
  (``oom`` when Ray's memory monitor killed it);
- a cell still running ``kill_grace_s`` after its time limit is cancelled and recorded as
  ``timeout``.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from ..provenance import usable_cpus, utc_now
from ..runner import CellJob, failed_record
from . import register_executor
from .base import EventCallback, ExecutorError, Started, declared_gpus, overdue_record
from .remote import run_job_json

DEFAULT_MAX_RETRIES = 3


@dataclass(eq=False)
class _Running:
    job: CellJob
    ref: object
    started: float
    started_iso: str


@register_executor("ray")
class RayExecutor:
    """Cells as Ray tasks; ``workers`` caps how many run at once."""

    def __init__(self, workers: int = 1, plugins=(), address: str | None = None,
                 gpus_per_cell: float | None = None, max_retries: int = DEFAULT_MAX_RETRIES,
                 threads_per_cell: int | None = None, temp_dir: str | None = None,
                 kill_grace_s: float = 60.0, num_cpus: int | None = None):
        try:
            import ray
        except ImportError:
            raise ExecutorError("the Ray executor needs Ray: pip install 'scorebench[ray]'") \
                from None
        if not isinstance(workers, int) or workers < 1:
            raise ExecutorError(f"--workers must be a positive integer, got {workers!r}")
        if gpus_per_cell is not None and gpus_per_cell < 0:
            raise ExecutorError(f"--ray-gpus-per-cell must be >= 0, got {gpus_per_cell}")
        if max_retries < 0:
            raise ExecutorError(f"--ray-max-retries must be >= 0, got {max_retries}")
        self._ray = ray
        self.workers = workers
        self.plugins = [os.path.abspath(p) for p in plugins]
        self.gpus_per_cell = gpus_per_cell
        self.max_retries = max_retries
        self.kill_grace_s = kill_grace_s
        self._owns_cluster = False
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
            else:
                from tasks.data.files import cache_dir

                tmp = temp_dir or str(cache_dir() / "ray")
                os.makedirs(tmp, exist_ok=True)
                ray.init(include_dashboard=False, _temp_dir=tmp, log_to_driver=False,
                         configure_logging=False, num_cpus=num_cpus or usable_cpus())
                self._owns_cluster = True
        resources = ray.cluster_resources()
        self.cluster_gpus = float(resources.get("GPU", 0.0))
        cpus = max(1, int(resources.get("CPU", 1)))
        self.threads = threads_per_cell or max(1, cpus // workers)
        self._remote = ray.remote(run_job_json)
        self._running: dict[object, _Running] = {}
        self._events: list[Started] = []

    @classmethod
    def add_arguments(cls, parser) -> None:
        g = parser.add_argument_group("ray executor (--executor ray)")
        g.add_argument("--ray-address", default=None, metavar="ADDR",
                       help="join this Ray cluster (default: start an embedded local one)")
        g.add_argument("--ray-gpus-per-cell", type=float, default=None, metavar="X",
                       help="GPUs per cell, fractions allowed (default: the task's declaration "
                            "when the cluster has GPUs)")
        g.add_argument("--ray-max-retries", type=int, default=DEFAULT_MAX_RETRIES, metavar="N",
                       help=f"reruns of a cell whose worker was lost (default "
                            f"{DEFAULT_MAX_RETRIES}); NaN or diverged cells are never rerun")

    @classmethod
    def from_args(cls, args, *, workers: int, plugins: list[str]) -> "RayExecutor":
        return cls(workers=workers, plugins=plugins, address=getattr(args, "ray_address", None),
                   gpus_per_cell=getattr(args, "ray_gpus_per_cell", None),
                   max_retries=getattr(args, "ray_max_retries", DEFAULT_MAX_RETRIES))

    def num_gpus(self, job: CellJob) -> float:
        if self.gpus_per_cell is not None:
            return self.gpus_per_cell
        return declared_gpus(job.cell.task) if self.cluster_gpus > 0 else 0.0

    def free_slots(self) -> int:
        return max(0, self.workers - len(self._running))

    def submit(self, job: CellJob) -> None:
        options = dict(num_cpus=self.threads, num_gpus=self.num_gpus(job),
                       max_retries=self.max_retries, retry_exceptions=False)
        ref = self._remote.options(**options).remote(json.dumps(job.to_json()), self.plugins,
                                                     self.threads, "ray")
        self._running[ref] = _Running(job, ref, time.monotonic(), utc_now())
        self._events.append(Started(job, f"ray task ({options['num_gpus']:g} GPU)"))

    def in_flight(self) -> int:
        return len(self._running)

    def _device(self, run: _Running) -> dict:
        gpus = self.num_gpus(run.job)
        return {"device": "cuda" if gpus > 0 else "cpu",
                "hardware_name": "a Ray worker (its hardware is unknown: it was lost)"}

    def _collect(self, run: _Running) -> dict:
        ray = self._ray
        wall = time.monotonic() - run.started
        try:
            return json.loads(ray.get(run.ref))
        except ray.exceptions.OutOfMemoryError as e:
            return failed_record(run.job, "oom", f"Ray's memory monitor killed the worker: "
                                 f"{_first_line(e)}", **self._device(run),
                                 started=run.started_iso, wall_time_s=wall)
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                ray.exceptions.RaySystemError) as e:
            return failed_record(run.job, "error", f"the Ray worker running this cell was lost "
                                 f"{self.max_retries + 1} time(s): {_first_line(e)}",
                                 **self._device(run), started=run.started_iso, wall_time_s=wall)
        except ray.exceptions.TaskCancelledError:
            return failed_record(run.job, "timeout", "the cell ran past its time limit and was "
                                 "cancelled", **self._device(run), started=run.started_iso,
                                 wall_time_s=wall)
        except ray.exceptions.RayError as e:
            return failed_record(run.job, "error", f"Ray could not run this cell: {e}",
                                 **self._device(run), started=run.started_iso, wall_time_s=wall)

    def _overdue(self) -> list[tuple[CellJob, dict]]:
        out = []
        now = time.monotonic()
        for ref, run in list(self._running.items()):
            record = overdue_record(run.job, run.started, now, self.kill_grace_s,
                                    "its Ray task was cancelled", **self._device(run),
                                    started=run.started_iso)
            if record is not None:
                self._ray.cancel(ref, force=True)
                del self._running[ref]
                out.append((run.job, record))
        return out

    def wait(self, timeout: float | None = None, on_event: EventCallback | None = None):
        if on_event is not None:
            for event in self._events:
                on_event(event)
        self._events.clear()
        if not self._running:
            return []
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait_s = 1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))
            ready, _ = self._ray.wait(list(self._running), num_returns=1, timeout=wait_s)
            finished = []
            for ref in ready:
                run = self._running.pop(ref)
                finished.append((run.job, self._collect(run)))
            finished += self._overdue()
            if finished or (deadline is not None and time.monotonic() >= deadline):
                return finished

    def cancel(self) -> None:
        for ref in list(self._running):
            self._ray.cancel(ref, force=True)
        self._running.clear()
        self._events.clear()

    def close(self) -> None:
        self.cancel()
        if self._owns_cluster and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns_cluster = False


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
