"""scripts/carry_over.py: a record carries over a change of the stopping rule exactly when a run
under the new rule would have ended where it ended (checked against real training runs under
both rules), and is then written as the new cell's record."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

import tasks
from suite.cells import resolve_config
from tasks import RunContext
from tasks.icl_linear import LinearConfig, mse_loss, sample_linear
from tasks.icl_training import ValidationData, build_model, train
from tasks.training import generator
from leaderboard_fakes import make_record, write_record

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("carry_over", ROOT / "scripts" / "carry_over.py")
carry_over = importlib.util.module_from_spec(spec)
spec.loader.exec_module(carry_over)

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = {"n_layer": 1, "n_head": 2, "n_embd": 8, "n_positions": 24, "batch_size": 8, "lr": 1e-3,
        "curriculum_start": 5, "curriculum_end": 9, "curriculum_every": 4, "eval_sequences": 8,
        "train_steps": 60, "eval_points": (5, 9), "eval_sigma_x": (1.0, 2.0),
        "eval_sigma": (1.0, 4.0), "eval_functions": 3, "stop": "converged", "eval_every": 5,
        "patience": 2}


class Scheduled:
    """A validation metric whose value at the k-th distinct model state it scores on every
    sequence is ``schedule[k]`` (its last value once spent)."""

    def __init__(self, schedule):
        self.schedule, self.values = list(schedule), {}
        self.data = ValidationData(*sample_linear(torch.Generator().manual_seed(0), 8, 9),
                                   self.score)

    def score(self, model, xs, ys):
        if len(xs) < len(self.data.xs):   # the learning curve's subset
            return torch.zeros(len(xs))
        state = float(sum(p.detach().double().sum() for p in model.parameters()))
        if state not in self.values:
            self.values[state] = self.schedule[min(len(self.values), len(self.schedule) - 1)]
        return torch.full((len(xs),), float(self.values[state]), dtype=torch.float64)


def stopping(schedule, **rule) -> dict:
    cfg = LinearConfig(**dict(TINY, **rule))
    model = build_model(cfg, "softmax", {}, 0, torch.device("cpu"))
    log = train(model, cfg, sample_linear, mse_loss, generator(0, "t"), RunContext(),
                validation=Scheduled(schedule).data, direction="lower")
    return log.stopping


@pytest.mark.parametrize("schedule, same", [
    ([3.0, 1.0, 2.0, 2.5, 2.6, 2.7], True),     # best at step 10: both rules stop at 20
    ([3.0, 2.0, 1.0, 1.5, 1.7, 0.5], False),    # best at 15: 25 under patience 2, later at 1/2
])
def test_the_replay_says_whether_a_run_under_the_new_rule_ends_where_it_ended(schedule, same):
    old = stopping(schedule)
    new_rule = {"patience": 2, "tolerance": 0.0, "patience_fraction": 0.5}
    stop = carry_over.replayed_stop(old, new_rule, "lower", first_step=9)
    assert carry_over.same_run(old, stop) is same
    new = stopping(schedule, patience_fraction=0.5)
    assert (new["stop_step"] == old["stop_step"]) is same
    if same:
        assert new["curve"] == old["curve"] and new["best_step"] == old["best_step"]


MQAR_RULE = {"stop": "converged", "train_steps": 2000, "eval_every": 100, "patience": 3,
             "tolerance": 0.005, "learned_at": 0.5, "target": 0.9}


def mqar_record(seed: int, values: list, reason: str, stop_step: int) -> dict:
    task = tasks.create_task("icl_mqar")
    config = resolve_config(task, MQAR_RULE)
    record = make_record("icl_mqar", "ssa", seed, {"accuracy": 0.9}, config=config,
                         task_version=task.version - 1)
    steps = [100 * (i + 1) for i in range(len(values))]
    best = max(range(len(values)), key=lambda i: (values[i], -i))
    record["extra"] = {"validation": {"metric": "val_accuracy", "direction": "higher"},
                       "train": {"stopping": {
                           "rule": "converged", "patience": 3, "tolerance": 0.005,
                           "eval_every": 100, "cap": 2000, "stop_step": stop_step,
                           "reason": reason, "learned": max(values) >= 0.5,
                           "best_step": steps[best], "best_value": values[best],
                           "learned_at": 0.5, "target": 0.9, "target_step": None,
                           "curve": {"step": steps, "value": values, "items": 8}}}}
    record["provenance"]["cpu_time_s"] = 12.5
    return record


def test_the_script_writes_the_records_that_carry_over_as_the_new_cells(tmp_path, capsys):
    task = tasks.create_task("icl_mqar")
    fast = [0.3, 0.9, 0.95, 0.95, 0.95, 0.95]        # best at 300, 3 stale: 600 under both rules
    slow = [0.3, 0.3, 0.3, 0.6, 0.7, 0.7, 0.7, 0.7]  # best at 500, cut at 800; 1/2 waits to 1,000
    plateau = [0.3] * 20                               # never learned: the cap under any rule
    paths = {name: write_record(tmp_path, mqar_record(seed, values, reason, stop))
             for name, seed, values, reason, stop in [
                 ("fast", 0, fast, "converged", 600), ("slow", 1, slow, "converged", 800),
                 ("plateau", 2, plateau, "cap", 2000)]}
    assert carry_over.main([str(tmp_path), "--task", "icl_mqar", "--set",
                            "patience_fraction=0.5"]) == 0
    out = capsys.readouterr().out
    assert "2 record(s) carried over to icl_mqar v%d, 1 left to run again" % task.version in out
    assert "stopped at 800 (converged); the new rule runs past its last evaluation" in out
    written = {p for p in tmp_path.glob("icl_mqar/ssa/*.json")} - set(paths.values())
    assert len(written) == 2
    for path in written:
        new = json.loads(path.read_text())
        old = json.loads(paths["fast" if new["cell"]["seed"] == 0 else "plateau"].read_text())
        cell = new["cell"]
        assert cell["task_version"] == task.version and cell["config"]["patience_fraction"] == 0.5
        assert resolve_config(task, cell["config"]) == cell["config"]
        assert new["cell_id"] == carry_over.cell_id(cell) == path.stem != old["cell_id"]
        assert new["extra"]["train"]["stopping"]["patience_fraction"] == 0.5
        assert new["provenance"]["carried_over"] == {
            "from": old["cell_id"], "task_version": task.version - 1,
            "set": {"patience_fraction": 0.5}}
        assert new["metrics"] == old["metrics"] and new["provenance"]["cpu_time_s"] == 12.5
    # a second pass writes the same records again, and no new file
    carry_over.main([str(tmp_path), "--task", "icl_mqar", "--set", "patience_fraction=0.5"])
    assert len(list(tmp_path.glob("icl_mqar/ssa/*.json"))) == 5


def test_a_setting_the_rule_does_not_have_is_refused():
    with pytest.raises(SystemExit):
        carry_over.main(["unused", "--task", "icl_mqar", "--set", "lr=0.1"])


def test_a_new_learned_at_keeps_a_run_it_would_not_have_stopped_and_replays_learned(
        tmp_path, capsys):
    """Raising MQAR's learned_at from 0.5 to 0.6: a run that stopped on a shelf at 0.55 (learned
    under 0.5) would train on, so it runs again; a fast run stops where it stopped; a run that
    never left the plateau stays at the cap, not learned; one that climbed to 0.599 by the cap,
    learned under 0.5, is not learned under 0.6; a record two versions old (another cap, another
    training) is not the previous version's and is left alone. The fast run's tuning block lists
    the sweep cells its choice consulted: they move to their new ids, carried or not."""
    task = tasks.create_task("icl_mqar")
    runs = {"fast": (0, [0.3, 0.9, 0.95, 0.95, 0.95, 0.95], "converged", 600),
            "shelf": (1, [0.3, 0.55, 0.55, 0.55, 0.55], "converged", 500),
            "plateau": (2, [0.3] * 20, "cap", 2000),
            "climb": (4, [0.3] + [0.5 + 0.0055 * i for i in range(19)], "cap", 2000)}
    records = {name: mqar_record(seed, values, reason, stop)
               for name, (seed, values, reason, stop) in runs.items()}
    assert records["climb"]["extra"]["train"]["stopping"]["learned"] is True
    records["fast"]["tuning"] = {"role": "report", "sweep_cells": sorted(
        records[name]["cell_id"] for name in ("shelf", "plateau"))}
    for record in records.values():
        write_record(tmp_path, record)
    older = mqar_record(3, [0.3] * 20, "cap", 2000)
    older["cell"]["task_version"] = task.version - 2
    older["cell_id"] = carry_over.cell_id(older["cell"])
    write_record(tmp_path, older)
    carry_over.main([str(tmp_path), "--task", "icl_mqar", "--set", "learned_at=0.6"])
    out = capsys.readouterr().out
    assert "3 record(s) carried over to icl_mqar v%d, 1 left to run again" % task.version in out
    assert "seed 1" in out and "stopped at 500 (converged); the new rule runs past" in out
    assert "seed 3" not in out
    carried = {json.loads(p.read_text())["cell"]["seed"]: json.loads(p.read_text())
               for p in tmp_path.glob("icl_mqar/ssa/*.json")
               if json.loads(p.read_text())["cell"]["task_version"] == task.version}
    assert sorted(carried) == [0, 2, 4]
    for seed, learned in ((0, True), (2, False), (4, False)):
        block = carried[seed]["extra"]["train"]["stopping"]
        assert (block["learned_at"], block["learned"]) == (0.6, learned)
        assert carried[seed]["cell"]["config"]["learned_at"] == 0.6
    new_ids = {name: carry_over.cell_id(carry_over.moved_cell(
        records[name]["cell"], task, {"learned_at": 0.6})) for name in ("shelf", "plateau")}
    assert new_ids["plateau"] == carried[2]["cell_id"]
    assert carried[0]["tuning"]["sweep_cells"] == sorted(new_ids.values())
