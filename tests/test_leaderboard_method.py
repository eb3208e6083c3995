"""The leaderboard's rules on constructed records: no verdict on a tie, tiers in score order, an
overall on fixed anchors that no other scorer moves, probes outside the overall, n/a apart from
failures, records without anchors."""
import json

import numpy as np
import pandas as pd
import pytest

from leaderboard.method.aggregate import build_board
from leaderboard.method.anchors import normalized
from leaderboard.rendering.columns import FIELDS
from leaderboard.rendering.html.tables import field_column
from leaderboard.rendering.markdown import failed_cells_sentence, overall_table, release_readme
from leaderboard.rendering.track_section import track_table
from leaderboard_fakes import make_record, write_record
from markdown_support import mark_of, markdown_tables, row

LOWER = {"error": {"direction": "lower", "headline": True, "floor": 1.0, "ceiling": 0.0}}
PROBE = {"other_mass": {"direction": "higher", "headline": True}}


def rows(board, **where):
    out = board.rows
    for k, v in where.items():
        out = out[out[k] == v]
    return {r["scorer"]: r for r in out.to_dict(orient="records")}


def write_table(root, table, task="icl_linear", specs=LOWER, metric="error", **kw):
    for scorer, values in table.items():
        for seed, v in enumerate(values):
            write_record(root, make_record(task, scorer, seed, {metric: float(v)}, specs=specs,
                                           **kw))


def test_a_metric_without_spread_between_scorers_is_degenerate_not_a_tie(tmp_path):
    """Values equal up to floating-point noise at every seed (a constant metric; or one that the
    seed's data decides, equal for every scorer) read "degenerate" with the reason, never tie,
    and get no tier or rank."""
    write_table(tmp_path, {"softmax": [0.0, 0.0, 0.0], "sparsemax": [9.2e-43, 9.2e-43, 9.2e-43],
                           "entmax": [2.5e-44, 0.0, 2.5e-44]})
    write_table(tmp_path, {"softmax": [0.5, 0.6, 0.7], "sparsemax": [0.5, 0.6, 0.7 + 1e-9],
                           "entmax": [0.5, 0.6, 0.7]}, task="icl_other")
    board = build_board(tmp_path)
    for task, why in (("icl_linear", "every scorer gives 0 at every seed"),
                      ("icl_other", "the seed's data, not the scorer, decides it")):
        by = rows(board, task=task)
        assert {by[s]["vs_baseline"] for s in ("sparsemax", "entmax")} == {"degenerate"}
        assert all(why in r["degenerate"] for r in by.values())
        assert all(pd.isna(r["tier"]) and pd.isna(r["rank_low"]) for r in by.values())
        assert all(pd.isna(r["p_vs_baseline_holm"]) for r in by.values())
    readme = release_readme(board.with_release("r"), [])
    assert "degenerate" in readme and "no difference larger than 0" not in readme


def test_min_effect_from_the_metric_spec(tmp_path):
    specs = {"error": {**LOWER["error"], "min_effect": 0.1}}   # 10% of softmax's mean
    write_table(tmp_path, {"softmax": [0.50, 0.51, 0.52], "small": [0.46, 0.47, 0.48],
                           "large": [0.30, 0.31, 0.32]}, specs=specs)
    by = rows(build_board(tmp_path))
    assert by["small"]["min_effect"] == pytest.approx(0.051)
    assert by["small"]["vs_baseline"] == "within resolution" and by["large"]["vs_baseline"] == "better"
    assert by["small"]["tier"] == by["softmax"]["tier"] == 2 and by["large"]["tier"] == 1


def test_tiers_follow_the_score_order(tmp_path):
    """A noisy scorer cannot escape being separated from the leader: the tier ends at the first
    scorer significantly worse, and everything after it sits in a later tier."""
    rng = np.random.default_rng(0)
    seed = rng.normal(0, 0.01, 5)
    write_table(tmp_path, {"leader": 0.20 + seed, "precise": 0.30 + seed,
                           "noisy": 0.35 + seed + np.array([-0.3, 0.3, -0.2, 0.25, -0.05]),
                           "softmax": 0.6 + seed})
    by = rows(build_board(tmp_path))
    assert by["leader"]["tier"] == 1 and by["precise"]["tier"] == 2
    assert by["noisy"]["tier"] >= 2
    for k in range(20):     # random boards: tiers never decrease along the score order
        sub = tmp_path / f"b{k}"
        means = rng.uniform(0.1, 0.5, 6)
        spreads = rng.choice([0.001, 0.05, 0.3], 6)
        write_table(sub, {f"s{j}" if j else "softmax": means[j] + rng.normal(0, spreads[j], 4)
                          for j in range(6)})
        by = rows(build_board(sub))
        order = sorted(by.values(), key=lambda r: r["mean"])
        tiers = [r["tier"] for r in order]
        assert tiers == sorted(tiers), tiers


