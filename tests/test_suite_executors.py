"""The executor registry and the local worker pool (spawned processes, GPU pinning, crashes)."""
from __future__ import annotations

import os
import time

import pytest
from suite_support import PLUGIN, expected_draws, plugin_tasks, profile_file

from suite.cells import expand
from suite.executors import (Executor, ExecutorError, Progress, Started, create_executor,
                             list_executors, register_executor)
from suite.executors.local import LocalExecutor
from suite.profiles import load_profile
from suite.runner import CellJob, run_cell


def test_registry():
    assert "local" in list_executors()
    assert isinstance(create_executor("local", workers=1), Executor)
    with pytest.raises(ExecutorError, match="unknown executor 'lcoal'.*Did you mean: local"):
        create_executor("lcoal")
    with pytest.raises(ExecutorError, match="already registered"):
        @register_executor("local")
        class Other:
            pass
    with pytest.raises(ExecutorError, match="positive integer"):
        LocalExecutor(workers=0)


def run_pool(tmp_path, cells, **options):
    """Run ``cells`` ((seed, fail, sleep_s, time_limit_s) each) on a local pool of 2 workers."""
    with plugin_tasks():
        jobs = {}
        for seed, fail, sleep_s, limit in cells:
            sub = tmp_path / f"p{seed}"
            sub.mkdir()
            cell = expand(load_profile(profile_file(sub / "p.toml", seeds=[seed], fail=fail,
                                                    sleep_s=sleep_s)))[0].cell
            jobs[seed] = CellJob(cell, None, limit)
        pool = LocalExecutor(workers=2, plugins=[str(PLUGIN)], **options)
        events, records = [], {}
        try:
            pending = list(jobs.values())
            deadline = time.time() + 240
            while (pending or pool.in_flight()) and time.time() < deadline:
                while pending and pool.free_slots():
                    pool.submit(pending.pop(0))
                for job, record in pool.wait(1.0, events.append):
                    records[job.cell.seed] = record
        finally:
            pool.close()
    assert sorted(records) == sorted(jobs)
    return jobs, records, events


def test_worker_pool_runs_cells_in_parallel_with_one_gpu_each(tmp_path):
    jobs, records, events = run_pool(tmp_path, [(0, "", 0.2, None), (1, "", 0.2, None)],
                                     gpus=["3", "5"])
    for seed in (0, 1):
        want = expected_draws(seed)
        assert records[seed]["status"] == "ok"
        assert records[seed]["metrics"]["mean_draw"] == pytest.approx(want["mean"], rel=1e-12)
        assert records[seed]["items"]["mean_draw"] == want["draws"]
        assert records[seed]["extra"]["pid"] != os.getpid()
        assert records[seed]["extra"]["threads"] == max(1, len(os.sched_getaffinity(0)) // 2)
    # The two cells run at once, on different workers, each seeing only its own GPU.
    assert {records[s]["extra"]["cuda_visible_devices"] for s in (0, 1)} == {"3", "5"}
    assert records[0]["extra"]["pid"] != records[1]["extra"]["pid"]
    started = [e for e in events if isinstance(e, Started)]
    assert sorted((e.job.cell.seed, e.worker) for e in started) == [
        (0, "worker 0 (GPU 3)"), (1, "worker 1 (GPU 5)")]
    progress = [e for e in events if isinstance(e, Progress) and e.cell_id == jobs[0].cell_id]
    assert progress and progress[-1].done == progress[-1].total == 4


def test_a_record_keeps_the_cells_cpu_time_beside_its_wall_time(tmp_path):
    """The test task sleeps 1 s: wall time that costs the process no CPU, as a shared
    machine's other jobs add wall time that is not the cell's cost."""
    with plugin_tasks():
        cell = expand(load_profile(profile_file(tmp_path / "p.toml", sleep_s=1.0)))[0].cell
        record = run_cell(CellJob(cell, None, 0))
    prov = record["provenance"]
    assert record["status"] == "ok"
    assert prov["wall_time_s"] >= 1.0
    assert 0 < prov["cpu_time_s"] < prov["wall_time_s"] - 0.5


@pytest.mark.slow
def test_dead_and_stuck_workers_become_records_and_are_replaced(tmp_path):
    _, records, _ = run_pool(tmp_path, [(0, "crash", 0, None), (1, "block", 30, 0.5),
                                        (2, "", 0, None), (3, "", 0, None)], kill_grace_s=0.5)
    assert records[0]["status"] == "error"
    assert "worker process running this cell died: signal 9 (SIGKILL" in records[0]["message"]
    assert records[1]["status"] == "timeout" and "did not stop" in records[1]["message"]
    assert records[1]["provenance"]["wall_time_s"] < 20
    for seed in (2, 3):
        assert records[seed]["status"] == "ok"
        assert records[seed]["metrics"]["mean_draw"] == pytest.approx(
            expected_draws(seed)["mean"], rel=1e-12)
