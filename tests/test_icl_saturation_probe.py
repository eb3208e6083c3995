"""The saturation probe against float64 formulas and docs/scorers.md#ssa-limits, and on every scorer."""
import math

import pytest
import torch

import scorers
import tasks
from tasks import RunContext
from tasks.saturation_probe import other_share

EXAMPLE = [1.0, 0.5, -0.3, 0.2]
SMALL = {"rows": 16, "n_keys": 6, "head_dim": 8}


pytestmark = pytest.mark.usefixtures("one_thread")


def _run(scorer, **overrides):
    task = tasks.create_task("saturation_probe")
    return task.run(scorer, {}, 0, task.config({**SMALL, **overrides}), RunContext())


def _softmax_others(logits, top):
    m = max(logits)
    e = [math.exp(v - m) for v in logits]
    return sum(v for i, v in enumerate(e) if i != top) / sum(e)


def _ssa_others(logits, top, b=0.8, n=1.5):
    w = [(1 + b * abs(s)) ** (n * math.copysign(1, s)) for s in logits]
    return sum(v for i, v in enumerate(w) if i != top) / sum(w)


def test_softmax_matches_the_float64_formula():
    result = _run("softmax")
    lambdas, xs = result.grids["scaled"]["cols"], result.grids["dominant"]["cols"]
    scaled = result.grids["scaled"]["values"][1]
    dominant = result.grids["dominant"]["values"][1]
    for lam, got in zip(lambdas, scaled):
        want = _softmax_others([lam * v for v in EXAMPLE], 0)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-300)
    for x, got in zip(xs, dominant):
        assert got == pytest.approx(_softmax_others([x, *EXAMPLE[1:]], 0), rel=1e-9, abs=1e-300)
    # docs/scorers.md#ssa-limits: softmax(10x)[0] = 0.99297; others 1.64e-4 and 1.34e-43 at X = 10, 100
    assert result.metrics["other_mass_scaled_example"] == pytest.approx(1 - 0.99297, abs=1e-5)
    assert dominant[1] == pytest.approx(1.64e-4, rel=1e-2)
    assert result.metrics["other_mass_dominant_example"] == pytest.approx(1.34e-43, rel=1e-2)


def test_ssa_keeps_mass_as_the_paper_says():
    result = _run("ssa", lambdas=[1.0, 10.0, 1000.0], headline_lambda=1000.0,
                  dominant_logits=[10.0, 100.0, 1000.0], headline_dominant=100.0)
    dominant = result.grids["dominant"]["values"][1]
    for x, got in zip([10.0, 100.0, 1000.0], dominant):
        assert got == pytest.approx(_ssa_others([x, *EXAMPLE[1:]], 0), rel=1e-9)
    # docs/scorers.md#ssa-limits golden values: 0.1185, 0.004955, 0.0001601; SSA(1000 x)[0] = 0.6924
    assert dominant == pytest.approx([0.1185, 0.004955, 0.0001601], rel=1e-3)
    assert result.metrics["other_mass_scaled_example"] == pytest.approx(1 - 0.6924, abs=1e-4)
    assert result.metrics["other_mass_dominant"] > 1e3 * _run("softmax").metrics["other_mass_dominant"]


def test_random_rows_scaling_and_dominant_key_through_q_and_k():
    # softmax: scaling q by lambda is scaling the logits; the moved key has logit exactly X
    result = _run("softmax", rows=8, lambdas=[1.0, 10.0], headline_lambda=10.0)
    gen_rows = result.items["other_mass_scaled"]
    assert len(gen_rows) == 8 and all(0 <= v <= 1 for v in gen_rows)
    curve = result.grids["scaled"]["values"][0]
    assert curve[1] < curve[0]
    dominant = result.grids["dominant"]["values"][0]
    assert dominant == sorted(dominant, reverse=True)


def test_other_share_sums_directly_and_uses_absolute_weights():
    w = torch.tensor([[1.0, 1e-300, -2e-300, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    share = other_share(w, torch.tensor([0, 0]))
    assert share[0].item() == pytest.approx(3e-300, rel=1e-12)
    assert math.isnan(share[1].item())


@pytest.mark.parametrize("scorer", scorers.list_scorers())
def test_every_scorer_gets_a_finite_row(scorer):
    result = _run(scorer, rows=4, lambdas=[1.0, 10.0], dominant_logits=[10.0, 100.0],
                  headline_dominant=100.0)
    task = tasks.create_task("saturation_probe")
    assert set(result.metrics) <= set(task.metrics)
    assert {"other_mass_scaled", "other_mass_dominant"} <= set(result.metrics)
    kind = scorers.get_scorer_class(scorer).kind
    assert ("other_mass_scaled_example" in result.metrics) == (kind == "logits")
    for name, value in result.metrics.items():
        assert value is None or 0.0 <= value <= 1.0, (name, value)
    for g in result.grids.values():
        assert all(v is None or 0.0 <= v <= 1.0 for row in g["values"] for v in row)
