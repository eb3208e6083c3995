"""ICL tasks end to end on tiny models: training determinism and failures, config errors, the
evaluation protocols on stub models with known answers, and a run of each task with softmax."""
import math
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import tasks
from tasks import RunContext, TaskError, TrainingFailure
from tasks.icl_linear import LinearConfig, mse_loss, sample_linear
from tasks.icl_quantifiers import (
    QuantifiersConfig,
    bce_loss,
    evaluate_deviant,
    evaluate_grid,
    labels_every,
    labels_some,
    sample_sequences,
)
from tasks.icl_training import build_model, train
from tasks.training import generator
from tasks.training import Divergence

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PROFILES = Path(__file__).resolve().parents[1] / "suite" / "profiles"
TINY = {"n_layer": 1, "n_head": 2, "n_embd": 8, "n_positions": 24, "batch_size": 8, "lr": 1e-3,
        "curriculum_start": 5, "curriculum_end": 7, "curriculum_every": 10, "eval_sequences": 8}
TINY_QUANTIFIERS = dict(TINY, train_steps=30, eval_points=(5, 10), eval_sigmas=(1.0, 3.0),
                        deviant_points=7, deviant_values=(10.0, -1000.0))
TINY_LINEAR = dict(TINY, train_steps=30, eval_points=(5, 9), eval_sigma_x=(1.0, 2.0),
                   eval_sigma=(1.0, 4.0), eval_functions=3)


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models: one thread is fastest, and much faster on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _train(cfg, seed=0, sample=None, loss=bce_loss):
    model = build_model(cfg, "softmax", {}, seed, torch.device("cpu"))
    return train(model, cfg, sample or sample_sequences("every"), loss, generator(seed, "t"),
                 RunContext())


def test_training_is_deterministic_for_a_seed():
    cfg = QuantifiersConfig(**TINY_QUANTIFIERS)
    first, again, other = _train(cfg), _train(cfg), _train(cfg, seed=1)
    assert first.loss_curve == again.loss_curve
    assert first.loss_curve["loss"] != other.loss_curve["loss"]
    assert first.loss_curve["points"][0] == 5 and first.final_points == 7


def test_huge_learning_rate_ends_with_a_training_failure():
    cfg = LinearConfig(**dict(TINY_LINEAR, lr=1e10))
    with pytest.raises(TrainingFailure) as info:
        _train(cfg, sample=sample_linear, loss=mse_loss)
    assert info.value.status == "nan" and info.value.step >= 0
    cfg = QuantifiersConfig(**dict(TINY_QUANTIFIERS, lr=1e3))
    with pytest.raises(TrainingFailure) as info:
        _train(cfg)
    assert info.value.status in ("nan", "diverged")
    assert "lr=1000" in info.value.message


def test_failure_rules():
    # m = 0.98 * 0.69 + 0.02 * x crosses 10 x 0.69 at x = 0.69 * (10 - 0.98) / 0.02 = 0.69 * 451
    rule = Divergence(10.0)
    rule.check(0, 0.69)
    rule.check(1, 0.69 * 450)
    rule = Divergence(10.0)
    rule.check(0, 0.69)
    with pytest.raises(TrainingFailure, match="exceeds 10 x the first loss") as info:
        rule.check(5, 0.69 * 452)
    assert (info.value.status, info.value.step) == ("diverged", 5)
    for bad in (math.inf, math.nan):
        with pytest.raises(TrainingFailure) as info:
            Divergence(10.0).check(3, bad)
        assert (info.value.status, info.value.step) == ("nan", 3)
    with pytest.raises(TrainingFailure) as info:
        Divergence(10.0).check(2, 1.0, grad_norm=math.inf)
    assert info.value.status == "nan"


@pytest.mark.parametrize("task", ["icl_quantifiers", "icl_linear", "saturation_probe"])
def test_unknown_config_key_is_an_error_naming_it(task):
    with pytest.raises(TaskError, match="n_layers"):
        tasks.create_task(task).config({"n_layers": 2})


@pytest.mark.parametrize("overrides, message", [
    ({"lr": "fast"}, "'lr' must be of type float"),
    ({"quantifier": "most"}, "quantifier must be"),
    ({"eval_points": [10, 300]}, "above n_positions"),
    ({"eval_sigmas": [2.0, 4.0]}, "in-distribution cell"),
    ({"n_embd": 30}, "multiple of n_head"),
    ({"curriculum_end": 5}, "curriculum_end=5 is below"),
])
def test_bad_values_are_clear_errors(overrides, message):
    with pytest.raises(TaskError, match=message):
        tasks.create_task("icl_quantifiers").config(overrides)


def test_profile_sections_are_valid_configs():
    for profile in ("smoke", "cpu", "paper"):
        data = tomllib.loads((PROFILES / f"{profile}.toml").read_text())
        for name in ("icl_quantifiers", "icl_linear", "saturation_probe"):
            tasks.create_task(name).config(data["tasks"][name])
    paper = tomllib.loads((PROFILES / "paper.toml").read_text())["tasks"]
    for name in ("icl_quantifiers", "icl_linear"):
        cfg = tasks.create_task(name).config(paper[name])
        assert (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.lr, cfg.batch_size, cfg.train_steps) == \
            (12, 8, 256, 1e-4, 64, 500_001)


