"""The stopping rule of the ICL tasks' converged mode (tasks/stopping.py): where it stops, the
cap and "not learned", the best state restored before the reported evaluation, the record's
block, the settings' errors, and a cell identity that stays as it was while the mode is off."""
import gzip
import json
from pathlib import Path

import pytest
import torch

import tasks
from leaderboard.loading.choice import stopping_blocks
from suite.cells import config_object, resolve_config
from tasks import RunContext, TaskError
from tasks import icl_linear
from tasks.icl_linear import LinearConfig, mse_loss, sample_linear
from tasks.icl_training import Curriculum, ValidationData, build_model, train
from tasks.stopping import Plateau, replay
from tasks.training import generator

ROOT = Path(__file__).resolve().parents[1]
ICL = ("icl_quantifiers", "icl_linear", "icl_mqar")
STOP_KEYS = ("stop", "patience", "tolerance", "eval_every")
TINY_LINEAR = {"n_layer": 1, "n_head": 2, "n_embd": 8, "n_positions": 24, "batch_size": 8,
               "lr": 1e-3, "curriculum_start": 5, "curriculum_end": 9, "curriculum_every": 10,
               "eval_sequences": 8, "train_steps": 40, "eval_points": (5, 9),
               "eval_sigma_x": (1.0, 2.0), "eval_sigma": (1.0, 4.0), "eval_functions": 3}
TINY_QUANTIFIERS = {"n_layer": 1, "n_head": 2, "n_embd": 8, "n_positions": 24, "batch_size": 8,
                    "curriculum_start": 5, "curriculum_end": 9, "curriculum_every": 4,
                    "eval_sequences": 8, "eval_points": (5, 10), "eval_sigmas": (1.0, 3.0),
                    "deviant_points": 9, "deviant_values": (10.0,)}
TINY_MQAR = {"n_layer": 1, "n_head": 2, "n_embd": 8, "n_positions": 16, "batch_size": 8,
             "vocab_size": 64, "train_len": 16, "train_pairs": (2,), "eval_lengths": (16,),
             "eval_pairs": (2,)}
CONVERGED = dict(TINY_LINEAR, curriculum_every=4, stop="converged", eval_every=5, patience=2)

pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------------------- the rule


def run_rule(values, direction="lower", patience=3, tolerance=0.0, every=100):
    """Feed ``values`` at steps every, 2 every, ... until the rule stops; the rule."""
    rule = Plateau(direction, patience, tolerance)
    for i, value in enumerate(values):
        rule.observe((i + 1) * every, value)
        if rule.done():
            break
    return rule


def test_a_plateau_stops_the_rule_within_the_patience_after_it():
    values = [1.0 / k for k in range(1, 6)] + [0.2] * 20   # falls until step 500, then flat
    rule = run_rule(values, patience=3)
    block = rule.block(cap=2500, eval_every=100, items=512)
    assert (block["best_step"], block["best_value"]) == (500, 0.2)
    assert block["stop_step"] == 800 and block["reason"] == "converged" and block["learned"]
    assert block["curve"]["step"] == list(range(100, 900, 100)) and block["curve"]["items"] == 512


def test_gains_within_the_tolerance_do_not_count_and_higher_is_better_when_declared():
    rule = run_rule([0.5, 0.9, 0.905, 0.91, 0.915, 0.92], "higher", patience=3, tolerance=0.02)
    assert (rule.best_step, rule.best_value, rule.step[-1]) == (200, 0.9, 500)
    assert rule.done()


def test_a_metric_that_never_improves_trains_on_to_the_cap_not_learned():
    rule = run_rule([2.0, 2.0, 2.5, None, 2.0, 3.0, 2.0], patience=2)
    block = rule.block(cap=700, eval_every=100, items=8)
    assert not rule.done() and block["stop_step"] == 700
    assert block["reason"] == "cap" and block["learned"] is False and block["best_step"] == 100
    assert block["curve"]["value"][3] is None


