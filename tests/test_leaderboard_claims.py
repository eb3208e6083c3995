"""The paper's claims judged on constructed records with known answers."""
import math

import numpy as np
import pytest
from scipy import stats as sps

from leaderboard.method.aggregate import build_board
from leaderboard.method.claims import Claim, judge, load_claims
from leaderboard.rendering.markdown import release_readme
from markdown_support import mark_of, markdown_tables
from leaderboard_fakes import make_record, write_record

SPECS = {"mse_T9_shifted": {"direction": "lower", "headline": True, "ceiling": 0.0},
         "mse_T9_id": {"direction": "lower", "headline": True, "ceiling": 0.0}}


def test_the_shipped_claims_file_loads():
    claims = load_claims()
    ids = {c.id for c in claims}
    assert {"icl_linear_ood", "decoder_wikipedia_perplexity",
            "zorro_binding_principle_a"} <= ids
    icl = next(c for c in claims if c.id == "icl_linear_ood")
    assert icl.scorer == "ssa_gpt2" and icl.beside == ("ssa",) and icl.direction == "lower"


def test_verdicts_on_constructed_records(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.normal(0.5, 0.02, 5)
    table = {"softmax": base, "ssa_gpt2": base - 0.2 + rng.normal(0, 0.01, 5),
             "ssa": base + rng.normal(0, 0.01, 5)}
    for scorer, values in table.items():
        for seed, v in enumerate(values):
            write_record(tmp_path, make_record("icl_linear", scorer, seed,
                                               {"mse_T9_shifted": float(v), "mse_T9_id": 0.1},
                                               specs=SPECS))
    board = build_board(tmp_path)
    claims = {(r["id"], r["scorer"]): r for r in board.claims.to_dict(orient="records")}
    main = claims[("icl_linear_ood", "ssa_gpt2")]
    d = table["ssa_gpt2"] - table["softmax"]
    assert main["effect"] == pytest.approx(d.mean()) and main["n_seeds"] == 5
    assert main["p_raw"] == pytest.approx(sps.ttest_rel(table["ssa_gpt2"],
                                                        table["softmax"]).pvalue)
    assert main["verdict"] == "supported"
    assert main["ci_low"] < d.mean() < main["ci_high"] < 0
    beside = claims[("icl_linear_ood", "ssa")]
    assert beside["verdict"] == "not supported" and beside["detectable"] > 0
    assert claims[("decoder_heldout_perplexity", "ssa")]["verdict"] == "not run"
    assert "not run at this profile" in release_readme(board.with_release("r"), [])
    readme = release_readme(board.with_release("r"), [])
    (claims_table,) = markdown_tables(readme)["Claims"]
    verdict = next(r for r in claims_table["rows"] if r["scorer"] == "ssa (beside)"
                   and r["claim"] == "icl_linear_ood")["verdict"]
    assert verdict.startswith("not supported")
    assert claims_table["notes"][mark_of(verdict)].startswith("no difference larger than")


def test_a_claim_against_the_data_is_contradicted():
    rows = [dict(profile="cpu", task="t", metric="m", scorer=s, seeds=[0, 1, 2],
                 values=v, min_effect=1e-6)
            for s, v in (("softmax", [0.5, 0.6, 0.7]), ("x", [0.61, 0.70, 0.805]))]
    claim = Claim("c", "x lowers m", "§1", "x", "softmax", "t", "m", "lower", "none")
    (entry,) = judge(rows, [claim])
    assert entry["verdict"] == "contradicted" and entry["effect"] > 0
    assert math.isclose(entry["p"], entry["p_raw"])   # a family of one


def test_a_release_without_any_claim_metric_has_no_claims_list(tmp_path):
    for seed in range(3):
        write_record(tmp_path, make_record("icl_linear", "softmax", seed, {"error": 0.3}))
    board = build_board(tmp_path)
    assert board.claims.empty and "claims" not in board.to_dict()
