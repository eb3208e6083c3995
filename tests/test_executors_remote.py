"""The out-of-memory retry (the same cell, its training batches split in two) in every executor,
and the JSON-in, JSON-out entry point of the Ray and SLURM workers."""
from __future__ import annotations

import dataclasses
import json

import pytest

from suite.executors.remote import run_job_json
from leaderboard.loading.schema import validate_record
from suite.runner import CellJob, run_cell, run_cell_with_oom_retry
from tasks.base import micro_batches

from executors_support import PLUGIN, TASK, job, plugin_tasks


@pytest.fixture(autouse=True)
def tasks_registered():
    with plugin_tasks():
        yield


def test_oom_cell_runs_again_with_its_batches_split_in_two():
    first = job(batch_size=8, oom_above=4, steps=2)
    record = run_cell_with_oom_retry(first)
    validate_record(record)
    assert record["status"] == "ok", record["message"]
    assert record["cell_id"] == first.cell_id and record["cell"] == first.cell.to_dict()
    assert record["extra"]["micro_batch_size"] == 4 and record["extra"]["accumulation"] == 2
    retry = record["provenance"]["oom_retry"]
    assert retry["accumulation"] == 2 and record["provenance"]["accumulation"] == 2
    assert retry["first_status"] == "oom" and "micro-batch 8 > 4" in retry["first_message"]
    # The retry computed exactly what the cell computes when asked for 2 micro-batches.
    direct = run_cell(dataclasses.replace(first, accumulation=2))
    assert direct["metrics"] == record["metrics"] and direct["items"] == record["items"]


def test_same_effective_batch_gives_nearly_the_same_training():
    whole = run_cell(job(batch_size=8, steps=2))
    halves = run_cell(dataclasses.replace(job(batch_size=8, steps=2), accumulation=2))
    assert "accumulation" not in whole["provenance"]
    assert whole["metrics"]["eval_mse"] == pytest.approx(halves["metrics"]["eval_mse"], rel=1e-4)


def test_second_oom_stays_oom_and_says_it_retried():
    record = run_cell_with_oom_retry(job(batch_size=8, oom_above=2))
    assert record["status"] == "oom"
    assert record["provenance"]["oom_retry"]["accumulation"] == 2


def test_no_retry_for_a_task_that_does_not_split_its_batches():
    record = run_cell_with_oom_retry(job("executors_test_no_micro_batch"))
    assert record["status"] == "oom" and "oom_retry" not in record["provenance"]
    assert "no out-of-memory retry" in record["message"]
    assert "supports_accumulation" in record["message"]


def test_nan_and_ok_cells_run_once():
    calls = []

    def counting(j, **kw):
        calls.append(j.cell_id)
        return run_cell(j, **kw)

    assert run_cell_with_oom_retry(job(nan=True), runner=counting)["status"] == "nan"
    assert run_cell_with_oom_retry(job(steps=1), runner=counting)["status"] == "ok"
    assert len(calls) == 2


def test_micro_batches_cover_the_batch():
    assert micro_batches(8, 2) == [slice(0, 4), slice(4, 8)]
    assert [s.stop - s.start for s in micro_batches(7, 3)] == [2, 2, 3]
    with pytest.raises(Exception, match="cannot split a batch of 2 into 4"):
        micro_batches(2, 4)


def test_accumulation_survives_the_job_json():
    j = dataclasses.replace(job(steps=1), accumulation=4)
    assert CellJob.from_json(json.loads(json.dumps(j.to_json()))).accumulation == 4


def test_job_json_round_trip(tmp_path):
    j = job(steps=1)
    record = json.loads(run_job_json(json.dumps(j.to_json()), [str(PLUGIN)], 1, "test"))
    validate_record(record)
    assert record["status"] == "ok" and record["cell_id"] == j.cell_id
    assert record["provenance"]["executor"]["engine"] == "test"
    assert record["cell"]["task"] == TASK


def test_the_local_executor_retries_out_of_memory_too():
    from suite.executors.local import LocalExecutor

    pool = LocalExecutor(workers=1)
    try:
        pool.submit(job(batch_size=8, oom_above=4, steps=2))
        [(_, record)] = pool.wait(60)
    finally:
        pool.close()
    assert record["status"] == "ok", record["message"]
    assert record["provenance"]["oom_retry"]["accumulation"] == 2
