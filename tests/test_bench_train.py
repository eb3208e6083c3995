"""``scorebench bench train``: training-step time per backbone and scorer, as a ratio to softmax."""
from __future__ import annotations

import statistics

import pytest

from suite.bench import BenchError, TrainBenchConfig, bench_train, train_records, train_rows
from suite.records import validate_record


def test_config_errors():
    with pytest.raises(BenchError, match="--backbones"):
        TrainBenchConfig(backbones=["rnn"]).check()
    with pytest.raises(BenchError, match="--size"):
        TrainBenchConfig(size="huge").check()
    with pytest.raises(BenchError, match="--fast"):
        TrainBenchConfig(fast_mode="turbo").check()


@pytest.fixture(scope="module")
def train_bench():
    config = TrainBenchConfig(backbones=["icl", "encoder"], repeats=2, warmup=1, size="tiny")
    return bench_train(["ssa", "stick_breaking"], config)


def test_ratios_to_softmax(train_bench):
    assert train_bench.scorers == ["softmax", "ssa", "stick_breaking"]
    rows = {(r["scorer"], r["backbone"]): r for r in train_rows(train_bench)}
    assert rows[("softmax", "icl")]["step_ratio"] == 1.0
    base = statistics.median(train_bench.variants["icl"]["softmax"].times)
    ssa = statistics.median(train_bench.variants["icl"]["ssa"].times)
    assert rows[("ssa", "icl")]["step_ratio"] == pytest.approx(ssa / base)
    assert rows[("ssa", "icl")]["tokens_per_s"] == pytest.approx(2 * 4 * 8 / ssa)
    assert rows[("stick_breaking", "encoder")]["step_ratio"] is None
    assert "causal-only" in rows[("stick_breaking", "encoder")]["error"]


def test_records(train_bench):
    records = {r["cell"]["scorer"]: r for r in train_records(train_bench)}
    for r in records.values():
        validate_record(r)
        assert r["cell"]["task"] == "bench_train" and r["cell"]["track"] == "cost"
        assert r["status"] == "ok"
    assert records["softmax"]["metrics"]["step_ratio_icl"] == 1.0
    assert records["ssa"]["metric_specs"]["tokens_per_s_encoder"]["direction"] == "higher"
    assert "step_ratio_encoder" not in records["stick_breaking"]["metrics"]
    assert "causal-only" in records["stick_breaking"]["message"]


@pytest.mark.slow
def test_decoder_backbone_and_fast_paths():
    config = TrainBenchConfig(backbones=["decoder"], repeats=1, warmup=1, fast_mode="auto",
                              size="tiny")
    result = bench_train(["ssa"], config)
    rows = {r["scorer"]: r for r in train_rows(result)}
    assert rows["softmax"]["step_ratio"] == 1.0 and rows["ssa"]["step_ratio"] > 0
