"""Running cells: seeding, statuses, time limits, resume, --rerun and --fail-fast."""
from __future__ import annotations

import subprocess
import time
from datetime import datetime

import pytest
from suite_support import expected_draws, plugin_tasks, profile_file

from suite.cells import expand
from suite.executors import create_executor
from suite.profiles import load_profile
from leaderboard.loading.schema import validate_record
from suite.runner import CellJob, run_cell
from suite.scheduler import run_cells
from suite.store import ResultStore


@pytest.fixture
def plugin():
    with plugin_tasks():
        yield


def plan(tmp_path, name="p.toml", **kw):
    profile = load_profile(profile_file(tmp_path / name, **kw))
    return profile, expand(profile)


def one_job(tmp_path, seed=0, time_limit_s=None, **task) -> CellJob:
    _, planned = plan(tmp_path, seeds=[seed], **task)
    return CellJob(planned[0].cell, planned[0].skip_reason, time_limit_s,
                   str(tmp_path / "work" / planned[0].cell.id))


def test_an_ok_cell_matches_an_independent_recomputation(tmp_path, plugin):
    job = one_job(tmp_path, seed=5, n=7, scale=3)
    record = run_cell(job, device="cpu")
    want = expected_draws(5, n=7, scale=3.0)
    assert record["status"] == "ok" and record["message"] == "" and record["step"] == 7
    assert record["metrics"]["mean_draw"] == pytest.approx(want["mean"], rel=1e-12)
    assert record["metrics"]["first_normal"] == want["first_normal"]
    assert record["items"]["mean_draw"] == want["draws"]
    assert record["extra"]["python_random"] == want["python_random"]
    assert record["extra"]["sigmas_type"] == "tuple"      # JSON lists back to the field's tuple
    assert record["grids"]["scaled"] == {
        "rows_name": "sigma", "cols_name": "k", "rows": [1, 2], "cols": [0, 1],
        "values": [[s * d for d in want["draws"][:2]] for s in (1, 2)]}
    no_anchors = {"floor": None, "ceiling": None, "log_scale": False, "min_effect": 1e-6}
    assert record["metric_specs"] == {
        "mean_draw": {"direction": "lower", "headline": True, **no_anchors},
        "first_normal": {"direction": "higher", "headline": False, **no_anchors}}
    assert record["cell_id"] == job.cell.id and record["cell"] == job.cell.to_dict()
    assert not (tmp_path / "work").exists()               # the empty scratch dir is removed
    validate_record(record)


def test_provenance(tmp_path, plugin):
    from suite import provenance

    provenance.git_state.cache_clear()  # commits may land while the test session runs
    record = run_cell(one_job(tmp_path), device="cpu")
    prov = record["provenance"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=__import__("suite").__path__[0])
    if head.returncode == 0:
        assert prov["git_sha"] == head.stdout.strip() and isinstance(prov["git_dirty"], bool)
    import torch

    assert prov["packages"]["torch"] == torch.__version__.split("+")[0] or \
        prov["packages"]["torch"] == torch.__version__
    assert prov["device"] == "cpu" and prov["dtype"] == "float32"
    assert prov["hardware"].endswith(" cores")
    started, finished = (datetime.fromisoformat(prov[k]) for k in ("started", "finished"))
    assert started.utcoffset().total_seconds() == 0 and started <= finished
    assert 0 <= prov["wall_time_s"] <= (finished - started).total_seconds() + 0.01
    assert prov["peak_memory_mb"] > 10


def test_the_same_seed_gives_the_same_record_and_another_seed_does_not(tmp_path, plugin):
    a = run_cell(one_job(tmp_path, seed=1))
    b = run_cell(one_job(tmp_path, seed=1))
    c = run_cell(one_job(tmp_path, seed=2))
    assert a["metrics"] == b["metrics"] and a["items"] == b["items"]
    assert a["metrics"] != c["metrics"]


@pytest.mark.parametrize("fail, status, step, message", [
    ("error", "error", None, "ValueError: deliberate failure in suite_test_draws"),
    ("nan", "nan", 7, "loss became nan at step 7"),
    ("oom", "oom", None, "CUDA out of memory"),
    ("exit", "error", None, "the task called sys.exit(3)"),
    ("undeclared", "error", 6, "metrics ['surprise'] have no entry in metric_specs"),
    ("badgrid", "error", 6, "grids.scaled: 1 rows of values for 2 row labels"),
])
def test_failures_become_statuses(tmp_path, plugin, fail, status, step, message):
    record = run_cell(one_job(tmp_path, fail=fail))
    assert record["status"] == status and record["step"] == step
    assert message in record["message"]
    if status in ("error", "oom") and fail not in ("undeclared", "badgrid"):
        assert "Traceback (most recent call last)" in record["message"]
        assert "suite_plugin_tasks.py" in record["message"]
    validate_record(record)


