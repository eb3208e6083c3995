"""Loading records and aggregating them: bad files reported and skipped, superseded versions kept
apart, failures counted, statistics and tiers on constructed data with known answers."""
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from leaderboard.method.aggregate import aggregate, build_board
from leaderboard.method.board import Board
from leaderboard.rendering.track_section import track_table
from leaderboard.rendering.notes import outside_overall
from leaderboard.loading.records import load_records
from leaderboard_fakes import make_record, populate, write_raw, write_record
from markdown_support import markdown_tables, row

N_BOOT = 1000


def rows_of(board, **where):
    out = board.rows
    for k, v in where.items():
        out = out[out[k] == v]
    return out.to_dict(orient="records")


def test_malformed_records_are_reported_and_skipped(tmp_path):
    good = make_record("icl_linear", "softmax", 0, {"error": 0.1})
    write_record(tmp_path, good)
    write_raw(tmp_path, "icl_linear/softmax/broken.json", '{"schema_version": 1, "cell_id": ')
    write_raw(tmp_path, "icl_linear/softmax/future.json",
              json.dumps({**good, "schema_version": 99}))
    no_status = {k: v for k, v in good.items() if k != "status"}
    write_raw(tmp_path, "icl_linear/softmax/nostatus.json", json.dumps(no_status))
    edited = json.loads(json.dumps(good))
    edited["cell"]["seed"] = 5  # cell changed after the run: id no longer matches
    write_raw(tmp_path, "icl_linear/softmax/edited.json", json.dumps(edited))
    vision = make_record("icl_linear", "softmax", 1, {"error": 0.1}, track="vision")
    write_raw(tmp_path, "icl_linear/softmax/vision.json", json.dumps(vision))
    write_raw(tmp_path, "notes.json", "[1, 2, 3]")
    write_raw(tmp_path, ".work/icl_linear/softmax/cache.json", "{garbage")  # scratch: ignored

    loaded = load_records(tmp_path)
    assert [r.path for r in loaded.records] == [f"icl_linear/softmax/{good['cell_id']}.json"]
    reasons = {p.path: p.reason for p in loaded.problems}
    assert set(reasons) == {"icl_linear/softmax/broken.json", "icl_linear/softmax/future.json",
                            "icl_linear/softmax/nostatus.json", "icl_linear/softmax/edited.json",
                            "icl_linear/softmax/vision.json", "notes.json"}
    assert "not readable as JSON" in reasons["icl_linear/softmax/broken.json"]
    assert "schema_version is 99" in reasons["icl_linear/softmax/future.json"]
    assert "status" in reasons["icl_linear/softmax/nostatus.json"]
    assert "does not match the cell" in reasons["icl_linear/softmax/edited.json"]
    assert "'vision' is not one of" in reasons["icl_linear/softmax/vision.json"]
    assert all(p.skipped for p in loaded.problems)

    board = aggregate(loaded, n_boot=N_BOOT)
    assert len(board.problems) == 6
    assert rows_of(board, metric="error")[0]["n"] == 1


def test_a_row_names_the_cpu_kernels_of_its_records_where_they_are_kept(tmp_path):
    """Seeds run on AVX2 and on AVX512 kernels are different runs of one cell: a row's hardware
    says which; records from before ``cpu_capability`` was kept, and GPU records, name the
    machine alone."""
    for seed, capability in ((0, "AVX2"), (1, "AVX512"), (2, None)):
        record = make_record("icl_linear", "softmax", seed, {"error": 0.1})
        if capability:
            record["provenance"]["cpu_capability"] = capability
        write_record(tmp_path, record)
    gpu = make_record("icl_linear", "ssa", 0, {"error": 0.1}, hardware="1x H100")
    gpu["provenance"].update(device="cuda", cpu_capability="AVX512")
    write_record(tmp_path, gpu)
    board = aggregate(load_records(tmp_path), n_boot=N_BOOT)
    (softmax,) = rows_of(board, scorer="softmax")
    assert softmax["hardware"] == ["Test CPU, 2 cores", "Test CPU, 2 cores (AVX2)",
                                   "Test CPU, 2 cores (AVX512)"]
    assert rows_of(board, scorer="ssa")[0]["hardware"] == ["1x H100"]


