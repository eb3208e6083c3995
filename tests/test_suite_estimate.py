"""Estimates before running: from records of the same config and device class, else from a
calibration fitted on two short runs; and the dry-run table of `scorebench run`."""
from dataclasses import replace

import pytest

from leaderboard_fakes import make_record, write_record
from suite import cli
from suite.cells import Cell
from suite.estimate import calibrate, estimate, extrapolate, trained_steps

HW = "Test CPU, 2 cores"
CONFIG = {"n_layer": 2, "train_steps": 1000}


def cell(scorer="softmax", seed=0, task="icl_linear", config=CONFIG) -> Cell:
    return Cell(task, 1, "icl", scorer, 1, {}, "cpu", seed, dict(config))


def timed(scorer, seed, wall, *, hardware=HW, config=CONFIG, status="ok", task="icl_linear",
          resumed=False, paused=False):
    record = make_record(task, scorer, seed, {"error": 0.1} if status == "ok" else None,
                         status=status, config=dict(config), hardware=hardware)
    record["provenance"]["wall_time_s"] = wall
    if paused:   # a cell resumed from its training checkpoint, as the ICL tasks' runner records it
        record["provenance"]["resumed"] = {"cpu_time_s": 30.0, "wall_time_s": wall - 30.0}
    record.setdefault("extra", {})["resumed_from_checkpoint"] = resumed
    return record


def no_calibration(c, device):
    raise AssertionError("calibration must not run when records exist")


def test_records_with_known_wall_times_give_the_expected_total():
    records = [timed("softmax", 0, 10.0), timed("softmax", 1, 14.0), timed("softmax", 2, 12.0),
               timed("ssa", 0, 30.0),
               timed("ssa", 1, 999.0, hardware="1x NVIDIA H100"),          # other device class
               timed("ssa", 2, 999.0, config={**CONFIG, "n_layer": 4}),    # other config
               timed("relu", 0, 999.0, status="timeout"),                  # not a cost
               timed("ssa", 3, 1.0, resumed=True),              # timed the rest of a cell
               timed("ssa", 4, 900.0, paused=True)]      # earlier processes' wall, stretched
    cells = [cell("softmax", 3), cell("softmax", 4), cell("ssa", 1), cell("relu", 1)]
    [est] = estimate(cells, records, "cpu", hardware_name=HW, calibrator=no_calibration)
    # softmax: median(10, 14, 12) = 12 each; ssa: its own 30; relu: no record of its own and no
    # step cost, so the median over the scorers of this config and device class, median(12, 30)
    assert est.task == "icl_linear" and est.cells == 4
    assert est.seconds == pytest.approx(12 + 12 + 30 + 21)
    assert est.per_cell == pytest.approx(75 / 4)
    assert est.source == f"records (4 on {HW})"


def test_a_single_threaded_cpu_cell_is_timed_by_its_cpu_time_which_a_pause_does_not_stretch():
    def on_threads(scorer, seed, wall, cpu, threads, paused=False):
        record = timed(scorer, seed, wall, paused=paused)
        record["provenance"].update(threads=threads, cpu_time_s=cpu)
        return record

    records = [on_threads("softmax", 0, 2579.0, 123.0, 1),     # stopped for 41 minutes
               on_threads("softmax", 1, 130.0, 125.0, 1),
               on_threads("softmax", 2, 900.0, 127.0, 1, paused=True),  # CPU summed over runs
               on_threads("ssa", 0, 60.0, 110.0, 2),          # two threads: its wall time
               on_threads("ssa", 1, 70.0, 130.0, 2, paused=True)]      # wall spans the pause
    [est] = estimate([cell("softmax", 3), cell("ssa", 2)], records, "cpu", hardware_name=HW,
                     calibrator=no_calibration)
    assert est.seconds == pytest.approx(125.0 + 60.0)


