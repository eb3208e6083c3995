"""No verdict where a task cannot tell: informative metrics decided from the baseline alone,
degenerate metrics, scores below the floor shown, what the overall rests on, and the claims
judged as the paper made them. Constructed records with hand-worked answers."""
import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.power import TTestPower

from leaderboard.method import informative
from leaderboard.method.aggregate import build_board
from leaderboard.method.claims import Claim, judge, load_claims
from leaderboard.rendering import summary
from leaderboard.rendering.markdown import release_readme
from leaderboard.rendering.track_section import track_table
from leaderboard_fakes import make_record, write_record
from markdown_support import markdown_tables, row as table_row

ACC = {"accuracy_id": {"direction": "higher", "headline": True, "floor": 0.0, "ceiling": 1.0},
       "accuracy_longest": {"direction": "higher", "headline": True, "floor": 0.0,
                            "ceiling": 1.0}}
ZORRO = {"zorro_overall": {"direction": "higher", "headline": True, "floor": 50.0,
                           "ceiling": 100.0}}


def write_mqar(root, table, floor=0.25):
    """icl_mqar records: scorer -> per-seed (accuracy_id, accuracy_longest); the records carry
    the guessing floor (1/pairs) as their own anchors."""
    for scorer, seeds in table.items():
        for seed, (acc_id, acc_long) in enumerate(seeds):
            rec = make_record("icl_mqar", scorer, seed, {"accuracy_id": acc_id,
                                                         "accuracy_longest": acc_long},
                              specs=ACC)
            rec["extra"]["anchors"] = {"accuracy_id": {"floor": floor},
                                       "accuracy_longest": {"floor": floor / 2}}
            write_record(root, rec)


def write_zorro(root, table):
    for scorer, values in table.items():
        for seed, v in enumerate(values):
            write_record(root, make_record("encoder_mlm", scorer, seed, {"zorro_overall": v},
                                           track="encoder", specs=ZORRO))


def by_scorer(board, **where):
    out = board.rows
    for k, v in where.items():
        out = out[out[k] == v]
    return {r["scorer"]: r for r in out.to_dict(orient="records")}


def decisions(board):
    return {(r["task"], r["metric"]): (r["informative"], r["informative_reason"])
            for r in board.rows.to_dict(orient="records") if r["scorer"] == "softmax"}


SOFTMAX_MQAR = [(0.93, 0.50), (0.95, 0.49), (0.96, 0.51)]
SOFTMAX_ZORRO = [55.0, 59.4, 57.5]   # 57.3% against 50% chance, three seeds


def test_the_decision_reads_only_the_baseline(tmp_path):
    """Changing, adding or removing other scorers' records never moves the decision."""
    first, second = tmp_path / "a", tmp_path / "b"
    write_mqar(first, {"softmax": SOFTMAX_MQAR, "ssa": [(0.24, 0.10), (0.26, 0.11), (0.25, 0.1)]})
    write_zorro(first, {"softmax": SOFTMAX_ZORRO, "ssa": [60.0, 61.0, 59.0]})
    write_mqar(second, {"softmax": SOFTMAX_MQAR, "ssa": [(0.99, 0.9), (0.98, 0.9), (0.97, 0.9)],
                        "sparsemax": [(0.1, 0.0), (0.2, 0.1), (0.3, 0.0)]})
    write_zorro(second, {"softmax": SOFTMAX_ZORRO, "ssa": [90.0, 91.0, 92.0],
                         "sparsemax": [50.0, 50.0, 50.0]})
    a, b = decisions(build_board(first)), decisions(build_board(second))
    assert a == b
    assert a[("icl_mqar", "accuracy_id")][0] is True
    assert a[("icl_mqar", "accuracy_longest")][0] is True     # learned in distribution
    assert a[("encoder_mlm", "zorro_overall")][0] is False    # not clearly above chance
    assert "not clearly above chance" in a[("encoder_mlm", "zorro_overall")][1]


def test_clearly_above_the_floor_by_hand():
    """Lower end of the baseline's 95% t interval against max(margin, detectable difference)."""
    z = [0.10, 0.188, 0.15]                 # Zorro 55.0, 59.4, 57.5 on the 50..100 scale
    x = np.array(z)
    low = x.mean() - sps.t.ppf(0.975, 2) * x.std(ddof=1) / math.sqrt(3)
    d = TTestPower().solve_power(nobs=3, alpha=0.05, power=0.8) * x.std(ddof=1) * math.sqrt(2)
    ok, text = informative.clear_of_floor(z, 0.1)
    assert ok is bool(low >= max(0.1, d)) is False
    assert f"{low:.3g}" in text and f"{d:.3g}" in text
    assert informative.clear_of_floor([0.9, 0.92, 0.91], 0.5)[0] is True
    assert informative.clear_of_floor([0.9], 0.5)[0] is False   # one seed cannot tell