def test_missing_results_dir_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_records(tmp_path / "nope")


def test_null_items_keep_the_record_without_items(tmp_path):
    rec = make_record("icl_linear", "softmax", 0, {"error": 0.5}, items={"error": [1, None]})
    write_record(tmp_path, rec)
    loaded = load_records(tmp_path)
    assert len(loaded.records) == 1 and loaded.records[0].items == {}
    assert len(loaded.problems) == 1 and not loaded.problems[0].skipped
    assert "null is not allowed in items" in loaded.problems[0].reason


def test_a_not_applicable_entry_that_contradicts_the_record_is_reported_and_left_out(tmp_path):
    specs = {"error": {"direction": "lower", "headline": True},
             "deviant": {"direction": "lower", "headline": False},
             "other": {"direction": "lower", "headline": False}}
    rec = make_record("icl_linear", "softmax", 0, {"error": 0.5, "deviant": None}, specs=specs)
    rec["extra"]["not_applicable"] = {"error": "cannot", "deviant": "no rows after the deviant",
                                      "other": 3}
    write_record(tmp_path, rec)
    loaded = load_records(tmp_path)
    (record,) = loaded.records
    assert record.metrics == {"error": 0.5}   # a null metric with a reason is n/a
    assert record.not_applicable == {"deviant": "no rows after the deviant"}
    reasons = " | ".join(p.reason for p in loaded.problems)
    assert len(loaded.problems) == 2 and not any(p.skipped for p in loaded.problems)
    assert "names 'error', which the record reports; its value is used" in reasons
    assert "'other' must give the reason as text" in reasons


def test_superseded_versions_are_listed_not_mixed(tmp_path):
    for seed in range(3):
        write_record(tmp_path, make_record("icl_linear", "ssa", seed, {"error": 0.9},
                                           task_version=2, scorer_version=1))
        write_record(tmp_path, make_record("icl_linear", "ssa", seed, {"error": 0.1 + seed / 100},
                                           task_version=2, scorer_version=2))
        write_record(tmp_path, make_record("icl_linear", "softmax", seed, {"error": 0.8},
                                           task_version=1))
        write_record(tmp_path, make_record("icl_linear", "softmax", seed, {"error": 0.2},
                                           task_version=2))
    board = build_board(tmp_path, n_boot=N_BOOT)
    ssa = rows_of(board, scorer="ssa", metric="error")
    assert len(ssa) == 1 and ssa[0]["scorer_version"] == 2 and ssa[0]["n"] == 3
    assert ssa[0]["mean"] == pytest.approx(0.11)
    softmax = rows_of(board, scorer="softmax", metric="error")
    assert len(softmax) == 1 and softmax[0]["task_version"] == 2
    assert softmax[0]["mean"] == pytest.approx(0.2)
    assert board.superseded.to_dict(orient="records") == [
        dict(task="icl_linear", task_version=1, scorer="softmax", scorer_version=1,
             profile="cpu", n_cells=3, reason="task icl_linear v1 < v2"),
        dict(task="icl_linear", task_version=2, scorer="ssa", scorer_version=1,
             profile="cpu", n_cells=3, reason="scorer ssa v1 < v2")]
    assert board.meta["n_used"] == 6 and board.meta["n_superseded"] == 6


def test_superseded_counts_exact(tmp_path):
    for seed in range(2):
        write_record(tmp_path, make_record("icl_linear", "ssa", seed, {"error": 0.9},
                                           scorer_version=1))
        write_record(tmp_path, make_record("icl_linear", "ssa", seed, {"error": 0.1},
                                           scorer_version=2))
    board = build_board(tmp_path, n_boot=N_BOOT)
    assert board.superseded.to_dict(orient="records") == [dict(
        task="icl_linear", task_version=1, scorer="ssa", scorer_version=1, profile="cpu",
        n_cells=2, reason="scorer ssa v1 < v2")]
    assert rows_of(board, metric="error")[0]["values"] == [0.1, 0.1]


