"""Records: schema validation, round trip through the store, atomic writes, claims."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from suite import store as store_module
from suite.cells import Cell
from leaderboard.loading.schema import RecordError, SCHEMA_VERSION, cell_id, validate_record
from suite.store import ResultStore, atomic_write_text, pid_alive

CELL = Cell(task="icl_linear", task_version=1, track="icl", scorer="ssa", scorer_version=1,
            scorer_kwargs={}, profile="cpu", seed=2, config={"n_layer": 2})


def make_record(cell: Cell = CELL, **changes) -> dict:
    record = {
        "schema_version": SCHEMA_VERSION, "cell_id": cell.id, "cell": cell.to_dict(),
        "status": "ok", "message": "", "step": 100,
        "metrics": {"mse": 0.25, "acc": None},
        "metric_specs": {"mse": {"direction": "lower", "headline": True},
                         "acc": {"direction": "higher", "headline": False}},
        "grids": {"ood": {"rows_name": "T", "cols_name": "sigma", "rows": [10, 20],
                          "cols": [1, 2, 3], "values": [[0.1, 0.2, None], [0.3, 0.4, 0.5]]}},
        "items": {"mse": [0.0, 0.5, 0.25, 0.25]},
        "extra": {"curve": [1.0, 0.5]},
        "provenance": {"git_sha": "abc", "git_dirty": False, "harness_version": "0.1.0",
                       "packages": {"torch": "2"}, "device": "cpu", "hardware": "x, 2 cores",
                       "host": "h", "dtype": "float32", "wall_time_s": 1.5,
                       "peak_memory_mb": 10.0, "started": "2025-01-01T00:00:00+00:00",
                       "finished": "2025-01-01T00:00:01+00:00"},
    }
    record.update(changes)
    return record


def test_a_valid_record_round_trips_through_the_store(tmp_path):
    store = ResultStore(tmp_path)
    record = make_record()
    path = store.write(record)
    assert path == tmp_path / "icl_linear" / "ssa" / f"{CELL.id}.json"
    assert json.loads(path.read_text()) == record
    assert store.load(path) == record
    assert store.existing(CELL) == record
    assert store.find(CELL.id[:5]) == path
    assert [p for p, _ in store.records()] == [path]
    assert sorted(os.listdir(path.parent)) == [path.name]  # no temporary file left


def mutate(path: str, value):
    record = make_record()
    target, *keys = path.split(".")
    obj = record
    for k in [target, *keys][:-1]:
        obj = obj[k]
    if value is KeyError:
        del obj[[target, *keys][-1]]
    else:
        obj[[target, *keys][-1]] = value
    return record


@pytest.mark.parametrize("path, value, match", [
    ("status", "crashed", "status 'crashed' is not one of"),
    ("metrics", KeyError, "missing field"),
    ("surprise", 1, "unknown field"),
    ("schema_version", 99, "schema_version is 99"),
    ("cell.seed", 3, "does not match the cell"),
    ("cell.seed", True, "cell.seed must be int"),
    ("metrics.mse", float("nan"), "NaN/inf are not JSON"),
    ("metrics.mse", "low", "must be a number or null"),
    ("extra.curve", [1.0, float("inf")], r"extra.curve\[1\] is inf"),
    ("items.mse", [0.0, 1.0], "mean of the 2 items is 0.5 but metrics.mse is 0.25"),
    ("items.nope", [1.0], "not a metric of this record"),
    ("grids.ood.values", [[0.1, 0.2, 0.3]], "1 rows of values for 2 row labels"),
    ("grids.ood.rows_name", KeyError, "missing keys"),
    ("metric_specs.mse.direction", "down", "metric_specs.mse"),
    ("metric_specs.mse", KeyError, "no entry in metric_specs"),
    ("provenance.host", KeyError, "provenance is missing"),
    ("step", 1.5, "step must be"),
])
def test_schema_violations_are_named(path, value, match):
    with pytest.raises(RecordError, match=match):
        validate_record(mutate(path, value))


def test_items_mean_equal_to_metric_and_null_metric_pass():
    record = make_record()
    record["items"]["acc"] = [1, 0, True]          # acc is null: no mean to compare
    validate_record(record)
    record["metrics"]["acc"] = 2 / 3
    validate_record(record)


def test_the_store_refuses_to_write_an_invalid_record(tmp_path):
    with pytest.raises(RecordError):
        ResultStore(tmp_path).write(make_record(status="weird"))
    assert not list(tmp_path.rglob("*.json"))


def test_a_failed_write_leaves_the_previous_record_and_no_temporary_file(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    path = store.write(make_record())
    before = path.read_bytes()

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(store_module.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        store.write(make_record(status="error", message="x"))
    assert path.read_bytes() == before
    assert sorted(os.listdir(path.parent)) == [path.name]


def test_atomic_write_never_shows_a_partial_file(tmp_path):
    target, stop = tmp_path / "r.json", tmp_path / "stop"
    sizes = (3, 1_000_000)
    atomic_write_text(target, json.dumps({"x": "y" * sizes[0]}))
    reader = subprocess.Popen([sys.executable, "-c", (
        "import json, os\n"
        "seen = []\n"
        f"while not os.path.exists({str(stop)!r}):\n"
        f"    seen.append(len(json.load(open({str(target)!r}))['x']))\n"
        "print(len(seen), sorted(set(seen)))\n")], stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 2
    while time.time() < deadline:
        for size in sizes:
            atomic_write_text(target, json.dumps({"x": "y" * size}))
    stop.touch()
    out, _ = reader.communicate(timeout=60)
    assert reader.returncode == 0, "a reader saw a partly written file"
    reads, seen = out.split(" ", 1)
    assert int(reads) > 0 and set(json.loads(seen)) <= set(sizes)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_invalid_record_on_disk_is_reported_and_ignored_for_resume(tmp_path):
    store = ResultStore(tmp_path)
    path = store.write(make_record())
    path.write_text(path.read_text()[:50])  # as if written non-atomically and cut off
    assert store.existing(CELL) is None
    assert "cannot read the record" in store.warnings[0] and str(path) in store.warnings[0]
    with pytest.raises(RecordError, match="cannot read"):
        store.load(path)


def test_find_errors(tmp_path):
    store = ResultStore(tmp_path)
    with pytest.raises(RecordError, match="no record with cell id"):
        store.find("abcd")
    with pytest.raises(RecordError, match="not a cell id"):
        store.find("xyz")
    store.write(make_record())
    other = Cell(**{**CELL.to_dict(), "seed": 5})
    store.write(make_record(other))
    common = os.path.commonprefix([CELL.id, other.id])
    if common:
        with pytest.raises(RecordError, match="matches 2 records"):
            store.find(common)


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_claims_are_exclusive_and_stale_ones_are_taken_over(tmp_path):
    first, second = ResultStore(tmp_path), ResultStore(tmp_path)
    claim = first.claim(CELL)
    assert claim is not None and claim.path.name == f"{CELL.id}.claim"
    owner = json.loads(claim.path.read_text())
    assert owner["pid"] == os.getpid() and owner["host"] == socket.gethostname()
    assert second.claim(CELL) is None             # held by a live process (this one)
    second.release(claim)                         # not second's claim: it stays
    assert claim.path.exists()
    first.release(claim)
    assert not claim.path.exists()
    assert second.claim(CELL) is not None
    second.release_all()

    owner["pid"] = dead_pid()
    claim.path.write_text(json.dumps(owner))       # a run killed while holding the claim
    taken = second.claim(CELL)
    assert taken is not None and json.loads(taken.path.read_text())["run_id"] == second.run_id


def test_a_zombie_or_reused_pid_does_not_hold_a_claim(tmp_path):
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 20
    while store_module._process_state(zombie.pid) != "Z" and time.time() < deadline:
        time.sleep(0.05)
    try:
        assert not pid_alive(zombie.pid)
    finally:
        zombie.wait()
    me = store_module._process_start(os.getpid())
    assert pid_alive(os.getpid(), me)
    assert not pid_alive(os.getpid(), str(int(me) + 1))  # same pid, other process start time


def test_claims_from_other_hosts_expire_without_heartbeat(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    path = store.path_of(CELL).with_suffix(".claim")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"pid": 1, "host": "elsewhere", "run_id": "r"}))
    assert store.claim(CELL) is None
    old = time.time() - store_module.STALE_AFTER_S - 5
    os.utime(path, (old, old))
    assert store.claim(CELL) is not None


def test_heartbeat_refreshes_held_claims(tmp_path):
    store = ResultStore(tmp_path)
    claim = store.claim(CELL)
    old = time.time() - 1000
    os.utime(claim.path, (old, old))
    store.start_heartbeat(interval=0.05)
    try:
        deadline = time.time() + 10
        while claim.path.stat().st_mtime < old + 500 and time.time() < deadline:
            time.sleep(0.05)
    finally:
        store.stop_heartbeat()
    assert claim.path.stat().st_mtime > time.time() - 60


def test_unsafe_names_cannot_become_paths(tmp_path):
    bad = Cell(**{**CELL.to_dict(), "scorer": "../escape"})
    with pytest.raises(RecordError, match="cannot be a directory name"):
        ResultStore(tmp_path).write(make_record(bad))
    assert cell_id(bad.to_dict()) == bad.id