def test_a_converged_config_is_timed_per_trained_step_at_the_steps_its_scorers_train():
    """Scorers of a converged config stop at different steps, so the records give seconds per
    step, times the scorer's own recorded steps, else the median of every recorded cell's."""
    converged = {**CONFIG, "stop": "converged"}

    def trained(scorer, seed, wall, steps):
        record = timed(scorer, seed, wall, config=converged)
        record["extra"]["train"] = {"steps": steps}
        return record

    records = [trained("softmax", 0, 100.0, 1000), trained("softmax", 1, 132.0, 1200),
               trained("ssa", 0, 480.0, 4000)]
    cells = [cell(s, 5, config=converged) for s in ("softmax", "ssa", "relu")]
    [est] = estimate(cells, records, "cpu", hardware_name=HW, calibrator=no_calibration)
    # softmax: 0.105 s a step x 1,100 steps; ssa: 0.12 x 4,000; relu: no records, so the
    # recorded scorers' median seconds a step, median(0.105, 0.12), x median(1000, 1200, 4000)
    assert est.seconds == pytest.approx(0.105 * 1100 + 0.12 * 4000 + 0.1125 * 1200)
    assert "per trained step, at the recorded median of 1200 steps" in est.source
    assert trained_steps({"train": {"every": {"steps": 300}, "some": {"steps": 200}}}) == 500


def test_a_scorer_without_records_of_a_converged_config_is_also_timed_at_the_cap():
    """The median step count of recorded scorers is low for one that never learns and trains
    every cell to the cap; the estimate says what that would cost beside its total. The cap
    counts every model a cell trains (icl_quantifiers: one per quantifier)."""
    converged = {**CONFIG, "stop": "converged", "train_steps": 5000}

    def trained(scorer, seed, wall, train, task="icl_linear"):
        record = timed(scorer, seed, wall, config=converged, task=task)
        record["extra"]["train"] = train
        return record

    records = [trained("softmax", 0, 100.0, {"steps": 1000}),
               trained("softmax", 1, 132.0, {"steps": 1200}),
               trained("softmax", 0, 50.0, {"all": {"steps": 300}, "most": {"steps": 200}},
                       task="icl_quantifiers")]
    cells = [cell(s, 5, config=converged) for s in ("softmax", "relu")] + [
        cell(s, 5, config=converged, task="icl_quantifiers") for s in ("softmax", "relu")]
    linear, quantifiers = estimate(cells, records, "cpu", hardware_name=HW,
                                   calibrator=no_calibration)
    # 0.105 s a step: softmax at its own 1,100 steps, relu at the median 1,100 or the cap 5,000
    assert linear.seconds == pytest.approx(0.105 * 1100 * 2)
    assert linear.at_cap == pytest.approx(0.105 * 1100 + 0.105 * 5000)
    # 0.1 s a step, 500 steps over two models, whose cap is 2 x 5,000 steps
    assert quantifiers.seconds == pytest.approx(0.1 * 500 * 2)
    assert quantifiers.at_cap == pytest.approx(0.1 * 500 + 0.1 * 10_000)
    # a config whose scorers all have records has no such bound
    assert estimate([cell("softmax", 5, config=converged)], records, "cpu", hardware_name=HW,
                    calibrator=no_calibration)[0].at_cap is None
    # cells that run only where a scorer never learns count in the bound alone, at the cap
    grown = [cell("relu", s, config={**converged, "lr": 5e-4}) for s in (1000, 1001)]
    with_growth, _ = estimate(cells, records, "cpu", hardware_name=HW,
                              calibrator=no_calibration, cap_only=grown)
    assert with_growth.cells == linear.cells and with_growth.seconds == linear.seconds
    assert with_growth.at_cap == pytest.approx(linear.at_cap + 2 * 0.105 * 5000)


def test_without_records_the_task_is_calibrated_once_per_config():
    calls = []

    def calibrator(c, device):
        calls.append(c)
        return 20.0, "calibration: fake"

    other = {**CONFIG, "n_layer": 4}
    cells = [cell("softmax", 0), cell("ssa", 0), cell("ssa", 0, config=other),
             cell("softmax", 0, task="saturation_probe", config={"rows": 8})]
    ests = estimate(cells, [timed("softmax", 0, 5.0, hardware="another CPU")], "cpu",
                    hardware_name=HW, calibrator=calibrator)
    assert [(e.task, e.cells, e.seconds, e.source) for e in ests] == [
        ("icl_linear", 3, 60.0, "calibration: fake"),
        ("saturation_probe", 1, 20.0, "calibration: fake")]
    assert len(calls) == 3


