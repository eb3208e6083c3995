"""What a remote worker (Ray, SLURM) runs for a cell: ``run_job_json``, JSON in and out, with
the out-of-memory retry of ``suite.runner.run_cell_with_oom_retry``."""
from __future__ import annotations

import json
import os

from leaderboard.loading.schema import validate_record

from ..runner import CellJob, run_cell_with_oom_retry


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
