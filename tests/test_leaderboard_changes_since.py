"""leaderboard.publishing.changes_since: what changed since an earlier release, on hand-built
releases."""
from __future__ import annotations

import json

import pytest

from leaderboard.publishing.changes_since import changes
from leaderboard.rendering.markdown import changes_section
from leaderboard.publishing.release import read_results
from markdown_support import markdown_tables


def row(task, metric, scorer, verdict="n.s.", tier=1, n=5):
    return {"profile": "cpu", "task": task, "metric": metric, "scorer": scorer,
            "vs_baseline": verdict, "tier": tier, "n": n}


def overall(scores):
    return [{"profile": "cpu", "scorer": s, "score": v} for s, v in scores.items()]


BEFORE = {"meta": {"release": "old"},
          "rows": [row("t1", "m", "softmax", ""), row("t1", "m", "a", "worse", 2),
                   row("t1", "m", "b"), row("t1", "m", "c", "better"),
                   row("t2", "m", "a"), row("t2", "m", "gone")],
          "overall": overall({"softmax": 0.9, "a": 0.7, "b": 0.5, "c": 0.3})}


def test_verdicts_tiers_and_unmatched_rows_are_counted_per_task():
    now_rows = [row("t1", "m", "softmax", "", 3), row("t1", "m", "a", "n.s.", 1),
                row("t1", "m", "b", "n.s.", 2), row("t1", "m", "c", "better"),
                row("t2", "m", "softmax", ""), row("t2", "m", "a"), row("t2", "m", "new")]
    ch = changes(now_rows, overall({"softmax": 0.9, "a": 0.7, "b": 0.5, "c": 0.3}), BEFORE,
                 "softmax")
    t1, t2 = ch["tasks"]
    assert (t1["task"], t1["compared"], t1["only_now"], t1["only_before"]) == ("t1", 3, 0, 0)
    # the baseline's own tier is left out; each change names the rule that moved it
    assert t1["verdicts"] == [["m", "a", "worse", "n.s.", "the records or the test"]]
    assert [t[:4] for t in t1["tiers"]] == [["m", "a", "2", "1"], ["m", "b", "1", "2"]]
    assert (t2["compared"], t2["only_now"], t2["only_before"], t2["verdicts"]) == (1, 1, 1, [])
    assert ch["overall"][0]["rho"] == pytest.approx(1.0)
    text = changes_section(ch)
    tables = markdown_tables(text)["What changed since old"]
    assert tables[0]["rows"][0] == {"profile": "cpu", "task": "t1", "rows in both": "3",
                                    "verdicts changed": "1", "tiers changed": "2",
                                    "rows new": "0", "rows gone": "0"}
    verdicts = tables[1]
    moved = verdicts["rows"][0]
    assert [moved[k] for k in ("task", "metric", "scorer", "before", "now")] == [
        "t1", "m", "a", "worse", "n.s."]
    assert verdicts["notes"][moved["rule"]] == "the records or the test"


