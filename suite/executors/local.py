"""The local executor: cells run in this process for one worker, in spawned processes otherwise.

With ``workers > 1`` each worker is a separate process (``spawn``, so CUDA is safe) that runs one
cell at a time; jobs and records cross the pipe as JSON. When GPUs are visible, worker ``i`` sees
only GPU ``i mod n`` through ``CUDA_VISIBLE_DEVICES``; without GPUs the workers share the CPU cores
evenly (``torch.set_num_threads``). A worker that dies mid-cell (segfault, the OOM killer) turns
that cell into an ``error`` record and is replaced; a worker stuck past the cell's time limit (in C
code the timer cannot interrupt) is killed after ``kill_grace_s`` more and the cell is recorded as
``timeout``. A cell that raises out-of-memory runs once more with its training batches split in
two (``suite.runner.run_cell_with_oom_retry``). Workers exit on their own when the parent dies.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import multiprocessing.connection
import os
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from ..runner import (CellJob, default_device, failed_record, run_cell_with_oom_retry,
                      worker_threads)
from ..provenance import utc_now
from . import register_executor
from .base import EventCallback, ExecutorError, Progress, Started, overdue_record

PROGRESS_INTERVAL_S = 0.25


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` entries."""
    import torch

    if not torch.cuda.is_available():
        return []
    count = torch.cuda.device_count()
    env = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if env:
        return [x.strip() for x in env.split(",") if x.strip()][:count]
    return [str(i) for i in range(count)]


def _throttled(send, interval: float = PROGRESS_INTERVAL_S):
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - last[0] >= interval:
            last[0] = now
            send(int(done), int(total))

    return progress


@register_executor("local")
class LocalExecutor:
    """``workers == 1``: in this process. ``workers > 1``: a pool of spawned worker processes."""

    def __init__(self, workers: int = 1, plugins: tuple[str, ...] | list[str] = (),
                 gpus: list[str] | None = None, kill_grace_s: float = 60.0):
        if not isinstance(workers, int) or workers < 1:
            raise ExecutorError(f"--workers must be a positive integer, got {workers!r}")
        self.workers = workers
        self._impl = (InProcessRunner() if workers == 1
                      else WorkerPool(workers, [os.path.abspath(p) for p in plugins], gpus,
                                      kill_grace_s))

    @classmethod
    def add_arguments(cls, parser) -> None:
        """The local executor needs no options beyond ``--workers``."""

    @classmethod
    def from_args(cls, args, *, workers: int, plugins: list[str]) -> "LocalExecutor":
        return cls(workers=workers, plugins=plugins)

    def free_slots(self) -> int:
        return self._impl.free_slots()

    def submit(self, job: CellJob) -> None:
        self._impl.submit(job)

    def wait(self, timeout: float | None = None, on_event: EventCallback | None = None):
        return self._impl.wait(timeout, on_event)

    def in_flight(self) -> int:
        return self._impl.in_flight()

    def cancel(self) -> None:
        self._impl.cancel()

    def close(self) -> None:
        self._impl.close()


class InProcessRunner:
    """Runs each job in the calling thread, inside ``wait``."""

    def __init__(self):
        self._queue: deque[CellJob] = deque()
        self._device: str | None = None

    def free_slots(self) -> int:
        return 0 if self._queue else 1

    def submit(self, job: CellJob) -> None:
        self._queue.append(job)

    def in_flight(self) -> int:
        return len(self._queue)

    def wait(self, timeout=None, on_event=None):
        if not self._queue:
            return []
        job = self._queue[0]
        self._device = self._device or default_device()
        progress = None
        if on_event is not None:
            on_event(Started(job, f"in-process ({self._device})"))
            progress = _throttled(lambda d, t: on_event(Progress(job.cell_id, d, t)))
        record = run_cell_with_oom_retry(job, device=self._device, progress=progress)
        self._queue.popleft()
        return [(job, record)]

    def cancel(self) -> None:
        self._queue.clear()

    def close(self) -> None:
        self._queue.clear()


