"""Run one cell and turn whatever happens into a record.

``run_cell`` never raises for a failing cell (only for ``KeyboardInterrupt``): a
:class:`tasks.TrainingFailure` becomes its status (``nan`` / ``diverged``) and step, CUDA or host
out-of-memory becomes ``oom``, the per-cell time limit ``timeout``, any other exception ``error``
with the traceback in ``message``. Everything random is seeded from the cell's seed alone.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import shutil
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from leaderboard.loading.schema import SCHEMA_VERSION, Cell, RecordError, validate_record

from .cells import config_object
from .provenance import hardware, peak_memory_mb, provenance, reset_peak_memory, utc_now


class CellTimeout(Exception):
    """The cell ran past its time limit."""


@dataclass(frozen=True)
class CellJob:
    """What an executor needs to run a cell; JSON-serializable (``to_json`` / ``from_json``)."""

    cell: Cell
    skip_reason: str | None = None
    time_limit_s: float | None = None
    workdir: str | None = None  # the cell's scratch directory (checkpoints, caches)
    accumulation: int = 1       # micro-batches per training batch (RunContext.accumulation)
    fast: str = "off"           # the scorers' fast paths in training (RunContext.fast)
    tuning: dict | None = None  # the record's ``tuning`` object (suite/tuning.py), if any

    @property
    def cell_id(self) -> str:
        return self.cell.id

    def to_json(self) -> dict:
        return {"cell": self.cell.to_dict(), "skip_reason": self.skip_reason,
                "time_limit_s": self.time_limit_s, "workdir": self.workdir,
                "accumulation": self.accumulation, "fast": self.fast, "tuning": self.tuning}

    @classmethod
    def from_json(cls, d: dict) -> "CellJob":
        return cls(Cell.from_dict(d["cell"]), d.get("skip_reason"), d.get("time_limit_s"),
                   d.get("workdir"), int(d.get("accumulation", 1)), str(d.get("fast", "off")),
                   d.get("tuning"))


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's (CPU and every CUDA device) generators."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`CellTimeout` in the main thread after ``seconds`` (no limit: None or 0)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise CellTimeout(f"the cell ran past its time limit of {seconds:g} s "
                          f"([run] time_limit_s of the profile)")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def to_json_value(obj: Any, where: str, notes: list[str]) -> Any:
    """``obj`` as plain JSON: numpy/torch scalars and arrays become numbers and lists; NaN and
    inf become null and are noted in ``notes``."""
    if obj is None or isinstance(obj, (str, bool)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if not math.isfinite(obj):
            notes.append(f"{where} was {obj}")
            return None
        return float(obj)
    if isinstance(obj, dict):
        return {str(k): to_json_value(v, f"{where}.{k}", notes) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json_value(v, f"{where}[{i}]", notes) for i, v in enumerate(obj)]
    if hasattr(obj, "tolist"):  # numpy or torch scalars and arrays
        return to_json_value(obj.tolist(), where, notes)
    if hasattr(obj, "item"):
        return to_json_value(obj.item(), where, notes)
    raise RecordError(f"{where} has a value of type {type(obj).__name__}, which is not JSON")


def normalize_grid(grid: Any) -> Any:
    """Accept the ``{"axes": {"rows": .., "cols": ..}, ...}`` form and give the record's
    ``rows_name`` / ``cols_name`` form."""
    if isinstance(grid, dict) and isinstance(grid.get("axes"), dict):
        grid = dict(grid)
        axes = grid.pop("axes")
        grid.setdefault("rows_name", axes.get("rows"))
        grid.setdefault("cols_name", axes.get("cols"))
    return grid


def _is_oom(e: BaseException) -> bool:
    if isinstance(e, MemoryError):
        return True
    try:
        import torch

        if isinstance(e, torch.cuda.OutOfMemoryError):
            return True
    except (ImportError, AttributeError):
        pass
    text = str(e)
    return isinstance(e, RuntimeError) and ("out of memory" in text
                                            or "can't allocate memory" in text)


def drop_checkpoints(workdir: str | None) -> None:
    """Remove a cell's training checkpoints (and its scratch directory, if that leaves it empty):
    for the caller that has written the cell's record. ``run_cell`` keeps them, so that a record
    lost between the run and its writer (a run killed meanwhile) is made again without training."""
    if workdir is None:
        return
    from tasks.resume import DIRECTORY

    shutil.rmtree(Path(workdir) / DIRECTORY, ignore_errors=True)
    _remove_if_empty(Path(workdir))


def _remove_if_empty(workdir: Path | None, levels: int = 4) -> None:
    """Remove the cell's scratch directory and its empty parents (``.work/<task>/<scorer>``)."""
    path = workdir
    for _ in range(levels if path is not None else 0):
        try:
            path.rmdir()
        except OSError:
            return
        path = path.parent