def two_phase_climb():
    """A run shaped like ssa's measured MQAR curve at 2.5e-4 (issue #49): an escape to 0.93 by
    step 1,000, a noisy shelf below 0.935 to step 1,800 (ssa's: from 6,000 to 11,500), a second
    climb to 0.99 by step 2,400, then flat. Steps every 100."""
    return ([0.3, 0.5, 0.7, 0.8, 0.85, 0.88, 0.9, 0.91, 0.92, 0.93]
            + [0.925 + 0.008 * (i % 2) for i in range(8)]
            + [0.94, 0.95, 0.96, 0.97, 0.98, 0.99] + [0.99] * 60)


def rule_on(values, **kw):
    rule = Plateau("higher", 5, 0.005, learned_at=0.5, target=0.95, **kw)
    for i, value in enumerate(values):
        rule.observe((i + 1) * 100, value)
        if rule.done():
            break
    return rule


def test_a_fixed_patience_cuts_a_slow_second_climb_that_a_relative_wait_sees():
    fixed = rule_on(two_phase_climb())
    assert fixed.done() and fixed.step[-1] == 1500            # 5 evaluations past 0.93 at 1,000
    assert (fixed.best_value, fixed.target_step) == (0.93, None)
    half = rule_on(two_phase_climb(), patience_fraction=0.5)
    assert half.done() and half.best_value == 0.99 and half.target_step == 2000
    # trained twice as long as it took to reach its best, then stopped
    assert (half.best_step, half.step[-1]) == (2400, 4800)
    assert half.block(cap=9000, eval_every=100, items=8)["patience_fraction"] == 0.5


def test_the_relative_wait_is_the_fraction_of_the_evaluations_so_far_and_never_below_patience():
    def stop_of(**kw):
        rule = Plateau("higher", 4, 0.0, **kw)
        for step in range(100, 3000, 100):
            rule.observe(step, min(step, 600) / 1000)          # rises to its best at 600, then flat
            if rule.done():
                return rule
    assert stop_of().step[-1] == 1000                            # 4 evaluations past the best
    rule = stop_of(patience_fraction=0.5)
    assert rule.step[-1] == 1200 and rule.stale == 6 and rule.wait() == 6   # ceil(0.5 x 12)
    assert stop_of(patience_fraction=0.1).step[-1] == 1000      # ceil(0.1 x 10) < patience
    assert "patience_fraction" not in stop_of().block(cap=3000, eval_every=100, items=1)


# ------------------------------------------------------------------------------- training


class Scheduled:
    """A validation metric that gives a state it has not scored yet the next value of
    ``schedule`` (its last one once spent) and a state it has scored the same value again; it
    notes the state (the sum of the parameters) of every evaluation on every sequence."""

    def __init__(self, schedule, sequences=8):
        self.schedule, self.states, self.values = list(schedule), [], {}
        gen = torch.Generator().manual_seed(0)
        self.data = ValidationData(*sample_linear(gen, sequences, 9), self.score)

    def score(self, model, xs, ys):
        if len(xs) < len(self.data.xs):   # the learning curve's subset
            return torch.zeros(len(xs))
        state = fingerprint(model)
        self.states.append(state)
        if state not in self.values:
            self.values[state] = self.schedule[min(len(self.values), len(self.schedule) - 1)]
        return torch.full((len(xs),), float(self.values[state]), dtype=torch.float64)


def fingerprint(model) -> float:
    return float(sum(p.detach().double().sum() for p in model.parameters()))


def train_with(metric: Scheduled, **overrides):
    cfg = LinearConfig(**dict(CONVERGED, **overrides))
    model = build_model(cfg, "softmax", {}, 0, torch.device("cpu"))
    log = train(model, cfg, sample_linear, mse_loss, generator(0, "t"), RunContext(),
                validation=metric.data, direction="lower")
    return model, log


def test_training_stops_after_the_patience_and_ends_in_the_best_state():
    metric = Scheduled([3.0, 2.0, 1.0, 1.5, 1.7, 0.5])   # best at the 3rd evaluation (step 15)
    model, log = train_with(metric)
    stop = log.stopping
    assert (stop["stop_step"], stop["reason"], stop["best_step"], stop["best_value"]) == \
        (25, "converged", 15, 1.0)
    assert log.steps == 25 and log.loss_curve["step"][-1] == 25
    assert stop["curve"] == {"step": [5, 10, 15, 20, 25], "value": [3.0, 2.0, 1.0, 1.5, 1.7],
                             "items": 8}
    at_best, at_stop, final = metric.states[2], metric.states[4], metric.states[-1]
    assert at_best != at_stop                     # the last state is not the best one ...
    assert final == at_best == fingerprint(model)  # ... and training ends in the best one


