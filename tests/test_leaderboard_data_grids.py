"""Grids of the evaluation items (leaderboard.method.grids.data_grids): a declared grid is shown
once where every scorer with the most seeds has the same one, and per scorer otherwise; the ICL
section states it as a table under its caption."""
from __future__ import annotations

import numpy as np

from leaderboard.method.aggregate import build_board
from leaderboard.method.grids import data_grids
from leaderboard.rendering.track_section import track_section
from leaderboard_fakes import make_record, write_record

ACCURACY = {"accuracy": {"direction": "higher", "headline": True, "floor": 0.0, "ceiling": 1.0}}


def grid(values):
    return {"rows_name": "pairs", "cols_name": "length", "rows": [2, 4], "cols": [64, 128],
            "values": values}


def rate(seed):
    """The items' distractor rate at a seed: the same for every scorer."""
    return grid([[0.04 + seed / 100, 0.09], [0.05, None]])


def board(tmp_path, seeds, rates=lambda seed, scorer: rate(seed)):
    for scorer, n in seeds.items():
        for seed in range(n):
            write_record(tmp_path, make_record(
                "icl_mqar", scorer, seed, {"accuracy": 0.5 + seed / 50}, specs=ACCURACY,
                grids={"distractor_rate": rates(seed, scorer),
                       "accuracy": grid([[0.9 - seed / 50, 0.8], [0.7, None]])}))
    return build_board(tmp_path).with_release("r")


def test_the_declared_grid_of_the_scorers_with_the_most_seeds_is_shown_once(tmp_path):
    b = board(tmp_path, {"softmax": 5, "sparsemax": 5, "cosformer": 2})
    found = data_grids(b.grids.to_dict(orient="records"))
    assert [(g["task"], g["grid"], g["n"], g["scorers"]) for g in found] == [
        ("icl_mqar", "distractor_rate", 5, 2)]
    expected = [[0.06, 0.09], [0.05, np.nan]]      # seeds 0-4: 0.04 + seed / 100 averages 0.06
    assert np.allclose(np.array(found[0]["values"], dtype=float), expected, equal_nan=True)
    text = "\n".join(track_section(b, "icl"))
    assert "**icl_mqar data** (cpu): `distractor_rate`, the fraction of queries" in text
    assert "identical in the records of the 2 scorers that have 5." in text
    assert "| pairs \\ length" in text and "| 2 " in text and "0.06" in text


def test_a_declared_grid_that_differs_between_scorers_is_not_the_items(tmp_path):
    b = board(tmp_path, {"softmax": 3, "sparsemax": 3},
              rates=lambda seed, scorer: grid([[0.04 + (scorer == "softmax") / 10, 0.09],
                                               [0.05, None]]))
    assert data_grids(b.grids.to_dict(orient="records")) == []
    assert "icl_mqar data" not in "\n".join(track_section(b, "icl"))