def test_failures_are_rows_and_survivor_means_are_flagged(tmp_path):
    for seed in range(4):
        write_record(tmp_path, make_record("icl_linear", "softmax", seed,
                                           {"error": 0.2 + seed / 100}))
    write_record(tmp_path, make_record("icl_linear", "ssa", 0, {"error": 0.1}))
    write_record(tmp_path, make_record("icl_linear", "ssa", 1, {"error": 0.12}))
    write_record(tmp_path, make_record("icl_linear", "ssa", 2, status="diverged", step=40,
                                       message="loss exploded"))
    write_record(tmp_path, make_record("icl_linear", "ssa", 3, {"error": None},
                                       message="error was nan"))
    for seed in range(2):
        write_record(tmp_path, make_record("icl_linear", "relu", seed, status="nan", step=3))
    board = build_board(tmp_path, n_boot=N_BOOT)
    ssa = rows_of(board, scorer="ssa", metric="error")[0]
    assert ssa["n"] == 2 and ssa["mean"] == pytest.approx(0.11)
    assert ssa["failures"] == {"diverged": 1, "null": 1}
    assert ssa["n_failed"] == 1 and ssa["n_null"] == 1 and ssa["survivors_only"]
    relu = rows_of(board, scorer="relu", metric="error")[0]
    assert relu["n"] == 0 and relu["failures"] == {"nan": 2} and math.isnan(relu["mean"])
    (stats,) = markdown_tables(track_table(board, "icl"))["icl_linear · error ↓"]
    ssa, softmax, relu = (row(stats, s) for s in ("ssa", "softmax", "relu"))
    assert re.fullmatch(r"0\.110* \[[-\d.]+, [-\d.]+\] †", ssa["mean [95% CI]"])
    assert ssa["failures"] == "diverged 1, null 1" and "†" not in softmax["mean [95% CI]"]
    assert relu["mean [95% CI]"] == "all failed" and relu["failures"] == "nan 2"
    failed = board.failed_cells.to_dict(orient="records")
    assert {(r["scorer"], r["seed"], r["status"]) for r in failed} == {
        ("ssa", 2, "diverged"), ("ssa", 3, "ok, null error"), ("relu", 0, "nan"),
        ("relu", 1, "nan")}
    overall = {r["scorer"]: r for r in board.overall.to_dict(orient="records")}
    assert overall["relu"]["score"] == 0.0 and overall["relu"]["tasks_failed"] == 1


def _seed_level(tmp_path, table, metric="error", direction="lower", task="icl_linear", **kw):
    floor, ceiling = (1.0, 0.0) if direction == "lower" else (0.0, 1.0)
    specs = {metric: {"direction": direction, "headline": True, "floor": floor,
                      "ceiling": ceiling}}
    for scorer, values in table.items():
        for seed, v in enumerate(values):
            write_record(tmp_path, make_record(task, scorer, seed, {metric: v}, specs=specs, **kw))


def test_statistics_of_one_row(tmp_path):
    values = [0.30, 0.20, 0.25, 0.35, 0.40]
    _seed_level(tmp_path, {"softmax": values})
    row = rows_of(build_board(tmp_path, n_boot=N_BOOT), metric="error")[0]
    assert row["mean"] == pytest.approx(np.mean(values))
    assert row["std"] == pytest.approx(np.std(values, ddof=1))
    assert row["n"] == 5 and row["ci_method"] == "t over seeds"
    ref = sps.t.interval(0.95, 4, loc=np.mean(values), scale=sps.sem(values))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(ref, rel=1e-12)
    assert row["delta_vs_baseline"] is None or math.isnan(row["delta_vs_baseline"])