@dataclass(eq=False)
class _Worker:
    index: int
    gpu: str | None
    process: mp.process.BaseProcess
    conn: mp.connection.Connection
    job: CellJob | None = None
    started_at: float = 0.0
    started_iso: str = ""

    @property
    def label(self) -> str:
        return f"worker {self.index}" + (f" (GPU {self.gpu})" if self.gpu is not None else "")


@dataclass
class WorkerPool:
    """``workers`` spawned processes, one cell each at a time."""

    workers: int
    plugins: list[str]
    gpus: list[str] | None = None
    kill_grace_s: float = 60.0
    _pool: list[_Worker] = field(default_factory=list)
    _spawns: int = 0

    def __post_init__(self):
        self._ctx = mp.get_context("spawn")
        self.gpus = visible_gpus() if self.gpus is None else list(self.gpus)
        self.threads = worker_threads(self.workers)
        self._pool = [self._spawn(i) for i in range(self.workers)]

    def _gpu_of(self, index: int) -> str | None:
        return self.gpus[index % len(self.gpus)] if self.gpus else None

    def _spawn(self, index: int) -> _Worker:
        self._spawns += 1
        if self._spawns > 4 * self.workers + 8:
            raise ExecutorError("local worker processes keep dying; the messages above say why "
                                "(try --workers 1 to run in-process and see the error directly)")
        parent_conn, child_conn = self._ctx.Pipe()
        gpu = self._gpu_of(index)
        process = self._ctx.Process(
            target=worker_main, name=f"scorebench-worker-{index}",
            args=(child_conn, gpu, list(self.plugins), self.threads, os.getpid()))
        process.start()
        child_conn.close()
        return _Worker(index, gpu, process, parent_conn)

    def _replace(self, worker: _Worker) -> None:
        _kill(worker.process)
        worker.conn.close()
        self._pool[worker.index] = self._spawn(worker.index)

    def free_slots(self) -> int:
        for w in list(self._pool):
            if w.job is None and not w.process.is_alive():
                self._replace(w)
        return sum(1 for w in self._pool if w.job is None)

    def submit(self, job: CellJob) -> None:
        idle = [w for w in self._pool if w.job is None]
        if not idle:
            raise ExecutorError("submit() called with no free slot; check free_slots() first")
        w = idle[0]
        w.job, w.started_at, w.started_iso = job, time.monotonic(), utc_now()
        try:
            w.conn.send_bytes(json.dumps(job.to_json()).encode())
        except (OSError, ValueError):
            pass  # the worker is gone; wait() sees its sentinel and records the cell

    def in_flight(self) -> int:
        return sum(1 for w in self._pool if w.job is not None)

    def _finish(self, w: _Worker, record: dict, finished: list) -> None:
        finished.append((w.job, record))
        w.job = None

    def _died(self, w: _Worker, finished: list) -> None:
        w.process.join(timeout=5)
        code = w.process.exitcode
        how = f"exit code {code}"
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else "?"
            how = f"signal {-code} ({name})"
            if -code == signal.SIGKILL:
                how += "; the kernel's out-of-memory killer sends SIGKILL"
        self._finish(w, failed_record(
            w.job, "error", f"the worker process running this cell died: {how}",
            **self._device_of(w), started=w.started_iso,
            wall_time_s=time.monotonic() - w.started_at), finished)
        self._replace(w)

    def _device_of(self, w: _Worker) -> dict:
        """The device and hardware a worker's cells run on, as seen from this process."""
        import torch

        if w.gpu is None or not torch.cuda.is_available():
            return {"device": "cpu", "hardware_name": None}
        index = self.gpus.index(w.gpu) if w.gpu in self.gpus else 0
        return {"device": "cuda", "hardware_name": f"1x {torch.cuda.get_device_name(index)}"}

    def _receive(self, w: _Worker, finished: list, on_event) -> None:
        """Handle every message waiting on ``w``'s pipe; a closed pipe means the worker died."""
        eof = False
        try:
            while w.job is not None and w.conn.poll():
                msg = json.loads(w.conn.recv_bytes())
                if msg["type"] == "record":
                    self._finish(w, msg["record"], finished)
                elif on_event is None:
                    continue
                elif msg["type"] == "started":
                    on_event(Started(w.job, w.label))
                elif msg["type"] == "progress":
                    on_event(Progress(w.job.cell_id, msg["done"], msg["total"]))
        except (EOFError, OSError):
            eof = True
        if w.job is not None and (eof or not w.process.is_alive()):
            self._died(w, finished)

    def _overdue(self, finished: list) -> None:
        now = time.monotonic()
        for w in self._pool:
            if w.job is None:
                continue
            record = overdue_record(w.job, w.started_at, now, self.kill_grace_s,
                                    "its worker was killed", **self._device_of(w),
                                    started=w.started_iso)
            if record is not None:
                self._finish(w, record, finished)
                self._replace(w)

    def _next_kill(self) -> float | None:
        times = [w.started_at + w.job.time_limit_s + self.kill_grace_s - time.monotonic()
                 for w in self._pool if w.job is not None and w.job.time_limit_s]
        return max(0.0, min(times)) if times else None

    def wait(self, timeout=None, on_event=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        finished: list = []
        while True:
            busy = [w for w in self._pool if w.job is not None]
            if not busy or finished:
                return finished
            waits = [t for t in (self._next_kill(),
                                 None if deadline is None else deadline - time.monotonic())
                     if t is not None]
            handles = {w.conn: w for w in busy} | {w.process.sentinel: w for w in busy}
            ready = mp.connection.wait(list(handles), timeout=max(0.0, min(waits)) if waits
                                       else None)
            for w in dict.fromkeys(handles[h] for h in ready):
                self._receive(w, finished, on_event)
            self._overdue(finished)
            if deadline is not None and time.monotonic() >= deadline:
                return finished

    def cancel(self) -> None:
        for w in self._pool:
            if w.job is not None:
                w.job = None
                self._replace(w)

    def close(self) -> None:
        for w in self._pool:
            if w.job is None and w.process.is_alive():
                try:
                    w.conn.send_bytes(b"null")
                except (OSError, ValueError):
                    pass
        for w in self._pool:
            w.process.join(timeout=5 if w.job is None else 0)
            _kill(w.process)
            w.conn.close()
            w.job = None


def _kill(process) -> None:
    if process.is_alive():
        process.kill()
    process.join(timeout=10)


def _watch_parent(parent_pid: int) -> None:
    while True:
        if os.getppid() != parent_pid:
            os._exit(1)  # the run that started us is gone; its claims are stale now
        time.sleep(1.0)


def worker_main(conn, gpu: str | None, plugins: list[str], threads: int, parent_pid: int) -> None:
    """A worker process: run the jobs that arrive on ``conn`` one by one, until ``null``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    os.environ["OMP_NUM_THREADS"] = str(threads)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()

    import torch

    import scorers
    import tasks  # noqa: F401  (registers the built-in tasks)

    torch.set_num_threads(threads)
    for path in plugins:
        scorers.load_plugin(path)
    device = default_device()

    def send(msg: dict) -> None:
        try:
            conn.send_bytes(json.dumps(msg, allow_nan=False).encode())
        except OSError:     # the run that started us is gone: stop here, not as the cell's error
            os._exit(1)

    while True:
        try:
            msg = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        if msg is None:
            return
        job = CellJob.from_json(msg)
        send({"type": "started"})
        progress = _throttled(lambda d, t: send({"type": "progress", "done": d, "total": t}))
        send({"type": "record",
              "record": run_cell_with_oom_retry(job, device=device, progress=progress)})