def test_an_uninformative_metric_keeps_its_numbers_but_gets_no_verdict(tmp_path):
    write_zorro(tmp_path, {"softmax": SOFTMAX_ZORRO, "ssa": [75.0, 76.0, 77.0]})
    write_mqar(tmp_path, {"softmax": SOFTMAX_MQAR, "ssa": [(0.5, 0.3), (0.6, 0.3), (0.55, 0.3)]})
    board = build_board(tmp_path)
    row = by_scorer(board, metric="zorro_overall")["ssa"]
    assert row["mean"] == pytest.approx(76.0) and row["delta_vs_baseline"] > 15
    assert row["vs_baseline"] == "uninformative"
    assert math.isnan(row["tier"]) if isinstance(row["tier"], float) else row["tier"] is None
    assert math.isnan(row["p_vs_baseline_holm"])
    assert {r["task"] for r in board.task_scores.to_dict(orient="records")} == {"icl_mqar"}
    readme = release_readme(board.with_release("r"), [])
    assert "encoder_mlm/zorro_overall (cpu): baseline not clearly above chance" in readme
    assert "uninformative, so not in the overall" in readme


def test_a_stand_in_headline_replaces_a_raw_mse_at_its_floor(tmp_path):
    specs = {"mse_T9_id": {"direction": "lower", "headline": True, "ceiling": 0.0},
             "mse_T9_shifted": {"direction": "lower", "headline": True, "ceiling": 0.0},
             "mse_over_zero_shifted": {"direction": "lower", "headline": False, "floor": 1.0,
                                       "ceiling": 0.0}}
    for scorer, shift in (("softmax", 0.0), ("ssa", -0.1)):
        for seed, noise in enumerate((0.0, 0.01, -0.01)):
            rec = make_record("icl_linear", scorer, seed, {
                "mse_T9_id": 0.1 + noise, "mse_T9_shifted": 1990.0 + 10 * noise,
                "mse_over_zero_shifted": 0.7 + shift + noise}, specs=specs)
            rec["extra"]["anchors"] = {"mse_T9_id": {"floor": 2.4},
                                       "mse_T9_shifted": {"floor": 1996.0}}
            write_record(tmp_path, rec)
    board = build_board(tmp_path)
    raw = by_scorer(board, metric="mse_T9_shifted")["ssa"]
    ratio = by_scorer(board, metric="mse_over_zero_shifted")["ssa"]
    assert raw["informative"] is False and raw["vs_baseline"] == "uninformative"
    assert ratio["headline"] and ratio["stand_in_for"] == "mse_T9_shifted"
    assert ratio["vs_baseline"] == "better"
    (task,) = board.overall_tasks.to_dict(orient="records")
    assert task["metrics"] == ["mse_T9_id", "mse_over_zero_shifted"]


def test_a_constant_claim_metric_is_degenerate_not_a_tie():
    rows = [dict(profile="cpu", task="encoder_mlm", metric="zorro.pp", scorer=s,
                 seeds=[0, 1, 2, 3], values=[50.4] * 4, min_effect=1e-6)
            for s in ("softmax", "ssa", "sparsemax")]
    claim = Claim("pp", "ssa improves pp", "§", "ssa", "softmax", "encoder_mlm", "zorro.pp",
                  "higher", "56 vs 66", min_effect=5.0)
    (entry,) = judge(rows, [claim])
    assert entry["verdict"] == "degenerate"
    assert entry["reason"] == "every scorer gives 50.4 at every seed"
    assert math.isnan(entry["p"]) and math.isnan(entry["detectable"])
    # the seed's data decides it: 0.0 at seed 0 and 50.8 elsewhere for every scorer
    for r in rows:
        r["values"] = [0.0, 50.8, 50.8, 50.8]
    (entry,) = judge(rows, [claim])
    assert entry["verdict"] == "degenerate" and "not the scorer, decides it" in entry["reason"]