def test_overall_scores_do_not_move_when_a_scorer_is_added(tmp_path):
    rng = np.random.default_rng(1)
    table = {"softmax": rng.uniform(0.2, 0.3, 3), "ssa": rng.uniform(0.1, 0.2, 3)}
    other = {"softmax": rng.uniform(0.4, 0.5, 3), "ssa": rng.uniform(0.4, 0.6, 3)}
    for root in (tmp_path / "a", tmp_path / "b"):
        write_table(root, table)
        write_table(root, other, task="icl_quantifiers")
    write_table(tmp_path / "b", {"stick_breaking": [0.0, 0.0, 0.0]})   # perfect on one task
    write_table(tmp_path / "b", {"stick_breaking": [1.0, 1.0, 1.0]}, task="icl_quantifiers")

    def scores(root):
        board = json.loads(build_board(root).to_json())
        return {r["scorer"]: json.dumps([r["score"], r["ci_low"], r["ci_high"]])
                for r in board["overall"]}

    a, b = scores(tmp_path / "a"), scores(tmp_path / "b")
    assert set(b) == {"softmax", "ssa", "stick_breaking"}
    assert {s: b[s] for s in a} == a
    overall = json.loads(build_board(tmp_path / "a").to_json())["overall"]
    ssa = next(r for r in overall if r["scorer"] == "ssa")
    expected = np.mean([1 - table["ssa"].mean(), 1 - other["ssa"].mean()])
    assert ssa["score"] == pytest.approx(expected)


def test_normalized_on_fixed_anchors():
    assert normalized(0.5, 2.0, 0.0, False) == 0.75
    assert normalized(3.0, 2.0, 0.0, False) == 0.0          # worse than the floor: clipped
    assert normalized(10.0, 100.0, 1.0, True) == pytest.approx(0.5)
    assert normalized(75.0, 50.0, 100.0, False) == 0.5
    assert np.isnan(normalized(0.5, None, 0.0, False))


def test_probes_stay_out_of_the_overall_and_carry_no_verdicts(tmp_path):
    write_table(tmp_path, {"softmax": [0.3, 0.31, 0.32], "ssa": [0.2, 0.21, 0.22]})
    base = tmp_path / "with_probe"
    write_table(base, {"softmax": [0.3, 0.31, 0.32], "ssa": [0.2, 0.21, 0.22]})
    write_table(base, {"softmax": [0.0, 0.0, 0.0], "ssa": [0.9, 0.9, 0.9]},
                task="saturation_probe", track="probe", specs=PROBE, metric="other_mass")
    plain, probed = build_board(tmp_path), build_board(base)
    assert set(probed.task_scores["task"]) == {"icl_linear"}
    assert plain.overall[["scorer", "score", "ci_low", "ci_high", "tier"]].equals(
        probed.overall[["scorer", "score", "ci_low", "ci_high", "tier"]])
    probe = rows(probed, task="saturation_probe")
    assert {r["vs_baseline"] for r in probe.values()} == {""}
    assert all(pd.isna(r["tier"]) and pd.isna(r["rank_low"]) for r in probe.values())
    readme = release_readme(probed.with_release("r"), [])
    assert "Descriptive: no better/worse" in readme