def test_non_finite_metrics_are_written_as_null_and_explained(tmp_path, plugin):
    record = run_cell(one_job(tmp_path, fail="nonfinite"))
    assert record["status"] == "ok" and record["metrics"]["first_normal"] is None
    assert "metrics.first_normal was nan" in record["message"]


def test_skipped_cells_are_recorded_without_running(tmp_path, plugin):
    log = tmp_path / "log"
    _, planned = plan(tmp_path, scorers="suite_test_unsupported", log=str(log))
    record = run_cell(CellJob(planned[0].cell, planned[0].skip_reason))
    assert record["status"] == "skipped" and "does not run" in record["message"]
    assert not log.exists()


def test_time_limit(tmp_path, plugin):
    t0 = time.perf_counter()
    record = run_cell(one_job(tmp_path, time_limit_s=0.3, sleep_s=20))
    assert record["status"] == "timeout" and "0.3 s" in record["message"]
    assert time.perf_counter() - t0 < 10


def starts(log) -> list[str]:
    return [ln for ln in log.read_text().splitlines() if ln.startswith("start")] \
        if log.exists() else []


def run(tmp_path, planned, **kw):
    store = ResultStore(tmp_path / "results")
    return run_cells(planned, store, create_executor("local", workers=1), **kw), store


def test_resume_skips_finished_cells_and_rerun_failed_reruns_failed_ones(tmp_path, plugin):
    log, marker = tmp_path / "log", tmp_path / "marker"
    marker.touch()
    _, planned = plan(tmp_path, seeds=3, log=str(log), fail_while_exists=str(marker))
    first, store = run(tmp_path, planned)
    assert [r["status"] for r in first.records] == ["error"] * 3
    assert len(first.failed) == 3 and len(starts(log)) == 3

    marker.unlink()
    again, _ = run(tmp_path, planned)
    assert again.records == [] and len(again.resumed) == 3 and len(starts(log)) == 3

    # Make seed 1's record a `nan` result: `--rerun failed` leaves results alone.
    nan_record = dict(store.existing(planned[1].cell), status="nan", message="m", step=3)
    store.write(nan_record)
    fixed, _ = run(tmp_path, planned, rerun="failed")
    assert sorted(r["cell"]["seed"] for r in fixed.records) == [0, 2]
    assert all(r["status"] == "ok" for r in fixed.records)
    assert store.existing(planned[1].cell)["status"] == "nan"
    assert len(starts(log)) == 5

    everything, _ = run(tmp_path, planned, rerun="all")
    assert len(everything.records) == 3 and len(starts(log)) == 8
    assert [store.existing(p.cell)["status"] for p in planned] == ["ok"] * 3


def test_fail_fast_stops_after_the_first_failure(tmp_path, plugin):
    _, planned = plan(tmp_path, seeds=4, fail="error")
    summary, store = run(tmp_path, planned, fail_fast=True)
    assert len(summary.records) == 1 and summary.stopped_early
    assert len(summary.not_run) == 3
    assert len(list(store.records())) == 1
    assert not list((tmp_path / "results").rglob("*.claim"))  # every claim released


def test_nan_results_do_not_stop_a_fail_fast_run(tmp_path, plugin):
    _, planned = plan(tmp_path, seeds=2, fail="nan")
    summary, _ = run(tmp_path, planned, fail_fast=True)
    assert [r["status"] for r in summary.records] == ["nan", "nan"] and not summary.failed


def test_a_cell_claimed_by_a_live_run_is_not_run(tmp_path, plugin):
    log = tmp_path / "log"
    _, planned = plan(tmp_path, seeds=2, log=str(log))
    other = ResultStore(tmp_path / "results")
    held = other.claim(planned[0].cell)            # a live run (this process) holds seed 0
    summary, store = run(tmp_path, planned)
    assert [r["cell"]["seed"] for r in summary.records] == [1]
    assert [j.cell.seed for j in summary.elsewhere] == [0]
    assert held.path.exists() and store.existing(planned[0].cell) is None
    assert [ln.split()[2] for ln in starts(log)] == ["1"]