def test_each_moved_verdict_tier_and_claim_names_the_rule_that_moved_it():
    before = {"meta": {"release": "old"},
              "rows": [dict(row("t", "m", "a", "worse", 2), min_effect=1e-6, informative=True),
                       dict(row("t", "m", "b", "better"), min_effect=1e-6, informative=True),
                       dict(row("t", "m", "c", "tie"), min_effect=1e-6, informative=True)],
              "overall": [dict(profile="cpu", scorer="a", score=0.5, tier=1)],
              "claims": [dict(profile="cpu", id="k", scorer="x", metric="m", verdict="supported"),
                         dict(profile="cpu", id="j", scorer="x", metric="m1", verdict="n.s."),
                         dict(profile="cpu", id="i", scorer="x", metric="m1",
                              verdict="supported")]}
    now_rows = [dict(row("t", "m", "a", "within resolution", 1), min_effect=0.02,
                     informative=True),
                dict(row("t", "m", "b", "uninformative", None), min_effect=1e-6,
                     informative=False),
                dict(row("t", "m", "c", "n.s."), min_effect=1e-6, informative=True),
                row("t", "m", "softmax", None)]
    claims = [dict(profile="cpu", id="k", scorer="x", metric="m", verdict="premise absent"),
              dict(profile="cpu", id="j", scorer="x", metric="m2", verdict="uninformative"),
              dict(profile="cpu", id="k", scorer="y", metric="m", verdict="not run"),
              dict(profile="cpu", id="i", scorer="x", metric="m2", verdict="not run",
                   reason="no x records of t / m2")]
    ch = changes(now_rows, [dict(profile="cpu", scorer="a", poi=0.6, tier=2)], before,
                 "softmax", claims)
    rules = {v[1]: v[4] for v in ch["tasks"][0]["verdicts"]}
    assert rules["a"].startswith("practical size") and rules["b"].startswith("informative")
    assert rules["c"].startswith("tie")
    tiers = {t[1]: t[4] for t in ch["tasks"][0]["tiers"]}
    assert tiers["a"].startswith("practical size") and tiers["b"].startswith("informative")
    assert ch["overall_tiers"] == [["cpu", "a", "1", "2", "headline: tiers come from "
                                    "P(better than the baseline), which replaces the normalized "
                                    "score"]]
    why = {(c[1], c[2]): c[5] for c in ch["claims"]}
    assert why[("k", "x")].startswith("premise") and why[("j", "x")] == "judged on m2 (was m1)"
    turned = changes([{**row("t", "m", "a", "degenerate"), "informative": True}, *now_rows[3:]],
                     [], {**before, "rows": before["rows"][:1]}, "softmax")
    assert turned["tasks"][0]["verdicts"][0][4] == ("degenerate: values that do not vary over "
                                                    "seeds give no test")
    # a claim no longer run says why, not that its metric changed
    assert why[("i", "x")] == "not run: no x records of t / m2"
    assert why[("k", "y")].startswith("new entry")
    text = changes_section(ch)
    assert "Overall tiers that changed" in text and "Claim verdicts that changed" in text


@pytest.mark.parametrize("scores, rho", [
    ({"softmax": 0.3, "a": 0.5, "b": 0.7, "c": 0.9}, -1.0),      # order reversed
    ({"softmax": 0.9, "a": 0.5, "b": 0.7, "c": 0.3}, 0.8),       # one swap: 1 - 6*2/(4*15)
])
def test_the_overall_rank_correlation_is_spearmans_rho(scores, rho):
    ch = changes(BEFORE["rows"], overall(scores), BEFORE, "softmax")
    assert ch["overall"][0]["rho"] == pytest.approx(rho)
    assert ch["overall"][0]["scorers"] == ["a", "b", "c", "softmax"]


def test_scorers_in_one_release_only_are_named_and_few_scorers_give_no_rho():
    ch = changes([], overall({"softmax": 1.0, "d": 0.5}), BEFORE, "softmax")
    o = ch["overall"][0]
    assert o["rho"] is None and o["only_now"] == ["d"] and o["only_before"] == ["a", "b", "c"]
    assert "fewer than 3 scorers" in changes_section(ch)
    # the tasks the overall rests on now stand beside its correlation (part-way through a
    # re-run, fewer than the earlier release's)
    rows = [{"profile": "cpu", "scorer": "d", "poi_tasks": {"decoder_lm": 0.9}},
            {"profile": "cpu", "scorer": "softmax", "poi_tasks": {"decoder_lm": 0.5,
                                                                 "icl_mqar": 0.5}}]
    assert ("It rests on 2 task(s) now: decoder_lm, icl_mqar; a tier moves with the tasks it "
            "rests on too.") in " ".join(changes_section(ch, rows).split())


def test_a_release_published_with_changes_since_says_so_and_reproduces(tmp_path, monkeypatch):
    from test_beside import cli, profile, TASKS

    monkeypatch.setenv("COLUMNS", "250")
    records, out = tmp_path / "records", tmp_path / "releases"
    assert cli("run", "--plugin", TASKS, "--profile", profile(tmp_path / "p.toml"),
               "--scorers", "softmax,sparsemax,ssa", "--results", records) == 0
    for path in records.rglob("*.json"):      # as if run from a clean tree, so --check takes them
        record = json.loads(path.read_text())
        record["provenance"].update(git_sha="feedbeef" * 5, git_dirty=False)
        path.write_text(json.dumps(record))
    assert cli("publish", "--results", records, "--release", "r1", "--out", out) == 0
    assert cli("publish", "--results", records, "--release", "r2", "--out", out,
               "--changes-since", "r1") == 0
    meta = read_results(out / "r2")["meta"]
    (task,) = meta["changes"]["tasks"]
    assert meta["changes"]["against"] == "r1" and task["compared"] > 0
    assert task["verdicts"] == [] and task["tiers"] == []
    assert "## What changed since r1" in (out / "r2" / "README.md").read_text()
    assert cli("publish", "--check", "--results", records, "--out", out, "--release", "r2") == 0
    with pytest.raises(SystemExit, match="r0/results.json.gz does not exist"):
        cli("publish", "--results", records, "--release", "r3", "--out", out,
            "--changes-since", "r0")


