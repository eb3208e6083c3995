"""The CLI: run, show, ls tasks|profiles, nightly --dry-run; a run killed with SIGKILL (its workers
stop and keep their checkpoints); two runs at once."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from suite_support import PLUGIN, TASK, expected_draws, plugin_tasks, profile_file

from suite.cli import main
from suite.store import ResultStore


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")


def cli(*argv) -> int:
    with plugin_tasks():
        return main([*argv, "--plugin", str(PLUGIN)])


def records_under(results: Path) -> dict[int, dict]:
    out = {}
    for _, record in ResultStore(results).records():
        out[record["cell"]["seed"]] = record
    return out


def starts(log: Path) -> list[int]:
    if not log.exists():
        return []
    return [int(ln.split()[2]) for ln in log.read_text().splitlines() if ln.startswith("start")]


def test_run_writes_records_prints_a_summary_and_show_prints_one(tmp_path, capsys):
    prof = profile_file(tmp_path / "p.toml", seeds=2, scorers="softmax,suite_test_unsupported")
    results = tmp_path / "res"
    assert cli("run", "--profile", str(prof), "--results", str(results)) == 0
    out = capsys.readouterr().out
    assert "profile p" in out and "4 cells" in out
    assert "took" in out and "4 cell(s) run" in out
    recs = list(ResultStore(results).records())
    assert sorted((r["cell"]["scorer"], r["status"]) for _, r in recs) == [
        ("softmax", "ok"), ("softmax", "ok"), ("suite_test_unsupported", "skipped"),
        ("suite_test_unsupported", "skipped")]

    ok = next(r for _, r in recs if r["status"] == "ok" and r["cell"]["seed"] == 1)
    assert cli("show", ok["cell_id"][:8], "--results", str(results)) == 0
    shown = capsys.readouterr().out
    assert ok["cell_id"] in shown and "mean_draw" in shown and "provenance" in shown
    assert f"{expected_draws(1)['mean']:.6g}" in shown
    assert cli("show", ok["cell_id"], "--results", str(results), "--json") == 0
    assert json.loads(capsys.readouterr().out) == ok

    assert cli("run", "--profile", str(prof), "--results", str(results)) == 0
    out = capsys.readouterr().out
    assert "4 cell(s) already have a record" in out and "0 cell(s) run" in out



def test_show_finds_a_cell_in_the_boards_records_and_says_so(tmp_path, capsys):
    prof = profile_file(tmp_path / "p.toml", seeds=1)
    board = tmp_path / "board"
    assert cli("run", "--profile", str(prof), "--results", str(board / "records")) == 0
    (_, record), = ResultStore(board / "records").records()
    capsys.readouterr()
    mine = tmp_path / "mine"
    assert cli("show", record["cell_id"][:6], "--results", str(mine), "--board", str(board)) == 0
    shown = capsys.readouterr().out
    assert shown.splitlines()[0] == (f"scorebench show: not under {mine}; found in the board's "
                                     f"records, {board / 'records'}")
    assert record["cell_id"] in shown and not mine.exists()
    assert cli("show", record["cell_id"], "--results", str(mine), "--board", str(board),
               "--json") == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == record and "found in the board's records" in out.err
    with pytest.raises(SystemExit, match="under .* or the board's records"):
        cli("show", "ffff", "--results", str(mine), "--board", str(board))

def test_errors_show_their_reason_and_fail_fast_sets_the_exit_code(tmp_path, capsys):
    prof = profile_file(tmp_path / "p.toml", seeds=3, fail="error")
    results = tmp_path / "res"
    assert cli("run", "--profile", str(prof), "--results", str(results), "--fail-fast") == 1
    out = capsys.readouterr().out
    assert "cells that did not finish ok" in out
    assert "ValueError: deliberate failure in suite_test_draws" in out
    assert "not run (--fail-fast)" in out
    recs = records_under(results)
    assert list(recs) == [0] and "Traceback" in recs[0]["message"]
    assert cli("show", recs[0]["cell_id"], "--results", str(results)) == 0
    assert "deliberate failure" in capsys.readouterr().out


def test_command_line_selections_and_bad_input(tmp_path, capsys):
    prof = profile_file(tmp_path / "p.toml", seeds=5)
    results = tmp_path / "res"
    assert cli("run", "--profile", str(prof), "--results", str(results), "--seeds", "7,9",
               "--tasks", "suite_test_*", "--scorers", "softmax") == 0
    assert sorted(records_under(results)) == [7, 9]
    for argv, message in [
        (["--profile", "smok"], "Did you mean: smoke"),
        (["--profile", str(prof), "--tasks", "suite_test_drawz"], "Did you mean: suite_test_draws"),
        (["--profile", str(prof), "--scorers", "sofmax"], "unknown scorer 'sofmax'"),
    ]:
        with pytest.raises(SystemExit) as e:
            cli("run", "--results", str(results), *argv)
        assert message in str(e.value)
    with pytest.raises(SystemExit):
        cli("run", "--seeds", "0", "--results", str(results))
    assert "--seeds '0'" in capsys.readouterr().err
    for command, option in [("run", "--workers"), ("bench", "--repeats")]:
        with pytest.raises(SystemExit):
            cli(command, *(["scorers"] if command == "bench" else []), option, "0")
        assert f"argument {option}: '0': give an integer >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli("show", "0123456789abcdef", "--results", str(results))
    assert "no record with cell id" in str(e.value)


def test_dry_run_lists_cells_without_running(tmp_path, capsys):
    prof = profile_file(tmp_path / "p.toml", seeds=2)
    assert cli("run", "--profile", str(prof), "--results", str(tmp_path / "r"), "--dry-run") == 0
    out = capsys.readouterr().out
    assert out.count(" run") >= 2 and not (tmp_path / "r").exists()


def test_nightly_dry_run_is_the_run_dry_run_and_publishes_nothing(tmp_path, capsys):
    prof = profile_file(tmp_path / "p.toml", seeds=2)
    common = ["--profile", str(prof), "--results", str(tmp_path / "r"), "--dry-run"]
    assert cli("run", *common) == 0
    run_out = capsys.readouterr().out
    assert cli("nightly", *common, "--releases", str(tmp_path / "rel"), "--date",
               "2025-01-01") == 0
    out = capsys.readouterr().out
    assert out.count(" run") >= 2 and out.splitlines()[:6] == run_out.splitlines()[:6]
    assert not (tmp_path / "r").exists() and not (tmp_path / "rel").exists()


def test_ls_tasks_and_profiles(capsys):
    assert cli("ls", "tasks", "suite_*") == 0
    out = capsys.readouterr().out
    assert TASK in out and "mean_draw" in out and "probe" in out
    assert cli("ls", "profiles") == 0
    out = capsys.readouterr().out
    for name in ("smoke", "cpu (default)", "paper"):
        assert name in out


def subprocess_run(*argv, cwd) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "suite.cli", "run", "--plugin", str(PLUGIN),
                             *argv], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "COLUMNS": "200"})


def test_a_run_killed_mid_cell_loses_only_that_cell_and_a_rerun_completes(tmp_path):
    log, results = tmp_path / "log", tmp_path / "res"
    prof = profile_file(tmp_path / "p.toml", seeds=2, sleep_s=1.5, log=str(log))
    proc = subprocess_run("--profile", str(prof), "--results", str(results), cwd=tmp_path)
    deadline = time.time() + 120
    while starts(log) != [0, 1] and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert starts(log) == [0, 1], proc.communicate()[0] if proc.poll() is not None else ""
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    recs = records_under(results)
    assert list(recs) == [0] and recs[0]["status"] == "ok"   # the finished cell is kept
    leftovers = sorted(p.name for p in (results / TASK / "softmax").iterdir())
    claim = [n for n in leftovers if n.endswith(".claim")]
    assert leftovers == sorted([f"{recs[0]['cell_id']}.json", *claim]) and len(claim) == 1
    assert json.loads((results / TASK / "softmax" / claim[0]).read_text())["pid"] == proc.pid

    assert cli("run", "--profile", str(prof), "--results", str(results)) == 0
    recs = records_under(results)
    assert sorted(recs) == [0, 1] and all(r["status"] == "ok" for r in recs.values())
    assert recs[1]["metrics"]["mean_draw"] == pytest.approx(expected_draws(1)["mean"])
    assert starts(log) == [0, 1, 1]
    assert not list(results.rglob("*.claim")) and not list(results.rglob("*.tmp"))


def test_workers_whose_run_is_killed_stop_and_keep_their_cells_checkpoints(tmp_path):
    log, results = tmp_path / "log", tmp_path / "res"
    prof = profile_file(tmp_path / "p.toml", seeds=2, sleep_s=60.0, log=str(log), checkpoint=True)
    proc = subprocess_run("--profile", str(prof), "--results", str(results), "--workers", "2",
                          cwd=tmp_path)
    deadline = time.time() + 120
    while sorted(starts(log)) != [0, 1] and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert sorted(starts(log)) == [0, 1], proc.communicate()[0] if proc.poll() is not None else ""
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    out = proc.communicate(timeout=30)[0]       # returns once the workers, too, have exited
    assert "Traceback" not in out, out          # they stopped; no cell became an error
    assert "end" not in log.read_text()
    markers = sorted(results.glob(".work/*/*/*/resume/marker"))
    assert len(markers) == 2 and not list(results.rglob("*.json"))


def test_two_runs_at_once_never_run_a_cell_twice(tmp_path):
    log, results = tmp_path / "log", tmp_path / "res"
    prof = profile_file(tmp_path / "p.toml", seeds=6, sleep_s=0.3, log=str(log), barrier=2)
    procs = [subprocess_run("--profile", str(prof), "--results", str(results), cwd=tmp_path)
             for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sorted(starts(log)) == list(range(6))               # every cell ran exactly once
    pids = {ln.split()[3] for ln in log.read_text().splitlines()}
    assert len(pids) == 2                                      # and both runs ran cells
    recs = records_under(results)
    assert sorted(recs) == list(range(6)) and all(r["status"] == "ok" for r in recs.values())
    ran = [int(out.split(" cell(s) run")[0].split()[-1]) for out in outs]
    assert sum(ran) == 6, outs
    assert not list(results.rglob("*.claim"))