def test_a_profile_estimate_stands_in_where_there_are_no_records():
    declared = {"device": "1x H100 (assumed)", "seconds_per_cell": {"icl_linear": 36.0}}
    records = [timed("softmax", 0, 10.0, task="saturation_probe", config={"rows": 8})]
    ests = estimate([cell("softmax", 0), cell("ssa", 0),
                     cell("softmax", 1, task="saturation_probe", config={"rows": 8})],
                    records, "cpu", hardware_name=HW, calibrator=no_calibration,
                    declared=declared)
    assert [(e.task, e.seconds) for e in ests] == [("icl_linear", 72.0),
                                                   ("saturation_probe", 10.0)]
    assert "1x H100 (assumed), not measured here" in ests[0].source
    assert ests[1].source.startswith("records")


def test_a_failed_calibration_is_reported_not_raised():
    def broken(c, device):
        raise RuntimeError("calibration run of icl_linear ended oom")

    [est] = estimate([cell()], [], "cpu", hardware_name=HW, calibrator=broken)
    assert est.seconds is None and "ended oom" in est.source


def test_extrapolation_from_two_short_runs():
    # t = 3 + 0.02 * steps: t(50) = 4, t(100) = 5 -> t(1000) = 23
    assert extrapolate(1000, 50, 4.0, 5.0) == pytest.approx(23.0)
    # noise hiding the per-step cost: the slower run
    assert extrapolate(1000, 50, 5.0, 4.9) == pytest.approx(5.0)


def test_calibrate_runs_short_lengths_at_the_final_curriculum_length():
    seen = []

    def run(c, device):
        seen.append(c)
        return 2.0 + 0.01 * c.config["train_steps"] + (1.0 if len(seen) == 1 else 0.0)

    config = {"train_steps": 1000, "curriculum_start": 11, "curriculum_end": 21}
    seconds, how = calibrate(replace(cell(config=config), scorer="ssa", seed=3), "cpu", run=run)
    assert [c.config["train_steps"] for c in seen] == [50, 100, 50]
    assert all(c.scorer == "softmax" and c.seed == 0 and c.config["curriculum_start"] == 21
               for c in seen)
    assert seconds == pytest.approx(2.0 + 0.01 * 1000)  # the first run's warm-up is dropped
    assert "50 and 100 of 1000 train_steps" in how


def test_dry_run_prints_the_estimate_from_records(tmp_path, capsys, monkeypatch):
    from suite import provenance
    from suite.cells import expand
    from suite.profiles import load_profile
    from leaderboard.loading.schema import RECORDS_VERSION, cell_id

    monkeypatch.setattr(provenance, "hardware", lambda device: HW)
    results = tmp_path / "results"
    planned = expand(load_profile("smoke"), tasks="saturation_probe", scorers="softmax",
                     seeds=[0, 1, 2, 3, 4])
    for p, wall in zip(planned[:3], (40.0, 50.0, 60.0)):
        record = make_record("saturation_probe", "softmax", p.cell.seed, {"error": 0.1},
                             track=p.cell.track, hardware=HW, config=p.cell.config)
        record["cell"] = p.cell.to_dict()
        record["cell_id"] = cell_id(record["cell"])
        record["provenance"]["wall_time_s"] = wall
        record["provenance"]["records_version"] = RECORDS_VERSION
        write_record(results, record)
    code = cli.main(["run", "--profile", "smoke", "--tasks", "saturation_probe", "--scorers",
                     "softmax", "--seeds", "0-4", "--dry-run", "--results", str(results)])
    text = capsys.readouterr().out
    assert code == 0
    assert text.count("keep (ok)") == 3
    assert f"records (3 on {HW})" in text
    assert "100 s" in text  # seeds 3 and 4 to run, median 50 s each


