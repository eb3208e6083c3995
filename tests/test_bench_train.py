"""``scorebench bench train``: training-step time per backbone and scorer, as a ratio to softmax."""
from __future__ import annotations

import statistics

import pytest

from tasks.bench import BenchError, TrainBenchConfig, bench_train, train_rows
from suite.commands.bench import run_bench_cells
from leaderboard.loading.schema import validate_record


def test_config_errors():
    with pytest.raises(BenchError, match="config key 'backbones' must be one of"):
        TrainBenchConfig(backbones=["rnn"])
    with pytest.raises(BenchError, match="config key 'size' must be one of"):
        TrainBenchConfig(size="huge")
    with pytest.raises(BenchError, match="config key 'fast_mode' must be one of"):
        TrainBenchConfig(fast_mode="turbo")


def test_records():
    task = {"backbones": ["icl", "encoder"], "repeats": 2, "warmup": 1, "size": "tiny",
            "fast_mode": "off"}
    records = {r["cell"]["scorer"]: r for r in run_bench_cells(
        "bench_train", task, "softmax,ssa,stick_breaking", results=None)}
    for r in records.values():
        validate_record(r)
        assert r["cell"]["task"] == "bench_train" and r["cell"]["track"] == "cost"
        assert r["status"] == "ok", r["message"]
    assert records["softmax"]["metrics"]["step_ratio_icl"] == 1.0
    assert records["ssa"]["metric_specs"]["tokens_per_s_encoder"]["direction"] == "higher"
    assert records["ssa"]["extra"]["paths"] == {"icl": "reference", "encoder": "reference"}
    ssa = records["ssa"]["extra"]
    assert records["ssa"]["metrics"]["step_ratio_icl"] == pytest.approx(
        statistics.median(ssa["times_ms"]["icl"]) / statistics.median(ssa["softmax_times_ms"]["icl"]),
        rel=1e-3)
    assert records["ssa"]["metrics"]["tokens_per_s_icl"] == pytest.approx(
        2 * 4 * 8 / (statistics.median(ssa["times_ms"]["icl"]) / 1e3), rel=1e-3)
    assert "step_ratio_encoder" not in records["stick_breaking"]["metrics"]
    assert any("causal-only" in n for n in records["stick_breaking"]["extra"]["notes"])


@pytest.mark.slow
def test_decoder_backbone_and_fast_paths():
    config = TrainBenchConfig(backbones=["decoder"], repeats=1, warmup=1, fast_mode="auto",
                              size="tiny")
    result = bench_train(["ssa"], config)
    rows = {r["scorer"]: r for r in train_rows(result)}
    assert rows["softmax"]["step_ratio"] == 1.0 and rows["ssa"]["step_ratio"] > 0
    assert result.paths["softmax"] == {"decoder": "sdpa"}
    assert result.paths["ssa"]["decoder"] not in ("", "none")