def test_the_detectable_difference_uses_the_corrected_level():
    rng = np.random.default_rng(3)
    base = rng.normal(0.5, 0.05, 5)
    rows = [dict(profile="cpu", task="t", metric=f"m{i}", scorer=s, seeds=list(range(5)),
                 values=(base + shift + rng.normal(0, 0.02, 5)).tolist(), min_effect=1e-6)
            for i in range(3) for s, shift in (("softmax", 0.0), ("x", 0.01))]
    claims = [Claim(f"c{i}", "x lowers m", "§", "x", "softmax", "t", f"m{i}", "lower", "none",
                    min_effect=0.0) for i in range(3)]
    entries = judge(rows, claims)
    for entry in entries:
        a = next(r for r in rows if r["metric"] == entry["metric"] and r["scorer"] == "x")
        b = next(r for r in rows if r["metric"] == entry["metric"] and r["scorer"] == "softmax")
        sd = float(np.std(np.subtract(a["values"], b["values"]), ddof=1))
        at_holm = TTestPower().solve_power(nobs=5, alpha=0.05 / 3, power=0.8) * sd
        at_raw = TTestPower().solve_power(nobs=5, alpha=0.05, power=0.8) * sd
        assert entry["alpha_corrected"] == pytest.approx(0.05 / 3)
        assert entry["detectable"] == pytest.approx(at_holm, rel=1e-6)
        assert entry["detectable"] > at_raw
        if entry["verdict"] == "not supported":
            assert f"{at_holm:.4g}" in entry["reason"]


def test_a_claim_needs_its_practical_minimum_effect():
    rows = [dict(profile="cpu", task="t", metric="m", scorer=s, seeds=[0, 1, 2, 3],
                 values=v, min_effect=1e-6)
            for s, v in (("softmax", [0.50, 0.60, 0.70, 0.55]),
                         ("x", [0.48, 0.58, 0.68, 0.53]))]
    small = Claim("c", "x lowers m", "§", "x", "softmax", "t", "m", "lower", "none",
                  min_effect=0.05)
    relative = Claim("c", "x lowers m", "§", "x", "softmax", "t", "m", "lower", "none",
                     min_effect_relative=0.02)
    (entry,) = judge(rows, [small])
    assert entry["p"] < 0.05 and entry["verdict"] == "not supported"
    assert "below the claim's minimum effect 0.05" in entry["reason"]
    (entry,) = judge(rows, [relative])
    assert entry["min_effect"] == pytest.approx(0.02 * 0.5875)
    assert entry["verdict"] == "supported"


def test_the_shipped_claims_name_the_papers_variants_and_minimum_effects():
    claims = {c.id: c for c in load_claims()}
    assert claims["zorro_agreement_across_pp"].scorer == "ssa_n2"
    assert {claims[k].scorer for k in ("zorro_swapped_arguments", "zorro_binding_principle_a",
                                       "zorro_quantifiers_superlative")} == {"ssa_n1_5"}
    assert all(c.beside == ("ssa", "ssa_gpt2") for k, c in claims.items()
               if k.startswith("zorro"))
    assert all(c.scorer == "ssa_gpt2" for k, c in claims.items() if k.startswith("icl"))
    assert all(c.scorer == "ssa" for k, c in claims.items() if k.startswith(("decoder", "zero")))
    # half the paper's effect: 65.95 - 56.00 points
    assert claims["zorro_agreement_across_pp"].min_effect == pytest.approx((65.95 - 56.0) / 2)
    assert all((c.min_effect is None) != (c.min_effect_relative is None)
               for c in claims.values())


def test_a_claim_without_a_minimum_effect_is_refused(tmp_path):
    path = tmp_path / "claims.toml"
    path.write_text('[[claim]]\nid = "c"\ntext = "t"\nsource = "s"\nscorer = "x"\n'
                    'baseline = "softmax"\ntask = "t"\nmetric = "m"\ndirection = "lower"\n'
                    'paper = "p"\n')
    with pytest.raises(ValueError, match="min_effect"):
        load_claims(path)


def test_a_score_below_the_floor_is_shown_below_zero_with_its_mark(tmp_path):
    write_mqar(tmp_path, {"softmax": SOFTMAX_MQAR,
                          "ssa": [(0.20, 0.10), (0.21, 0.11), (0.19, 0.09)]})
    board = build_board(tmp_path)
    row = by_scorer(board, metric="accuracy_id")["ssa"]
    assert row["normalized"] == pytest.approx((0.20 - 0.25) / 0.75)
    assert row["not_learned"] == "accuracy_id"
    table = track_table(board, "icl")
    assert f"{(0.20 - 0.25) / 0.75:.3f} ▽" in table and "ssa ‡" in table
    # the mark stands beside the value in the track's matrix and on the front page too, each with
    # its legend
    (matrix,) = markdown_tables(table)[None]
    assert table_row(matrix, "ssa")["icl_mqar · accuracy_id ↑"].startswith("0.200 ‡")
    front = "\n".join(summary.front_table(board.with_release("r"), "cpu", {}))
    ssa = next(line for line in front.splitlines() if line.startswith("|") and "| ssa |" in line)
    assert "‡" in ssa and "‡ the scorer did not clearly learn the task in distribution" in front
    scores = {r["scorer"]: r for r in board.task_scores.to_dict(orient="records")}
    unclipped = np.mean([(0.20 - 0.25) / 0.75, (0.10 - 0.125) / 0.875])
    assert scores["ssa"]["score"] == 0.0
    assert scores["ssa"]["score_unclipped"] == pytest.approx(unclipped)
    overall = {r["scorer"]: r for r in board.overall.to_dict(orient="records")}
    assert overall["ssa"]["outside_anchors"] == {"icl_mqar": pytest.approx(unclipped)}
    assert f"icl_mqar {unclipped:.3g} ▽" in release_readme(board.with_release("r"), [])


