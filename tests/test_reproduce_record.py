"""scripts/reproduce_record.py: a record retrains to the same evaluations and loss windows, bit
for bit, on the CPU kernels its provenance names; a value changed by one ulp is found, at its
step; a record of a task that does not train to convergence is refused."""
from __future__ import annotations

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

TINY_MQAR = {"n_layer": 1, "n_head": 2, "n_embd": 8, "batch_size": 8, "eval_sequences": 8,
             "stop": "converged", "patience": 3, "eval_every": 5, "n_positions": 16,
             "vocab_size": 64, "train_len": 16, "train_pairs": (2,), "eval_lengths": (16,),
             "eval_pairs": (2,), "train_steps": 60, "lr": 3e-3}


def tiny_cell() -> Cell:
    task = tasks.create_task("icl_mqar")
    return Cell(task="icl_mqar", task_version=task.version, track="icl", scorer="softmax",
                scorer_version=1, scorer_kwargs={}, profile="t", seed=3,
                config=resolve_config(task, TINY_MQAR))


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


def write(record: dict, path: Path) -> Path:
    with gzip.open(path, "wt") as f:
        json.dump(record, f)
    return path


def test_a_record_reproduces_and_a_value_one_ulp_off_is_found_at_its_step(tmp_path, capsys):
    record = run_cell(CellJob(tiny_cell()), device="cpu")
    assert record["status"] == "ok" and record["provenance"]["cpu_capability"]
    path = write(record, tmp_path / "record.json.gz")
    assert reproduce_record.main([str(path), "--steps", "30"]) == 0
    line = capsys.readouterr().out
    assert "identical" in line and "6 evaluations, 29 loss windows and the first loss up to step 30" in line

    windows = record["extra"]["train"]["loss_curve"]
    at = windows["step"].index(20)
    windows["loss"][at] = math.nextafter(windows["loss"][at], math.inf)
    write(record, path)
    assert reproduce_record.main([str(path), "--steps", "30"]) == 1
    line = capsys.readouterr().out
    assert "DIFFERS" in line and "1 of 36 values, first the loss window at step 20" in line


def test_a_record_of_other_kernels_reproduces_on_the_capability_it_names(tmp_path, capsys):
    """A record made on torch's scalar kernels (ATEN_CPU_CAPABILITY=default) states DEFAULT in
    its provenance, and the script retrains it on them."""
    path = tmp_path / "default.json.gz"
    made = subprocess.run([sys.executable, "-c", MAKE_RECORD, str(path)], cwd=ROOT,
                          env={**os.environ, "ATEN_CPU_CAPABILITY": "default"},
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    with gzip.open(path, "rt") as f:
        assert json.load(f)["provenance"]["cpu_capability"] == "DEFAULT"
    assert reproduce_record.main([str(path), "--steps", "30"]) == 0
    assert "on DEFAULT: 6 evaluations" in capsys.readouterr().out


def test_a_record_without_a_stopping_curve_is_refused(tmp_path):
    record = run_cell(CellJob(tiny_cell()), device="cpu")
    del record["extra"]["train"]["stopping"]
    path = write(record, tmp_path / "record.json.gz")
    with pytest.raises(SystemExit, match="not an ok record of a task trained to convergence"):
        reproduce_record.main([str(path)])
