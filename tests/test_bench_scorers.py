"""``bench_scorers`` (a cost-track task; ``scorebench bench scorers``): options, the memory
measure, ratios, records written by the harness's runner."""
from __future__ import annotations

import statistics

import pytest
import torch

from tasks.bench import (BenchError, ScorerBenchConfig, bench_scorers, cpu_peak_bytes, make_mask,
                         parse_shapes, scorer_rows)
from suite.commands.bench import run_bench_cells
from leaderboard.loading.schema import validate_record
from tasks import TaskError, create_task

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


def test_config_errors_name_the_key():
    for kwargs, key in (({"repeats": 0}, "repeats"), ({"warmup": 0}, "warmup"),
                        ({"fast_mode": "turbo"}, "fast_mode"), ({"clock": "sundial"}, "clock"),
                        ({"dtype": "int8"}, "dtype"), ({"block_size": 0}, "block_size"),
                        ({"shapes": [[2, 2, 16]]}, "shapes")):
        with pytest.raises(BenchError, match=f"config key '{key}'"):
            ScorerBenchConfig(**kwargs)
        with pytest.raises(TaskError, match=rf"\[tasks.bench_scorers\] config key '{key}'"):
            create_task("bench_scorers").config(kwargs)


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


TINY_TASK = {"shapes": TINY, "repeats": 3, "warmup": 1, "fast_mode": "off"}


@pytest.fixture(scope="module")
def tiny_records(tmp_path_factory):
    results = tmp_path_factory.mktemp("cost")
    return results, run_bench_cells("bench_scorers", TINY_TASK, "softmax,ssa,cosformer",
                                    results=str(results))


def test_records_are_cost_track_records(tiny_records):
    results, records = tiny_records
    assert [r["cell"]["scorer"] for r in records] == ["softmax", "ssa", "cosformer"]
    for r in records:
        validate_record(r)
        assert r["status"] == "ok", r["message"]
        assert r["cell"]["task"] == "bench_scorers" and r["cell"]["track"] == "cost"
        assert r["cell"]["profile"] == "bench" and r["cell"]["config"]["shapes"] == TINY
        spec = r["metric_specs"]["fwd_bwd_ratio_2x2x16x8"]
        assert (spec["direction"], spec["headline"]) == ("lower", True)
        assert "fast_ratio_2x2x16x8" not in r["metric_specs"]        # fast_mode off
        times = r["extra"]["times_ms"]["2x2x16x8"]["attend"]
        ref = r["extra"]["reference_ms"]["2x2x16x8"]
        assert r["metrics"]["attend_ratio_2x2x16x8"] == pytest.approx(
            statistics.median(times) / statistics.median(ref), rel=1e-3)
        assert len(r["extra"]["load_average_before"]) == 3
        assert (results / "bench_scorers" / r["cell"]["scorer"] / f"{r['cell_id']}.json").is_file()
    # The same options give the same cells: a rerun replaces the records.
    assert len({r["cell_id"] for r in records}) == 3
    again = run_bench_cells("bench_scorers", TINY_TASK, "softmax", results=None)
    assert again[0]["cell_id"] == records[0]["cell_id"]


def test_leaderboard_shows_the_cost_track(tiny_records):
    from leaderboard.method.aggregate import build_board
    from leaderboard.rendering.track_section import track_table

    table = track_table(build_board(tiny_records[0]), "cost")
    assert "bench_scorers" in table
    for name in ("softmax", "ssa", "cosformer"):
        assert name in table


def test_failing_scorer_is_an_error_record():
    import scorers
    from scorers import registry

    with registry.scoped():
        @scorers.register_scorer("bench_test_broken", family="test")
        class Broken(scorers.LogitsScorer):
            def weights(self, s, mask):
                raise RuntimeError("deliberately broken weights")

        (record,) = run_bench_cells("bench_scorers", dict(TINY_TASK, repeats=1),
                                    "bench_test_broken", results=None)
    validate_record(record)
    assert record["status"] == "error" and record["metrics"] == {}
    assert "deliberately broken weights" in record["message"]


def test_a_bare_wildcard_leaves_the_benches_out_and_a_pattern_selects_them():
    from suite.cells import resolve_tasks

    assert not {"bench_scorers", "bench_train"} & set(resolve_tasks("*"))
    assert resolve_tasks("bench_*") == ["bench_scorers", "bench_train"]
    assert "bench_train" in resolve_tasks("icl_linear,bench_train")


@pytest.mark.slow
def test_cli_prints_and_records(tmp_path):
    from suite.cli import main

    assert main(["bench", "scorers", "--shapes", "2,2,32,8", "--scorers", "softmax,ssa,sigmoid",
                 "--repeats", "2", "--warmup", "1", "--fast", "off", "--results",
                 str(tmp_path)]) == 0
    files = sorted(p.parent.name for p in tmp_path.glob("bench_scorers/*/*.json"))
    assert files == ["sigmoid", "softmax", "ssa"]


def test_a_length_sweep_gives_cost_against_length_and_its_slope(tmp_path):
    from leaderboard.rendering.plots import loglog_slope, plot_scaling, scaling_series
    from tasks.bench import parse_lengths, sweep_shapes

    assert parse_lengths("256, 512,1024") == [256, 512, 1024]
    for bad in ("", "a,b", "0,256"):
        with pytest.raises(BenchError, match="--lengths"):
            parse_lengths(bad)
    assert sweep_shapes([(1, 8, 1, 64), (2, 4, 9, 32)], [128, 256]) == [
        (1, 8, 128, 64), (1, 8, 256, 64), (2, 4, 128, 32), (2, 4, 256, 32)]
    # a scorer whose time grows like L^2 and memory like L, SDPA's both like L
    shapes = [[1, 8, n, 64] for n in (128, 256, 512)]
    metrics, ref_ms, ref_mb = {}, {}, {}
    for b, h, n, d in shapes:
        label = f"{b}x{h}x{n}x{d}"
        metrics[f"fwd_bwd_ms_{label}"] = 1e-3 * n * n
        metrics[f"peak_mem_mb_{label}"] = 0.5 * n
        ref_ms[label], ref_mb[label] = [0.1 * n] * 3, 0.25 * n
    record = {"status": "ok", "cell": {"scorer": "quad", "config": {"shapes": shapes}},
              "metrics": metrics, "extra": {"reference_ms": ref_ms, "reference_peak_mb": ref_mb}}
    series = scaling_series([record])
    assert list(series) == [(1, 8, 64)]
    quad = series[(1, 8, 64)]["quad"]
    assert [p[0] for p in quad] == [128, 256, 512]
    assert loglog_slope([(p[0], p[1]) for p in quad]) == pytest.approx(2.0)
    assert loglog_slope([(p[0], p[2]) for p in quad]) == pytest.approx(1.0)
    sdpa = series[(1, 8, 64)]["softmax (SDPA)"]
    assert loglog_slope([(p[0], p[1]) for p in sdpa]) == pytest.approx(1.0)
    assert loglog_slope([(1, 2.0)]) is None
    (path,) = plot_scaling([record], tmp_path / "scaling.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    one = dict(record, cell={"scorer": "quad", "config": {"shapes": shapes[:1]}})
    assert scaling_series([one]) == {}                          # one length: no sweep
