"""What a remote worker runs: the out-of-memory retry with half the micro-batch and twice the
accumulation, and the JSON-in, JSON-out entry point of the Ray and SLURM workers."""
from __future__ import annotations

import json

import pytest

from suite.executors.remote import oom_overrides, run_cell_with_oom_retry, run_job_json
from suite.records import validate_record
from suite.runner import run_cell

from executors_support import PLUGIN, TASK, job, plugin_tasks


@pytest.fixture(autouse=True)
def tasks_registered():
    with plugin_tasks():
        yield


def test_oom_cell_runs_again_with_half_the_micro_batch():
    first = job(micro_batch_size=8, grad_accum_steps=1, oom_above=4, steps=2)
    record = run_cell_with_oom_retry(first)
    validate_record(record)
    assert record["status"] == "ok", record["message"]
    assert record["cell_id"] == first.cell_id and record["cell"] == first.cell.to_dict()
    assert record["cell"]["config"]["micro_batch_size"] == 8
    assert record["extra"]["micro_batch_size"] == 4 and record["extra"]["grad_accum_steps"] == 2
    retry = record["provenance"]["oom_retry"]
    assert retry["overrides"] == {"micro_batch_size": 4, "grad_accum_steps": 2}
    assert retry["first_status"] == "oom" and "micro-batch 8 > 4" in retry["first_message"]
    # The retry computed exactly what a cell planned with (4, 2) computes.
    direct = run_cell(job(micro_batch_size=4, grad_accum_steps=2, oom_above=4, steps=2))
    assert direct["metrics"] == record["metrics"] and direct["items"] == record["items"]


def test_same_effective_batch_gives_nearly_the_same_training():
    whole = run_cell(job(micro_batch_size=8, grad_accum_steps=1, steps=2))
    halves = run_cell(job(micro_batch_size=4, grad_accum_steps=2, steps=2))
    assert whole["metrics"]["eval_mse"] == pytest.approx(halves["metrics"]["eval_mse"], rel=1e-4)


def test_second_oom_stays_oom_and_says_it_retried():
    record = run_cell_with_oom_retry(job(micro_batch_size=8, oom_above=2))
    assert record["status"] == "oom"
    assert record["provenance"]["oom_retry"]["overrides"]["micro_batch_size"] == 4


def test_no_retry_without_micro_batch_settings():
    record = run_cell_with_oom_retry(job("executors_test_no_micro_batch"))
    assert record["status"] == "oom" and "oom_retry" not in record["provenance"]
    assert "no out-of-memory retry" in record["message"]
    assert "micro_batch_size" in record["message"]


def test_no_retry_when_the_micro_batch_cannot_be_halved():
    record = run_cell_with_oom_retry(job(micro_batch_size=7, oom_above=4))
    assert record["status"] == "oom" and "cannot be halved" in record["message"]


def test_nan_and_ok_cells_run_once():
    calls = []

    def counting(j, **kw):
        calls.append(j.cell_id)
        return run_cell(j, **kw)

    assert run_cell_with_oom_retry(job(nan=True), runner=counting)["status"] == "nan"
    assert run_cell_with_oom_retry(job(steps=1), runner=counting)["status"] == "ok"
    assert len(calls) == 2


def test_a_task_hook_decides_the_retry():
    class Task:
        name = "hooked"

        def oom_fallback(self, config):
            return {"chunk": config["chunk"] // 4}

    assert oom_overrides(Task(), {"chunk": 64}) == ({"chunk": 16}, "")


def test_job_json_round_trip(tmp_path):
    j = job(steps=1)
    record = json.loads(run_job_json(json.dumps(j.to_json()), [str(PLUGIN)], 1, "test"))
    validate_record(record)
    assert record["status"] == "ok" and record["cell_id"] == j.cell_id
    assert record["provenance"]["executor"]["engine"] == "test"
    assert record["cell"]["task"] == TASK
