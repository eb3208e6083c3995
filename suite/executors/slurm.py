"""The SLURM executor (``--executor slurm``, extra ``scorebench[slurm]``): submitit job arrays.

The scheduler hands over every missing cell (``free_slots`` is large); they are submitted together
as one job array per batch, at most ``--slurm-parallelism`` array tasks running at once
(``#SBATCH --array=0-N%P``). Each array task runs one cell (``suite.executors.remote``: JSON job in,
JSON record out, with the out-of-memory retry). SLURM's verdicts become record statuses:
``TIMEOUT`` -> ``timeout``, ``OUT_OF_MEMORY`` -> ``oom``, any other failure (node failure,
cancellation, a crash) -> ``error`` with the job's log tail. Job logs are under
``<results>/.slurm``.

``--slurm-cluster local`` runs the same arrays as local processes through submitit (for tests and
for machines without SLURM); there the parallelism cap is kept by submitting at most that many
cells at a time.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..provenance import usable_cpus, utc_now
from ..runner import CellJob, failed_record
from . import register_executor
from .base import EventCallback, ExecutorError, Started
from .remote import run_job_json

CLUSTERS = ("slurm", "local", "debug")
STATUS_OF_STATE = {"TIMEOUT": "timeout", "OUT_OF_MEMORY": "oom", "OOM": "oom"}
MAX_PENDING = 100_000
DEFAULT_PARALLELISM = 64


@dataclass(eq=False)
class _Submitted:
    job: CellJob
    handle: object
    started: float
    started_iso: str


@register_executor("slurm")
class SlurmExecutor:
    """Cells as SLURM array tasks through submitit."""

    def __init__(self, workers: int = 1, plugins=(), folder: str | os.PathLike = "results/.slurm",
                 cluster: str = "slurm", parallelism: int = DEFAULT_PARALLELISM,
                 partition: str | None = None, time_min: int | None = None,
                 gpus_per_cell: int | None = None, cpus_per_cell: int | None = None,
                 mem_gb: float | None = None, extra: dict | None = None,
                 poll_s: float = 5.0):
        try:
            import submitit
        except ImportError:
            raise ExecutorError("the SLURM executor needs submitit: pip install "
                                "'scorebench[slurm]'") from None
        if cluster not in CLUSTERS:
            raise ExecutorError(f"--slurm-cluster must be one of {CLUSTERS}, got {cluster!r}")
        if parallelism < 1:
            raise ExecutorError(f"--slurm-parallelism must be >= 1, got {parallelism}")
        self._submitit = submitit
        self.cluster = cluster
        self.parallelism = parallelism
        self.plugins = [os.path.abspath(p) for p in plugins]
        self.folder = Path(folder)
        self.partition = partition
        self.time_min = time_min
        self.gpus_per_cell = gpus_per_cell
        self.cpus_per_cell = cpus_per_cell or (1 if cluster != "slurm" else
                                               max(1, usable_cpus() // max(1, workers)))
        self.mem_gb = mem_gb
        self.extra = dict(extra or {})
        self.poll_s = poll_s
        self._buffer: list[CellJob] = []
        self._running: list[_Submitted] = []
        self._events: list[Started] = []
        self.arrays: list[list[str]] = []  # job ids of each array submitted (for tests, logs)

    @classmethod
    def add_arguments(cls, parser) -> None:
        g = parser.add_argument_group("slurm executor (--executor slurm)")
        g.add_argument("--slurm-partition", default=None, metavar="NAME")
        g.add_argument("--slurm-parallelism", type=int, default=DEFAULT_PARALLELISM,
                       metavar="N", help=f"array tasks running at once (default "
                                         f"{DEFAULT_PARALLELISM})")
        g.add_argument("--slurm-time", type=int, default=None, metavar="MIN",
                       help="time limit per cell in minutes (default: the profile's time limit)")
        g.add_argument("--slurm-gpus-per-cell", type=int, default=None, metavar="N",
                       help="GPUs per cell (default: the task's declaration, rounded up)")
        g.add_argument("--slurm-cpus-per-cell", type=int, default=None, metavar="N")
        g.add_argument("--slurm-mem-gb", type=float, default=None, metavar="GB")
        g.add_argument("--slurm-cluster", choices=CLUSTERS, default="slurm",
                       help="slurm (default); local: the same arrays as local processes")

    @classmethod
    def from_args(cls, args, *, workers: int, plugins: list[str]) -> "SlurmExecutor":
        results = getattr(args, "results", "results")
        return cls(workers=workers, plugins=plugins, folder=Path(results) / ".slurm",
                   cluster=getattr(args, "slurm_cluster", "slurm"),
                   parallelism=getattr(args, "slurm_parallelism", DEFAULT_PARALLELISM),
                   partition=getattr(args, "slurm_partition", None),
                   time_min=getattr(args, "slurm_time", None),
                   gpus_per_cell=getattr(args, "slurm_gpus_per_cell", None),
                   cpus_per_cell=getattr(args, "slurm_cpus_per_cell", None),
                   mem_gb=getattr(args, "slurm_mem_gb", None))

    # ----- submission
    def free_slots(self) -> int:
        cap = MAX_PENDING if self.cluster == "slurm" else self.parallelism
        return max(0, cap - len(self._buffer) - len(self._running))

    def submit(self, job: CellJob) -> None:
        self._buffer.append(job)

    def in_flight(self) -> int:
        return len(self._buffer) + len(self._running)

    def _gpus(self, job: CellJob) -> int:
        if self.gpus_per_cell is not None:
            return self.gpus_per_cell
        from .base import declared_gpus

        declared = declared_gpus(job.cell.task)
        return int(math.ceil(declared)) if self.cluster == "slurm" else 0

    def _executor(self, jobs: list[CellJob]):
        limit = max((j.time_limit_s or 0) for j in jobs)
        minutes = self.time_min or (int(math.ceil(limit / 60.0)) + 5 if limit else 24 * 60)
        executor = self._submitit.AutoExecutor(folder=self.folder / "%j", cluster=self.cluster)
        params = dict(timeout_min=minutes, cpus_per_task=self.cpus_per_cell,
                      name="scorebench")
        if self.cluster == "slurm":
            params.update(gpus_per_node=self._gpus(jobs[0]),
                          slurm_array_parallelism=self.parallelism)
            if self.partition:
                params["slurm_partition"] = self.partition
            if self.mem_gb:
                params["mem_gb"] = self.mem_gb
            params.update({f"slurm_{k}": v for k, v in self.extra.items()})
        executor.update_parameters(**params)
        return executor

    def _flush(self) -> None:
        """Submit the buffered cells as arrays, one per GPU count."""
        if not self._buffer:
            return
        groups: dict[int, list[CellJob]] = {}
        for job in self._buffer:
            groups.setdefault(self._gpus(job), []).append(job)
        self._buffer = []
        for jobs in groups.values():
            executor = self._executor(jobs)
            payloads = [json.dumps(j.to_json()) for j in jobs]
            n = len(jobs)
            try:
                handles = executor.map_array(run_job_json, payloads, [self.plugins] * n,
                                             [self.cpus_per_cell] * n, ["slurm"] * n)
            except Exception as e:  # noqa: BLE001 - sbatch refused: the engine failed
                raise ExecutorError(f"submitting {n} cell(s) to SLURM failed: {e}") from e
            now, iso = time.monotonic(), utc_now()
            self.arrays.append([str(h.job_id) for h in handles])
            for job, handle in zip(jobs, handles):
                self._running.append(_Submitted(job, handle, now, iso))
                self._events.append(Started(job, f"{self.cluster} job {handle.job_id}"))

    # ----- results
    def _record(self, sub: _Submitted) -> dict:
        handle = sub.handle
        wall = time.monotonic() - sub.started
        try:
            return json.loads(handle.result())
        except Exception as e:  # noqa: BLE001 - every way a job fails becomes a record
            state = str(getattr(handle, "state", "UNKNOWN")).upper()
            status = next((s for key, s in STATUS_OF_STATE.items() if state.startswith(key)),
                          "error")
            detail = _first_line(e)
            logs = _tail(handle)
            message = (f"SLURM job {handle.job_id} ended in state {state}: {detail}"
                       + (f"\n{logs}" if logs else ""))
            return failed_record(sub.job, status, message,
                                 device="cuda" if self._gpus(sub.job) else "cpu",
                                 hardware_name=f"{self.cluster} job {handle.job_id}",
                                 started=sub.started_iso, wall_time_s=wall)

    def wait(self, timeout: float | None = None, on_event: EventCallback | None = None):
        self._flush()
        if on_event is not None:
            for event in self._events:
                on_event(event)
        self._events.clear()
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._running:
            done = [s for s in self._running if s.handle.done()]
            if done:
                self._running = [s for s in self._running if s not in done]
                return [(s.job, self._record(s)) for s in done]
            if deadline is not None and time.monotonic() >= deadline:
                return []
            pause = self.poll_s if deadline is None else min(self.poll_s,
                                                             deadline - time.monotonic())
            time.sleep(max(0.05, pause))
        return []

    def cancel(self) -> None:
        for sub in self._running:
            try:
                sub.handle.cancel(check=False)
            except Exception:  # noqa: BLE001 - best effort; the claims are released anyway
                pass
        self._running = []
        self._buffer = []
        self._events = []

    def close(self) -> None:
        self.cancel()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


def _tail(handle, lines: int = 5) -> str:
    try:
        text = handle.stderr() or ""
    except Exception:  # noqa: BLE001
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])