def _summary_line(tb: str) -> str:
    lines = [ln for ln in tb.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def build_record(cell: Cell, status: str, message: str, step: int | None, out: dict,
                 metric_specs: dict, provenance: dict) -> dict:
    """The one builder of a record (docs/records.md) for every cell, whatever ran it; ``out``
    holds the result's ``metrics``, ``grids``, ``items`` and ``extra`` (missing ones are empty)."""
    return {
        "schema_version": SCHEMA_VERSION, "cell_id": cell.id, "cell": cell.to_dict(),
        "status": status, "message": message, "step": step,
        "metrics": out.get("metrics", {}), "metric_specs": metric_specs,
        "grids": out.get("grids", {}), "items": out.get("items", {}),
        "extra": out.get("extra", {}), "provenance": provenance,
    }


def run_cell(job: CellJob, *, device: str | None = None,
             progress: Callable[[int, int], None] | None = None) -> dict:
    """Run ``job`` and return its record (validated against the schema)."""
    import torch
    from tasks import RunContext, TrainingFailure, create_task

    cell = job.cell
    device = device or default_device()
    started, t0, cpu0 = utc_now(), time.perf_counter(), time.process_time()
    reset_peak_memory(device)
    status, message, step = "ok", "", None
    out: dict[str, Any] = {"metrics": {}, "grids": {}, "items": {}, "extra": {}}
    metric_specs: dict[str, dict] = {}
    workdir = Path(job.workdir) if job.workdir else None
    ctx = None
    try:
        task = create_task(cell.task)
        if int(task.version) != cell.task_version:
            raise RecordError(f"task {cell.task!r} is version {task.version} here but the cell "
                              f"was planned with version {cell.task_version}")
        config = config_object(task, cell.config)
        metric_specs = task.metric_specs(config)
        if job.skip_reason:
            status, message = "skipped", job.skip_reason
        else:
            if workdir is not None:
                workdir.mkdir(parents=True, exist_ok=True)
            ctx = RunContext(device=torch.device(device), workdir=workdir, progress=progress,
                             accumulation=job.accumulation, fast=job.fast,
                             sweep=cell.is_sweep, hardware=hardware(device))
            seed_everything(cell.seed)
            with time_limit(job.time_limit_s):
                result = task.run(cell.scorer, dict(cell.scorer_kwargs), cell.seed, config, ctx)
            notes: list[str] = []
            out = {k: to_json_value(getattr(result, k), k, notes)
                   for k in ("metrics", "grids", "items", "extra")}
            out["grids"] = {k: normalize_grid(g) for k, g in out["grids"].items()}
            step = None if result.step is None else int(result.step)
            if notes:
                message = "non-finite values written as null: " + "; ".join(notes)
    except KeyboardInterrupt:
        raise
    except TrainingFailure as e:
        status, step, message = e.status, e.step, e.message
    except CellTimeout as e:
        status, message = "timeout", str(e)
    except BaseException as e:  # noqa: BLE001 - every failure of a cell is a result
        status = "oom" if _is_oom(e) else "error"
        message = traceback.format_exc()
        if isinstance(e, SystemExit):
            message = f"the task called sys.exit({e.code})\n{message}"
    finally:
        _remove_if_empty(workdir)
    wall = time.perf_counter() - t0
    extra = out["extra"] if isinstance(out["extra"], dict) else {}
    record = build_record(cell, status, message, step, out, metric_specs,
                          provenance(device=device, dtype=str(extra.get("dtype", "float32")),
                                     wall_time_s=wall, peak_mb=peak_memory_mb(device),
                                     started=started, finished=utc_now()))
    record["provenance"]["cpu_time_s"] = round(time.process_time() - cpu0, 3)
    if ctx is not None and ctx.resumed:     # training that earlier, interrupted processes did
        for key, seconds in ctx.resumed.items():
            record["provenance"][key] = round(record["provenance"][key] + seconds, 3)
        record["provenance"]["resumed"] = {k: round(v, 3) for k, v in ctx.resumed.items()}
    if job.tuning is not None:
        record["tuning"] = job.tuning
    if job.accumulation != 1:
        record["provenance"]["accumulation"] = job.accumulation
    if ctx is not None and ctx.fast_paths:
        record["provenance"]["fast"] = job.fast
        record["provenance"]["fast_paths"] = dict(ctx.fast_paths)
    try:
        return validate_record(record)
    except RecordError as e:
        record.update(status="error", metrics={}, grids={}, items={}, extra={},
                      message=f"the task returned a result that does not fit the record schema "
                              f"(docs/records.md): {e}")
        return validate_record(record)


def _free_accelerator_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_cell_with_oom_retry(job: CellJob, *, device: str | None = None,
                            progress: Callable[[int, int], None] | None = None,
                            runner: Callable[..., dict] = run_cell) -> dict:
    """``run_cell``; after an out-of-memory, one more run with every training batch split into
    twice as many micro-batches (the same effective batch, so the same cell), for tasks that
    support it (``Task.supports_accumulation``). ``provenance.oom_retry`` records the retry."""
    record = runner(job, device=device, progress=progress)
    if record["status"] != "oom":
        return record
    from tasks import get_task_class

    try:
        supported = bool(get_task_class(job.cell.task).supports_accumulation)
    except Exception:  # noqa: BLE001 - the first record stands
        supported = False
    if not supported:
        record["message"] = (f"{record['message'].rstrip()}\nno out-of-memory retry: task "
                             f"{job.cell.task!r} does not split its training batches "
                             f"(Task.supports_accumulation is False)")
        return validate_record(record)
    _free_accelerator_memory()
    retry = dataclasses.replace(job, accumulation=2 * job.accumulation)
    second = runner(retry, device=device, progress=progress)
    first_line = next((ln for ln in reversed(record["message"].strip().splitlines()) if ln), "")
    second["provenance"]["oom_retry"] = {"accumulation": retry.accumulation,
                                         "first_status": "oom", "first_message": first_line}
    return validate_record(second)


def failed_record(job: CellJob, status: str, message: str, *, device: str = "cpu",
                  hardware_name: str | None = None, started: str | None = None,
                  wall_time_s: float = 0.0) -> dict:
    """The record of a cell that ended outside ``run_cell`` (its worker process died, or it was
    killed for running past its time limit)."""
    metric_specs = {}
    tuning = {"tuning": job.tuning} if job.tuning is not None else {}
    try:
        from tasks import create_task

        task = create_task(job.cell.task)
        metric_specs = task.metric_specs(config_object(task, job.cell.config))
    except Exception:  # noqa: BLE001 - the record is still valid without them
        pass
    return validate_record({**build_record(
        job.cell, status, message, None, {}, metric_specs,
        provenance(device=device, dtype="float32", wall_time_s=wall_time_s, peak_mb=None,
                   started=started or utc_now(), finished=utc_now(),
                   hardware_name=hardware_name)), **tuning})


def failure_reason(record: dict) -> str:
    """One line saying why a cell did not finish ``ok``."""
    msg = record.get("message", "")
    if record.get("status") in ("error", "oom") and "Traceback" in msg:
        msg = _summary_line(msg)
    line = msg.strip().splitlines()[0] if msg.strip() else ""
    step = record.get("step")
    return f"{line} (step {step})" if step is not None and record.get("status") != "ok" else line


def worker_threads(workers: int) -> int:
    """Intra-op threads per worker so that ``workers`` processes share the usable CPUs."""
    from .provenance import usable_cpus

    return max(1, usable_cpus() // max(1, workers))

