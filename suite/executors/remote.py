"""What a remote worker (Ray, SLURM) runs for a cell: ``run_job_json``, JSON in and out, with the
out-of-memory retry.

Out-of-memory retry: a cell that ran out of memory runs once more with half the micro-batch and
twice the gradient accumulation (the same effective batch), recorded in the record's provenance.

The hook is generic. A task supports the retry when

- it defines ``oom_fallback(config: dict) -> dict | None`` returning config overrides for the retry
  (None: no retry), or
- its config has ``micro_batch_size`` and ``grad_accum_steps`` (an even micro-batch is halved and
  the accumulation doubled).

The retried cell keeps its identity (cell and ``cell_id``: the effective batch is unchanged); the
record's ``provenance.oom_retry`` holds the overrides and the first attempt's message.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable

from ..records import validate_record
from ..runner import CellJob, run_cell

MICRO_BATCH = "micro_batch_size"
ACCUMULATION = "grad_accum_steps"


def oom_overrides(task, config: dict) -> tuple[dict | None, str]:
    """(overrides for the retry, or None; why not when None)."""
    hook = getattr(task, "oom_fallback", None)
    if callable(hook):
        overrides = hook(dict(config))
        return (dict(overrides), "") if overrides else (None, f"task {task.name!r}'s "
                                                              f"oom_fallback declined a retry")
    if MICRO_BATCH not in config or ACCUMULATION not in config:
        return None, (f"task {task.name!r} has no {MICRO_BATCH}/{ACCUMULATION} in its config "
                      f"(nor an oom_fallback hook), so it cannot retry with a smaller micro-batch")
    micro, accum = config[MICRO_BATCH], config[ACCUMULATION]
    if not isinstance(micro, int) or micro < 2 or micro % 2:
        return None, (f"{MICRO_BATCH}={micro!r} cannot be halved exactly, so the effective batch "
                      f"would change")
    return {MICRO_BATCH: micro // 2, ACCUMULATION: accum * 2}, ""


def supports_oom_retry(task_name: str) -> bool:
    """Whether the default config of ``task_name`` allows the out-of-memory retry."""
    from tasks import create_task

    from ..cells import resolve_config

    task = create_task(task_name)
    return oom_overrides(task, resolve_config(task, {}))[0] is not None


def _free_accelerator_memory() -> None:
    import gc

    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


def run_cell_with_oom_retry(job: CellJob, *, device: str | None = None,
                            progress: Callable[[int, int], None] | None = None,
                            runner: Callable[..., dict] = run_cell) -> dict:
    """``run_cell``, and on status ``oom`` one more run with the task's out-of-memory overrides."""
    record = runner(job, device=device, progress=progress)
    if record["status"] != "oom":
        return record
    from tasks import create_task

    try:
        task = create_task(job.cell.task)
        overrides, why = oom_overrides(task, dict(job.cell.config))
    except Exception as e:  # noqa: BLE001 - the first record stands
        overrides, why = None, f"the task could not be asked for a retry: {e}"
    if overrides is None:
        record["message"] = f"{record['message'].rstrip()}\nno out-of-memory retry: {why}"
        return validate_record(record)
    unknown = sorted(set(overrides) - set(job.cell.config))
    if unknown:
        record["message"] += f"\nno out-of-memory retry: overrides {unknown} are not config keys"
        return validate_record(record)
    _free_accelerator_memory()
    retry_cell = dataclasses.replace(job.cell, config={**job.cell.config, **overrides})
    second = runner(dataclasses.replace(job, cell=retry_cell), device=device, progress=progress)
    second["cell"] = job.cell.to_dict()
    second["cell_id"] = job.cell.id
    first_line = next((ln for ln in reversed(record["message"].strip().splitlines()) if ln), "")
    second["provenance"]["oom_retry"] = {"overrides": overrides, "first_status": "oom",
                                         "first_message": first_line}
    return validate_record(second)


def run_job_json(job_json: str, plugins: list[str], threads: int, engine: str) -> str:
    """Run one cell in a worker process of ``engine``: a JSON job in, a JSON record out."""
    import torch

    import scorers
    import tasks  # noqa: F401  (registers the built-in tasks)

    from ..runner import default_device

    torch.set_num_threads(max(1, int(threads)))
    for path in plugins:
        scorers.load_plugin(path)
    job = CellJob.from_json(json.loads(job_json))
    record = run_cell_with_oom_retry(job, device=default_device())
    record["provenance"]["executor"] = {"engine": engine, "node": os.uname().nodename,
                                        "pid": os.getpid()}
    return json.dumps(validate_record(record), allow_nan=False)