def test_training_that_never_improves_runs_to_the_cap():
    metric = Scheduled([1.0])
    model, log = train_with(metric, train_steps=22)
    stop = log.stopping
    assert log.steps == 22 and stop["stop_step"] == 22 and stop["cap"] == 22
    assert stop["curve"]["step"] == [5, 10, 15, 20, 22]
    assert stop["reason"] == "cap" and stop["learned"] is False and stop["best_step"] == 5
    assert fingerprint(model) == metric.states[0]


def test_training_never_stops_before_the_curriculums_last_length():
    assert [Curriculum(11, 21, 2, 100).last_growth(), Curriculum(5, 10, 2, 10).last_growth(),
            Curriculum(7, 7, 2, 10).last_growth(), Curriculum(5, 9, 0, 10).last_growth()] == \
        [500, 30, 0, 0]
    metric = Scheduled([3.0, 1.0, 2.0])   # the rule holds at step 20, the last growth's step
    _, log = train_with(metric, curriculum_every=10)
    assert (log.stopping["stop_step"], log.stopping["best_step"]) == (25, 10)
    assert log.final_points == 9


def test_converged_mode_needs_the_metrics_direction():
    cfg = LinearConfig(**CONVERGED)
    model = build_model(cfg, "softmax", {}, 0, torch.device("cpu"))
    with pytest.raises(ValueError, match="direction"):
        train(model, cfg, sample_linear, mse_loss, generator(0, "t"), RunContext(),
              validation=Scheduled([1.0]).data)


def test_the_reported_evaluation_scores_the_best_state(monkeypatch):
    metric = Scheduled([3.0, 1.0, 2.0, 2.5, 0.1])   # best at step 10, stop at step 20
    evaluated = []
    evaluate = icl_linear.evaluate

    def spy(model, *args):
        evaluated.append(fingerprint(model))
        return evaluate(model, *args)

    monkeypatch.setattr(icl_linear, "validation_data", lambda cfg, seed: metric.data)
    monkeypatch.setattr(icl_linear, "evaluate", spy)
    task = tasks.create_task("icl_linear")
    result = task.run("softmax", {}, 0, task.config(CONVERGED), RunContext())
    stop = result.extra["train"]["stopping"]
    assert (stop["stop_step"], stop["best_step"], stop["reason"]) == (20, 10, "converged")
    assert evaluated == [metric.states[1]] != [metric.states[3]]
    assert result.step == 20 and result.extra["train"]["steps"] == 20
    assert result.extra["validation"]["value"] == 1.0
    json.dumps(result.extra, allow_nan=False)


@pytest.mark.parametrize("name", ICL)
def test_every_icl_task_records_its_stop(name):
    task = tasks.create_task(name)
    section = {"icl_linear": dict(TINY_LINEAR, curriculum_every=4),
               "icl_quantifiers": TINY_QUANTIFIERS, "icl_mqar": TINY_MQAR}[name]
    section = dict(section, train_steps=12, stop="converged", eval_every=4, patience=1)
    result = task.run("softmax", {}, 0, task.config(section), RunContext(sweep=True))
    train_blocks = result.extra["train"]
    blocks = [train_blocks[q] for q in ("every", "some")] if name == "icl_quantifiers" \
        else [train_blocks]
    for block in blocks:
        stop = block["stopping"]
        assert stop["reason"] in ("converged", "cap") and stop["cap"] == 12
        assert stop["curve"]["step"][-1] == stop["stop_step"] == block["steps"]
        assert stop["curve"]["items"] == result.extra["validation"]["items"] // len(blocks)
    assert result.step == max(b["steps"] for b in blocks)
    assert result.metrics        # a sweep cell trained to convergence runs the evaluation too


# ------------------------------------------------------------------------------- settings


