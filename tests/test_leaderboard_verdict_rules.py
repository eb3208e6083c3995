"""The rules that decide what a verdict on the board claims: an overall no single task decides, a
task score clipped as a mean, the informative rule on every headline metric, a practical size
for every verdict, claims tested only where their premise holds, and bounded numbers."""
import math

import numpy as np
import pytest

from leaderboard.method import informative, resolution
from leaderboard.method.aggregate import build_board
from leaderboard.method.claims import load_claims
from leaderboard.rendering.markdown import release_readme
from leaderboard_fakes import make_record, write_record

ERROR = {"error": {"direction": "lower", "headline": True, "floor": 1.0, "ceiling": 0.0}}


def write_table(root, task, table, specs=ERROR, metric="error", track="icl"):
    for scorer, values in table.items():
        for seed, v in enumerate(values):
            write_record(root, make_record(task, scorer, seed, {metric: float(v)}, specs=specs,
                                           track=track))


def overall_of(board) -> dict[str, dict]:
    return {r["scorer"]: r for r in board.overall.to_dict(orient="records")}


def rows_of(board, **where) -> dict[str, dict]:
    rows = board.rows.to_dict(orient="records")
    return {r["scorer"]: r for r in rows if all(r[k] == v for k, v in where.items())}


TASKS = {
    "task_a": {"softmax": 0.30, "leader_a": 0.22, "leader_b": 0.31, "other": 0.33, "weak": 0.40},
    "task_b": {"softmax": 0.30, "leader_a": 0.31, "leader_b": 0.21, "other": 0.29, "weak": 0.38},
    "task_c": {"softmax": 0.30, "leader_a": 0.30, "leader_b": 0.32, "other": 0.26, "weak": 0.31},
}


def write_tasks(root, scale_c: float = 1.0):
    rng = np.random.default_rng(3)
    noise = {t: {s: rng.normal(0, 0.01, 5) for s in TASKS[t]} for t in TASKS}
    for task, means in TASKS.items():
        centre = float(np.mean(list(means.values())))
        table = {}
        for s, m in means.items():
            values = m + noise[task][s]
            if task == "task_c":
                values = centre + scale_c * (values - centre)
            table[s] = values
        write_table(root / "r", task, table)


def test_scaling_one_tasks_spread_by_ten_moves_no_other_tasks_leader(tmp_path):
    write_tasks(tmp_path / "plain")
    write_tasks(tmp_path / "scaled", scale_c=10.0)
    plain = overall_of(build_board(tmp_path / "plain" / "r"))
    scaled = overall_of(build_board(tmp_path / "scaled" / "r"))
    leaders = ["leader_a", "leader_b"]
    order = lambda o: sorted(leaders, key=lambda s: -o[s]["poi"])   # noqa: E731
    assert order(plain) == order(scaled)
    for s in plain:   # each task enters through comparisons with softmax only: nothing moves
        assert scaled[s]["poi"] == pytest.approx(plain[s]["poi"])
        assert scaled[s]["tier"] == plain[s]["tier"]
    # the normalized score beside it is moved by the wider task: the headline is the rule
    assert any(abs(scaled[s]["score"] - plain[s]["score"]) > 0.05 for s in plain)


def test_one_lucky_seed_above_the_floor_no_longer_outranks_a_better_mean(tmp_path):
    specs = {"error": {"direction": "lower", "headline": True, "floor": 0.5, "ceiling": 0.0}}
    write_table(tmp_path, "task_a", {
        "softmax": [0.30, 0.31, 0.29, 0.30, 0.32],
        "lottery": [0.45, 0.90, 0.90, 0.90, 0.90],   # one seed above the floor, mean 0.81
        "steady": [0.60, 0.61, 0.60, 0.59, 0.60]},   # every seed below it, mean 0.60
        specs=specs)
    board = build_board(tmp_path)
    overall = overall_of(board)
    # per-seed clipping gave lottery 0.02 and steady 0; clipped as a mean both are at the floor
    assert overall["lottery"]["score"] == overall["steady"]["score"] == 0.0
    scores = {r["scorer"]: r for r in board.task_scores.to_dict(orient="records")}
    assert scores["lottery"]["score_unclipped"] == pytest.approx((0.5 - 0.81) / 0.5)
    assert scores["steady"]["score_unclipped"] == pytest.approx((0.5 - 0.60) / 0.5)
    assert overall["lottery"]["poi"] <= overall["steady"]["poi"]


