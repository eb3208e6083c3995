"""The SLURM executor: submitit job arrays over the missing cells, statuses from SLURM's verdicts.

Without a SLURM cluster: submitit's in-process ``debug`` cluster and its ``local`` cluster (local
processes) run real cells; fake ``sbatch``/``srun`` programs capture the array job script that
would be submitted."""
from __future__ import annotations

import os
import stat

import pytest
import torch

pytest.importorskip("submitit")

from suite.executors import ExecutorError  # noqa: E402
from suite.executors.local import LocalExecutor  # noqa: E402
from suite.executors.slurm import SlurmExecutor, _Submitted  # noqa: E402
from suite.scheduler import run_cells  # noqa: E402
from suite.store import ResultStore  # noqa: E402

from executors_support import PLUGIN, job, plan, plugin_tasks, results, same_outcome  # noqa: E402


@pytest.fixture(autouse=True)
def tasks_registered():
    """The test tasks; one thread, as in every array task (float sums depend on the threads)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with plugin_tasks():
        yield
    torch.set_num_threads(threads)


def run_both(tmp_path, engine, cells):
    local = ResultStore(tmp_path / "local-executor")
    run_cells(cells, local, LocalExecutor(workers=1))
    other = ResultStore(tmp_path / f"submitit-{engine.cluster}")
    summary = run_cells(cells, other, engine)
    return results(local), results(other), summary


def test_debug_cluster_gives_the_records_of_the_local_executor(tmp_path):
    cells = plan(scorers=("softmax", "ssa"), seeds=(0, 1), steps=2)
    engine = SlurmExecutor(cluster="debug", plugins=[PLUGIN], folder=tmp_path / "jobs")
    local, debug, summary = run_both(tmp_path, engine, cells)
    assert len(local) == 4 and local.keys() == debug.keys()
    for cell_id, record in local.items():
        assert record["status"] == "ok"
        assert same_outcome(record, debug[cell_id])
        assert debug[cell_id]["provenance"]["executor"]["engine"] == "slurm"
    assert len(engine.arrays) == 1 and len(engine.arrays[0]) == 4   # one array for all cells


def test_nan_is_a_result(tmp_path):
    engine = SlurmExecutor(cluster="debug", plugins=[PLUGIN], folder=tmp_path / "jobs")
    summary = run_cells(plan(nan=True), ResultStore(tmp_path), engine)
    assert [r["status"] for r in summary.records] == ["nan"]
    assert summary.records[0]["step"] == 1


class FakeHandle:
    """A finished SLURM array task whose result cannot be read (it was killed)."""

    def __init__(self, state: str, log: str = ""):
        self.state, self.job_id, self._log = state, "4242_3", log

    def done(self):
        return True

    def result(self):
        from submitit.core.utils import UncompletedJobError

        raise UncompletedJobError(f"Job 4242_3 (task: 0) with path ... has not produced any "
                                  f"output (state: {self.state})")

    def stderr(self):
        return self._log

    def cancel(self, check=True):
        pass


@pytest.mark.parametrize("state,status", [("TIMEOUT", "timeout"), ("OUT_OF_MEMORY", "oom"),
                                          ("NODE_FAIL", "error"), ("CANCELLED by 1234", "error"),
                                          ("FAILED", "error")])
def test_slurm_verdicts_become_statuses(tmp_path, state, status):
    engine = SlurmExecutor(cluster="debug", plugins=[PLUGIN], folder=tmp_path)
    j = job(steps=1)
    engine._running.append(_Submitted(j, FakeHandle(state, "slurmstepd: error: killed"), 0.0,
                                      "2025-01-01T00:00:00+00:00"))
    ((done_job, record),) = engine.wait(timeout=1)
    assert done_job is j and record["status"] == status
    assert state in record["message"] and "slurmstepd: error: killed" in record["message"]
    assert record["cell_id"] == j.cell_id


def fake_slurm(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = tmp_path / "submitted.sbatch"
    programs = {"sbatch": f'#!/bin/sh\ncp "$1" {script}\necho "Submitted batch job 4242"\n',
                "srun": "#!/bin/sh\nexit 0\n", "scancel": "#!/bin/sh\nexit 0\n"}
    for name, text in programs.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return script


def test_array_script_caps_parallelism_and_asks_for_resources(tmp_path, monkeypatch):
    script = fake_slurm(tmp_path, monkeypatch)
    engine = SlurmExecutor(cluster="slurm", parallelism=2, partition="gpu", mem_gb=16,
                           folder=tmp_path / "jobs")
    assert engine.free_slots() > 1000        # every missing cell is taken at once
    for seed in range(3):
        j = job(seed=seed)
        engine.submit(dataclass_replace(j, time_limit_s=600))
    engine._flush()
    text = script.read_text()
    for line in ("#SBATCH --array=0-2%2", "#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=1",
                 "#SBATCH --time=15", "#SBATCH --mem=16GB", "#SBATCH --job-name=scorebench"):
        assert line in text, f"{line!r} missing from\n{text}"
    assert engine.arrays == [["4242_0", "4242_1", "4242_2"]]
    engine.close()
    assert engine.in_flight() == 0


def dataclass_replace(j, **changes):
    import dataclasses

    return dataclasses.replace(j, **changes)


def test_local_cluster_keeps_the_parallelism_cap(tmp_path):
    engine = SlurmExecutor(cluster="local", parallelism=2, plugins=[PLUGIN], folder=tmp_path)
    assert engine.free_slots() == 2
    engine.submit(job(seed=0))
    assert engine.free_slots() == 1


def test_bad_options():
    with pytest.raises(ExecutorError, match="--slurm-cluster"):
        SlurmExecutor(cluster="pbs")
    with pytest.raises(ExecutorError, match="--slurm-parallelism"):
        SlurmExecutor(cluster="debug", parallelism=0)


@pytest.mark.slow
def test_local_cluster_runs_real_cells_like_the_local_executor(tmp_path):
    cells = plan(scorers=("softmax", "ssa"), seeds=(0,), steps=2)
    engine = SlurmExecutor(cluster="local", parallelism=2, plugins=[PLUGIN],
                           folder=tmp_path / "jobs", poll_s=0.5)
    local, slurm, _ = run_both(tmp_path, engine, cells)
    assert local.keys() == slurm.keys() and len(local) == 2
    for cell_id, record in local.items():
        assert same_outcome(record, slurm[cell_id])
        assert slurm[cell_id]["provenance"]["executor"]["pid"] != os.getpid()