@pytest.mark.parametrize("overrides, message", [
    ({"patience": 0}, r"\[tasks.icl_linear\] config key 'patience' must be >= 1, got 0"),
    ({"tolerance": -0.1}, r"\[tasks.icl_linear\] config key 'tolerance' must be >= 0, got -0.1"),
    ({"patience_fraction": 1.0},
     r"\[tasks.icl_linear\] config key 'patience_fraction' must be < 1, got 1.0"),
    ({"eval_every": 0}, r"config key 'eval_every' must be >= 1, got 0"),
    ({"stop": "early"}, r"config key 'stop' must be one of \['steps', 'converged'\], got 'early'"),
    ({"stop": "converged", "train_steps": 50, "eval_every": 100},
     r"\[tasks.icl_linear\] config key 'train_steps' \(the cap under stop = 'converged'\) must be "
     r">= eval_every=100, got 50"),
])
def test_bad_stopping_settings_are_errors_naming_the_key_and_its_range(overrides, message):
    with pytest.raises(TaskError, match=message):
        tasks.create_task("icl_linear").config(overrides)


def test_a_cap_below_eval_every_is_allowed_when_training_counts_steps():
    cfg = tasks.create_task("icl_linear").config({"train_steps": 50, "eval_every": 100})
    assert cfg.stop == "steps" and cfg.train_steps == 50


@pytest.mark.parametrize("name", ICL)
def test_the_stopping_settings_enter_a_cells_config_only_when_on(name):
    task = tasks.create_task(name)
    assert not set(STOP_KEYS) & set(resolve_config(task, {"patience": 3}))
    on = resolve_config(task, {"stop": "converged", "tolerance": 0.01})
    assert {k: on[k] for k in STOP_KEYS} == {"stop": "converged", "patience": 5,
                                             "tolerance": 0.01, "eval_every": 100}


@pytest.mark.parametrize("name", ICL)
def test_committed_icl_records_keep_their_configs(name):
    """A committed record's config resolves to itself: the stopping rule's keys stay out of a
    steps-mode config, so a cell's id changes only with the task's version."""
    task = tasks.create_task(name)
    paths = sorted((ROOT / "leaderboard" / "records" / name).glob("*/*.json.gz"))[:5]
    assert paths
    for record in (json.loads(gzip.decompress(p.read_bytes())) for p in paths):
        assert resolve_config(task, record["cell"]["config"]) == record["cell"]["config"]


def committed_converged_records():
    """(task, config, record) of every committed ok record of a task trained to convergence."""
    for name in ICL:
        task = tasks.create_task(name)
        for path in sorted((ROOT / "leaderboard" / "records" / name).glob("*/*.json.gz")):
            record = json.loads(gzip.decompress(path.read_bytes()))
            if record["status"] == "ok" and record["cell"]["config"].get("stop") == "converged":
                yield task, config_object(task, record["cell"]["config"]), record


def test_every_committed_converged_run_stopped_where_its_own_rule_stops_its_recorded_curve():
    """The rule replayed on each committed run's evaluations ends it where the record says, at
    the cap exactly when the rule never stops it; its best and target steps are the curve's."""
    checked = 0
    for task, cfg, record in committed_converged_records():
        direction = record["extra"]["validation"]["direction"]
        sign = 1 if direction == "higher" else -1
        for block in stopping_blocks(record["extra"]):
            rule = Plateau.of(cfg, direction)
            stop = replay(rule, block["curve"], cfg.curriculum().last_growth() + 1)
            where = f"{task.name} {record['cell_id']}"
            assert block["reason"] == ("cap" if stop is None else "converged"), where
            assert block["stop_step"] == (cfg.train_steps if stop is None else stop), where
            assert block["curve"]["step"][-1] == block["stop_step"], where
            assert (block["best_step"], block["best_value"]) == (rule.best_step, rule.best_value)
            finite = [(s, v) for s, v in zip(block["curve"]["step"], block["curve"]["value"])
                      if v is not None]
            if block.get("target") is not None:
                assert block["target_step"] == next(
                    (s for s, v in finite if sign * v >= sign * block["target"]), None), where
            checked += 1
    assert checked >= 300


# ------------------------------------------------------------------- learned_at and target


def plateau_then_escape():
    """An MQAR-like curve: a plateau at 0.3 from step 200 to 1,500, an escape to 0.95 by 2,000,
    then flat."""
    return ([0.1, 0.3] + [0.3 + 0.001 * (i % 2) for i in range(13)]
            + [0.5, 0.7, 0.85, 0.92, 0.95] + [0.95] * 20)


