"""Level, speed and reliability apart (leaderboard/convergence.py): the exact binomial interval
against its closed form, steps to the target over the seeds that reach it, and split seeds."""
from __future__ import annotations

import pytest

from leaderboard.method.convergence import reliability, summary
from leaderboard.loading.records import load_records
from leaderboard_fakes import make_record, write_record


def test_the_reliability_interval_is_the_exact_binomial_one():
    # 0 or n successes: the Clopper-Pearson bounds have the closed form (alpha/2)^(1/n)
    n, half = 5, 0.025
    assert reliability(0, n) == pytest.approx((0.0, 0.0, 1 - half ** (1 / n)))
    assert reliability(n, n) == pytest.approx((1.0, half ** (1 / n), 1.0))
    # 3 of 5, worked from the beta quantiles: Beta(0.025; 3, 3) and Beta(0.975; 4, 2)
    assert reliability(3, 5) == pytest.approx((0.6, 0.146633, 0.947255), abs=1e-6)


def stopped(task, scorer, seed, target_step, *, reason="converged", learned=True, cap=8000):
    record = make_record(task, scorer, seed, {"accuracy": 0.9})
    record["extra"]["train"] = {"stopping": {
        "rule": "converged", "patience": 5, "tolerance": 0.01, "eval_every": 100, "cap": cap,
        "stop_step": cap if reason == "cap" else (target_step or 0) + 500, "reason": reason,
        "learned": learned, "best_step": 100, "best_value": 0.9, "learned_at": 0.5,
        "curve": {"step": [100], "value": [0.9], "items": 8},
        "target": 0.9, "target_step": target_step}}
    return record


def test_speed_counts_the_seeds_that_reach_the_target_and_a_split_reads_so(tmp_path):
    steps = {"softmax": [1000, 1200, 1100, 900, 1300], "ssa": [2000, 2400, None, 2200, None]}
    for scorer, per_seed in steps.items():
        for seed, step in enumerate(per_seed):
            reason = "converged" if step else "cap"
            write_record(tmp_path, stopped("icl_mqar", scorer, seed, step, reason=reason,
                                           learned=step is not None))
    write_record(tmp_path, make_record("icl_linear", "softmax", 0, {"error": 1.0}))
    out = summary(load_records(tmp_path))
    assert list(out) == ["icl_mqar"] and out["icl_mqar"]["target"] == 0.9
    soft, ssa = out["icl_mqar"]["scorers"]["softmax"], out["icl_mqar"]["scorers"]["ssa"]
    assert soft["speed"]["mean"] == 1100 and soft["reached"] == 5 and not soft["split"]
    # t interval of 1000..1300: mean 1100, sd 158.1, t_{4, 0.975} = 2.776
    assert soft["speed"]["lo"] == pytest.approx(1100 - 2.776445 * 158.113883 / 5 ** 0.5)
    assert ssa["speed"] == {"mean": 2200, "lo": pytest.approx(1703.1, abs=0.1),
                            "hi": pytest.approx(2696.9, abs=0.1), "seeds": 3}
    assert (ssa["reached"], ssa["not_reached"], ssa["split"]) == (3, 2, True)
    assert (ssa["cap"], ssa["not_learned"], ssa["converged"]) == (2, 2, 3)
    assert ssa["reliability"] == 0.6


def tuned(task, scorer, seed, lr, value, *, role):
    record = make_record(task, scorer, seed, {"accuracy": value},
                         config={"n_layer": 2, "lr": lr})
    record["cell"]["role"] = role
    if role == "tuned":
        record["tuning"] = {"role": "report", "point": {"lr": lr},
                            "grid": {"lr": [1e-3, 2e-3, 4e-3, 8e-3]}}
    else:
        record["tuning"] = {"role": "sweep", "point": {"lr": lr}}
    from leaderboard.loading.schema import cell_id
    record["cell_id"] = cell_id(record["cell"])
    return record


def test_a_verdict_is_checked_at_the_neighbouring_rates_on_the_same_tuning_seeds(tmp_path):
    from leaderboard.method.neighbours import BETTER, check, words

    grid = {"softmax": {2e-3: 0.80},                        # its chosen rate
            "ssa": {1e-3: 0.85, 2e-3: 0.86, 4e-3: 0.70, 8e-3: 0.90}}   # chosen 2e-3
    for scorer, at in grid.items():
        for lr, value in at.items():
            for seed in (1000, 1001):
                write_record(tmp_path, tuned("icl_mqar", scorer, seed, lr, value + seed % 2 / 100,
                                             role="sweep"))
        write_record(tmp_path, tuned("icl_mqar", scorer, 0, 2e-3, 0.9, role="tuned"))
    loaded = load_records(tmp_path)
    found = check(loaded, {("icl_mqar", "ssa", "accuracy"): BETTER})
    result = found[("icl_mqar", "ssa", "accuracy")]
    assert result["rates"] == {1e-3: True, 4e-3: False}
    assert words(result) == "rate-sensitive (holds at 1/2)"
    assert words({"holds": 2, "of": 2}) == "holds at 2/2 neighbouring rates"