def test_progress_line_names_done_failed_left_and_the_expected_finish():
    from suite.progress import Tally

    t = [1_700_000_000.0]  # 2023-11-14 22:13:20 UTC
    tally = Tally(clock=lambda: t[0])
    tally.start(["icl_linear"] * 10)
    assert tally.line().endswith("10 left; expected finish unknown")
    for failed in (False, True):
        t[0] += 60.0
        tally.finished("icl_linear", 60.0, failed)
    # 2 cells in 120 s, one at a time: 8 left take 480 s more
    assert tally.line() == ("progress: 2/10 cells done, 1 failed, 8 left; expected finish "
                            "2023-11-14 22:23 UTC (in 0:08:00)")
    for _ in range(8):
        tally.finished("icl_linear", 60.0, False)
    assert tally.line().endswith("10/10 cells done, 1 failed, 0 left; finished")


def test_the_expected_finish_weighs_each_task_by_its_own_cells():
    from suite.progress import Tally

    t = [1_700_000_000.0]
    tally = Tally(clock=lambda: t[0])
    tally.start(["decoder_lm"] * 3 + ["icl_linear"] * 30 + [None] * 5 + ["probe"],
                prior={"icl_linear": [10.0, 10.0]})                 # 5 n/a cells
    t[0] += 1.0
    tally.finished("probe", 0.0, False)  # too quick to time: no rate yet
    assert tally.line().endswith("expected finish unknown")
    t[0] += 599.0                        # two workers: two decoder cells of 600 s at once
    tally.finished("decoder_lm", 600.0, False)
    tally.finished("decoder_lm", 600.0, False)
    # (1 x 600 s + 30 x 10 s, the resumed records' mean) / 2 cells at once; the mean over the
    # cells done would say 31 x 600 / 2 = 9,300 s
    assert tally.line().endswith("(in 0:07:30)")
    t[0] += 10.0
    tally.add(["icl_linear"] * 2)        # a sweep's further points
    tally.finished("icl_linear", 20.0, False)
    # this run's icl cell replaces the prior: (600 + 31 x 20) / (1,220 s busy in 610 s)
    assert tally.line().endswith("(in 0:10:10)")
    tally.finished(None, 0.0, False)     # an n/a cell: done, and no weight on any mean
    assert tally.line().endswith("(in 0:10:10)") and "5/41 cells done" in tally.line()


def test_the_cells_still_running_count_toward_how_many_the_run_keeps_busy():
    from suite.progress import Tally

    t = [1_700_000_000.0]
    tally = Tally(clock=lambda: t[0])
    tally.start(["decoder_lm"] * 10)
    tally.started("a")
    tally.started("b")                   # two workers
    t[0] += 100.0
    tally.finished("decoder_lm", 100.0, False, "a")
    # 9 cells of 100 s left, 2 at a time (b has run as long as a): 450 s, not 900 s
    assert tally.line().endswith("(in 0:07:30)")
    tally.started("c")
    t[0] += 50.0
    tally.finished("decoder_lm", 150.0, False, "b")
    # (100 + 150 done, 50 s of c running) / 150 s elapsed = 2; 8 left at a mean of 125 s
    assert tally.line().endswith("(in 0:08:20)")


def test_the_fit_uses_cpu_time_and_scales_it_by_the_runs_wall_to_cpu_ratio():
    from suite.estimate import fit

    calls = []

    def run(c, device):
        cpu = 2.0 + 0.01 * c.config["train_steps"]
        calls.append(cpu)
        # the load triples the wall time of the 2s run only: a wall-time fit would find a slope
        # of (3 x 3 - 2.5) / 50 = 0.13 s per step instead of 0.01
        wall = cpu * (3.0 if len(calls) == 2 else 1.0)
        return wall, cpu

    result = fit(cell(config={"train_steps": 1000}), "cpu", run=run)
    ratio = (2.5 + 9.0 + 2.5) / (2.5 + 3.0 + 2.5)
    assert result.per_step == pytest.approx(0.01 * ratio)
    assert result.fixed == pytest.approx(2.0 * ratio)
    assert result.seconds == pytest.approx(12.0 * ratio)