def test_a_baseline_below_the_trivial_predictor_makes_its_metric_uninformative(tmp_path):
    specs = {"error_id": {"direction": "lower", "headline": False, "floor": 0.0625,
                          "ceiling": 0.0},
             "error_shifted": {"direction": "lower", "headline": True, "floor": 0.0625,
                               "ceiling": 0.0}}
    for scorer, shifted in (("softmax", [0.24, 0.25, 0.23, 0.26, 0.24]),
                            ("lucky", [0.04, 0.30, 0.31, 0.30, 0.29])):
        for seed, v in enumerate(shifted):
            write_record(tmp_path, make_record("icl_quantifiers", scorer, seed,
                                               {"error_id": 0.0, "error_shifted": v},
                                               specs=specs))
    board = build_board(tmp_path)
    row = rows_of(board, metric="error_shifted")["lucky"]
    assert row["informative"] is False and row["vs_baseline"] == "uninformative"
    assert row["informative_reason"].startswith("the baseline is below the trivial predictor")
    assert board.task_scores.empty and all(math.isnan(r["poi"]) for r in overall_of(board).values())
    assert any("error_shifted" in line for line in board.meta["uninformative"])


def test_a_headline_metric_without_a_margin_of_its_own_is_held_to_the_default():
    z = {"accuracy_id": [0.90, 0.92, 0.95], "accuracy_longest": [0.03, 0.05, 0.04]}
    as_secondary = informative.decide("icl_mqar", "accuracy_longest", z)
    as_headline = informative.decide("icl_mqar", "accuracy_longest", z, headline=True)
    assert as_secondary.informative is True      # learned in distribution is enough
    assert as_headline.informative is False      # 0.04 of the way: below the 0.1 margin
    assert "margin 0.1" in as_headline.reason


PPL = {"heldout_perplexity_1x": {"direction": "lower", "headline": True, "floor": None,
                                 "ceiling": 1.0, "log_scale": True}}


def test_a_significant_difference_below_the_minimum_effect_is_within_resolution(tmp_path):
    base = np.array([225.0, 226.0, 224.0, 225.5, 224.5])
    wobble = np.array([0.05, -0.05, 0.02, -0.03, 0.01])
    write_table(tmp_path, "decoder_lm", {
        "softmax": base, "small": base * 1.017 + wobble, "large": base * 1.05 + wobble,
        "twin": base + 0.1 + wobble},
        specs=PPL, metric="heldout_perplexity_1x", track="decoder")
    rows = rows_of(build_board(tmp_path), metric="heldout_perplexity_1x")
    effect = resolution.PERPLEXITY_STEP * base.mean()   # 2% of softmax's perplexity
    assert rows["small"]["min_effect"] == pytest.approx(effect)
    assert rows["small"]["p_vs_baseline_holm"] <= 0.05
    assert rows["small"]["vs_baseline"] == "within resolution"      # +1.7%: significant, small
    assert rows["large"]["vs_baseline"] == "worse"                  # +5%
    assert rows["twin"]["vs_baseline"] in ("tie", "within resolution")
    assert abs(rows["twin"]["delta_vs_baseline"]) < effect


def test_the_minimum_effect_is_the_larger_of_the_rule_and_the_declaration():
    assert resolution.min_effect("icl_mqar", "accuracy_id", 1e-6, 0.9)[0] == 0.02
    assert resolution.min_effect("icl_mqar", "accuracy_id", 0.1, 0.9)[0] == pytest.approx(0.09)
    assert resolution.min_effect("decoder_lm", "train_loss", 1e-6, 5.4)[0] == pytest.approx(
        math.log(1.02))
    assert resolution.min_effect("some_task", "x", 1e-6, 2.0) == (2e-6, "the task's declared "
                                                                         "minimum effect")


DEVIANT = {"error_id": {"direction": "lower", "headline": False, "floor": 0.0625,
                        "ceiling": 0.0},
           "deviant_weight": {"direction": "lower", "headline": False}}


def write_deviant(root, softmax_weight):
    rng = np.random.default_rng(7)
    for scorer, weight in (("softmax", softmax_weight), ("ssa_gpt2", softmax_weight / 2),
                           ("ssa", softmax_weight)):
        for seed in range(5):
            write_record(root, make_record(
                "icl_quantifiers", scorer, seed,
                {"error_id": 0.0, "deviant_weight": weight + rng.normal(0, 0.005)},
                specs=DEVIANT))