def test_not_applicable_is_not_a_failure(tmp_path):
    specs = {"error": LOWER["error"], "deviant": {"direction": "lower", "headline": False}}
    for seed in range(3):
        write_record(tmp_path, make_record("icl_linear", "softmax", seed,
                                           {"error": 0.3 + seed / 100, "deviant": 0.5},
                                           specs=specs))
        # ssa does not compute "deviant": n/a
        write_record(tmp_path, make_record("icl_linear", "ssa", seed, {"error": 0.2},
                                           specs=specs))
        # the task cannot run this scorer
        write_record(tmp_path, make_record("icl_linear", "flash_only", seed, status="skipped",
                                           message="needs a GPU", specs=specs))
        # a probe is outside the overall, so the overall does not name it among its tasks
        for scorer in ("softmax", "ssa"):
            write_record(tmp_path, make_record("saturation_probe", scorer, seed,
                                               {"other_mass": 0.5}, track="probe", specs=PROBE))
        write_record(tmp_path, make_record("saturation_probe", "flash_only", seed,
                                           status="skipped", message="needs a GPU",
                                           track="probe", specs=PROBE))
    write_record(tmp_path, make_record("icl_linear", "relu", 0, {"error": 0.4, "deviant": None},
                                       specs=specs))
    write_record(tmp_path, make_record("icl_linear", "relu", 1, status="diverged", step=5,
                                       specs=specs))
    board = build_board(tmp_path)
    dev = rows(board, metric="deviant")
    assert dev["ssa"]["n_na"] == 3 and dev["ssa"]["n_null"] == 0 and dev["ssa"]["n_failed"] == 0
    assert dev["flash_only"]["n_na"] == 3 and dev["flash_only"]["n_failed"] == 0
    assert dev["relu"]["n_null"] == 1 and dev["relu"]["n_failed"] == 1
    failed = board.failed_cells.to_dict(orient="records")
    bad = {(r["scorer"], r["seed"]) for r in failed if r["status"] != "skipped"}
    counted = {("relu", 0), ("relu", 1)}
    assert bad == counted
    assert failed_cells_sentence(board).startswith("2 failed cell(s)")
    assert "6 skipped cell(s)" in failed_cells_sentence(board)
    overall = {r["scorer"]: r for r in board.overall.to_dict(orient="records")}
    assert overall["flash_only"]["n_tasks"] == 0 and overall["flash_only"]["tasks_skipped"] == 1
    # A scorer that runs none of a section's tasks is out of its tables, with its reason once,
    # and the overall names the task in a note.
    icl = track_table(board, "icl")
    (stats,) = markdown_tables(icl)["icl_linear · error ↓"]
    assert "flash_only" not in {r["scorer"] for r in stats["rows"]}
    assert ("- flash_only runs none of this section's tasks, so is in none of its tables: needs a "
            "GPU.") in " ".join(icl.split())
    main = markdown_tables(overall_table(board))[None][0]
    tasks = next(r for r in main["rows"] if r["scorer"] == "flash_only")["tasks"]
    assert tasks.startswith("0 (+1 n/a") and main["notes"][mark_of(tasks)].startswith(
        "n/a: icl_linear")


def test_a_scorer_off_a_sections_tasks_is_stated_once_and_one_off_a_task_reads_n_a(tmp_path):
    """A scorer skipped on every task of a track leaves the section's tables for one line with
    what its reasons share (not each task's clause); one skipped on some of them keeps its rows,
    n/a with the reason as a note."""
    def track_only(task):
        return f"scorer 'ssa_n2' runs on the encoder track only; task '{task}' is on the icl track"

    for seed in range(3):
        for task in ("icl_linear", "icl_mqar"):
            write_record(tmp_path, make_record(task, "softmax", seed, {"error": 0.3 + seed / 100}))
            write_record(tmp_path, make_record(task, "ssa_n2", seed, status="skipped",
                                               message=track_only(task)))
        write_record(tmp_path, make_record("icl_linear", "flash_only", seed, {"error": 0.2}))
        write_record(tmp_path, make_record("icl_mqar", "flash_only", seed, status="skipped",
                                           message="needs a GPU"))
    icl = track_table(build_board(tmp_path), "icl")
    tables = markdown_tables(icl)
    assert "ssa_n2" not in " ".join(icl.split()).replace(
        "- ssa_n2 runs none of this section's tasks, so is in none of its tables: scorer 'ssa_n2' "
        "runs on the encoder track only.", "")
    (mqar,) = tables["icl_mqar · error ↓"]
    mean = row(mqar, "flash_only")["mean [95% CI]"]
    assert mean.startswith("n/a") and mqar["notes"][mark_of(mean)] == "needs a GPU"
    (linear,) = tables["icl_linear · error ↓"]
    assert row(linear, "flash_only")["n"] == "3"
    (matrix,) = tables[None]   # the section's matrix, before the first metric's heading
    cell = row(matrix, "flash_only")["icl_mqar · error ↓"]
    assert cell.startswith("n/a") and matrix["notes"][mark_of(cell)] == "needs a GPU"
    assert "ssa_n2" not in {r["scorer"] for r in matrix["rows"]}