def test_tuned_records_supersede_the_untuned_records_of_their_task(tmp_path, monkeypatch):
    from test_beside import cli, profile, TASKS

    monkeypatch.setenv("COLUMNS", "250")
    records, prof = tmp_path / "records", profile(tmp_path / "p.toml")
    assert cli("run", "--plugin", TASKS, "--profile", prof, "--scorers", "softmax,sparsemax",
               "--no-tuning", "--results", records) == 0
    assert cli("run", "--plugin", TASKS, "--profile", prof, "--scorers", "softmax",
               "--results", records) == 0
    assert cli("publish", "--results", records, "--release", "r", "--allow-dirty") == 0
    release = read_results(records / "releases" / "r")
    assert {(r["profile"], r["scorer"]) for r in release["rows"]} == {("p", "softmax")}
    assert [(s["scorer"], s["n_cells"], s["reason"].split(":")[0])
            for s in release["superseded"]] == [("softmax", 3, "untuned"),
                                                ("sparsemax", 3, "untuned")]


def test_a_skipped_record_is_never_superseded_as_untuned_and_joins_its_tasks_setting():
    from leaderboard.loading.records import Record
    from leaderboard.loading.selection import setting_labels, split_superseded

    def record(scorer, status, lr, tuned):
        tuning = {"base_grid": {"lr": [1e-3, 4e-3]}} if tuned else None
        return Record(path=f"t/{scorer}/{lr}.json", cell_id=scorer, task="t", task_version=1,
                      track="icl", scorer=scorer, scorer_version=1, scorer_kwargs={},
                      profile="cpu", seed=0, config={"lr": lr, "steps": 10}, status=status,
                      message="", step=None, metrics={}, metric_specs={}, grids={}, items={},
                      role="tuned" if tuned else "report", tuning=tuning)

    tuned = record("softmax", "ok", 4e-3, True)
    untuned = record("sparsemax", "ok", 3e-4, False)
    na = record("stick_breaking", "skipped", 3e-4, False)   # the profile's default recipe
    current, superseded = split_superseded([tuned, untuned, na])
    assert [r.scorer for r in current] == ["softmax", "stick_breaking"]
    assert [s["scorer"] for s in superseded] == ["sparsemax"]
    labels = setting_labels(current)
    assert {labels[("t", "cpu", r.config_key)] for r in current} == {"cpu"}
    # two settings of the task: the n/a record of a third recipe keeps a label of its own
    other = record("sparsemax", "ok", 1e-2, False)
    na_elsewhere = record("stick_breaking", "skipped", 5e-4, False)
    labels = setting_labels([untuned, other, na_elsewhere])
    assert len({labels[("t", "cpu", r.config_key)] for r in (untuned, other, na_elsewhere)}) == 3


