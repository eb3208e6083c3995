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
from tasks import icl_linear
from tasks.icl_linear import LinearConfig, mse_loss, sample_linear
from tasks.icl_quantifiers import (
    QuantifiersConfig,
    bce_loss,
    evaluate_deviant,
    evaluate_grid,
    evaluate_paper_fixed,
    evaluate_paper_variant,
    labels_every,
    labels_some,
    paper_fixed_sequence,
    paper_variant_sequences,
    sample_sequences,
    undefined_entropy_is_not_applicable,
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
TINY_QUANTIFIERS = dict(TINY, train_steps=30, curriculum_end=9, eval_points=(5, 10),
                        eval_sigmas=(1.0, 3.0), deviant_points=9, deviant_values=(10.0, -1000.0))
TINY_LINEAR = dict(TINY, train_steps=30, curriculum_end=9, eval_points=(5, 9), eval_sigma_x=(1.0, 2.0),
                   eval_sigma=(1.0, 4.0), eval_functions=3)


pytestmark = pytest.mark.usefixtures("one_thread")


def _train(cfg, seed=0, sample=None, loss=bce_loss):
    model = build_model(cfg, "softmax", {}, seed, torch.device("cpu"))
    return train(model, cfg, sample or sample_sequences("every"), loss, generator(seed, "t"),
                 RunContext())


def test_training_is_deterministic_for_a_seed():
    cfg = QuantifiersConfig(**TINY_QUANTIFIERS)
    first, again, other = _train(cfg), _train(cfg), _train(cfg, seed=1)
    assert first.loss_curve == again.loss_curve
    assert first.loss_curve["loss"] != other.loss_curve["loss"]
    assert first.loss_curve["points"][0] == 5 and first.final_points == 9


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
    ({"lr": "fast"}, "config key 'lr' must be a number, got 'fast'"),
    ({"quantifier": "most"}, r"'quantifier' must be one of \['every', 'some', 'both'\]"),
    ({"eval_points": [10, 300]}, "above n_positions"),
    ({"eval_sigmas": [2.0, 4.0]}, "in-distribution cell"),
    ({"n_embd": 30}, "multiple of n_head"),
    ({"curriculum_end": 5}, "curriculum_end=5 is below"),
    ({"precision": "fp16"}, "'precision' must be one of"),
    ({"headline_metrics": ["error_typo"]}, "unknown metric"),
    ({"deviant_points": 7}, "deviant_points=7 must be between 8"),
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
    t, positions = 9, cfg.deviant_positions()
    assert positions == (4, 9)  # {4, T // 2, T}
    # uniform causal weights: the x token of point s sees 2s - 1 keys; mean over points s >= p
    expected_weight = [sum(1 / (2 * s - 1) for s in range(p, t + 1)) / (t - p + 1) for p in positions]
    expected_entropy = [sum(math.log(2 * s - 1) for s in range(p, t + 1)) / (t - p + 1)
                        for p in positions]
    assert result["deviant_error"][0] == 0 and result["deviant_accuracy"][0] == 1
    for name, expected in (("deviant_weight", expected_weight), ("deviant_entropy", expected_entropy)):
        rows = grids[f"some_{name}"]["values"]
        for row, want in zip(rows, expected):
            assert all(abs(v - want) < 1e-6 for v in row)
        assert abs(result[name][0] - sum(expected) / len(positions)) < 1e-6
    assert grids["some_deviant_weight"]["cols"] == ["none", 10.0, -1000.0]
    assert len(result["deviant_error"][1]) == len(positions) * 2 * cfg.eval_sequences


def test_an_undefined_deviant_entropy_is_not_applicable_with_its_reason():
    metrics = {"some_deviant_entropy": 1.5, "deviant_entropy": 1.5, "deviant_weight": 0.2}
    items = {"some_deviant_entropy": [1.0, None, 2.0], "deviant_entropy": [1.0, None, 2.0],
             "deviant_weight": [0.1, 0.0, 0.5]}
    extra = {}
    undefined_entropy_is_not_applicable(metrics, items, extra)
    assert metrics == {"deviant_weight": 0.2} and list(items) == ["deviant_weight"]
    assert set(extra["not_applicable"]) == {"some_deviant_entropy", "deviant_entropy"}
    assert extra["not_applicable"]["deviant_entropy"].startswith("1 of 3 deviant sequences")
    defined = {"deviant_entropy": [1.0, 2.0]}
    undefined_entropy_is_not_applicable({"deviant_entropy": 1.5}, defined, extra := {})
    assert defined == {"deviant_entropy": [1.0, 2.0]} and extra == {}


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
    assert result.step == 30 and result.extra["train"]["every"]["final_points"] == 9
    single = task.run("softmax", {}, 0, task.config(dict(TINY_QUANTIFIERS, quantifier="some")),
                      RunContext())
    assert single.metrics["error_id"] == single.metrics["some_error_id"]
    assert single.metrics["some_error_id"] == result.metrics["some_error_id"]  # same streams
    assert not any(k.startswith("every_") for k in single.metrics)


def test_linear_run_with_softmax_and_baselines(tmp_path):
    task = tasks.create_task("icl_linear")
    result = task.run("ssa", {}, 0, task.config(TINY_LINEAR), RunContext(workdir=tmp_path))
    _declared_and_consistent(task, result)
    headline = {k for k, m in task.metrics.items() if m.headline}
    assert headline == {"mse_T9_id", "mse_T9_shifted"} <= set(result.metrics)
    assert {"mse_over_zero_id", "mse_over_zero_shifted"} <= set(result.metrics)
    assert "mse_T41_sigma1" not in result.metrics  # 41 is not an eval point here
    # the T = 9 headlines are the paper's grid cells: (sigma_x, sigma) = (1, 1), and the mean of the rest
    mse, zero9 = result.grids["mse_T9"]["values"], result.grids["zero_mse_T9"]["values"]
    shifted = [mse[0][1], mse[1][0], mse[1][1]]
    assert result.metrics["mse_T9_id"] == pytest.approx(mse[0][0], rel=1e-12)
    assert result.metrics["mse_T9_shifted"] == pytest.approx(sum(shifted) / 3, rel=1e-12)
    anchors = result.extra["anchors"]
    assert anchors["mse_T9_id"] == {"floor": pytest.approx(zero9[0][0], rel=1e-12), "ceiling": 0.0}
    assert anchors["mse_T9_shifted"]["floor"] == pytest.approx(
        (zero9[0][1] + zero9[1][0] + zero9[1][1]) / 3, rel=1e-12)
    assert result.extra["dtype"] == "float32"
    assert result.extra["baselines"]["least_squares_max_mse"] < 1e-9
    zero = result.grids["zero_mse_T9"]
    assert zero["rows"] == [1.0, 2.0] and zero["cols"] == [1.0, 4.0]
    ratio = result.grids["ratio_T9"]["values"]
    mse = result.grids["mse_T9"]["values"]
    assert all(abs(ratio[i][j] - mse[i][j] / zero["values"][i][j]) < 1e-9 for i in range(2) for j in range(2))
    assert len(result.extra["scorer_parameters"]["layer0.n"]) == 1
    assert Path(result.extra["checkpoint"]).is_file()


def test_linear_t41_metrics_are_the_t41_grid_cells(monkeypatch):
    task = tasks.create_task("icl_linear")
    cfg = task.config(dict(TINY_LINEAR, eval_points=(9, 12), curriculum_start=9, train_steps=5))
    monkeypatch.setattr(icl_linear, "RAW", {9: icl_linear.RAW[9], 12: icl_linear.RAW[41]})
    result = task.run("softmax", {}, 0, cfg, RunContext())
    mse, zero = result.grids["mse_T12"]["values"], result.grids["zero_mse_T12"]["values"]
    assert result.metrics["mse_T41_sigma1"] == pytest.approx(mse[0][0], rel=1e-12)
    assert result.metrics["mse_T41_shifted"] == pytest.approx((mse[0][1] + mse[1][0] + mse[1][1]) / 3,
                                                              rel=1e-12)
    assert result.extra["anchors"]["mse_T41_sigma1"]["floor"] == pytest.approx(zero[0][0], rel=1e-12)
    # the pooled ratio: T = 12 is above the last training length (9), so only T = 9's (1, 1) cell
    ratio9 = result.grids["ratio_T9"]["values"]
    assert result.metrics["mse_over_zero_id"] == pytest.approx(ratio9[0][0], rel=1e-12)


def test_linear_needs_the_papers_cell():
    task = tasks.create_task("icl_linear")
    with pytest.raises(TaskError, match="eval_points must contain T=9"):
        task.config(dict(TINY_LINEAR, eval_points=(5, 11)))
    with pytest.raises(TaskError, match="training must reach 9 points"):
        task.config(dict(TINY_LINEAR, curriculum_end=7))


def test_papers_fixed_deviant_sequence():
    xs = paper_fixed_sequence()
    assert xs.tolist() == [[1.0, -1.0, -2.0, 1000.0]]
    # its labels do not depend on the deviant: the same as with the last value negated
    flipped = xs.clone()
    flipped[0, 3] = -1000.0
    for label in (labels_every, labels_some):
        assert torch.equal(label(xs), label(flipped))
    assert labels_every(xs).tolist() == [[1.0, -1.0, -1.0, -1.0]]
    assert labels_some(xs).tolist() == [[1.0, 1.0, 1.0, 1.0]]
    cfg = QuantifiersConfig(**TINY_QUANTIFIERS)
    grids = {}
    result = evaluate_paper_fixed(Oracle("some"), "some", cfg, 0, grids)
    # uniform causal weights: the x token of point 4 (token 6) sees 7 keys
    assert result["paper_fixed_error"] == (0.0, [0.0])
    assert result["paper_fixed_weight"][0] == pytest.approx(1 / 7, rel=1e-6)
    attention = grids["some_paper_fixed_attention"]
    assert attention["rows"][6] == "x4" and len(attention["values"]) == 8
    assert attention["values"][6][6] == pytest.approx(1 / 7, rel=1e-6)
    wrong = evaluate_paper_fixed(Oracle("some", constant=-1.0), "some", cfg, 0, {})
    assert wrong["paper_fixed_error"][0] == 1.0  # the 4th label is +1


def test_papers_variant_places_minus_70_at_point_6_and_70000_at_point_8():
    z = torch.randn(5, 9, generator=torch.Generator().manual_seed(0))
    xs = paper_variant_sequences(z, [1.0, 3.0])
    assert xs.shape == (10, 9)
    assert (xs[:, 5] == -70.0).all() and (xs[:, 7] == 70000.0).all()  # 0-based 5 and 7
    keep = [0, 1, 2, 3, 4, 6, 8]
    assert torch.equal(xs[:5, keep], z[:, keep]) and torch.equal(xs[5:, keep], 3.0 * z[:, keep])
    cfg = QuantifiersConfig(**dict(TINY_QUANTIFIERS, eval_sequences=400))
    grids = {}
    value, items = evaluate_paper_variant(Oracle("every"), "every", cfg, 0, grids)["paper_variant_error"]
    assert value == 0 and len(items) == 2 * 400
    # always -1: wrong only if x_1..x_4 are all > 0 (-70 at point 6 makes "every" -1 from there on)
    value, items = evaluate_paper_variant(Oracle("every", -1.0), "every", cfg, 0, grids)[
        "paper_variant_error"]
    assert abs(value - 1 / 16) < 5 * math.sqrt(1 / 16 * 15 / 16 / len(items))
    assert grids["every_paper_variant_error"]["rows"] == [9]
    assert grids["every_paper_variant_error"]["cols"] == [1.0, 3.0]


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
def test_deviant_test_stays_within_the_trained_lengths(profile):
    section = tomllib.loads((PROFILES / f"{profile}.toml").read_text())["tasks"]["icl_quantifiers"]
    cfg = tasks.create_task("icl_quantifiers").config(section)
    assert cfg.deviant_points <= cfg.trained_points()
    assert cfg.trained_points() == cfg.curriculum().points(cfg.train_steps - 1)
    with pytest.raises(TaskError, match="last training length"):
        tasks.create_task("icl_quantifiers").config(dict(section, deviant_points=cfg.trained_points() + 1))


def test_cpu_trains_quantifiers_to_the_curriculums_last_length():
    section = tomllib.loads((PROFILES / "cpu.toml").read_text())["tasks"]["icl_quantifiers"]
    cfg = tasks.create_task("icl_quantifiers").config(section)
    assert cfg.trained_points() == 21 and cfg.deviant_points == 21


def _loss_dtypes(cfg, sample, loss_fn):
    """dtypes of the model's output and of the loss in a 2-step training run under ``cfg``."""
    seen = {"output": set(), "loss": set()}

    def spy(pred, ys):
        loss = loss_fn(pred, ys)
        seen["loss"].add(loss.dtype)
        return loss

    model = build_model(cfg, "softmax", {}, 0, torch.device("cpu"))
    model.register_forward_hook(lambda m, args, out: seen["output"].add(out.dtype))
    train(model, cfg, sample, spy, generator(0, "t"), RunContext())
    return seen


@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
@pytest.mark.parametrize("task", ["icl_quantifiers", "icl_linear"])
def test_icl_trains_in_fp32_under_every_profile(profile, task):
    section = tomllib.loads((PROFILES / f"{profile}.toml").read_text())["tasks"][task]
    precision = tasks.create_task(task).config(section).precision
    assert precision == "fp32"
    base = TINY_LINEAR if task == "icl_linear" else TINY_QUANTIFIERS
    sample, loss = (sample_linear, mse_loss) if task == "icl_linear" else (sample_sequences("every"),
                                                                          bce_loss)
    cfg = tasks.create_task(task).config(dict(base, train_steps=2, curriculum_start=9, precision=precision))
    assert _loss_dtypes(cfg, sample, loss) == {"output": {torch.float32}, "loss": {torch.float32}}
    # the check can fail: bf16 autocast gives bf16 outputs (the loss is still taken in fp32)
    cfg = tasks.create_task(task).config(dict(base, train_steps=2, curriculum_start=9, precision="bf16"))
    assert _loss_dtypes(cfg, sample, loss)["output"] == {torch.bfloat16}


def test_a_profile_chooses_its_headline_metrics():
    task = tasks.create_task("icl_quantifiers")
    section = tomllib.loads((PROFILES / "cpu.toml").read_text())["tasks"]["icl_quantifiers"]
    cfg = task.config(section)
    assert cfg.headline_metrics == ("error_shifted",)
    specs = task.metric_specs(cfg)
    assert specs["error_id"]["headline"] is False and specs["error_shifted"]["headline"] is True
    other = task.config({**section, "headline_metrics": ["error_id", "deviant_error"]})
    assert {n for n, s in task.metric_specs(other).items() if s["headline"]} == {"error_id",
                                                                               "deviant_error"}
    assert task.metric_specs(task.config({}))["error_id"]["headline"] is True
    assert task.metric_specs(cfg)["error_id"]["direction"] == "lower"
    with pytest.raises(TaskError, match="unknown metric.*error_typo"):
        task.config({"headline_metrics": ["error_typo"]})


def test_records_carry_the_chosen_headlines():
    from suite.cells import Cell, resolve_config
    from suite.runner import CellJob, failed_record, run_cell

    task = tasks.create_task("icl_quantifiers")
    config = resolve_config(task, {"headline_metrics": ["error_shifted"]})
    cell = Cell(task="icl_quantifiers", task_version=task.version, track="icl", scorer="softmax",
                scorer_version=1, scorer_kwargs={}, profile="t", seed=0, config=config)
    for record in (run_cell(CellJob(cell, skip_reason="not run"), device="cpu"),
                   failed_record(CellJob(cell), "error", "worker died")):
        specs = record["metric_specs"]
        assert specs["error_id"]["headline"] is False and specs["error_shifted"]["headline"] is True