def test_records_without_anchors_aggregate_and_stay_out_of_the_overall(tmp_path):
    old = {"error": {"direction": "lower", "headline": True}}
    write_table(tmp_path, {"softmax": [0.3, 0.31, 0.32], "ssa": [0.2, 0.21, 0.22]}, specs=old)
    board = build_board(tmp_path)
    assert len(board.rows) == 2 and rows(board)["ssa"]["vs_baseline"] == "better"
    assert board.overall["score"].isna().all()
    assert board.meta["unanchored"] == ["icl_linear/error (cpu)"]
    assert "not in the overall" in release_readme(board.with_release("r"), [])


def test_a_records_own_anchors_override_the_declared_ones(tmp_path):
    specs = {"ppl": {"direction": "lower", "headline": True, "ceiling": 1.0, "log_scale": True}}
    for seed in range(3):
        for scorer, ppl in (("softmax", 10.0), ("ssa", 100.0)):
            rec = make_record("decoder_lm", scorer, seed, {"ppl": ppl}, specs=specs,
                              track="decoder")
            rec["extra"]["anchors"] = {"ppl": {"floor": 1000.0 if seed else 100.0}}
            write_record(tmp_path, rec)
    overall = {r["scorer"]: r for r in build_board(tmp_path).overall.to_dict(orient="records")}
    # softmax: log-scale scores 1 - 1/3 at floor 1000 (two seeds) and 0.5 at floor 100
    assert overall["softmax"]["score"] == pytest.approx((2 * (2 / 3) + 0.5) / 3)
    assert overall["ssa"]["score"] == pytest.approx((2 * (1 / 3) + 0.0) / 3)


def test_method_text_ends_with_the_differences_from_the_paper():
    from leaderboard.rendering.markdown import PAPER_DIFFERENCES, method_text

    text = method_text({"n_boot": 1000, "baseline": "softmax", "alpha": 0.05})
    assert PAPER_DIFFERENCES in text and text.index(PAPER_DIFFERENCES) > text.index("**Columns**")
    block = " ".join(text[text.index(PAPER_DIFFERENCES):].split())
    for phrase in ("judged on `ssa_gpt2`, with `ssa`", "100i + 10j", "independent draws",
                   "in expectation only", "[1, −1, −2, 1000]", "−70 at point 6 and 70000 at point 8",
                   "`mse_T9_id`", "`mse_T9_shifted`", "fp32 in every profile", "`headline_metrics`"):
        assert phrase in block, phrase
    assert block.endswith("is secondary.")


def test_the_method_says_how_long_this_releases_icl_tasks_trained():
    """From the release itself: a task trained to convergence names its cap, one trained for a
    fixed count its last learning-curve step; the text states no step count of another release."""
    from leaderboard.rendering.markdown import method_text

    meta = {"n_boot": 1000, "baseline": "softmax", "alpha": 0.05,
            "convergence": {"icl_linear": {"target": 0.25, "cap": 22000, "scorers": {}}},
            "curves": {"icl_quantifiers": {"scorers": {"softmax": {"step": [1, 50, 500]},
                                                       "ssa": {"step": [1, 60, 600]}}}}}
    text = " ".join(method_text(meta).split())
    assert ("In this release they train `icl_linear` until its validation metric converges, up to "
            "22,000 steps and `icl_quantifiers` for 600 steps.") in text
    assert "1,000" not in text and "19 points" not in text


# Words that name a statistical method; a column title may use only those of its own method.
METHOD_WORDS = ("bootstrap", "student t", "paired t", "sign-flip", "permutation", "wilcoxon",
                "mann-whitney", "bca", "stratified", "welch", "holm", "benjamini", "z test",
                "percentile", "anchors", "best scorer of a task", "replicates")


def test_every_column_title_names_the_method_its_statistic_uses():
    from leaderboard.rendering.columns import CLAIM_FIELDS, FIELDS, MARKDOWN_FIELDS
    from leaderboard.method.stats import METHODS

    fields = [*FIELDS["rows"].values(), *FIELDS["overall"].values(), *CLAIM_FIELDS.values(),
              *MARKDOWN_FIELDS.values()]
    corrections = METHODS["family_correction"] + " " + METHODS["metric_correction"]
    for f in fields:
        title = f.title.lower()
        for method in f.methods:
            assert METHODS[method].lower() in title, (f.key, f.title)
        allowed = " ".join([METHODS[m] for m in f.methods] + [corrections]).lower()
        for word in METHOD_WORDS:
            if word in title:
                assert word in allowed, f"{f.key}: {f.title!r} names {word!r}, not its method"