def test_reporting_records_of_a_point_chosen_before_another_are_superseded():
    from leaderboard.loading.records import Record
    from leaderboard.loading.selection import split_superseded
    from leaderboard.rendering.tuning_section import method_text

    def record(scorer, seed, lr, finished, rule=True):
        tuning = {"role": "report", "point": {"lr": lr}, "base_grid": {"lr": [1e-3, 4e-3]}}
        if rule:
            tuning["rule"] = "worst cell at the rate, then best mean"
        return Record(path=f"t/{scorer}/{lr}-{seed}.json", cell_id=f"{scorer}{lr}{seed}",
                      task="t", task_version=1, track="icl", scorer=scorer, scorer_version=1,
                      scorer_kwargs={}, profile="cpu", seed=seed,
                      config={"lr": lr, "steps": 10}, status="ok", message="", step=None,
                      metrics={}, metric_specs={}, grids={}, items={}, role="tuned",
                      tuning=tuning, provenance={"finished": finished})

    # the first choice ran both seeds; the later choice has run one of them so far
    before = [record("ssa", s, 4e-3, f"2026-12-01T0{s}:00") for s in (0, 1)]
    after = record("ssa", 0, 1e-3, "2026-12-03T00:00")
    other = record("softmax", 0, 4e-3, "2026-11-30T00:00", rule=False)
    current, superseded = split_superseded([*before, after, other])
    assert sorted((r.scorer, r.config["lr"]) for r in current) == [("softmax", 4e-3),
                                                                    ("ssa", 1e-3)]
    (row,) = superseded
    assert row["scorer"] == "ssa" and row["n_cells"] == 2
    assert row["reason"] == ("tuned at lr=0.004, which the tuning protocol no longer chooses "
                             "(its latest choice: lr=0.001)")

    def summary(rule, chosen, rule_choice):
        t = {"grid": {"lr": [1e-3, 4e-3]}, "tuning_seeds": [1000], "cells": {"sweep": 4, "report": 2},
             "scorers": {"ssa": {"complete": True, "chosen": chosen, "rule_choice": rule_choice}}}
        return {"t": {**t, "rule": rule} if rule else t}

    agrees = method_text(summary("r", {"lr": 1e-3}, {"lr": 1e-3}))
    assert "by its worst tuning cell" in agrees and "earlier rule" not in agrees
    assert "its rule is its own: t: r." in agrees            # a task's own rule is named
    from leaderboard.loading.choice import SELECTION_RULE
    assert "its own" not in method_text(summary(SELECTION_RULE, {"lr": 1e-3}, {"lr": 1e-3}))
    differs = method_text(summary("r", {"lr": 4e-3}, {"lr": 1e-3}))
    assert "an earlier rule chose, not the rule's: ssa (t: the rule chooses lr=0.001)" in differs
    before = method_text(summary(None, {"lr": 4e-3}, None))
    assert "worst" not in before and "A point's score is its mean" in before


def test_a_task_whose_scorers_were_chosen_under_two_rules_names_each_with_its_scorers():
    """A rule extended mid-board (a growth step added): the scorers tuned before keep the rule
    their records name, and the release says which scorers each rule chose for."""
    from leaderboard.loading.choice import SELECTION_RULE
    from leaderboard.loading.records import LoadedRecords, Record
    from leaderboard.method import tuning
    from leaderboard.rendering.tuning_section import method_text

    def record(scorer, role, seed, rule, **provenance):
        block = {"role": role, "point": {"lr": 1e-3}, "grid": {"lr": [1e-3]},
                 "selection_metric": "val", "direction": "higher", "rule": rule}
        return Record(path=f"t/{scorer}/{role}-{seed}.json", cell_id=f"{scorer}{role}{seed}",
                      task="t", task_version=1, track="icl", scorer=scorer, scorer_version=1,
                      scorer_kwargs={}, profile="cpu", seed=seed, config={"lr": 1e-3},
                      status="ok", message="", step=None, metrics={}, metric_specs={}, grids={},
                      items={}, role="tuned" if role == "report" else role, tuning=block,
                      validation={"metric": "val", "value": 0.9, "direction": "higher"},
                      provenance={"finished": "2026-12-05", **provenance})

    rules = {"softmax": "rule A", "ssa": "rule B", "relu": "rule B"}
    loaded = LoadedRecords([record(s, "report", 0, r) for s, r in rules.items()], [],
                           [record(s, "sweep", 1000, r) for s, r in rules.items()])
    t = tuning.summary(loaded, SELECTION_RULE)["t"]
    assert t["rule"] == "rule B" and t["rules"] == {"rule A": ["softmax"],
                                                    "rule B": ["relu", "ssa"]}
    assert "its rule is its own: t: rule A (softmax) / rule B (relu, ssa)." in method_text(
        {"t": t})
    grown = {**t, "rules": {"A, then B": ["softmax"], "A, then B; screened": ["ssa"],
                            "A, then B; screened; grown": ["relu"]}}
    assert "t: A, then B (for softmax: no more; for ssa: screened; for relu: screened; grown)." \
        in method_text({"t": grown})
    same = tuning.summary(LoadedRecords([record("ssa", "report", 0, "rule B")], [],
                                        [record("ssa", "sweep", 1000, "rule B")]),
                          SELECTION_RULE)["t"]
    assert same["rule"] == "rule B" and "rules" not in same
    # A reporting record carried over from an earlier sweep keeps that sweep's block: the rule is
    # the one of the records the current sweep chose, whatever their order; a scorer whose sweep
    # has no choice yet names none.
    carried = record("ssa", "report", 4, "rule A", finished="2026-12-06",
                     carried_over={"from": "0123456789abcdef", "task_version": 2})
    for order in (1, -1):
        reports = [carried, record("ssa", "report", 0, "rule B")][::order]
        mixed = tuning.summary(LoadedRecords(reports, [], [record("ssa", "sweep", 1000, "rule B"),
                                                           record("relu", "sweep", 1000, None)]),
                               SELECTION_RULE)["t"]
        assert mixed["rule"] == "rule B" and "rules" not in mixed


