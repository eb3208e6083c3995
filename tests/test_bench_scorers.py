"""``scorebench bench scorers``: options, the memory measure, ratios, cost-track records."""
from __future__ import annotations

import statistics

import pytest
import torch

from suite.bench import (BenchError, ScorerBenchConfig, bench_scorers, cpu_peak_bytes, make_mask,
                         parse_shapes, scorer_records, scorer_rows)
from suite.records import validate_record

TINY = [[2, 2, 16, 8]]


def test_parse_shapes():
    assert parse_shapes("8,8,128,32;4,8,512,64") == [(8, 8, 128, 32), (4, 8, 512, 64)]
    assert parse_shapes(" 2x2x16x8 ; ") == [(2, 2, 16, 8)]
    for bad in ("8,8,128", "8,8,128,0", "a,b,c,d", ";"):
        with pytest.raises(BenchError, match="--shapes"):
            parse_shapes(bad)


def test_masks():
    assert make_mask("none", 2, 4, "cpu") is None
    causal = make_mask("causal", 2, 4, "cpu")
    assert torch.equal(causal[0, 0], torch.ones(4, 4, dtype=torch.bool).tril())
    padded = make_mask("padding", 2, 8, "cpu")
    assert padded.shape == (2, 1, 8, 8)
    assert not padded[1, 0, :, 6:].any() and padded[0, 0, 7].all()
    with pytest.raises(BenchError, match="--mask"):
        make_mask("diagonal", 2, 4, "cpu")


def test_config_errors_name_the_option():
    for kwargs, option in (({"repeats": 0}, "--repeats"), ({"warmup": 0}, "--warmup"),
                           ({"fast_mode": "turbo"}, "--fast"), ({"clock": "sundial"}, "--clock"),
                           ({"dtype": "int8"}, "--dtype"), ({"block_size": 0}, "--block-size")):
        with pytest.raises(BenchError, match=option):
            ScorerBenchConfig(**kwargs).check()


def test_cpu_peak_memory_counts_tensors_live_at_once():
    def step():
        a = torch.empty(262144)          # 1 MiB
        b = torch.empty(262144)          # 1 MiB
        c = a + 1                        # 1 MiB, while a and b live
        del a, b, c
        d = torch.empty(131072)          # 0.5 MiB after the others are gone
        del d

    peak = cpu_peak_bytes(step)
    assert 3 * 2**20 <= peak <= 3 * 2**20 + 1024


@pytest.fixture(scope="module")
def tiny_bench():
    config = ScorerBenchConfig(shapes=TINY, repeats=3, warmup=1, fast_mode="off")
    return bench_scorers(["softmax", "ssa", "cosformer"], config)


def test_ratios_are_medians_over_the_sdpa_median(tiny_bench):
    label = "2x2x16x8"
    ref = tiny_bench.reference[label]
    assert len(ref.times) == 3 and ref.peak_bytes > 0
    for row in scorer_rows(tiny_bench):
        attend = tiny_bench.variants[label][row["scorer"]]["attend"]
        assert len(attend.times) == 3
        expected = statistics.median(attend.times) / statistics.median(ref.times)
        assert row["attend_ratio"] == pytest.approx(expected, rel=1e-12)
        assert row["best_ratio"] == row["attend_ratio"] and row["fast_ratio"] is None
        assert row["mem_ratio"] == pytest.approx(attend.peak_bytes / ref.peak_bytes)
    paths = {r["scorer"]: r["attend_path"] for r in scorer_rows(tiny_bench)}
    assert paths == {"softmax": "sdpa", "ssa": "reference", "cosformer": "linear"}


def test_records_are_cost_track_records(tiny_bench, tmp_path):
    records = scorer_records(tiny_bench)
    assert [r["cell"]["scorer"] for r in records] == ["softmax", "ssa", "cosformer"]
    for r in records:
        validate_record(r)
        assert r["status"] == "ok"
        assert r["cell"]["task"] == "bench_scorers" and r["cell"]["track"] == "cost"
        assert r["metric_specs"]["fwd_bwd_ratio_2x2x16x8"] == {"direction": "lower",
                                                                "headline": True}
        times = r["extra"]["times_ms"]["2x2x16x8"]["attend"]
        ref = r["extra"]["reference_ms"]["2x2x16x8"]
        assert r["metrics"]["attend_ratio_2x2x16x8"] == pytest.approx(
            statistics.median(times) / statistics.median(ref), rel=1e-3)
        assert len(r["extra"]["load_average_before"]) == 3
    # The same options give the same cells: a rerun replaces the records.
    assert len({r["cell_id"] for r in records}) == 3
    assert [r["cell_id"] for r in scorer_records(tiny_bench)] == [r["cell_id"] for r in records]


def test_leaderboard_shows_the_cost_track(tiny_bench, tmp_path):
    from leaderboard.aggregate import build_board
    from leaderboard.markdown import track_table
    from suite.store import ResultStore

    store = ResultStore(tmp_path)
    for record in scorer_records(tiny_bench):
        store.write(record)
    table = track_table(build_board(tmp_path), "cost")
    assert "bench_scorers" in table
    for name in ("softmax", "ssa", "cosformer"):
        assert name in table


def test_failing_scorer_is_an_error_record():
    import scorers
    from scorers import registry

    saved = dict(registry._REGISTRY)

    @scorers.register_scorer("bench_test_broken", family="test")
    class Broken(scorers.LogitsScorer):
        def weights(self, s, mask):
            raise RuntimeError("deliberately broken weights")

    try:
        config = ScorerBenchConfig(shapes=TINY, repeats=1, warmup=1, fast_mode="off")
        (record,) = scorer_records(bench_scorers(["bench_test_broken"], config))
    finally:
        registry._REGISTRY.clear()
        registry._REGISTRY.update(saved)
    validate_record(record)
    assert record["status"] == "error" and record["metrics"] == {}
    assert "deliberately broken weights" in record["message"]


@pytest.mark.slow
def test_cli_prints_and_records(tmp_path):
    from suite.cli import main

    assert main(["bench", "scorers", "--shapes", "2,2,32,8", "--scorers", "softmax,ssa,sigmoid",
                 "--repeats", "2", "--warmup", "1", "--results", str(tmp_path)]) == 0
    files = sorted(p.parent.name for p in tmp_path.glob("bench_scorers/*/*.json"))
    assert files == ["sigmoid", "softmax", "ssa"]