def test_the_markdown_legend_and_the_page_read_one_definition(tmp_path):
    from leaderboard.rendering.columns import FIELDS
    from leaderboard.rendering.html import context, overall, tracks

    write_table(tmp_path, {"softmax": [0.3, 0.31, 0.29], "ssa": [0.2, 0.21, 0.22]})
    readme = release_readme(build_board(tmp_path, n_boot=200), [])
    said = " ".join(readme.split())
    for key in ("mean", "p_vs_baseline_holm", "rank_low"):
        assert FIELDS["rows"][key].title in said
    assert context.FIELDS is overall.FIELDS is tracks.FIELDS is FIELDS
    assert "95% bootstrap interval" not in readme and "0 = worst" not in readme


CONTEXT_SPECS = {f"heldout_perplexity_{m}x": {"direction": "lower", "headline": True,
                                              "floor": 1000.0, "ceiling": 1.0, "log_scale": True}
                 for m in (1, 4)}
TOO_LONG = "sequence length 512 exceeds L_max = max_len = 128"


def test_a_metric_a_scorer_cannot_report_is_na_with_its_reason_in_the_tables_and_overall(
        tmp_path):
    """cosformer past its maximum length: the metric is n/a with the reason (the task's
    extra.not_applicable, or the null metric beside extra.context_perplexity.failed of earlier
    decoder records), never a failure; the headline leaves that metric out and the overall row
    names the metric its task score leaves out."""
    one_x = {"softmax": 10.0, "ssa": 20.0, "cosformer": 15.0, "legacy": 30.0}
    for seed in range(3):
        for scorer, ppl in one_x.items():
            metrics = {"heldout_perplexity_1x": ppl + seed / 10}
            if scorer in ("softmax", "ssa"):
                metrics["heldout_perplexity_4x"] = 1.2 * ppl + seed / 10
            elif scorer == "legacy":
                metrics["heldout_perplexity_4x"] = None
            rec = make_record("decoder_lm", scorer, seed, metrics, specs=CONTEXT_SPECS,
                              track="decoder")
            if scorer == "cosformer":
                rec["extra"]["not_applicable"] = {"heldout_perplexity_4x": TOO_LONG}
            elif scorer == "legacy":
                rec["extra"]["context_perplexity"] = {"failed": {"4x": TOO_LONG}}
                rec["extra"]["anchors"] = {"heldout_perplexity_4x": {"floor": 1000.0}}
            write_record(tmp_path, rec)
    board = build_board(tmp_path)
    assert board.problems.empty and board.failed_cells.empty
    four_x = rows(board, metric="heldout_perplexity_4x")
    for scorer in ("cosformer", "legacy"):
        r = four_x[scorer]
        assert (r["n"], r["n_na"], r["n_null"], r["n_failed"]) == (0, 3, 0, 0)
        assert r["na_reason"] == TOO_LONG
        (stats,) = markdown_tables(track_table(board, "decoder"))[
            "decoder_lm · heldout_perplexity_4x ↓"]
        mean = row(stats, scorer)["mean [95% CI]"]
        assert mean.startswith("n/a") and stats["notes"][mark_of(mean)] == TOO_LONG
        page_cell = field_column(FIELDS["rows"]["mean"], [r]).cell(r)
        assert f'<span title="{TOO_LONG}">n/a</span>' in page_cell
    overall = {r["scorer"]: r for r in board.overall.to_dict(orient="records")}
    # on 1x, cosformer (15) loses to softmax (10) at every pair of seeds; its 4x is n/a, left
    # out of its headline rather than counted as a loss
    assert overall["cosformer"]["poi_tasks"] == {"decoder_lm": 0.0}
    assert overall["softmax"]["poi"] == 0.5
    expected = np.mean([normalized(15.0 + s / 10, 1000.0, 1.0, True) for s in range(3)])
    assert overall["cosformer"]["score"] == pytest.approx(expected)
    assert overall["cosformer"]["metrics_na"] == {"decoder_lm": ["heldout_perplexity_4x"]}
    assert overall["softmax"]["metrics_na"] == {}
    main = markdown_tables(overall_table(board))[None][0]
    tasks = next(r for r in main["rows"] if r["scorer"] == "cosformer")["tasks"]
    assert tasks.startswith("1 (n/a") and main["notes"][mark_of(tasks)].startswith(
        "n/a: decoder_lm/heldout_perplexity_4x")