def test_a_scorer_without_records_sits_on_the_records_line_of_time_against_step_cost():
    costs = {"softmax": 1.0, "ssa": 2.0, "relu": 1.5, "entmax_bisect": 8.0}
    # medians: softmax 12 at r = 1, ssa 26 at r = 2, relu 19 at r = 1.5: t = -2 + 14 r exactly,
    # a negative intercept, so the proportional fit through 0: b = (12 + 52 + 28.5) / 7.25
    records = [timed("softmax", 0, 10.0), timed("softmax", 1, 14.0),
               timed("ssa", 0, 24.0), timed("ssa", 1, 28.0), timed("relu", 0, 19.0)]
    cells = [cell("entmax_bisect", 0), cell("ssa", 2), cell("sigmoid", 0)]
    [est] = estimate(cells, records, "cpu", hardware_name=HW, calibrator=no_calibration,
                     step_cost=lambda task, scorer: costs.get(scorer, 1.0))
    b = (12 + 52 + 28.5) / 7.25
    assert est.seconds == pytest.approx(8.0 * b + 26 + 1.0 * b)
    assert est.source == f"records (5 on {HW}); 1 scorer(s) scaled by their step cost"


def test_the_cost_line_keeps_a_fixed_part_and_never_a_negative_slope():
    from suite.estimate import cost_line

    assert cost_line([(1.0, 80.0), (1.5, 85.0), (2.0, 90.0)]) == pytest.approx((70.0, 10.0))
    assert cost_line([(1.0, 90.0), (1.5, 80.0), (2.0, 82.0)]) == pytest.approx((82.0, 0.0))
    assert cost_line([(1.0, 12.0), (1.2, 14.0)]) == pytest.approx((2.0, 10.0))
    assert cost_line([(1.0, 10.0), (2.0, 30.0)]) == pytest.approx((0.0, 70.0 / 5.0))
    assert cost_line([(1.0, 12.0)]) == (0.0, 12.0)
    assert cost_line([(2.0, 12.0), (2.0, 16.0)]) == (0.0, 7.0)


def test_a_calibrated_task_scales_each_scorer_by_its_step_cost():
    ests = estimate([cell("softmax", 0), cell("ssa", 0), cell("stick_breaking", 0)], [], "cpu",
                    hardware_name=HW, calibrator=lambda c, d: (20.0, "calibration: fake"),
                    step_cost=lambda task, scorer: {"ssa": 1.5, "stick_breaking": 2.5}.get(
                        scorer, 1.0))
    assert ests[0].seconds == pytest.approx(20.0 * (1 + 1.5 + 2.5))


def test_step_cost_measures_a_backbone_once_and_only_for_training_tracks(monkeypatch):
    from suite.estimate import StepCost

    measured = []

    def measure(self, backbone):
        measured.append(backbone)
        return {"ssa": 1.25, "softmax": 1.0}, {}

    monkeypatch.setattr(StepCost, "measure", measure)
    cost = StepCost("cpu", ["softmax", "ssa"])
    assert cost("saturation_probe", "ssa") == 1.0
    assert cost("icl_linear", "softmax") == 1.0
    assert measured == []
    assert cost("icl_linear", "ssa") == 1.25 and cost("icl_mqar", "ssa") == 1.25
    assert cost("decoder_lm", "relu") is None           # not benched: unknown
    assert cost("encoder_mlm", "stick_breaking") is None
    assert measured == ["icl"]
    assert cost("decoder_lm", "ssa") == 1.25 and measured == ["icl", "decoder"]


def test_a_scorer_the_step_cost_bench_cannot_run_is_an_error_not_softmaxs_cost(monkeypatch):
    from suite.estimate import StepCost, StepCostError

    monkeypatch.setattr(StepCost, "measure", lambda self, backbone: (
        {"softmax": 1.0}, {"relu": "TypeError: weights() takes 2 positional arguments"}))
    cost = StepCost("cpu", ["softmax", "relu"])
    with pytest.raises(StepCostError, match="could not train scorer relu on the icl backbone "
                                            r"\(TypeError: weights\(\) takes 2"):
        cost("icl_linear", "relu")
    with pytest.raises(StepCostError, match="`scorebench check --scorers relu`"):
        cost("icl_mqar", "relu")
    with pytest.raises(StepCostError):
        estimate([cell("relu", 0)], [timed("softmax", 0, 10.0)], "cpu", hardware_name=HW,
                 calibrator=no_calibration, step_cost=cost)