class Oracle(nn.Module):
    """Outputs +-1 from the true labels, or a constant; attention uniform over visible keys."""

    def __init__(self, quantifier, constant=None):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
        self.label = {"every": labels_every, "some": labels_some}[quantifier]
        self.constant = constant

    def forward(self, xs, ys):
        if self.constant is not None:
            return torch.full_like(xs, self.constant)
        return self.label(xs)

    def attention_weights(self, xs, ys, layer=-1):
        n = 2 * xs.shape[1]
        w = torch.ones(n, n).tril()
        return (w / w.sum(-1, keepdim=True)).expand(xs.shape[0], 2, n, n)


@pytest.mark.parametrize("quantifier", ["every", "some"])
def test_grid_evaluation_with_oracle_and_constant_models(quantifier):
    cfg = QuantifiersConfig(**dict(TINY_QUANTIFIERS, eval_sequences=2000))
    grids = {}
    result = evaluate_grid(Oracle(quantifier), quantifier, cfg, 0, 7, grids)
    assert all(value == 0 for value, _ in result.values())
    assert len(result["error_id"][1]) == 2000 and len(result["error_shifted"][1]) == 3 * 2000
    constant = -1.0 if quantifier == "every" else 1.0
    result = evaluate_grid(Oracle(quantifier, constant), quantifier, cfg, 0, 7, grids)
    values = grids[f"{quantifier}_error"]["values"]
    assert values[0][0] == values[0][1] and values[1][0] == values[1][1]  # sigma does not move labels
    for value, outcomes in result.values():
        assert abs(value - 1 / 16) < 5 * math.sqrt(1 / 16 * 15 / 16 / len(outcomes))
        assert value == sum(outcomes) / len(outcomes)


def test_deviant_test_on_uniform_attention():
    cfg = QuantifiersConfig(**TINY_QUANTIFIERS)
    grids = {}
    result = evaluate_deviant(Oracle("some"), "some", cfg, 0, grids)
    t, positions = 7, cfg.deviant_positions()
    assert positions == (3, 4, 7)  # {4, T // 2, T}
    # uniform causal weights: the x token of point s sees 2s - 1 keys; mean over points s >= p
    expected_weight = [sum(1 / (2 * s - 1) for s in range(p, t + 1)) / (t - p + 1) for p in positions]
    expected_entropy = [sum(math.log(2 * s - 1) for s in range(p, t + 1)) / (t - p + 1)
                        for p in positions]
    assert result["deviant_error"][0] == 0 and result["deviant_accuracy"][0] == 1
    for name, expected in (("deviant_weight", expected_weight), ("deviant_entropy", expected_entropy)):
        rows = grids[f"some_{name}"]["values"]
        for row, want in zip(rows, expected):
            assert all(abs(v - want) < 1e-6 for v in row)
        assert abs(result[name][0] - sum(expected) / 3) < 1e-6
    assert grids["some_deviant_weight"]["cols"] == ["none", 10.0, -1000.0]
    assert len(result["deviant_error"][1]) == 3 * 2 * cfg.eval_sequences


def _declared_and_consistent(task, result):
    assert set(result.metrics) <= set(task.metrics)
    for name, value in result.metrics.items():
        assert value is not None and math.isfinite(value), name
        outcomes = result.items[name]
        assert abs(sum(outcomes) / len(outcomes) - value) < 1e-9, name
    for g in result.grids.values():
        assert len(g["values"]) == len(g["rows"]) and all(len(r) == len(g["cols"]) for r in g["values"])


def test_quantifiers_run_with_softmax():
    task = tasks.create_task("icl_quantifiers")
    result = task.run("softmax", {}, 0, task.config(TINY_QUANTIFIERS), RunContext())
    _declared_and_consistent(task, result)
    headline = {k for k, m in task.metrics.items() if m.headline}
    assert headline == {"error_id", "error_shifted"} and headline <= set(result.metrics)
    for q in ("every", "some"):
        assert f"{q}_deviant_weight" in result.metrics and f"{q}_error_length" in result.metrics
    assert result.step == 30 and result.extra["train"]["every"]["final_points"] == 7
    single = task.run("softmax", {}, 0, task.config(dict(TINY_QUANTIFIERS, quantifier="some")),
                      RunContext())
    assert single.metrics["error_id"] == single.metrics["some_error_id"]
    assert single.metrics["some_error_id"] == result.metrics["some_error_id"]  # same streams
    assert not any(k.startswith("every_") for k in single.metrics)


def test_linear_run_with_softmax_and_baselines(tmp_path):
    task = tasks.create_task("icl_linear")
    result = task.run("ssa", {}, 0, task.config(TINY_LINEAR), RunContext(workdir=tmp_path))
    _declared_and_consistent(task, result)
    assert {"mse_id", "ratio_shifted"} <= set(result.metrics)
    assert result.extra["baselines"]["least_squares_max_mse"] < 1e-9
    zero = result.grids["zero_mse_T9"]
    assert zero["rows"] == [1.0, 2.0] and zero["cols"] == [1.0, 4.0]
    ratio = result.grids["ratio_T9"]["values"]
    mse = result.grids["mse_T9"]["values"]
    assert all(abs(ratio[i][j] - mse[i][j] / zero["values"][i][j]) < 1e-9 for i in range(2) for j in range(2))
    assert len(result.extra["scorer_parameters"]["layer0.n"]) == 1
    assert Path(result.extra["checkpoint"]).is_file()
