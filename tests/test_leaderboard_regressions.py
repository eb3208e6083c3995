"""Nightly regressions: between constructed releases, no false alarm on identical ones,
and the `scorebench nightly` command (publish + compare; one run through the real harness)."""
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from leaderboard.publishing import regressions
from leaderboard.method.aggregate import build_board
from leaderboard.publishing.release import load_release
from leaderboard_fakes import make_record, write_record
from suite import cli
from suite.nightly import previous_nightly, release_name

N_BOOT = 300
SPECS = {"error": {"direction": "lower", "headline": True},
         "accuracy": {"direction": "higher", "headline": False}}


def write_results(root: Path, table: dict, failed=(), **kwargs) -> Path:
    """``table``: scorer -> per-seed errors (accuracy = 1 - error); ``failed``: (scorer, seed,
    status) cells."""
    for scorer, values in table.items():
        for seed, v in enumerate(values):
            write_record(root, make_record("icl_linear", scorer, seed,
                                           {"error": v, "accuracy": 1 - v}, specs=SPECS, **kwargs))
    for scorer, seed, status in failed:
        write_record(root, make_record("icl_linear", scorer, seed, status=status, specs=SPECS,
                                       **kwargs))
    return root


BASE = {"softmax": [0.20, 0.22, 0.21, 0.23], "ssa": [0.10, 0.12, 0.11, 0.13]}


def test_classify_rule():
    row = dict(mean=0.20, std=0.01, n=4, direction="lower")
    assert regressions.classify(row, {**row, "mean": 0.21})["status"] == "within noise"  # z = 1.4
    worse = regressions.classify(row, {**row, "mean": 0.25})
    assert worse["status"] == "regression"
    assert worse["se"] == pytest.approx(math.sqrt(2 * 0.01**2 / 4))
    assert worse["z"] == pytest.approx(0.05 / worse["se"])
    assert regressions.classify(row, {**row, "mean": 0.15})["status"] == "improvement"
    higher = dict(row, direction="higher")
    assert regressions.classify(higher, {**higher, "mean": 0.15})["status"] == "regression"
    assert regressions.classify(row, row)["status"] == "unchanged"
    # deterministic metric (std 0): any change beyond the relative floor counts, jitter does not
    det = dict(mean=1.0, std=0.0, n=3, direction="lower")
    assert regressions.classify(det, {**det, "mean": 1.0 + 1e-9})["status"] == "within noise"
    assert regressions.classify(det, {**det, "mean": 1.01})["status"] == "regression"
    # one seed: no std, so a change cannot be judged
    one = dict(mean=0.2, std=float("nan"), n=1, direction="lower")
    assert regressions.classify(one, {**one, "mean": 0.5})["status"] == "untested"
    assert regressions.classify(one, one)["status"] == "unchanged"


def test_regression_between_two_constructed_releases(tmp_path):
    before = build_board(write_results(tmp_path / "a", BASE), "nightly-2025-01-01", n_boot=N_BOOT)
    worse = {"softmax": BASE["softmax"], "ssa": [v + 0.08 for v in BASE["ssa"]]}
    after = build_board(write_results(tmp_path / "b", worse), "nightly-2025-01-02", n_boot=N_BOOT)
    comparison = regressions.compare(before, after)
    assert comparison.has_regression
    reg = comparison.regressions.to_dict(orient="records")
    assert {(r["scorer"], r["metric"]) for r in reg} == {("ssa", "error"), ("ssa", "accuracy")}
    assert all(r["delta"] * (1 if r["metric"] == "error" else -1) == pytest.approx(0.08)
               for r in reg)
    assert set(comparison.rows[comparison.rows["scorer"] == "softmax"]["status"]) == {"unchanged"}
    text = regressions.report(comparison)
    assert "**REGRESSION**" in text and "| icl_linear | cpu" in text and "ssa" in text
    # the reverse direction is an improvement, not a regression
    back = regressions.compare(after, before)
    assert not back.has_regression and len(back.improvements) == 2


def test_identical_releases_raise_no_alarm(tmp_path):
    root = write_results(tmp_path / "a", BASE, failed=[("relu", 0, "nan")])
    one = build_board(root, "nightly-2025-01-01", n_boot=N_BOOT)
    two = build_board(root, "nightly-2025-01-02", n_boot=N_BOOT)
    comparison = regressions.compare(one, two)
    assert not comparison.has_regression
    assert set(comparison.rows["status"]) <= {"unchanged", "untested"}
    assert "**No regression**" in regressions.report(comparison)