def test_the_bench_times_only_a_few_recorded_scorers_that_span_their_cost():
    from suite.estimate import anchor_scorers

    times = {"softmax": 10.0, "relu": 11.0, "ssa": 12.0, "sigmoid": 14.0, "entmax15": 30.0}
    records = [timed(name, 0, wall) for name, wall in times.items()]
    records.append(timed("temperature_softmax", 0, 50.0))
    records[-1]["cell"]["scorer_kwargs"] = {"learnable": True}
    records.append(timed("cosformer", 0, 99.0, hardware="Another CPU"))
    assert anchor_scorers(records, HW, [cell("mine", 0)]) == {
        "icl": {"softmax", "ssa", "entmax15"}}
    assert anchor_scorers(records, HW, [cell("mine", 0, task="saturation_probe")]) == {}


def test_step_cost_measures_with_the_bench():
    from suite.estimate import StepCost

    ratios, errors = StepCost("cpu", ["softmax", "ssa"], repeats=3).measure("icl")
    assert errors == {}
    assert set(ratios) == {"softmax", "ssa"} and ratios["softmax"] == 1.0
    assert 0.2 < ratios["ssa"] < 20.0


def test_records_at_another_learning_rate_time_a_cell():
    """lr is tunable (tasks.config): it changes no cost, so a record at lr 1e-3 times a cell at
    lr 3e-4 of the same sizes; a size key still separates configs."""
    records = [timed("softmax", 0, 10.0, config={**CONFIG, "lr": 1e-3})]
    [est] = estimate([cell(config={**CONFIG, "lr": 3e-4})], records, "cpu", hardware_name=HW,
                     calibrator=no_calibration)
    assert est.seconds == pytest.approx(10.0)
    [other] = estimate([cell(config={**CONFIG, "lr": 3e-4, "n_layer": 4})], records, "cpu",
                       hardware_name=HW, calibrator=no_calibration)
    assert other.seconds is None and "calibration must not run" in other.source


def test_the_live_bar_shows_the_same_time_left_as_the_progress_line():
    import io

    from rich.console import Console

    from suite.cells import Cell
    from suite.executors import Started
    from suite.progress import RichReporter
    from suite.runner import CellJob

    def job(task, seed):
        return CellJob(Cell(task, 1, "icl", "softmax", 1, {}, "cpu", seed, {}))

    jobs = [job("decoder_lm", 0), job("icl_linear", 0), job("icl_linear", 1)]
    out = io.StringIO()
    t = [1_700_000_000.0]
    reporter = RichReporter(Console(file=out, force_terminal=True, color_system=None, width=200))
    reporter.tally.now = lambda: t[0]
    resumed = [{"status": "ok", "cell": {"task": "icl_linear"},
                "provenance": {"wall_time_s": 30.0}},
               {"status": "ok", "cell": {"task": "icl_linear"},   # one thread, paused 40 minutes
                "provenance": {"wall_time_s": 2430.0, "cpu_time_s": 30.0, "device": "cpu",
                               "threads": 1}}]
    with reporter:
        reporter.planned(jobs, resumed)
        reporter.event(Started(jobs[0], "worker 0"))
        t[0] += 600.0
        reporter.finished(jobs[0], {"status": "ok", "provenance": {"wall_time_s": 600.0}})
        reporter.progress.refresh()
    text = out.getvalue()
    # 2 icl cells left at the resumed records' 30 s, one cell at a time
    assert "expected finish 2023-11-14 22:24 UTC (in 0:01:00)" in text
    assert "ETA 0:01:00" in text


