"""``scorebench beside``: a plugin scorer written as the README shows joins a copy of the board in
one command, tuned as the board's scorers were, paired with the committed baseline seeds, and
nothing is written into the board's directory."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scorers import registry as scorer_registry
from suite.cli import main
from leaderboard.publishing.release import read_results
from tasks import registry as task_registry

REPO = Path(__file__).resolve().parents[1]
TASKS = Path(__file__).with_name("tuning_plugin_tasks.py").resolve()
TASK = "suite_test_tuned"
MY_SCORER = '''
import torch
from scorers import LogitsScorer, register_scorer

@register_scorer("softmax_half", family="softmax", normalization="normalized", paper="mine")
class SoftmaxHalf(LogitsScorer):
    """w = softmax(s / 2) over the visible keys."""

    def weights(self, s, mask):
        return torch.softmax((s / 2).masked_fill(~mask, float("-inf")), dim=-1)
'''


def profile(path: Path) -> Path:
    path.write_text("\n".join([
        'extends = ""', "[run]", f'tasks = "{TASK}"', 'scorers = "softmax"', "seeds = [0, 1, 2]",
        "time_limit_s = 0", "[tuning]", "seeds = [1000, 1001]", "max_extensions = 1",
        f"[tuning.grid.{TASK}]", "lr = [5e-4, 1e-3, 2e-3]"]) + "\n")
    return path


def cli(*argv) -> int:
    with task_registry.scoped(), scorer_registry.scoped():
        return main([str(a) for a in argv])


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")


def test_a_plugin_scorer_joins_the_board_paired_with_its_baseline_seeds(tmp_path, capsys):
    prof = profile(tmp_path / "board.toml")
    board = tmp_path / "board"
    assert cli("run", "--plugin", TASKS, "--profile", prof, "--results", board / "records") == 0
    assert cli("publish", "--results", board / "records", "--release", "r1", "--out",
               board / "releases", "--leaderboard", board / "LEADERBOARD.md") == 0
    before = snapshot(board)
    mine = tmp_path / "my_scorer.py"
    mine.write_text(MY_SCORER)
    results = tmp_path / "mine"

    args = ("--plugin", TASKS, "--plugin", mine, "--scorers", "softmax_half", "--board", board,
            "--profile", prof, "--results", results)
    capsys.readouterr()
    assert cli("beside", *args, "--dry-run") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (f"joining release r1 of {board}: profile {prof}, seeds "
                                   "[0, 1, 2] (the baseline softmax's)")
    assert "records (" in out and "calibration" not in out     # the board's records time it
    assert not list(results.rglob("*.json"))
    assert cli("beside", *args) == 0

    assert snapshot(board) == before
    records = [json.loads(p.read_text()) for p in (results / TASK).rglob("*.json")]
    assert {r["cell"]["scorer"] for r in records} == {"softmax_half"}
    sweeps = [r for r in records if r["cell"].get("role") == "sweep"]
    reports = [r for r in records if r["cell"].get("role") != "sweep"]
    assert len(sweeps) >= 3 * 2 and sorted(r["cell"]["seed"] for r in reports) == [0, 1, 2]
    assert all(r["tuning"]["point"] for r in reports)
    release = read_results(results / "releases" / "r1+softmax_half")
    rows = {r["scorer"]: r for r in release["rows"] if r["metric"] == "score"}
    committed = read_results(board / "releases" / "r1")
    baseline = next(r for r in committed["rows"] if r["metric"] == "score")
    assert rows["softmax"]["values"] == baseline["values"]
    assert rows["softmax_half"]["n_paired"] == 3 and rows["softmax_half"]["seeds"] == [0, 1, 2]
    assert rows["softmax_half"]["p_vs_baseline"] is not None


def test_beside_without_a_scorer_or_a_release_says_what_to_give(tmp_path, capsys):
    with pytest.raises(SystemExit, match="name your scorer"):
        cli("beside", "--board", tmp_path)
    with pytest.raises(SystemExit, match="holds no release"):
        cli("beside", "--scorers", "softmax", "--board", tmp_path)


def test_beside_help_states_its_own_defaults(capsys):
    with pytest.raises(SystemExit):
        cli("beside", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "(default ./beside-results)" in text and "(default ./results)" not in text
    assert "(default: the newest release's profile)" in text and "default cpu" not in text
    assert "the seeds of the newest release's baseline" in text


BROKEN = {
    "a weights that takes no mask": ("    def weights(self, s):\n", "does not take (s, mask)"),
    "a misspelt weights": ("    def wieghts(self, s, mask):\n", "defines wieghts, not weights"),
}


@pytest.mark.parametrize("broken", list(BROKEN))
def test_a_broken_plugin_scorer_stops_the_dry_run_within_seconds_with_its_traceback(tmp_path,
                                                                                     broken):
    line, said = BROKEN[broken]
    mine = tmp_path / "my_scorer.py"
    mine.write_text(MY_SCORER.replace("    def weights(self, s, mask):\n", line))
    started = time.monotonic()
    done = run_cli(REPO, "beside", "--plugin", mine, "--scorers", "softmax_half", "--dry-run",
                   "--results", tmp_path / "mine")
    assert time.monotonic() - started < 30
    assert done.returncode != 0 and "cells" not in done.stdout
    assert done.stdout.startswith("joining release ")
    err = done.stderr
    assert err.startswith("scorebench beside: scorer softmax_half cannot run") and said in err
    assert f"scorebench check --plugin {os.path.realpath(mine)} --scorers softmax_half" in err
    assert f'  File "{os.path.realpath(mine)}", line 9, in SoftmaxHalf.' in err
    assert not (tmp_path / "mine").exists()


def test_a_plugin_scorer_that_raises_stops_the_run_with_its_own_frames(tmp_path, capsys):
    mine = tmp_path / "my_scorer.py"
    mine.write_text(MY_SCORER.replace("return torch.softmax((s / 2)", "return torch.softmax((s.view(-1, 3) / 2)"))
    with pytest.raises(SystemExit) as stopped:
        cli("run", "--plugin", TASKS, "--plugin", mine, "--scorers", "softmax_half", "--profile",
            profile(tmp_path / "p.toml"), "--results", tmp_path / "mine")
    message = str(stopped.value)
    assert "scorer softmax_half" in message and "raised RuntimeError" in message
    frames = [ln for ln in message.splitlines() if ln.startswith("  File ")]
    assert frames == [f'  File "{os.path.realpath(mine)}", line 10, in weights']
    assert not (tmp_path / "mine").exists()


def run_cli(cwd, *args) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "suite.cli", *map(str, args)], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True,
                          timeout=120)