def test_a_claim_whose_premise_fails_reads_premise_absent_with_the_measured_value(tmp_path):
    write_deviant(tmp_path / "flat", 0.085)      # near the uniform 1/19: no collapse to test
    write_deviant(tmp_path / "collapse", 0.40)
    flat = {(c["id"], c["scorer"]): c for c in
            build_board(tmp_path / "flat").claims.to_dict(orient="records")}
    collapse = {(c["id"], c["scorer"]): c for c in
                build_board(tmp_path / "collapse").claims.to_dict(orient="records")}
    entry = flat[("icl_quantifiers_deviant", "ssa_gpt2")]
    assert entry["verdict"] == "premise absent"
    assert "baseline deviant_weight 0.08" in entry["reason"] and "at least 0.16" in entry["reason"]
    assert collapse[("icl_quantifiers_deviant", "ssa_gpt2")]["verdict"] == "supported"
    readme = release_readme(build_board(tmp_path / "flat").with_release("r"), [])
    assert "premise absent at this profile" in readme


def test_every_ssa_claim_reports_both_parametrizations_and_linear_ood_is_the_papers_cell():
    for claim in load_claims():
        assert {"ssa", "ssa_gpt2"} <= {claim.scorer, *claim.beside}, claim.id
    linear = next(c for c in load_claims() if c.id == "icl_linear_ood")
    assert linear.metric == "mse_T9_shifted" and linear.premise.above == "mse_T9_id"


def test_no_interval_of_a_bounded_metric_leaves_its_bounds(tmp_path):
    specs = {"accuracy_id": {"direction": "higher", "headline": True, "floor": 0.0,
                             "ceiling": 1.0},
             "error_id": {"direction": "lower", "headline": False, "floor": 1.0,
                          "ceiling": 0.0}}
    table = {"softmax": ([0.95, 0.96, 0.97, 0.95, 0.96], [0.02, 0.03, 0.02, 0.03, 0.02]),
             "split": ([0.30, 0.99, 1.00, 1.00, 0.99], [0.00, 0.00, 0.30, 0.00, 0.00])}
    for scorer, (acc, err) in table.items():
        for seed in range(5):
            write_record(tmp_path, make_record("icl_mqar", scorer, seed,
                                               {"accuracy_id": acc[seed], "error_id": err[seed]},
                                               specs=specs))
    board = build_board(tmp_path)
    acc = rows_of(board, metric="accuracy_id")["split"]
    err = rows_of(board, metric="error_id")["split"]
    assert acc["ci_high"] == 1.0 and "clipped to the metric's range [0, 1]" in acc["ci_method"]
    assert err["ci_low"] == 0.0 and acc["ci_low"] < acc["mean"]
    for r in board.rows.to_dict(orient="records"):
        assert 0.0 <= r["ci_low"] <= r["ci_high"] <= 1.0
    for r in overall_of(board).values():
        assert 0.0 <= r["poi_low"] <= r["poi"] <= r["poi_high"] <= 1.0
        assert 0.0 <= r["ci_low"] <= r["ci_high"] <= 1.0


def test_the_sign_flip_test_is_shown_only_where_it_can_reach_alpha(tmp_path):
    rng = np.random.default_rng(1)
    for n in (5, 6):
        base = rng.normal(0.5, 0.02, n)
        write_table(tmp_path / str(n), "task_a", {"softmax": base, "x": base - 0.1})
    five = rows_of(build_board(tmp_path / "5"))["x"]
    six = rows_of(build_board(tmp_path / "6"))["x"]
    assert math.isnan(five["p_signflip"])                 # 2^(1-5) = 0.0625 > 0.05
    assert six["p_signflip"] == pytest.approx(2 / 2**6)   # every sign the same: the smallest p


def test_per_byte_and_per_word_metrics_take_the_change_of_two_percent_token_perplexity():
    token, bits, words = 225.0, 2.2688, 3744.0
    means = {"heldout_perplexity": token, "heldout_bits_per_byte": bits,
             "heldout_byte_perplexity": 2 ** bits, "heldout_word_perplexity": words}
    tokens_per_byte = bits / math.log2(token)          # bpb = log2(ppl) x tokens / bytes
    tokens_per_word = math.log(words) / math.log(token)
    effect = {m: resolution.min_effect("decoder_lm", m, 1e-6, v, means)[0]
              for m, v in means.items()}
    assert effect["heldout_perplexity"] == pytest.approx(0.02 * token)
    assert effect["heldout_bits_per_byte"] == pytest.approx(math.log2(1.02) * tokens_per_byte)
    assert effect["heldout_byte_perplexity"] == pytest.approx(
        2 ** bits * (1.02 ** tokens_per_byte - 1), rel=1e-3)
    assert effect["heldout_word_perplexity"] == pytest.approx(
        words * (1.02 ** tokens_per_word - 1), rel=1e-3)