def test_tiers_and_ranks_on_constructed_data(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.normal(0.3, 0.05, 8)  # seed effect shared by every scorer
    jitter = rng.normal(0, 0.02, 8)
    _seed_level(tmp_path, {
        "softmax": base,
        "twin": base + jitter - jitter.mean(),        # paired differences average to zero
        "good": base - 0.1 + rng.normal(0, 1e-3, 8),  # clearly better
        "bad": base + 0.2 + rng.normal(0, 1e-3, 8),   # clearly worse
    })
    board = build_board(tmp_path, n_boot=N_BOOT)
    by = {r["scorer"]: r for r in rows_of(board, metric="error")}
    assert {s: by[s]["tier"] for s in by} == {"good": 1, "softmax": 2, "twin": 2, "bad": 3}
    assert (by["good"]["rank_low"], by["good"]["rank_high"]) == (1, 1)
    assert (by["bad"]["rank_low"], by["bad"]["rank_high"]) == (4, 4)
    assert by["softmax"]["rank_low"] >= 2 and by["twin"]["rank_high"] <= 3
    assert by["good"]["vs_baseline"] == "better" and by["bad"]["vs_baseline"] == "worse"
    # not significant, but its interval is wider than the (tiny) minimum effect: no tie claimed
    assert by["twin"]["vs_baseline"] == "n.s."
    assert by["good"]["p_signflip"] == pytest.approx(2 / 2**8)
    overall = {r["scorer"]: r for r in board.overall.to_dict(orient="records")}
    assert overall["good"]["score"] == pytest.approx(1 - by["good"]["mean"])   # floor 1, ceiling 0
    assert overall["bad"]["score"] == pytest.approx(1 - by["bad"]["mean"])

    def improvement(x, y):   # P(X better than Y) over all pairs, lower is better, ties half
        return np.mean([[1.0 if a < b else 0.5 if a == b else 0.0 for b in y] for a in x])

    seeds = {s: by[s]["values"] for s in by}
    for s in by:
        assert overall[s]["poi"] == pytest.approx(improvement(seeds[s], seeds["softmax"]))
    assert overall["softmax"]["poi"] == 0.5 and overall["bad"]["poi"] == 0.0
    assert overall["good"]["tier"] == 1 and overall["bad"]["tier"] == max(
        r["tier"] for r in overall.values())


def test_direction_comes_from_metric_specs(tmp_path):
    rng = np.random.default_rng(1)
    base = rng.normal(0.7, 0.05, 6)
    _seed_level(tmp_path, {"softmax": base, "high": base + 0.1}, metric="accuracy",
                direction="higher")
    by = {r["scorer"]: r for r in rows_of(build_board(tmp_path, n_boot=N_BOOT))}
    assert by["high"]["tier"] == 1 and by["high"]["vs_baseline"] == "better"


def test_holm_family_spans_tasks(tmp_path):
    rng = np.random.default_rng(2)
    for task in ("task_a", "task_b"):
        base = rng.normal(0.3, 0.05, 6)
        _seed_level(tmp_path, {"softmax": base, "ssa": base - 0.1}, task=task)
    board = build_board(tmp_path, n_boot=N_BOOT)
    ssa = rows_of(board, scorer="ssa")
    raw = sorted(r["p_vs_baseline"] for r in ssa)
    adjusted = sorted(r["p_vs_baseline_holm"] for r in ssa)
    assert adjusted[0] == pytest.approx(min(1, 2 * raw[0]))  # smallest of two: times 2
    assert adjusted[1] == pytest.approx(max(adjusted[0], raw[1]))


def test_items_enter_through_seed_means_and_the_items_only_interval_stands_apart(tmp_path):
    rng = np.random.default_rng(5)
    shared = rng.random(400)   # the same evaluation items at every seed
    for seed in range(3):
        for scorer, rate in (("softmax", 0.30), ("ssa", 0.22)):
            items = (shared < rate).astype(float).tolist()
            write_record(tmp_path, make_record("icl_linear", scorer, seed,
                                               {"error": float(np.mean(items))},
                                               specs={"error": {"direction": "lower",
                                                                "headline": True}},
                                               items={"error": items}))
    row = rows_of(build_board(tmp_path, n_boot=4000), scorer="ssa")[0]
    assert row["ci_method"] == "t over seeds" and row["n_items"] == 1200
    # identical seeds: no seed spread, so the seed-level interval is a point and Δ is exact; a
    # constant difference gives p = 0, but with no spread there is nothing to test: degenerate
    assert row["ci_low"] == row["ci_high"] == pytest.approx(row["mean"])
    assert row["p_vs_baseline"] == 0.0 and row["vs_baseline"] == "degenerate"
    assert "no spread to test" in row["degenerate"]
    # at three seeds the sign-flip test cannot go below 0.25 > alpha: not reported
    assert math.isnan(row["p_signflip"])
    # items only, shared draws: the normal-theory width of the mean of 400 0/1 items
    half = 1.96 * math.sqrt(row["mean"] * (1 - row["mean"]) / 400)
    assert row["ci_items_high"] - row["ci_items_low"] == pytest.approx(2 * half, rel=0.1)


def test_duplicate_cells_keep_the_latest(tmp_path):
    rec = make_record("icl_linear", "softmax", 0, {"error": 0.3})
    write_record(tmp_path, rec)
    newer = make_record("icl_linear", "softmax", 0, {"error": 0.1},
                        finished="2025-02-01T00:00:00.000000+00:00")
    write_raw(tmp_path, "copy/of/it.json", json.dumps(newer))
    board = build_board(tmp_path, n_boot=N_BOOT)
    assert rows_of(board, metric="error")[0]["values"] == [0.1]
    assert "finished later" in board.problems.to_dict(orient="records")[0]["reason"]


def test_profiles_and_configs_are_not_mixed(tmp_path):
    _seed_level(tmp_path, {"softmax": [0.1, 0.2]}, profile="cpu")
    _seed_level(tmp_path, {"softmax": [0.5, 0.6]}, profile="smoke")
    _seed_level(tmp_path, {"softmax": [0.9, 0.8]}, profile="cpu", config={"n_layer": 4})
    board = build_board(tmp_path, n_boot=N_BOOT)
    means = {r["profile"]: round(r["mean"], 9) for r in rows_of(board, metric="error")}
    assert len(means) == 3 and means.pop("smoke") == 0.55
    assert all(p.startswith("cpu@") for p in means) and sorted(means.values()) == [0.15, 0.85]


def test_board_json_round_trip_is_exact(tmp_path):
    _seed_level(tmp_path, {"softmax": [0.1, 0.2, 0.3], "ssa": [0.05, 0.1, 0.2]})
    write_record(tmp_path, make_record("icl_linear", "relu", 0, status="oom", message="OOM"))
    board = build_board(tmp_path, n_boot=N_BOOT)
    text = board.to_json()
    again = Board.from_dict(json.loads(text))
    assert again.to_json() == text
    assert str(again.rows["tier"].dtype) == "Int64"
    with pytest.raises(ValueError, match="format_version"):
        Board.from_dict({**json.loads(text), "format_version": 0})


def test_bad_item_lists_skip_the_record(tmp_path):
    good = make_record("icl_linear", "softmax", 0, {"error": 0.5}, items={"error": [0, 1]})
    wrong_mean = json.loads(json.dumps(good))
    wrong_mean["items"]["error"] = [1, 1]
    write_raw(tmp_path, "a/wrong_mean.json", json.dumps(wrong_mean))
    nan_item = json.loads(json.dumps(good))
    write_raw(tmp_path, "a/nan_item.json", json.dumps(nan_item).replace("[0, 1]", "[NaN, 1]"))
    stray = json.loads(json.dumps(good))
    stray["items"]["other"] = [1.0]
    write_raw(tmp_path, "a/stray.json", json.dumps(stray))
    loaded = load_records(tmp_path)
    reasons = {p.path: p.reason for p in loaded.problems}
    assert loaded.records == []
    assert "the mean of the 2 items is 1.0 but metrics.error is 0.5" in reasons["a/wrong_mean.json"]
    assert "NaN or inf" in reasons["a/nan_item.json"]
    assert "'other' is not a metric" in reasons["a/stray.json"]


def test_cost_track_has_its_own_table_and_stays_out_of_overall(tmp_path):
    _seed_level(tmp_path, {"softmax": [0.2, 0.21, 0.22], "ssa": [0.1, 0.11, 0.12]})
    _seed_level(tmp_path, {"softmax": [1.0, 1.0, 1.0], "ssa": [1.3, 1.31, 1.29]},
                metric="time_ratio", task="bench_scorers", track="cost")
    board = build_board(tmp_path, n_boot=N_BOOT)
    cost = track_table(board, "cost")
    assert "bench_scorers" in cost and "time_ratio ↓" in cost
    assert "bench_scorers" not in track_table(board, "icl")
    assert set(board.task_scores["task"]) == {"icl_linear"}
    overall = {r["scorer"]: r for r in board.overall.to_dict(orient="records")}
    assert overall["ssa"]["score"] == pytest.approx(1 - 0.11) and overall["ssa"]["n_tasks"] == 1


def test_leaderboard_never_imports_torch_or_models():
    code = ("import sys, leaderboard.publishing.release, leaderboard.publishing.regressions, leaderboard.method.aggregate, "
            "leaderboard.rendering.plots, leaderboard.rendering.markdown, leaderboard.loading.records, leaderboard.method.stats\n"
            "bad = [m for m in ('torch', 'scorers', 'tasks') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True,
                   cwd=Path(__file__).resolve().parent.parent)


def test_a_task_run_by_some_scorers_only_stays_out_of_overall(tmp_path):
    """Two scorers that tie on a decoder task would otherwise normalize by a zero-width range,
    and the scorers that did not run it would average over fewer tasks."""
    populate(tmp_path, {"softmax": 0.0, "ssa": -0.1, "relu": 0.2, "relu2": 0.1,
                        "sigmoid": 0.05})   # error and accuracy
    specs = {"perplexity": {"direction": "lower", "headline": True},
             "accuracy": {"direction": "higher", "headline": False}}
    for scorer in ("softmax", "ssa"):
        for seed, ppl in enumerate([260.0, 262.0, 261.0]):
            write_record(tmp_path, make_record("decoder_lm", scorer, seed, {
                "perplexity": ppl, "accuracy": 0.25}, specs=specs, track="decoder"))
    for scorer in ("relu", "relu2", "sigmoid"):     # skipped cells: the task was not run by them
        for seed in range(3):
            write_record(tmp_path, make_record("decoder_lm", scorer, seed, status="skipped",
                                               message="needs a GPU", specs=specs,
                                               track="decoder"))
    board = build_board(tmp_path, n_boot=N_BOOT)
    assert set(board.task_scores["task"]) == {"icl_linear"}
    overall = {r["scorer"]: r for r in board.overall.to_dict(orient="records")}
    assert {r["n_tasks"] for r in overall.values()} == {1} and len(overall) == 5
    assert overall["softmax"]["tier1_tasks"] <= 1 and overall["ssa"]["tier1_tasks"] == 1
    errors = {r["scorer"]: r["mean"] for r in rows_of(board, task="icl_linear", metric="error")}
    assert {s: overall[s]["score"] for s in overall} == pytest.approx(
        {s: 1 - e for s, e in errors.items()})
    assert -1.0 < overall["softmax"]["ci_low"] < overall["softmax"]["ci_high"] < 2.0
    assert outside_overall(board) == [
        "decoder_lm (cpu): run by softmax, ssa only, so shown in its track and not in the overall"]
    assert "perplexity ↓" in track_table(board, "decoder")
    assert "accuracy ↑" in track_table(board, "decoder")       # every metric of a 2-scorer task
    assert "accuracy ↑" not in track_table(board, "icl")       # headline only with 5 scorers
