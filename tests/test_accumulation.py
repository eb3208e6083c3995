"""Every training task honours ``RunContext.accumulation`` (the out-of-memory retry): split into
micro-batches, the first step's loss is the same weighted mean as over the whole batch (for the
encoder, a mean over masked tokens, which micro-batches hold in unequal numbers)."""
from __future__ import annotations

import dataclasses

import pytest

from suite.profiles import load_profile
from suite.runner import run_cell
from tasks import get_task_class, list_tasks

from executors_support import job

# One training step and as little evaluation as the tasks allow: only the first loss is compared.
SHORT = {"icl_linear": {"train_steps": 2, "loss_log_points": 2, "curriculum_start": 9},
         "decoder_lm": {"steps": 1, "log_every": 1, "benchmarks": [], "ppl_sets": ["heldout"],
                        "heldout_max_tokens": 600},
         "encoder_mlm": {"max_steps": 1, "log_every": 1, "zorro_pairs": 1, "val_sentences": 10,
                         "dropout": 0.0}}   # dropout masks depend on the micro-batch split


def first_loss(record: dict) -> float:
    extra = record["extra"]
    extra = extra.get("train", extra)
    if "first_loss" in extra:
        return extra["first_loss"]
    curve = extra["loss_curve"]
    return curve["loss"][0] if isinstance(curve, dict) else curve[0][1]


def test_the_training_tasks_declare_it():
    assert {t for t in list_tasks() if get_task_class(t).supports_accumulation} >= {
        "icl_linear", "icl_quantifiers", "decoder_lm", "encoder_mlm"}


@pytest.mark.parametrize("task", [
    "icl_linear",
    pytest.param("decoder_lm", marks=pytest.mark.slow),
    pytest.param("encoder_mlm", marks=pytest.mark.slow)])
def test_split_batches_give_the_same_first_loss(task):
    overrides = {**load_profile("smoke").task_overrides.get(task, {}), **SHORT[task]}
    whole = run_cell(job(task, **overrides))
    split = run_cell(dataclasses.replace(job(task, **overrides), accumulation=2))
    assert whole["status"] == split["status"] == "ok", (whole["message"], split["message"])
    assert split["provenance"]["accumulation"] == 2
    assert first_loss(split) == pytest.approx(first_loss(whole), rel=1e-5, abs=1e-6)


def test_the_record_names_the_path_each_scorer_trained_with():
    overrides = {**load_profile("smoke").task_overrides["icl_linear"], **SHORT["icl_linear"]}
    record = run_cell(dataclasses.replace(job("icl_linear", "ssa", **overrides), fast="off"))
    assert record["status"] == "ok", record["message"]
    assert record["provenance"]["fast"] == "off"
    assert record["provenance"]["fast_paths"] == {"ssa": "reference"}
    assert set(record["extra"]["scorer_parameters"]) >= {"layer0.rho", "layer0.n"}
