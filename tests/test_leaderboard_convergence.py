"""Level, speed and reliability apart (leaderboard/convergence.py): the exact binomial interval
against its closed form, steps to the target over the seeds that reach it, and split seeds."""
from __future__ import annotations

from types import SimpleNamespace

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


def stopped(task, scorer, seed, target_step, *, reason="converged", learned=True, cap=8000,
            best_step=100):
    record = make_record(task, scorer, seed, {"accuracy": 0.9})
    record["extra"]["train"] = {"stopping": {
        "rule": "converged", "patience": 5, "tolerance": 0.01, "eval_every": 100, "cap": cap,
        "stop_step": cap if reason == "cap" else (target_step or 0) + 500, "reason": reason,
        "learned": learned, "best_step": best_step, "best_value": 0.9, "learned_at": 0.5,
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
    # the modified Cox interval of 2000, 2400, 2200: logs 7.600902, 7.783224, 7.696213, mean
    # 7.693446, variance 0.0083161; exp(7.693446 + 0.0041581 ± 4.302653 * sqrt(0.0083161 / 3 +
    # 0.0083161^2 / 4)) = exp(7.697604 ± 0.227241)
    assert ssa["speed"] == {"mean": 2200, "lo": pytest.approx(1755.2, abs=0.1),
                            "hi": pytest.approx(2765.1, abs=0.1), "seeds": 3}
    assert soft["speed"]["lo"] < soft["speed"]["mean"] == 1100 < soft["speed"]["hi"]
    assert (ssa["reached"], ssa["not_reached"], ssa["split"]) == (3, 2, True)
    assert (ssa["cap"], ssa["not_learned"], ssa["converged"]) == (2, 2, 3)
    assert ssa["reliability"] == 0.6


def test_a_seed_of_several_models_settles_when_its_last_model_does(tmp_path):
    """A task that trains two models per cell (icl_quantifiers): a seed settles at the later of
    its models' settle steps, a model that never learned at 0 and one the cap stopped while it
    could still gain never, so the median seed of three with one such model is unsettled."""
    def two_models(seed, first, second):
        record = stopped("icl_quantifiers", "softmax", seed, 100)
        block = record["extra"]["train"]["stopping"]
        record["extra"]["train"] = {"every": {"stopping": {**block, **first}},
                                    "some": {"stopping": {**block, **second}}}
        return record

    never = {"learned": False, "reason": "cap", "stop_step": 8000, "best_step": 7000}
    gaining = {"reason": "cap", "stop_step": 8000, "best_step": 7900}
    write_record(tmp_path, two_models(0, never, gaining))
    write_record(tmp_path, two_models(1, {"best_step": 300}, never))
    write_record(tmp_path, two_models(2, {"best_step": 300}, gaining))
    soft = summary(load_records(tmp_path))["icl_quantifiers"]["scorers"]["softmax"]
    assert soft["median_settled"] is None          # settle steps: inf, 300, inf
    write_record(tmp_path, two_models(2, {"best_step": 300}, {"best_step": 500}))
    soft = summary(load_records(tmp_path))["icl_quantifiers"]["scorers"]["softmax"]
    assert soft["median_settled"] == 500           # inf, 300, 500


def test_the_cap_is_stated_against_the_baselines_median_convergence(tmp_path):
    """Softmax's seeds reach their best values at 4,300-7,900 steps and one runs to the cap: the
    median seed's 6,000 makes the 22,000-step cap 3.7x it, below the protocol's 4x, which the
    release says; where the median seed runs to the cap, it says that."""
    import tasks.icl_training
    from leaderboard.method.convergence import CAP_MULTIPLE, cap_multiple
    from leaderboard.rendering.convergence_section import cap_text

    assert CAP_MULTIPLE == tasks.icl_training.CAP_MULTIPLE
    best = [4300, 4800, 6000, 7900, 13800]
    for seed, step in enumerate(best):
        write_record(tmp_path, stopped("icl_mqar", "softmax", seed, 2000, cap=22000,
                                       best_step=step, reason="cap" if seed == 4 else "converged"))
    out = summary(load_records(tmp_path))
    soft = out["icl_mqar"]["scorers"]["softmax"]
    assert soft["best_steps"] == best and soft["median_converged"] == 6000
    assert cap_multiple(out["icl_mqar"], "softmax") == pytest.approx(22000 / 6000)
    assert cap_multiple(out["icl_mqar"], "ssa") is None
    board = SimpleNamespace(meta={"baseline": "softmax", "convergence": out})
    assert " ".join(cap_text(board).split()) == (
        "The caps against softmax's convergence, the step at which it reached the best value the "
        "rule then stopped it at (or one that left no gain), on its reporting seeds: icl_mqar: "
        "the cap, 22,000 steps, is 3.7x the median seed's 6,000, below the protocol's 4x: a "
        "scorer that slow reads \"not learned within the cap\", not \"slower\" (the best step "
        "of each seed: 4,300, 4,800, 6,000, 7,900, 13,800; 1 ran to the cap unconverged, counted "
        "as slower than every other seed).")
    # with the accuracy's range declared, seed 4's best value, 0.995, left no gain above 0.01
    record = stopped("icl_mqar", "softmax", 4, 2000, cap=22000, best_step=13800, reason="cap")
    record["extra"]["train"]["stopping"]["best_value"] = 0.995
    record["extra"]["validation"] = {"metric": "val_accuracy", "direction": "higher"}
    write_record(tmp_path, record)
    bounded = summary(load_records(tmp_path), {"icl_mqar": [0.0, 1.0]})
    assert bounded["icl_mqar"]["scorers"]["softmax"]["median_converged"] == 6000
    text = cap_text(SimpleNamespace(meta={"baseline": "softmax", "convergence": bounded}))
    assert " ".join(text.split()).endswith(
        "13,800; 1 reached the cap with no gain left, counted at its best step).")
    for seed in range(3):
        write_record(tmp_path, stopped("icl_mqar", "softmax", seed, None, cap=22000,
                                       best_step=20000, reason="cap", learned=False))
    out = summary(load_records(tmp_path))
    assert cap_multiple(out["icl_mqar"], "softmax") == 0.0
    text = cap_text(SimpleNamespace(meta={"baseline": "softmax", "convergence": out}))
    assert ("icl_mqar: the median seed ran to the cap, 22,000 steps, unconverged, below the "
            "protocol's 4x") in " ".join(text.split())


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
    # softmax at its own neighbours against ssa at its chosen 2e-3 (0.86 / 0.87 on the two seeds):
    # 1e-3 at 0.88 / 0.89 beats ssa, 4e-3 at 0.70 / 0.71 does not
    for lr, value in ((1e-3, 0.88), (4e-3, 0.70)):
        for seed in (1000, 1001):
            write_record(tmp_path, tuned("icl_mqar", "softmax", seed, lr, value + seed % 2 / 100,
                                         role="sweep"))
    both = check(load_records(tmp_path), {("icl_mqar", "ssa", "accuracy"): BETTER})
    both = both[("icl_mqar", "ssa", "accuracy")]
    assert both["baseline_rates"] == {1e-3: False, 4e-3: True}
    assert words(both) == "rate-sensitive (holds at 1/2; at softmax's 1/2)"
    assert words({"holds": 2, "of": 2, "baseline": "softmax", "baseline_rates": {1e-3: True}}) \
        == "holds at 2/2 neighbouring rates; at softmax's 1/1"
    assert words({"holds": 2, "of": 2, "baseline": "softmax", "baseline_rates": {1e-3: False}}) \
        == "rate-sensitive (holds at 2/2; at softmax's 0/1)"


def test_a_chosen_rate_at_an_end_of_its_grid_says_its_one_neighbour_is_all_there_is(tmp_path):
    """cosformer is chosen at its grid's lowest rate, 1e-3: its one neighbour, 2e-3, is checked,
    and the words say that no lower rate was run."""
    from leaderboard.method.neighbours import WORSE, check, words

    grid = {"softmax": {2e-3: 0.80}, "cosformer": {1e-3: 0.60, 2e-3: 0.30}}
    for scorer, at in grid.items():
        for lr, value in at.items():
            for seed in (1000, 1001):
                write_record(tmp_path, tuned("icl_mqar", scorer, seed, lr, value, role="sweep"))
        write_record(tmp_path, tuned("icl_mqar", scorer, 0, min(at), 0.5, role="tuned"))
    result = check(load_records(tmp_path), {("icl_mqar", "cosformer", "accuracy"): WORSE})
    result = result[("icl_mqar", "cosformer", "accuracy")]
    assert (result["rates"], result["edge"]) == ({2e-3: True}, "lowest")
    assert words(result) == "holds at 1/1 neighbouring rates; the grid's lowest rate"
    assert words({**result, "holds": 0}) == "rate-sensitive (holds at 0/1; the grid's lowest rate)"
    # a middle rate whose neighbour has one seed only: that neighbour is left out, and counted
    write_record(tmp_path, tuned("icl_mqar", "ssa", 0, 2e-3, 0.5, role="tuned"))
    for lr, seeds in ((1e-3, (1000, 1001)), (4e-3, (1000,))):
        for seed in seeds:
            write_record(tmp_path, tuned("icl_mqar", "ssa", seed, lr, 0.4, role="sweep"))
    ssa = check(load_records(tmp_path), {("icl_mqar", "ssa", "accuracy"): WORSE})
    ssa = ssa[("icl_mqar", "ssa", "accuracy")]
    assert (ssa["rates"], ssa["left_out"], "edge" in ssa) == ({1e-3: True}, 1, False)
    assert words(ssa) == "holds at 1/1 neighbouring rates; 1 left out"


def test_a_neighbour_a_screen_left_on_two_seeds_is_compared_on_those_seeds(tmp_path):
    from leaderboard.method.neighbours import BETTER, check

    def sweep(scorer, lr, values):
        for seed, value in values.items():
            write_record(tmp_path, tuned("icl_mqar", scorer, seed, lr, value, role="sweep"))

    sweep("softmax", 2e-3, {1000: 0.9, 1001: 0.9, 1002: 0.1, 1003: 0.1})   # mean 0.5 on 4 seeds
    sweep("ssa", 2e-3, {1000: 0.95, 1001: 0.95, 1002: 0.95, 1003: 0.95})
    sweep("ssa", 1e-3, {1000: 0.85, 1001: 0.85})         # screened: 0.85 vs softmax's 0.9 there
    sweep("ssa", 4e-3, {1000: 0.95})                      # one seed: left out
    for scorer in ("softmax", "ssa"):
        write_record(tmp_path, tuned("icl_mqar", scorer, 0, 2e-3, 0.9, role="tuned"))
    found = check(load_records(tmp_path), {("icl_mqar", "ssa", "accuracy"): BETTER})
    assert found[("icl_mqar", "ssa", "accuracy")]["rates"] == {1e-3: False}


def test_only_the_sweep_cells_a_choice_consulted_count_next_door_and_in_its_points(tmp_path):
    """softmax's rule consulted seeds 1000 and 1001 at 4e-3. A cell of seed 1002 run there
    before the screen (on the plateau, 0.10) is in the records, yet outside the rule's view: it
    would pull softmax's mean at 4e-3 below ssa's on the seeds ssa has, making ssa's verdict hold
    at softmax's 4e-3, where on the consulted seeds (0.90 against ssa's 0.90) it does not. On
    ssa's side, an unconsulted seed 1002 at its neighbour 4e-3 (0.0) would turn the verdict there
    (0.95 against 0.90 on the consulted seeds). The tuning points show the consulted cells too,
    and a rate outside the chosen grid as run; the cost counts every cell run."""
    from leaderboard.method.neighbours import BETTER, check
    from leaderboard.method.tuning import summary as tuning_summary

    listed = {"softmax": [], "ssa": []}

    def sweep(scorer, lr, values, *, consulted=True):
        for seed, value in values.items():
            record = tuned("icl_mqar", scorer, seed, lr, value, role="sweep")
            record["extra"]["validation"] = {"metric": "val_accuracy", "direction": "higher",
                                             "value": value}
            write_record(tmp_path, record)
            if consulted:
                listed[scorer].append(record["cell_id"])

    for scorer in ("softmax", "ssa"):
        sweep(scorer, 2e-3, {1000: 0.9, 1001: 0.9, 1002: 0.9, 1003: 0.9})
        sweep(scorer, 1e-3, {1000: 0.5, 1001: 0.5})
    sweep("softmax", 4e-3, {1000: 0.9, 1001: 0.9})
    sweep("softmax", 4e-3, {1002: 0.1}, consulted=False)
    sweep("softmax", 8e-3, {1000: 0.2}, consulted=False)
    sweep("ssa", 4e-3, {1000: 0.95, 1001: 0.95})
    sweep("ssa", 4e-3, {1002: 0.0}, consulted=False)
    for scorer in ("softmax", "ssa"):
        record = tuned("icl_mqar", scorer, 0, 2e-3, 0.9, role="tuned")
        record["tuning"]["grid"] = {"lr": [1e-3, 2e-3, 4e-3]}
        record["tuning"]["sweep_cells"] = sorted(listed[scorer])
        write_record(tmp_path, record)
    loaded = load_records(tmp_path)
    # ssa at its chosen 2e-3 is 0.9 on every seed: against softmax's 0.9 at 4e-3 (seeds 1000 and
    # 1001) it is not better; with seed 1002's 0.1 it would be (mean 0.63 on three seeds)
    result = check(loaded, {("icl_mqar", "ssa", "accuracy"): BETTER})[
        ("icl_mqar", "ssa", "accuracy")]
    assert result["baseline_rates"] == {1e-3: True, 4e-3: False}
    assert result["rates"] == {1e-3: False, 4e-3: True}
    tuning = tuning_summary(loaded)["icl_mqar"]
    points = tuning["scorers"]["softmax"]["points"]
    assert [(p["point"]["lr"], p["ok"], p["mean"]) for p in points] == [
        (1e-3, 2, 0.5), (2e-3, 4, 0.9), (4e-3, 2, 0.9), (8e-3, 1, 0.2)]
    # every cell run counts in the cost, and a rate run outside the chosen grid is among the
    # values swept
    assert tuning["scorers"]["softmax"]["sweep_cells"] == 10
    assert tuning["grid"]["lr"] == [1e-3, 2e-3, 4e-3, 8e-3]


GRID = [1e-3, 2e-3, 4e-3]


def converged_record(scorer, seed, error, target_step, *, lr=2e-3, role="tuned", stop=None):
    """A record of icl_mqar trained to convergence: its stopping block (dense curve every 100
    steps, a target), its validation block and its tuning block."""
    record = make_record("icl_mqar", scorer, seed, {"error": error},
                         config={"n_layer": 2, "lr": lr})
    record["cell"]["role"] = role
    record["tuning"] = ({"role": "report", "point": {"lr": lr}, "grid": {"lr": GRID}}
                        if role == "tuned" else {"role": "sweep", "point": {"lr": lr}})
    stop = stop or (target_step or 800) + 300
    steps = list(range(100, stop + 1, 100))
    values = [min(1.0, 0.3 + s / 1000) for s in steps]
    record["extra"]["train"] = {"stopping": {
        "rule": "converged", "patience": 3, "tolerance": 0.01, "eval_every": 100, "cap": 2000,
        "stop_step": stop, "reason": "converged" if target_step else "cap",
        "learned": target_step is not None, "best_step": stop, "best_value": values[-1],
        "learned_at": 0.5, "curve": {"step": steps, "value": values, "items": 8},
        "target": 0.9, "target_step": target_step}}
    record["extra"]["validation"] = {"metric": "val_accuracy", "direction": "higher",
                                     "reach": 0.9, "value": values[-1], "items": 8,
                                     "curve": {"step": [1, 10, 100], "value": [0.1, 0.2, 0.4]}}
    from leaderboard.loading.schema import cell_id
    record["cell_id"] = cell_id(record["cell"])
    return record


def converged_results(root):
    """softmax: every seed reaches the target; ssa: a lower error, three of five seeds reach
    it; sweeps on tuning seeds at ssa's neighbouring rates (better at 1e-3, worse at 4e-3)."""
    reach = {"softmax": [600, 700, 800, 700, 600], "ssa": [900, None, 1000, 1100, None]}
    errors = {"softmax": 0.30, "ssa": 0.10}
    for scorer, steps in reach.items():
        for seed, step in enumerate(steps):
            write_record(root, converged_record(scorer, seed, errors[scorer] + seed / 1000,
                                                step, stop=None if step else 2000))
    for seed in (1000, 1001):
        write_record(root, converged_record("softmax", seed, 0.3, 700, role="sweep"))
        for lr, error in ((1e-3, 0.2), (4e-3, 0.5)):
            write_record(root, converged_record("ssa", seed, error, 900, lr=lr, role="sweep"))
    return root


def test_a_release_reports_level_speed_reliability_and_the_neighbouring_rates(tmp_path):
    import json

    from leaderboard.publishing.release import release_board, write_release
    from leaderboard.rendering.html.page import render_page
    from html_support import PageTables
    from markdown_support import markdown_tables, merged

    loaded = load_records(converged_results(tmp_path / "results"))
    board = release_board(loaded, "r1", n_boot=200)
    meta = board.meta
    ssa = meta["convergence"]["icl_mqar"]["scorers"]["ssa"]
    assert (ssa["reached"], ssa["seeds"], ssa["split"]) == (3, 5, True)
    row = next(r for r in board.rows.to_dict(orient="records")
               if r["scorer"] == "ssa" and r["metric"] == "error")
    assert row["vs_baseline"] == "better"
    assert meta["neighbours"] == {"icl_mqar": {"ssa": {"error": "rate-sensitive (holds at 1/2)"}}}
    # The dense curve of the stopping blocks, not the validation block's 3 points, with each
    # scorer's median stop step; a stopped seed stands at its best value afterwards.
    curve = meta["curves"]["icl_mqar"]
    assert curve["dense"] and curve["scorers"]["ssa"]["stop_step"] == 1400.0
    assert curve["scorers"]["softmax"]["step"][:3] == [100, 200, 300]
    assert curve["scorers"]["softmax"]["mean"][-1] == pytest.approx(1.0)
    # read at the target the speed is measured at (0.3 + step / 1000 >= 0.9 first at 600), not
    # at a fraction of the baseline's final value
    assert curve["target"] == 0.9 and curve["baseline_final"] is None
    assert curve["scorers"]["softmax"]["reach_step"] == 600
    # ssa's seeds split on the target: each seed's curve, in seed order, no first step of a mean
    # that no seed follows
    assert "seed_curves" not in curve["scorers"]["softmax"]
    seeds = curve["scorers"]["ssa"]["seed_curves"]
    assert [(s["seed"], s["reached"]) for s in seeds] == [
        (0, True), (1, False), (2, True), (3, True), (4, False)]
    assert seeds[1]["value"][:2] == pytest.approx([0.4, 0.5])
    assert curve["scorers"]["ssa"]["reach_step"] is None

    readme = "".join(p.read_text() for p in write_release(board, tmp_path / "r1")
                     if p.name == "README.md")
    assert "## Level, speed and reliability" in readme
    tables = markdown_tables(readme)
    level = merged(tables["icl_mqar"])
    ssa, soft = level["ssa"], level["softmax"]
    level = ssa["level (best checkpoint)"]
    assert level.startswith("error 0.1") and "▲" in level
    speed = "speed: steps to the target [95% CI]"
    # 900, 1000, 1100: exp(6.904405 + 0.0050378 ± 4.302653 * 0.058171) = [780, 1,287]
    assert ssa[speed] == "1,000 [780, 1,287]; 2 of 5 did not reach it"
    assert ssa["reliability [exact 95% CI]"] == ("0.60 [0.15, 0.95]; seeds split: 3 of 5 reach "
                                                 "the target")
    assert ssa["stops"] == "3 converged, 2 at the cap, 2 not learned within the cap"
    reach = "first step the mean reaches the target 0.9"
    assert merged(tables["icl_mqar (val_accuracy, higher is better)"])["ssa"][reach] == (
        "seeds split: 3 of 5 reach it")
    assert merged(tables["icl_mqar (val_accuracy, higher is better)"])["softmax"][reach] == "600"
    assert "drawn seed by seed" in readme
    assert ssa["verdict's sign at the neighbouring rates"] == "error: rate-sensitive (holds at 1/2)"
    assert soft[speed].startswith("680 [") and "did not" not in soft[speed]
    assert "split" not in soft["reliability [exact 95% CI]"]
    curves = merged(tables["icl_mqar (val_accuracy, higher is better)"])
    assert "median stop step" in curves["ssa"] and curves["ssa"]["seeds"] == "5"

    page = PageTables(render_page(json.loads(board.to_json()), [], []))
    table, = [t for t in page.in_section("track-icl") if "level, speed" in t["caption"]]
    cells = {r["attrs"]["data-scorer"]: [c["text"] for c in r["cells"]] for r in table["rows"]}
    assert cells["ssa"][3] == "0.60 [0.15, 0.95]; seeds split: 3 of 5 reach the target"
    assert cells["ssa"][5] == "error: rate-sensitive (holds at 1/2)"


def test_a_release_against_a_fixed_step_one_says_speed_or_level_and_a_changed_rate(tmp_path):
    """Against an earlier release that trained 2,500 steps and chose lr 1e-3 for ssa, ssa's
    verdict that moved names the rate it is chosen at now, 2e-3, beside speed or level."""
    import json

    from leaderboard.publishing.release import release_board

    loaded = load_records(converged_results(tmp_path / "results"))
    now = json.loads(release_board(loaded, "r0", n_boot=200).to_json())
    rows = [{**r, "vs_baseline": "n.s." if r["scorer"] == "ssa" else r["vs_baseline"]}
            for r in now["rows"]]
    earlier = {"meta": {"release": "old",
                        "curves": {"icl_mqar": {"scorers": {"ssa": {"step": [1, 2500]}}}},
                        "tuning": {"icl_mqar": {"scorers": {"ssa": {"chosen": {"lr": 1e-3}}}}}},
               "rows": rows, "overall": now["overall"]}
    changes = release_board(loaded, "r1", earlier=earlier, n_boot=200).meta["changes"]
    (moved,) = [v for t in changes["tasks"] for v in t["verdicts"] if v[1] == "ssa"]
    assert moved[5].startswith("level: the median seed reached its best at step ")
    assert moved[5].endswith("; chosen rate changed (ssa: lr 0.001 then, lr 0.002 now)")


def test_records_without_a_target_add_nothing_to_the_release(tmp_path):
    from leaderboard.publishing.release import release_board

    for seed in range(3):
        for scorer in ("softmax", "ssa"):
            write_record(tmp_path, make_record("icl_mqar", scorer, seed, {"error": 0.2}))
    meta = release_board(load_records(tmp_path), "r0", n_boot=100).meta
    assert "convergence" not in meta and "neighbours" not in meta


def test_the_front_page_says_who_reaches_the_target_whose_seeds_split_and_who_never_does(
        tmp_path):
    """softmax and 'quick' reach the target on every seed, ssa on 3 of 5, relu on none; quick's
    mean steps, 500 [304, 696], against softmax's 680 [576, 784]: the intervals overlap, which
    the line says; a 'quicker' at 120 [100, 140] is apart from softmax."""
    from leaderboard.publishing.release import release_board
    from leaderboard.rendering import summary

    root = converged_results(tmp_path / "results")
    for seed in range(5):
        write_record(root, converged_record("quick", seed, 0.3, 300 + 100 * seed))
        write_record(root, converged_record("relu", seed, 0.7, None, stop=2000))
    text = " ".join(summary.sentences(release_board(load_records(root), "r1", n_boot=200)))
    assert ("icl_mqar, trained until its validation metric converges (target 0.9, cap 2,000 "
            "steps): 2 of 4 scorers reach the target on every seed; seeds split for ssa (3/5); "
            "no seed reaches it within the cap for relu. Fewest steps to the target of them, "
            "mean over seeds: quick (500; softmax 680, their 95% intervals overlapping).") in text
    for seed in range(5):
        write_record(root, converged_record("quicker", seed, 0.3, 100 + 10 * seed))
    text = " ".join(summary.sentences(release_board(load_records(root), "r1", n_boot=200)))
    assert "mean over seeds: quicker (120; softmax 680)." in text
    # where the baseline is the fastest, the next scorer stands beside it: slow at 1,100
    # [904, 1,296] is apart from softmax's 680 [576, 784]
    other = converged_results(tmp_path / "other")
    for seed in range(5):
        write_record(other, converged_record("slow", seed, 0.3, 900 + 100 * seed))
    text = " ".join(summary.sentences(release_board(load_records(other), "r1", n_boot=200)))
    assert "mean over seeds: softmax (680; next slow 1,100)." in text


def test_a_scorer_the_cap_stopped_before_it_converged_reads_so_beside_its_level(tmp_path):
    """'slow' reaches the target on every seed but the cap stops each run before the rule sees
    it converge: its level may not be a converged one, which the stops column and the front page
    say; ssa's seeds at the cap never learned, so they do not count."""
    from leaderboard.publishing.release import release_board
    from leaderboard.rendering import summary
    from leaderboard.rendering.convergence_section import task_rows

    root = converged_results(tmp_path / "results")
    for seed in range(5):
        record = converged_record("slow", seed, 0.2, 1500, stop=2000)
        record["extra"]["train"]["stopping"]["reason"] = "cap"
        write_record(root, record)
    board = release_board(load_records(root), "r1", n_boot=200)
    stops = {row[0]: row[4] for row in task_rows(board, "icl_mqar")}
    assert stops["slow"] == "0 converged, 5 at the cap (5 of them learned, not converged)"
    assert stops["ssa"] == "3 converged, 2 at the cap, 2 not learned within the cap"
    text = " ".join(summary.sentences(board))
    assert "most seeds at the cap unconverged (their level perhaps not reached) for slow." in text


def test_no_gain_is_left_within_the_tolerance_of_the_end_of_the_metrics_range():
    from leaderboard.method.convergence import no_gain_left
    from tasks.stopping import Plateau

    def block(best):
        return {"best_value": best, "tolerance": 0.005}
    # an accuracy in [0, 1]: 1 - 0.996 = 0.004 leaves no gain above 0.005; 1 - 0.994 = 0.006 does
    assert no_gain_left(block(0.996), "higher", (0.0, 1.0))
    assert not no_gain_left(block(0.994), "higher", (0.0, 1.0))
    # the training rule's own test of a gain, at the end of the range, decides the edge cases
    for best in (0.995, 0.9950001, 0.99499, 1.0):
        rule = Plateau("higher", 10, 0.005, best_value=best)
        assert no_gain_left(block(best), "higher", (0.0, 1.0)) == (not rule.improves(1.0))
    # a loss in [0, inf): 0.004 - 0 is within 0.005, 0.006 is not; no end, no bound
    assert no_gain_left(block(0.004), "lower", (0.0, None))
    assert not no_gain_left(block(0.006), "lower", (0.0, None))
    assert not no_gain_left(block(1e9), "higher", (0.0, None))
    assert not no_gain_left(block(None), "higher", (0.0, 1.0))


def test_a_seed_at_the_cap_with_no_gain_left_counts_as_converged_at_its_best_step(tmp_path):
    """'slow' runs every seed to the cap after learning. Seeds 0-2 reached an accuracy of 1
    (tolerance 0.01: no evaluation could count as a gain), seeds 3-4 0.985 (a gain of 0.015 was
    still possible). Published as `scorebench publish` does, with icl_mqar's declared range, the
    release counts three seeds with no gain left and two unconverged, so the front page does not
    call the level cut, the median seed's convergence is its best step, and the release
    reproduces; without the range every seed at the cap counts as unconverged."""
    from leaderboard.method.convergence import summary as convergence_summary
    from leaderboard.publishing.reproduction import reproduce
    from leaderboard.rendering import summary
    from leaderboard.rendering.convergence_section import task_rows
    from suite.publishing import publish_release

    root = converged_results(tmp_path / "results")
    for seed in range(5):
        record = converged_record("slow", seed, 0.2, 1500, stop=2000)
        stopping = record["extra"]["train"]["stopping"]
        stopping.update(reason="cap", best_step=1800)
        if seed >= 3:
            stopping["best_value"] = 0.985
        write_record(root, record)
    published = publish_release(root, "2026-12-06-test", tmp_path / "releases",
                                tmp_path / "LEADERBOARD.md", n_boot=200)
    mqar = published.board.meta["convergence"]["icl_mqar"]
    assert mqar["range"] == [0.0, 1.0]
    slow = mqar["scorers"]["slow"]
    assert (slow["cap"], slow["no_gain_left"], slow["median_converged"]) == (5, 3, 1800)
    assert slow["median_settled"] == 1800
    # ssa's seeds 1 and 4 never learn: a longer run left them where they were (step 0), while
    # for the cap's measurement they count as never converging; the others' best steps
    ssa = mqar["scorers"]["ssa"]
    assert (ssa["median_settled"], ssa["median_converged"]) == (1200, 1400)
    stops = {row[0]: row[4] for row in task_rows(published.board, "icl_mqar")}
    assert stops["slow"] == ("0 converged, 5 at the cap (3 of them with no gain left; 2 of them "
                             "learned, not converged)")
    assert stops["ssa"] == "3 converged, 2 at the cap, 2 not learned within the cap"
    assert "unconverged" not in " ".join(summary.sentences(published.board))
    assert reproduce(root, tmp_path / "releases", "2026-12-06-test").ok

    unbounded = convergence_summary(load_records(root))["icl_mqar"]
    assert "range" not in unbounded
    slow = unbounded["scorers"]["slow"]
    assert slow["no_gain_left"] == 0
    assert slow["median_converged"] is None and slow["median_settled"] is None


def test_the_tuning_table_of_a_rule_with_a_target_shows_its_score_not_a_worst_cell(tmp_path):
    """Under MQAR's rule a rate scores the fraction of its tuning seeds at the target, then their
    median: the table says so instead of calling the median a worst cell."""
    from leaderboard.loading.choice import SELECTION_RULE
    from leaderboard.method.tuning import summary
    from leaderboard.rendering.tuning_section import markdown

    root = tmp_path / "results"
    reach = {1e-3: (700, 800), 2e-3: (900, None), 4e-3: (None, None)}
    for lr, steps in reach.items():
        for seed, step in zip((1000, 1001), steps):
            write_record(root, converged_record("ssa", seed, 0.2, step, lr=lr, role="sweep",
                                                stop=None if step else 2000))
    for seed in range(2):
        record = converged_record("ssa", seed, 0.2, 700, lr=1e-3)
        record["tuning"]["rule_params"] = {"target": 0.9}
        write_record(root, record)
    tuning = summary(load_records(root), rule=SELECTION_RULE)
    ssa = tuning["icl_mqar"]["scorers"]["ssa"]
    assert ssa["rule_choice"] == {"lr": 1e-3}
    assert ssa["rate_reached"] == {"lr=0.001": 1.0, "lr=0.002": 0.5, "lr=0.004": 0.0}
    text = markdown(tuning, [])
    assert "at its rate: seeds at the target, median" in text and "worst cell" not in text
    row = next(line for line in text.splitlines() if line.startswith("| ssa"))
    assert "| 100%, 1.00 " in row


def test_the_release_recomputes_which_rates_a_tie_decided_among(tmp_path):
    """Every tuning seed at 1e-3 and 2e-3 reaches the target and ends at an accuracy of 1, within
    the tolerance 0.01: the release's recomputed choice names both as tied; 4e-3 never learns."""
    from leaderboard.loading.choice import SELECTION_RULE
    from leaderboard.method.tuning import summary

    reach = {1e-3: (700, 800), 2e-3: (600, 700), 4e-3: (None, None)}
    for lr, steps in reach.items():
        for seed, step in zip((1000, 1001), steps):
            write_record(tmp_path, converged_record("ssa", seed, 0.2, step, lr=lr, role="sweep",
                                                    stop=None if step else 2000))
    record = converged_record("ssa", 0, 0.2, 700, lr=1e-3)
    record["tuning"]["rule_params"] = {"target": 0.9, "tie": 0.01}
    write_record(tmp_path, record)
    ssa = summary(load_records(tmp_path), rule=SELECTION_RULE)["icl_mqar"]["scorers"]["ssa"]
    assert ssa["tied"] == ["lr=0.001", "lr=0.002"]


def test_the_tuning_method_names_the_choices_a_tie_decided():
    """Each task names the scorers whose rate a tie decided, and how many of their rates tied."""
    from leaderboard.rendering.tuning_section import _rule_text

    def scorer(tied, scores):
        return {"chosen": {"lr": 1e-3}, "rule_choice": {"lr": 1e-3}, "complete": True,
                "rate_scores": scores, **({"tied": tied} if tied else {})}
    three = {"lr=0.001": 0.17, "lr=0.002": 0.18, "lr=0.004": None}
    tuning = {"icl_linear": {"rule": "worst cell at the rate, rates within 0.05 a tie ...",
                             "scorers": {"softmax": scorer(["lr=0.001", "lr=0.002"], three),
                                         "ssa": scorer([], three)}},
              "icl_mqar": {"rule": "most tuning seeds reaching 0.9 ...",
                           "scorers": {"sparsemax": scorer(["lr=0.001", "lr=0.002"],
                                                           {**three, "lr=0.004": 0.3})}}}
    text = _rule_text(tuning)
    assert text.endswith("tied: icl_linear: softmax (all 2); icl_mqar: sparsemax (2 of 3).")
    # a scorer reported at an earlier rule's point: the tie decided the rule's choice, not its
    tuning["icl_mqar"]["scorers"]["sparsemax"]["chosen"] = {"lr": 2e-3}
    assert _rule_text(tuning).endswith("tied: icl_linear: softmax (all 2).")



def test_the_front_page_links_every_section_of_the_release_the_convergence_beside_the_tasks(
        tmp_path):
    import re

    from leaderboard.publishing.release import release_board, write_leaderboard_md, write_release
    from leaderboard.rendering.markdown import TRACK_TITLES, TRACKS

    board = release_board(load_records(converged_results(tmp_path / "results")), "r1",
                          n_boot=200)
    write_release(board, tmp_path / "releases" / "r1")
    readme = (tmp_path / "releases" / "r1" / "README.md").read_text(encoding="utf-8")
    titles = [line[3:] for line in readme.splitlines() if line.startswith("## ")]
    after_tasks = titles.index(TRACK_TITLES[TRACKS[-1]]) + 1
    assert titles[after_tasks:after_tasks + 2] == ["Level, speed and reliability",
                                                   "Failed and skipped cells"]
    index = write_leaderboard_md(tmp_path / "releases", tmp_path / "LEADERBOARD.md").read_text(
        encoding="utf-8")
    listed = re.findall(r"^- \[(.+)\]\(releases/r1/README\.md#([^)]+)\)$", index, re.M)
    assert [title for title, _ in listed] == titles
    # each anchor is the one GitHub gives the heading: lower case, punctuation dropped
    assert ("Level, speed and reliability", "level-speed-and-reliability") in listed
