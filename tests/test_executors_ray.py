"""The Ray executor on an embedded local cluster: real cells give the records of the local
executor for the same seeds; a lost worker is retried, a NaN is not. (Starting Ray takes tens of
seconds on a small machine: those tests are marked slow and share one cluster.)"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from suite.executors import ExecutorError
from suite.executors.base import declared_gpus

from executors_support import PLUGIN, plan, plugin_tasks, results, same_outcome


def test_declared_gpus_default_and_override():
    with plugin_tasks():
        assert declared_gpus("executors_test_attention") == 1.0
        from tasks import get_task_class

        cls = get_task_class("executors_test_attention")
        cls.gpus = 0.25
        try:
            assert declared_gpus("executors_test_attention") == 0.25
        finally:
            del cls.gpus


def test_bad_options_are_refused_before_starting_ray():
    pytest.importorskip("ray")
    from suite.executors.ray import RayExecutor

    with pytest.raises(ExecutorError, match="--workers"):
        RayExecutor(workers=0)
    with pytest.raises(ExecutorError, match="--ray-gpus-per-cell"):
        RayExecutor(gpus_per_cell=-1)
    with pytest.raises(ExecutorError, match="--ray-max-retries"):
        RayExecutor(max_retries=-1)


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    # A short root: Ray's socket paths must fit in 107 characters.
    cache = Path(tempfile.mkdtemp(prefix="sbray"))
    old = os.environ.get("SCOREBENCH_CACHE")
    os.environ["SCOREBENCH_CACHE"] = str(cache)
    yield cache
    if ray.is_initialized():
        ray.shutdown()
    if old is None:
        os.environ.pop("SCOREBENCH_CACHE", None)
    else:
        os.environ["SCOREBENCH_CACHE"] = old


@pytest.fixture(scope="module")
def shared_cluster(ray_cluster):
    """A cluster started here, which executors join instead of starting their own."""
    import ray

    if not ray.is_initialized():
        ray.init(include_dashboard=False, _temp_dir=str(ray_cluster / "ray"), num_cpus=2,
                 log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture
def plugin_thread(one_thread):
    with plugin_tasks():
        yield


def executor(**kwargs):
    from suite.executors.ray import RayExecutor

    return RayExecutor(plugins=[PLUGIN], threads_per_cell=1, num_cpus=2, **kwargs)


@pytest.mark.slow
def test_ray_gives_the_records_of_the_local_executor(tmp_path, ray_cluster, plugin_thread):
    from suite.executors.local import LocalExecutor
    from suite.scheduler import run_cells
    from suite.store import ResultStore

    cells = plan(scorers=("softmax", "ssa"), seeds=(0, 1), steps=2)
    local = ResultStore(tmp_path / "local")
    run_cells(cells, local, LocalExecutor(workers=1))
    engine = executor(workers=2)
    assert engine._owns_cluster          # embedded, its files under the cache; closed at the end
    assert any(p.name.startswith("session") for p in (ray_cluster / "ray").iterdir())
    remote = ResultStore(tmp_path / "ray")
    run_cells(cells, remote, engine)
    a, b = results(local), results(remote)
    assert len(a) == 4 and a.keys() == b.keys()
    for cell_id in a:
        assert a[cell_id]["status"] == "ok" and same_outcome(a[cell_id], b[cell_id])
        assert b[cell_id]["provenance"]["executor"]["engine"] == "ray"
        assert b[cell_id]["provenance"]["executor"]["pid"] != os.getpid()


@pytest.mark.slow
def test_lost_worker_is_retried_and_nan_is_not(tmp_path, shared_cluster, plugin_thread):
    from suite.scheduler import run_cells
    from suite.store import ResultStore

    log = tmp_path / "attempts.log"
    crash = plan(scorers=("ssa",), steps=1, crash_marker=str(tmp_path / "crashed"),
                 attempts_log=str(log))
    nan = plan(scorers=("softmax",), nan=True, attempts_log=str(log))
    summary = run_cells(crash + nan, ResultStore(tmp_path / "results"),
                        executor(workers=2, max_retries=2))
    status = {r["cell"]["scorer"]: r for r in summary.records}
    assert status["ssa"]["status"] == "ok"
    assert status["softmax"]["status"] == "nan" and status["softmax"]["step"] == 1
    starts = log.read_text().split("\n")
    assert sum(line.startswith("start ssa") for line in starts) == 2      # crashed, then ran
    assert sum(line.startswith("start softmax") for line in starts) == 1  # NaN: never rerun


@pytest.mark.slow
def test_worker_lost_every_time_is_an_error_record(tmp_path, shared_cluster, plugin_thread):
    from suite.scheduler import run_cells
    from suite.store import ResultStore

    cells = plan(scorers=("ssa",), crash_always=True)
    summary = run_cells(cells, ResultStore(tmp_path / "results"), executor(max_retries=1))
    (record,) = summary.records
    assert record["status"] == "error" and "lost 2 time(s)" in record["message"]