def test_the_tuning_method_names_the_seeds_each_task_tuned_on():
    """A bimodal task tunes on more seeds than the rest; the method says which ran which."""
    from leaderboard.rendering.tuning_section import method_text

    def task(seeds):
        return {"grid": {"lr": [1e-3]}, "tuning_seeds": seeds, "scorers": {},
                "cells": {"sweep": 1, "report": 1}}
    text = method_text({"a": task([1001, 1000]), "b": task([1000, 1001]),
                        "mqar": task([1000, 1001, 1002, 1003])})
    assert "on tuning seeds [1000, 1001] (mqar: [1000, 1001, 1002, 1003])," in text
    assert "on tuning seeds [1000, 1001], which" in method_text({"a": task([1000, 1001])})


def converged(target, **medians):
    return {"target": target, "cap": 20000,
            "scorers": {s: {"median_settled": m} for s, m in medians.items()}}


def test_a_verdict_moved_on_a_task_now_trained_to_convergence_says_speed_or_level():
    """The earlier release trained 2,500 steps (its curves end there). Now a's median seed
    reaches its best at 6,000 (speed), b's within the budget beside softmax's (level), c's never
    learns (level: a longer run did not move it), and d's within the budget while softmax's
    after it (speed: the baseline was read before it had reached its level); one the cap
    stopped while it could still gain reads speed."""
    curve = {"step": [1, 100, 2500]}
    before = {"meta": {"release": "old", "curves": {"t": {"scorers": {"a": curve}}}},
              "rows": [row("t", "m", s, "worse") for s in "abc"] + [row("u", "m", "a", "worse")],
              "overall": []}
    now = ([row("t", "m", s, "n.s.") for s in "abc"] + [row("u", "m", "a", "n.s.")]
           + [row(task, "m", "softmax", None) for task in "tu"])
    ch = changes(now, [], before, "softmax", convergence={
        "t": converged(0.9, a=6000.0, b=2000.0, c=0.0, softmax=2200.0)})
    t, u = ch["tasks"]
    why = {v[1]: v[5] for v in t["verdicts"]}
    assert why["a"] == ("speed: the median seed reached its best at step 6,000 (softmax: reached "
                        "its best at step 2,200); the earlier budget was 2,500 steps")
    assert why["b"].startswith("level:")
    assert why["c"].startswith("level: the median seed never learned (softmax: reached its best")
    assert [len(v) for v in u["verdicts"]] == [5]           # u is not trained to convergence
    # every record of t was re-run, so the rule names the records beside any rule of the method
    assert {v[4] for v in t["verdicts"]} == {"the records, re-trained to convergence since"}
    assert u["verdicts"][0][4] == "the records or the test"
    base = [row("t", "m", "softmax", None)]
    moved_too = changes([{**row("t", "m", "a", "n.s."), "min_effect": 0.02}, *base], [],
                        {**before, "rows": [{**row("t", "m", "a", "worse"), "min_effect": 0.01}]},
                        "softmax", convergence={"t": converged(0.9, a=6000.0, softmax=2200.0)})
    # a changed minimum effect does not move n.s. and worse: the re-run records did
    assert moved_too["tasks"][0]["verdicts"][0][4] == (
        "the records, re-trained to convergence since")
    late = changes([row("t", "m", "b", "n.s."), *base], [], before, "softmax",
                   convergence={"t": converged(0.9, b=2000.0, softmax=3000.0)})
    assert late["tasks"][0]["verdicts"][0][5].startswith("speed:")
    # c never learns, softmax is stopped by the cap while still gaining: the budget cut its run
    never = changes([row("t", "m", "c", "n.s."), *base], [], before, "softmax",
                    convergence={"t": converged(0.9, c=0.0, softmax=None)})
    assert never["tasks"][0]["verdicts"][0][5] == (
        "speed: the median seed never learned (softmax: was still gaining at the cap); the earlier "
        "budget was 2,500 steps")
    # part-way through the re-run, softmax has records but not the target's summary yet
    early = changes([row("t", "m", "a", "n.s."), *base], [], before, "softmax",
                    convergence={"t": converged(0.9, a=6000.0)})
    assert early["tasks"][0]["verdicts"][0][5] == (
        "not known yet: softmax has no records of the task")
    (moved,) = [table for table in markdown_tables(changes_section(ch))["What changed since old"]
                if "speed or level" in table["headers"]]
    a = next(r for r in moved["rows"] if r["scorer"] == "a")
    assert moved["notes"][a["speed or level"]] == why["a"]
    # a tier that moved on the re-run task names the records too; a row that turned
    # degenerate (every scorer one value) lost its tier by that rule
    tiers = changes([row("t", "m", "a", "worse", tier=2),
                     {**row("t", "m2", "a", "n.s.", tier=None), "degenerate": "every scorer "
                      "gives 1 at every seed"}, *base], [],
                    {**before, "rows": [row("t", "m", "a", "worse", tier=1),
                                        row("t", "m2", "a", "n.s.", tier=1)]},
                    "softmax", convergence={"t": converged(0.9, a=6000.0, softmax=2200.0)})
    assert {v[0]: v[4] for v in tiers["tasks"][0]["tiers"]} == {
        "m": "the records, re-trained to convergence since",
        "m2": "degenerate: a metric on which every scorer gives one value has no tiers; and the "
              "records, re-trained to convergence since"}
    # an earlier release trained to convergence too: nothing to say
    again = changes(now, [], {**before, "meta": {**before["meta"], "convergence": {"t": {}}}},
                    "softmax", convergence={"t": converged(0.9, a=6000.0, softmax=2200.0)})
    assert all(len(v) == 5 for v in again["tasks"][0]["verdicts"])


