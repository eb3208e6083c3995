"""scripts/reproduce_record.py: a record retrains to the same evaluations, loss windows and first
loss, bit for bit, on the CPU kernels its provenance names, for one model and for
icl_quantifiers' two; a value one ulp off is found at its step; the partial loss window the cut
leaves is not compared; a record this checkout cannot retrain is named and the others go on."""
from __future__ import annotations

import copy
import gzip
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tasks
from suite.cells import Cell, resolve_config
from suite.runner import CellJob, run_cell

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("reproduce_record",
                                              ROOT / "scripts" / "reproduce_record.py")
reproduce_record = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reproduce_record)

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = {"n_layer": 1, "n_head": 2, "n_embd": 8, "batch_size": 8, "eval_sequences": 8,
        "stop": "converged", "patience": 20, "eval_every": 5, "loss_log_points": 10}
CONFIGS = {     # a loss window every 6 steps
    "icl_mqar": dict(TINY, n_positions=16, vocab_size=64, train_len=16, train_pairs=(2,),
                     eval_lengths=(16,), eval_pairs=(2,), train_steps=60, lr=3e-3),
    "icl_quantifiers": dict(TINY, n_positions=24, curriculum_start=5, curriculum_end=9,
                            curriculum_every=4, train_steps=60, eval_points=(5, 10),
                            eval_sigmas=(1.0, 3.0), deviant_points=9, deviant_values=(10.0,)),
}

MAKE_RECORD = """
import gzip, json, sys
import torch
sys.path.insert(0, ".")
from tests.test_reproduce_record import tiny_cell
from suite.runner import CellJob, run_cell
torch.set_num_threads(1)
with gzip.open(sys.argv[1], "wt") as f:
    json.dump(run_cell(CellJob(tiny_cell()), device="cpu"), f)
"""


def tiny_cell(task: str = "icl_mqar") -> Cell:
    t = tasks.create_task(task)
    return Cell(task=task, task_version=t.version, track="icl", scorer="softmax",
                scorer_version=1, scorer_kwargs={}, profile="t", seed=3,
                config=resolve_config(t, CONFIGS[task]))


def write(record: dict, path: Path) -> str:
    with gzip.open(path, "wt") as f:
        json.dump(record, f)
    return str(path)


def one_ulp_up(values: list, at: int) -> None:
    values[at] = math.nextafter(values[at], math.inf)


def test_a_record_reproduces_and_each_value_one_ulp_off_is_found_at_its_step(tmp_path, capsys):
    record = run_cell(CellJob(tiny_cell()), device="cpu")
    assert record["status"] == "ok" and record["provenance"]["cpu_capability"]
    train = record["extra"]["train"]
    edits = {"evaluation": lambda t: one_ulp_up(t["stopping"]["curve"]["value"],
                                                t["stopping"]["curve"]["step"].index(20)),
             "loss window": lambda t: one_ulp_up(t["loss_curve"]["loss"],
                                                 t["loss_curve"]["step"].index(18)),
             "first loss": lambda t: t.update(first_loss=math.nextafter(t["first_loss"], 0))}
    paths = [write(record, tmp_path / "record.json.gz")]
    for name, edit in edits.items():
        changed = copy.deepcopy(record)
        edit(changed["extra"]["train"])
        paths.append(write(changed, tmp_path / f"{name.replace(' ', '_')}.json.gz"))
    other = copy.deepcopy(record)
    other["cell"]["task_version"] += 1
    paths.insert(1, write(other, tmp_path / "other_version.json.gz"))

    # up to step 33: evaluations at 5-30, full loss windows at 6-30 (the one the cut ends at 33
    # holds 3 steps, the record's at 36 holds 6)
    assert 33 < train["loss_curve"]["step"][-1]
    assert reproduce_record.main([*paths, "--steps", "33"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5
    assert "identical" in lines[0] and "6 evaluations, 5 loss windows and the first loss" in lines[0]
    assert "NOT CHECKED" in lines[1] and "check out a commit of that version" in lines[1]
    assert "1 of 12 values, first the evaluation at step 20" in lines[2]
    assert "1 of 12 values, first the loss window at step 18" in lines[3]
    assert "1 of 12 values, first the first loss at step 0" in lines[4]
    assert all("DIFFERS" in line and "try --capability" not in line for line in lines[2:])


def test_both_models_of_icl_quantifiers_are_compared_each_on_its_own_record(tmp_path, capsys):
    record = run_cell(CellJob(tiny_cell("icl_quantifiers")), device="cpu")
    assert record["extra"]["quantifiers"] == ["every", "some"]
    changed = copy.deepcopy(record)
    some = changed["extra"]["train"]["some"]["stopping"]["curve"]
    one_ulp_up(some["value"], some["step"].index(15))
    paths = [write(record, tmp_path / "q.json.gz"), write(changed, tmp_path / "some.json.gz")]
    assert reproduce_record.main([*paths, "--steps", "30"]) == 1
    same, differs = capsys.readouterr().out.splitlines()
    assert "identical" in same and "12 evaluations, 10 loss windows and the first loss of 2 " \
        "models up to step 30" in same
    assert "1 of 24 values, first the some evaluation at step 15" in differs


def test_a_record_of_other_kernels_reproduces_on_the_capability_it_names(tmp_path, capsys):
    """A record made on torch's scalar kernels (ATEN_CPU_CAPABILITY=default) states DEFAULT in
    its provenance, and the script retrains it on them whatever --capability says."""
    path = tmp_path / "default.json.gz"
    made = subprocess.run([sys.executable, "-c", MAKE_RECORD, str(path)], cwd=ROOT,
                          env={**os.environ, "ATEN_CPU_CAPABILITY": "default"},
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    with gzip.open(path, "rt") as f:
        assert json.load(f)["provenance"]["cpu_capability"] == "DEFAULT"
    assert reproduce_record.main([str(path), "--steps", "30", "--capability", "AVX2"]) == 0
    assert "on DEFAULT: 6 evaluations" in capsys.readouterr().out


def test_records_it_cannot_retrain_are_named_with_the_reason(tmp_path, capsys):
    record = run_cell(CellJob(tiny_cell()), device="cpu")
    no_curve = copy.deepcopy(record)
    del no_curve["extra"]["train"]["stopping"]
    gpu = copy.deepcopy(record)
    gpu["provenance"]["device"] = "cuda"
    paths = [write(no_curve, tmp_path / "no_curve.json.gz"), write(gpu, tmp_path / "gpu.json.gz")]
    assert reproduce_record.main([*paths, "--steps", "4"]) == 1
    no_curve_line, gpu_line = capsys.readouterr().out.splitlines()
    assert "NOT CHECKED: not an ok record of a task trained to convergence" in no_curve_line
    assert "NOT CHECKED: run on cuda; this script retrains CPU records only" in gpu_line
    assert reproduce_record.main([write(record, tmp_path / "r.json.gz"), "--steps", "4"]) == 1
    assert "no evaluation up to step 4; raise --steps past the task's eval_every (5)" in \
        capsys.readouterr().out