def test_a_plateau_below_learned_at_never_stops_the_rule_and_the_target_times_the_escape():
    without = run_rule(plateau_then_escape(), "higher", patience=5, tolerance=0.005)
    assert without.done() and without.step[-1] == 700          # stopped on the plateau
    rule = Plateau("higher", 5, 0.005, learned_at=0.5, target=0.9)
    for i, value in enumerate(plateau_then_escape()):
        rule.observe((i + 1) * 100, value)
        if rule.done():
            break
    block = rule.block(cap=4000, eval_every=100, items=512)
    assert block["learned_at"] == 0.5 and block["learned"] and block["reason"] == "converged"
    assert block["best_step"] == 2000 and block["stop_step"] == 2500
    assert (block["target"], block["target_step"]) == (0.9, 1900)


def test_a_run_that_never_passes_learned_at_reads_not_learned_at_the_cap():
    rule = Plateau("lower", 2, 0.0, learned_at=0.5, target=0.1)
    for i, value in enumerate([2.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.8]):
        rule.observe((i + 1) * 10, value)
        assert not rule.done()
    block = rule.block(cap=70, eval_every=10, items=8)
    assert block["reason"] == "cap" and block["learned"] is False
    assert block["target_step"] is None and block["best_value"] == 0.8


@pytest.mark.parametrize("overrides, message", [
    ({"stop": "converged", "train_steps": 7999, "softmax_converged_at": 2000},
     r"\[tasks.icl_mqar\] config key 'train_steps' \(the cap under stop = 'converged'\) must be "
     r">= 4 x softmax_converged_at = 8000, got 7999"),
    ({"stop": "converged", "target": 1.5},
     r"\[tasks.icl_mqar\] config key 'target' must lie in the validation metric's range \[0, 1\], "
     r"got 1.5"),
    ({"stop": "converged", "learned_at": -0.1},
     r"config key 'learned_at' must lie in the validation metric's range \[0, 1\], got -0.1"),
])
def test_a_cap_below_four_softmax_convergences_or_a_level_outside_the_range_is_an_error(
        overrides, message):
    with pytest.raises(TaskError, match=message):
        tasks.create_task("icl_mqar").config(overrides)


def test_the_measured_softmax_convergence_never_enters_a_cells_identity():
    task = tasks.create_task("icl_mqar")
    on = {"stop": "converged", "train_steps": 8000}
    ids = {resolve_config(task, dict(on, softmax_converged_at=at), lambda k: "profile")
           .get("softmax_converged_at", "absent") for at in (1000, 2000)}
    assert ids == {"absent"}


def test_a_converged_cell_killed_mid_training_records_nothing_and_runs_again(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    prof = tmp_path / "p.toml"
    prof.write_text('extends = "smoke"\n[run]\ntasks = "icl_linear"\nscorers = "softmax"\n'
                    'seeds = 1\n[tuning]\nenabled = false\n[tasks.icl_linear]\n'
                    'stop = "converged"\ntrain_steps = 240\neval_every = 20\npatience = 1000\n'
                    + "".join(f"{k} = {json.dumps(v)}\n" for k, v in TINY_LINEAR.items()
                              if k != "train_steps"))
    results = tmp_path / "r"
    command = [sys.executable, "-m", "suite.cli", "run", "--profile", str(prof),
               "--results", str(results)]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 120
    while not list(results.rglob("*.claim")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.5)                                   # inside the cell's training
    assert proc.poll() is None, proc.communicate()[0]
    os.killpg(proc.pid, signal.SIGKILL)              # the run and any worker it started
    proc.wait()
    assert not list(results.rglob("*.json")) and not list(results.rglob("*.json.gz"))
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = [p for p in results.rglob("*.json*") if not p.name.endswith(".claim")]
    opener = gzip.open if path.suffix == ".gz" else open
    record = json.loads(opener(path, "rt").read())
    stop = record["extra"]["train"]["stopping"]
    assert record["status"] == "ok" and stop["reason"] == "cap" and stop["stop_step"] == 240
    assert not list(results.rglob("resume"))         # the runner removes a finished cell's checkpoints
    assert stop["curve"]["step"] == list(range(20, 260, 20)) and record["metrics"]