def test_a_verdict_the_correction_moved_names_the_multiple_testing_not_the_minimum_effect():
    """sa_softmax on the trial release: the same raw p, 0.0032, and BH p, 0.009, in both; the
    Holm p fell from 0.118 to 0.031 as its family of tests shrank, so n.s. became better, while
    its minimum effect also changed. Where the raw p crossed α too, the records moved it."""
    def tested(verdict, raw, holm, min_effect):
        return {**row("t", "m", "a", verdict), "p_vs_baseline": raw, "p_vs_baseline_holm": holm,
                "p_vs_baseline_bh": 0.009, "min_effect": min_effect, "informative": True}
    before = {"meta": {"release": "old"}, "overall": [],
              "rows": [tested("n.s.", 0.0032, 0.118, 0.0002)]}
    base = row("t", "m", "softmax", None)
    moved = changes([tested("better", 0.0032, 0.031, 4.5), base], [], before, "softmax")
    assert moved["tasks"][0]["verdicts"][0][4] == (
        "multiple testing: the corrected p crossed α with the tests it is corrected over (raw p "
        "0.003 then, 0.003 now; Holm p 0.118 then, 0.031 now)")
    # a raw p that moved, even on the same side of α: the records moved the verdict
    for raw in (0.08, 0.001):
        before["rows"] = [tested("n.s.", raw, 0.2, 4.5)]
        data = changes([tested("better", 0.0032, 0.031, 4.5), base], [], before, "softmax")
        assert data["tasks"][0]["verdicts"][0][4] == "the records or the test"


def test_a_verdict_moved_with_a_changed_learning_rate_says_so():
    """b's chosen rate moved from 1e-3 to 5e-4 between the releases, softmax's stayed at 2e-3:
    the speed-or-level note names b's change; a rate neither release names is no change."""
    def tuning(**chosen):
        return {"t": {"scorers": {s: {"chosen": {"lr": lr}} for s, lr in chosen.items()}}}

    before = {"meta": {"release": "old", "curves": {"t": {"scorers": {"b": {"step": [2500]}}}},
                       "tuning": tuning(b=1e-3, softmax=2e-3)},
              "rows": [row("t", "m", "b", "worse")], "overall": []}
    now = [row("t", "m", "b", "n.s."), row("t", "m", "softmax", None)]
    ch = changes(now, [], before, "softmax", convergence={
        "t": converged(0.9, b=2000.0, softmax=2200.0)}, tuning=tuning(b=5e-4, softmax=2e-3))
    assert ch["tasks"][0]["verdicts"][0][5] == (
        "level: the median seed reached its best at step 2,000 (softmax: reached its best at "
        "step 2,200); the earlier budget was 2,500 steps; chosen rate changed (b: lr 0.001 then, "
        "lr 0.0005 now)")
    unnamed = changes(now, [], before, "softmax", convergence={
        "t": converged(0.9, b=2000.0, softmax=2200.0)})
    assert unnamed["tasks"][0]["verdicts"][0][5].endswith("the earlier budget was 2,500 steps")