def test_sweep_and_reporting_cells_are_timed_by_records_of_their_role():
    """A sweep cell skips the reported evaluation: sweep records time sweep cells, tuned records
    time reporting cells, and a role without records falls back to the untuned cells' records."""
    def role(record_or_cell, name):
        if isinstance(record_or_cell, Cell):
            return replace(record_or_cell, role=name)
        record_or_cell["cell"]["role"] = name
        return record_or_cell

    records = [timed("softmax", 0, 100.0), role(timed("softmax", 1000, 40.0), "sweep"),
               role(timed("ssa", 1000, 60.0), "sweep"), role(timed("softmax", 1, 90.0), "tuned")]
    sweep = [role(cell("softmax", 1001), "sweep"), role(cell("ssa", 1001), "sweep")]
    [est] = estimate(sweep, records, "cpu", hardware_name=HW, calibrator=no_calibration)
    assert est.seconds == pytest.approx(40.0 + 60.0)
    [est] = estimate([role(cell("softmax", 2), "tuned")], records, "cpu", hardware_name=HW,
                     calibrator=no_calibration)
    assert est.seconds == pytest.approx(90.0)
    [est] = estimate([role(cell("softmax", 1000), "sweep")], records[:1], "cpu",
                     hardware_name=HW, calibrator=no_calibration)
    assert est.seconds == pytest.approx(100.0)


def test_the_slope_is_fitted_on_the_training_phase_where_the_record_times_it():
    """Training costs 0.05 s a step; the evaluation takes 19-22 s, varying between runs: the
    totals (25.5, 25.0 and 23.5 s at 50, 100 and 50 steps) would give 0.03 s a step and 52 s at
    1,000 steps; the training phase alone gives 0.05 s a step, the evaluation joins the fixed
    part, and 1,000 steps take 70 s."""
    from suite.estimate import fit

    evaluation = iter([22.0, 19.0, 20.0])

    def run(c, device):
        train = 1.0 + 0.05 * c.config["train_steps"]
        cpu = train + next(evaluation)
        return cpu, cpu, train

    result = fit(cell(config={"train_steps": 1000}), "cpu", run=run)
    assert result.per_step == pytest.approx(0.05)
    assert result.fixed == pytest.approx(1.0 + 19.0)
    assert result.seconds == pytest.approx(70.0)


def test_calibration_runs_on_the_threads_a_cell_gets_and_reads_the_training_phase(monkeypatch):
    import torch

    from suite import estimate as est
    from suite import runner

    seen = []

    def run_cell(job, device=None):
        seen.append(torch.get_num_threads())
        return {"status": "ok", "extra": {"cpu_time_s": {"train": 1.5}}}

    monkeypatch.setattr(runner, "run_cell", run_cell)
    before = torch.get_num_threads()
    wall, cpu, train = est._timed_run(cell(), "cpu", threads=1)
    assert seen == [1] and torch.get_num_threads() == before and train == 1.5
    est._timed_run(cell(), "cpu")
    assert seen == [1, before]


def test_a_converged_cell_is_timed_at_softmaxs_stop_with_its_cap_beside():
    """Softmax's best at step 1,000: a fixed wait of 5 evaluations of 100 steps stops it at
    1,500; a wait of half the run at 2,000, where tasks.stopping.Plateau stops it too."""
    from tasks.stopping import Plateau

    def run(c, device):
        return 2.0 + 0.01 * c.config["train_steps"]

    config = {"train_steps": 4000, "stop": "converged", "eval_every": 100, "patience": 5}
    seconds, how = calibrate(cell(config=config), "cpu", run=run, converged_at=1000)
    assert seconds == pytest.approx(2.0 + 0.01 * 1500)
    assert "1500 steps, its best at 1000" in how and "at its cap: 42 s" in how
    half = {**config, "patience_fraction": 0.5}
    seconds, _ = calibrate(cell(config=half), "cpu", run=run, converged_at=1000)
    assert seconds == pytest.approx(2.0 + 0.01 * 2000)
    rule = Plateau("higher", 5, 0.0, patience_fraction=0.5)
    for step in range(100, 4001, 100):
        rule.observe(step, min(step, 1000))
        if rule.done():
            break
    assert step == 2000
    capped, _ = calibrate(cell(config={**config, "stop": "steps"}), "cpu", run=run,
                          converged_at=1000)
    assert capped == pytest.approx(2.0 + 0.01 * 4000)        # a fixed length runs in full