def test_leave_one_task_out_ranks_and_spread_shares_by_hand():
    scores = {"a": {"t1": 1.0, "t2": 0.0, "t3": 0.2},
              "b": {"t1": 0.0, "t2": 0.6, "t3": 0.2},
              "c": {"t1": 0.5, "t2": 0.5, "t3": 0.2}}
    # overall a 0.4, b 0.2667, c 0.4; without t1: a 0.1, b 0.4, c 0.35; without t2: a 0.6,
    # b 0.1, c 0.35; without t3: a 0.5, b 0.3, c 0.5 (a and c tie for first)
    assert informative.leave_one_out_ranks(scores) == {
        "a": {"t1": 3, "t2": 1, "t3": 1}, "b": {"t1": 1, "t2": 3, "t3": 3},
        "c": {"t1": 2, "t2": 2, "t3": 1}}
    shares = informative.spread_shares(scores)
    total = np.array([0.4, 0.8 / 3, 0.4])
    t1 = np.array([1.0, 0.0, 0.5]) / 3
    assert shares["t1"] == pytest.approx(np.cov(t1, total, bias=True)[0, 1] / total.var())
    assert shares["t3"] == pytest.approx(0.0)              # the same for every scorer
    assert sum(shares.values()) == pytest.approx(1.0)


def test_the_overall_says_what_it_rests_on(tmp_path):
    write_mqar(tmp_path, {"softmax": SOFTMAX_MQAR, "ssa": [(0.5, 0.3), (0.6, 0.3), (0.55, 0.3)],
                          "sparsemax": [(0.9, 0.4), (0.92, 0.45), (0.91, 0.4)]})
    for scorer, err in (("softmax", 0.30), ("ssa", 0.10), ("sparsemax", 0.35)):
        for seed in range(3):
            write_record(tmp_path, make_record("icl_linear", scorer, seed,
                                               {"error": err + 0.01 * seed}))
    board = build_board(tmp_path)
    overall = {r["scorer"]: r for r in board.overall.to_dict(orient="records")}
    tasks = {r["task"]: r for r in board.overall_tasks.to_dict(orient="records")}
    task = {(r["scorer"], r["task"]): r["poi"]
            for r in board.task_scores.to_dict(orient="records")}
    for left in ("icl_linear", "icl_mqar"):
        kept = "icl_mqar" if left == "icl_linear" else "icl_linear"
        ranks = {s: 1 + sum(task[(o, kept)] > task[(s, kept)] for o in overall)
                 for s in overall}
        assert {s: overall[s]["rank_without"][left] for s in overall} == ranks
    assert sum(t["share"] for t in tasks.values()) == pytest.approx(1.0)
    readme = release_readme(board.with_release("r"), [])
    assert "overall rank if a task is left out" in readme and "rests on" in readme


def test_the_papers_zorro_variants_are_ssa_with_a_fixed_n_on_the_encoder_track():
    import scorers
    from tasks import create_task

    for name, n in (("ssa_n2", 2.0), ("ssa_n1_5", 1.5)):
        scorer = scorers.create_scorer(name, num_heads=2, max_len=8)
        assert float(scorer.n_value()) == n and not any(p.requires_grad
                                                       for p in scorer.parameters())
        s = torch_scores()
        mask = np.ones((4, 4), dtype=bool)
        import torch
        ref = scorers.create_scorer("ssa", num_heads=2, max_len=8, n=n, learn_n=False)
        m = torch.from_numpy(mask)
        assert torch.equal(scorer.weights(s, m), ref.weights(s, m))
        assert create_task("encoder_mlm").skip_reason(name) is None
        assert "encoder track only" in create_task("icl_linear").skip_reason(name)
    assert scorers.canonical_name("ssa-2") == "ssa_n2"
    assert create_task("icl_linear").skip_reason("ssa") is None


def torch_scores():
    import torch

    return torch.linspace(-3, 3, 32).reshape(1, 2, 4, 4)