def test_sweep_records_of_an_older_task_version_never_join_the_tuning_summary():
    """A task version bumped mid-board (a new protocol): the rule's choice and the tuning table
    read the sweeps of the reporting records' version alone; before the new version reports, its
    sweeps under way stay out as well."""
    from leaderboard.loading.choice import SELECTION_RULE
    from leaderboard.loading.records import LoadedRecords, Record
    from leaderboard.loading.selection import current
    from leaderboard.method import tuning

    def record(version, role, seed, lr, value=None):
        block = {"role": role, "point": {"lr": lr}, "grid": {"lr": [1e-3, 4e-3]},
                 "selection_metric": "val", "direction": "lower",
                 "rule": "worst cell at the rate, then best mean"}
        return Record(path=f"t/softmax/v{version}-{role}-{lr}-{seed}.json",
                      cell_id=f"{version}{role}{lr}{seed}", task="t", task_version=version,
                      track="icl", scorer="softmax", scorer_version=1, scorer_kwargs={},
                      profile="cpu", seed=seed, config={"lr": lr, "v": version}, status="ok",
                      message="", step=None, metrics={}, metric_specs={}, grids={}, items={},
                      role="tuned" if role == "report" else role, tuning=block,
                      validation=None if value is None else {"metric": "val", "value": value,
                                                             "direction": "lower"},
                      provenance={"finished": f"2026-12-0{version}"})

    # v1 chose 1e-3; v2's sweeps favour 4e-3, and its reports follow
    v1 = [record(1, "sweep", s, 1e-3, 0.1) for s in (1000, 1001)] + \
        [record(1, "sweep", s, 4e-3, 0.9) for s in (1000, 1001)]
    v2 = [record(2, "sweep", s, 1e-3, 0.9) for s in (1000, 1001)] + \
        [record(2, "sweep", s, 4e-3, 0.1) for s in (1000, 1001)]
    v1_reports = [record(1, "report", s, 1e-3) for s in (0, 1)]
    v2_reports = [record(2, "report", s, 4e-3) for s in (0, 1)]

    both = current(LoadedRecords(v1_reports + v2_reports, [], v1 + v2))
    assert {r.task_version for r in both.records + both.sweeps} == {2}
    (softmax,) = tuning.summary(both, SELECTION_RULE)["t"]["scorers"].values()
    assert softmax["chosen"] == softmax["rule_choice"] == {"lr": 4e-3}
    assert [p["ok"] for p in softmax["points"]] == [2, 2]

    under_way = current(LoadedRecords(v1_reports, [], v1 + v2))
    assert {r.task_version for r in under_way.records + under_way.sweeps} == {1}
    only_sweeps = current(LoadedRecords([], [], v1 + v2))
    assert {r.task_version for r in only_sweeps.sweeps} == {2}


def test_a_task_whose_baseline_has_no_records_now_compares_no_verdicts():
    """Part-way through a re-run the baseline has not run yet: its scorers' rows have no verdict
    now, which is no change of verdict; the section says how many rows wait for it."""
    before = {"meta": {"release": "old"}, "overall": [],
              "rows": [row("t", "m", s, "worse") for s in ("softmax", "a", "b")]}
    now = [row("t", "m", s, None) for s in ("a", "b")] + [row("t", "m", "softmax", None, n=0)]
    ch = changes(now, [], before, "softmax")
    (t,) = ch["tasks"]
    assert (t["compared"], t["verdicts"], t["no_baseline_now"]) == (0, [], 2)
    text = " ".join(changes_section(ch).split())
    assert ("t (cpu): 2 rows in both not compared, as the baseline has no records of the task in "
            "this release yet") in text