def test_a_converged_config_recorded_on_other_hardware_is_timed_here_at_the_steps_it_trained():
    """A new machine: a step is timed here (the calibration's line), the steps come from the
    records made elsewhere; softmax stopped early, ssa ran to the cap, relu has no records."""
    from suite.estimate import Fit

    converged = {**CONFIG, "train_steps": 5000, "stop": "converged"}

    def trained(scorer, seed, steps, task="icl_linear"):
        record = timed(scorer, seed, 999.0, config=converged, task=task, hardware="Other CPU")
        record["extra"]["train"] = ({"steps": steps} if task == "icl_linear" else
                                    {"all": {"steps": steps}, "most": {"steps": steps // 2}})
        return record

    records = [trained("softmax", 0, 1000), trained("softmax", 1, 1400),
               trained("ssa", 0, 5000), trained("softmax", 0, 1200, task="icl_quantifiers")]
    cells = [cell(s, 5, config=converged) for s in ("softmax", "ssa", "relu")] + [
        cell("relu", 5, config=converged, task="icl_quantifiers")]
    fitted = []

    def fitter(c, device):
        fitted.append(c.task)
        return Fit(2.0, 0.01, "train_steps", 5000, "calibration: fake")

    linear, quantifiers = estimate(cells, records, "cpu", hardware_name=HW,
                                   calibrator=no_calibration, fitter=fitter)
    assert fitted == ["icl_linear", "icl_quantifiers"]        # one calibration per config
    # softmax at its median 1,200 steps, ssa at its 5,000, relu at the median of all, 1,400
    assert linear.seconds == pytest.approx((2 + 12) + (2 + 50) + (2 + 14))
    assert linear.at_cap == pytest.approx(linear.seconds + 0.01 * (5000 - 1400))
    assert "1400" in linear.source and "3 records trained on other hardware" in linear.source
    # two models, 1,200 and 600 steps: each at 900 of the config's steps on the line
    assert quantifiers.seconds == pytest.approx(2 + 0.01 * 900)
    # records of this machine time it by their own seconds, as before
    here = [{**r, "provenance": {**r["provenance"], "hardware": HW}} for r in records]
    assert estimate(cells[:1], here, "cpu", hardware_name=HW, calibrator=no_calibration,
                    fitter=fitter)[0].source.startswith(f"records (3 on {HW})")


def test_a_config_recorded_only_at_a_scorers_settings_is_anchored_by_its_scorers_name():
    """The bench times a scorer at its defaults, and the estimate reads a recorded variant (here
    entmax_bisect with learn_alpha) by its name: a config whose records on this machine are all of
    such variants is anchored by them, not left without a point to place the line on."""
    from suite.estimate import anchor_scorers

    variant = timed("entmax_bisect", 0, 40.0)
    variant["cell"]["scorer_kwargs"] = {"learn_alpha": True}
    default = timed("relu", 0, 12.0, config={**CONFIG, "n_layer": 4})
    other = cell("mine", 0, config={**CONFIG, "n_layer": 4})
    assert anchor_scorers([variant], HW, [cell("mine", 0)]) == {"icl": {"softmax", "entmax_bisect"}}
    assert anchor_scorers([variant, default], HW, [other]) == {"icl": {"softmax", "relu"}}

    [est] = estimate([cell("ssa", 0)], [variant], "cpu", hardware_name=HW,
                     calibrator=no_calibration,
                     step_cost=lambda task, scorer: {"entmax_bisect": 8.0, "ssa": 2.0}[scorer])
    assert est.seconds == pytest.approx(40.0 / 8.0 * 2.0)


def test_records_without_a_step_cost_to_place_the_line_fall_back_to_the_calibration():
    """Records on this machine of a scorer the bench did not time (a plugin not loaded now) place
    no line for another scorer: the config is calibrated, as one without records, not an error."""
    recorded = timed("gone_plugin", 0, 40.0)
    [est] = estimate([cell("ssa", 0)], [recorded], "cpu", hardware_name=HW,
                     calibrator=lambda c, d: (20.0, "calibration: fake"),
                     step_cost=lambda task, scorer: {"ssa": 2.0}.get(scorer))
    assert est.seconds == pytest.approx(20.0 * 2.0)
    assert est.source.startswith("calibration: fake")
    [own] = estimate([cell("gone_plugin", 1)], [recorded], "cpu", hardware_name=HW,
                     calibrator=no_calibration, step_cost=lambda task, scorer: None)
    assert own.seconds == pytest.approx(40.0)