def test_more_failed_cells_is_a_regression(tmp_path):
    before = build_board(write_results(tmp_path / "a", BASE), "a", n_boot=N_BOOT)
    table = {"softmax": BASE["softmax"], "ssa": BASE["ssa"][:3]}
    after = build_board(write_results(tmp_path / "b", table, failed=[("ssa", 3, "diverged")]),
                        "b", n_boot=N_BOOT)
    comparison = regressions.compare(before, after)
    assert comparison.has_regression
    assert [(f["scorer"], f["before"], f["now"]) for f in comparison.failure_regressions] == [
        ("ssa", 0, 1)]
    assert "## More failed cells" in regressions.report(comparison)


def test_previous_nightly_and_release_names(tmp_path):
    for name in ("nightly-2025-01-01", "nightly-2025-01-03", "v1", "nightly-2025-01-05"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text("{}")
    assert previous_nightly(tmp_path, "nightly-2025-01-05").name == "nightly-2025-01-03"
    assert previous_nightly(tmp_path, "nightly-2025-01-04").name == "nightly-2025-01-03"
    assert previous_nightly(tmp_path, "nightly-2025-01-01") is None
    assert release_name("2025-02-03") == "nightly-2025-02-03"
    with pytest.raises(SystemExit, match="not a date"):
        release_name("yesterday")


def test_nightly_command_exit_status(tmp_path, capsys):
    results, releases = tmp_path / "results", tmp_path / "lb" / "releases"
    write_results(results, BASE)
    common = ["nightly", "--skip-run", "--results", str(results), "--releases", str(releases)]
    assert cli.main([*common, "--date", "2025-01-01"]) == 0
    first = (releases / "nightly-2025-01-01" / "REGRESSIONS.md").read_text()
    assert "No earlier nightly release" in first
    assert cli.main([*common, "--date", "2025-01-02"]) == 0  # same records: no alarm
    assert "No regression" in (releases / "nightly-2025-01-02" / "REGRESSIONS.md").read_text()
    for seed, v in enumerate(BASE["ssa"]):  # ssa v2 is worse on every seed
        write_record(results, make_record("icl_linear", "ssa", seed, {"error": v + 0.1,
                                          "accuracy": 0.9 - v}, specs=SPECS, scorer_version=2))
    assert cli.main([*common, "--date", "2025-01-03", "--html"]) == 1
    assert (releases / "nightly-2025-01-03" / "index.html").is_file()
    report = (releases / "nightly-2025-01-03" / "REGRESSIONS.md").read_text()
    assert "**REGRESSION**" in report and "scorer v1 → v2" in report
    assert "REGRESSION" in capsys.readouterr().out
    # --releases other than leaderboard/releases: the LEADERBOARD.md inside it.
    assert (releases / "LEADERBOARD.md").read_text().count("nightly-2025-01-0") >= 3
    assert not (tmp_path / "LEADERBOARD.md").exists()



def subcommand_parsers() -> dict:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices


def test_nightly_takes_every_option_of_run_as_run_declares_it():
    parsers = subcommand_parsers()
    run = {s: a for a in parsers["run"]._actions for s in a.option_strings}
    nightly = {s: a for a in parsers["nightly"]._actions for s in a.option_strings}
    assert "--fail-fast" in run and "--no-tuning" in run and "--ray-address" in run
    for option, action in run.items():
        assert option in nightly, f"scorebench nightly does not take {option}"
        twin = nightly[option]
        for field in ("dest", "choices", "help", "default", "type", "nargs", "const", "metavar"):
            assert getattr(twin, field) == getattr(action, field), (option, field)
    assert set(nightly) - set(run) == {"--releases", "--leaderboard", "--date", "--release",
                                       "--z", "--rtol", "--html", "--skip-run"}
    args = parsers["nightly"].parse_args(["--fail-fast", "--no-tuning", "--seeds", "2-3"])
    assert (args.fail_fast, args.no_tuning, args.seeds) == (True, True, [2, 3])
    assert not parsers["nightly"].parse_args([]).fail_fast


def test_vanished_rows_exit_non_zero_and_are_named(tmp_path, capsys):
    """Night 2 loses ssa's records (e.g. rejected by the validator): an alert, not 'missing'."""
    releases = tmp_path / "lb" / "releases"
    night1, night2 = tmp_path / "r1", tmp_path / "r2"
    write_results(night1, BASE)
    write_results(night2, {"softmax": BASE["softmax"]})
    common = ["nightly", "--skip-run", "--releases", str(releases)]
    assert cli.main([*common, "--results", str(night1), "--date", "2025-01-01"]) == 0
    assert cli.main([*common, "--results", str(night2), "--date", "2025-01-02"]) == 1
    out = capsys.readouterr().out
    assert "MISSING since nightly-2025-01-01: icl_linear [cpu] error ssa" in out
    report = (releases / "nightly-2025-01-02" / "REGRESSIONS.md").read_text()
    assert "**ROWS MISSING**" in report
    assert "- missing: icl_linear [cpu] error ssa" in report
    assert "- missing: icl_linear [cpu] accuracy ssa" in report


def test_regression_after_a_gap_is_caught_against_the_last_release_with_the_row(tmp_path,
                                                                                capsys):
    """Nights 1, 2 have ssa; night 3 lacks it; night 4's ssa is 0.08 worse than night 2's."""
    releases = tmp_path / "lb" / "releases"
    nights = {1: BASE, 2: BASE, 3: {"softmax": BASE["softmax"]},
              4: {"softmax": BASE["softmax"], "ssa": [v + 0.08 for v in BASE["ssa"]]}}
    codes = {}
    for night, table in nights.items():
        results = write_results(tmp_path / f"r{night}", table)
        codes[night] = cli.main(["nightly", "--skip-run", "--releases", str(releases),
                                 "--results", str(results), "--date", f"2025-01-0{night}"])
    assert codes == {1: 0, 2: 0, 3: 1, 4: 1}
    report = (releases / "nightly-2025-01-04" / "REGRESSIONS.md").read_text()
    assert "**REGRESSION**" in report
    assert "vs nightly-2025-01-02 (absent or empty in nightly-2025-01-03)" in report
    boards = [load_release(releases / f"nightly-2025-01-0{n}") for n in (1, 2, 3)]
    comparison = regressions.compare(boards, load_release(releases / "nightly-2025-01-04"))
    reg = comparison.regressions.to_dict(orient="records")
    assert {(r["scorer"], r["metric"], r["against"]) for r in reg} == {
        ("ssa", "error", "nightly-2025-01-02"), ("ssa", "accuracy", "nightly-2025-01-02")}
    expected_se = math.sqrt(2 * pd_std(BASE["ssa"]) ** 2 / 4)
    err = next(r for r in reg if r["metric"] == "error")
    assert err["delta"] == pytest.approx(0.08) and err["se"] == pytest.approx(expected_se)
    assert comparison.new == [] and comparison.missing == []
    # comparing with night 3 alone (the old rule) would have called these rows new
    assert len(regressions.compare(boards[-1], load_release(
        releases / "nightly-2025-01-04")).new) == 2


def pd_std(values) -> float:
    """Sample standard deviation (ddof 1), the board's std."""
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


PLUGIN = textwrap.dedent('''
    from dataclasses import dataclass
    import random
    from tasks import Metric, Task, TaskResult, register_task

    @register_task("leaderboard_nightly_probe")
    class NightlyProbe(Task):
        """A task without training: per-item errors drawn from the seed; softmax errs more."""
        name = "leaderboard_nightly_probe"
        version = 1
        track = "probe"

        @dataclass
        class Config:
            items: int = 60

        metrics = {"error": Metric("lower", headline=True)}

        def run(self, scorer, scorer_kwargs, seed, config, ctx):
            rng = random.Random(seed)
            rate = 0.5 if scorer == "softmax" else 0.1
            items = [float(rng.random() < rate) for _ in range(config.items)]
            return TaskResult(metrics={"error": sum(items) / len(items)},
                              items={"error": items})
''')


@pytest.mark.slow
def test_nightly_runs_missing_cells_through_the_harness(tmp_path):
    (tmp_path / "probe_plugin.py").write_text(PLUGIN)
    (tmp_path / "probe.toml").write_text(
        '[run]\ntasks = ["leaderboard_nightly_probe"]\nscorers = "softmax,sigmoid"\nseeds = 2\n')
    env = {**os.environ, "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                          os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "suite.cli", "nightly", "--plugin", "probe_plugin.py",
           "--profile", "probe.toml", "--results", "res", "--releases", "rel/releases"]
    first = subprocess.run([*cmd, "--date", "2025-01-01"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert first.returncode == 0, first.stderr + first.stdout
    records = sorted((tmp_path / "res" / "leaderboard_nightly_probe").rglob("*.json"))
    assert len(records) == 4
    second = subprocess.run([*cmd, "--date", "2025-01-02"], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert second.returncode == 0, second.stderr + second.stdout
    assert sorted((tmp_path / "res" / "leaderboard_nightly_probe").rglob("*.json")) == records
    readme = (tmp_path / "rel" / "releases" / "nightly-2025-01-02" / "README.md").read_text()
    assert "leaderboard_nightly_probe" in readme and "## Probes" in readme
    assert "No regression" in (tmp_path / "rel" / "releases" / "nightly-2025-01-02"
                               / "REGRESSIONS.md").read_text()
