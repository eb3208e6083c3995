"""``icl_linear``: learn f(x) = a x + b in context; input and function shift against the optimal baseline.

Data (docs/tasks.md#icl_linear): x_t ~ N(0, 1); per sequence a, b ~ N(0, 1); y_t = a x_t + b, noise-free. The model
reads (x_1, y_1, ..., x_T, y_T) and predicts y_t at the x_t token; loss = MSE over all positions.

Evaluation: for T in ``eval_points`` (paper 9; scorebench also 41), sigma_x in ``eval_sigma_x`` x sigma in
``eval_sigma``: x = sigma_x * z with z ~ N(0, 1) fixed per (sequence, position) for that T; functions
a = sigma * a0, b = sigma * b0 with (a0, b0) ~ N(0, 1) drawn once per cell seed and reused for every grid
cell; every function is applied to the same ``eval_sequences`` x-sequences. MSE over 0-based indices
>= ``mse_start``, averaged over sequences and functions. Baselines on the same data:

- least squares with intercept on the context (x_1..x_{t-1}, y_1..y_{t-1}) evaluated at x_t; the
  minimum-norm solution when t - 1 = 1, prediction 0 when t = 1; exact from t - 1 = 2 on (noise-free);
- the zero predictor, expected MSE sigma^2 (sigma_x^2 + 1).

Validation (tasks/validation.py): ``val_mse``, the MSE over all positions (the training loss) of
fresh training-distribution sequences at the last training length, drawn from the stream (cell seed,
"icl_linear", "validation"). Sweep cells skip the reported evaluation.

Headlines are the paper's cell (docs/tasks.md#icl_linear): raw MSE at T = 9, in distribution (sigma_x = sigma = 1)
and the mean raw MSE over the shifted cells of the T = 9 grid (sigma_x > 1 or sigma > 1); T = 9 must be
an eval point within the training lengths. Their score anchors are the zero predictor's MSE on the same
cells (floor, in ``extra["anchors"]``) and 0 (ceiling). Secondary: the same at T = 41 (when it is an
eval point; in distribution only if training reached 41 points) and ``mse_over_zero_*``, model MSE / the
zero predictor's MSE on the same cell, pooled over every eval length, where in distribution =
sigma_x = sigma = 1 and T <= the last training length, and everything else is shifted.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from .base import Metric, RunContext, Task, TaskResult
from .config import ConfigError, setting
from .icl_training import (
    VALIDATION_SEQUENCES,
    ICLTaskConfig,
    ValidationData,
    build_model,
    grid,
    mean_of,
    predict,
    save_checkpoint,
    evaluated,
    stopping_of,
    train,
)
from .resume import resume_path
from .registry import register_task
from .training import generator, scorer_parameter_values, training_dtype
from .validation import Validation

PAPER_POINTS = 9  # the paper's evaluation length
LONG_POINTS = 41  # the paper's last training length


def sample_linear(gen: torch.Generator, batch: int, points: int):
    """(xs, ys) with x ~ N(0, 1) and y = a x + b, a, b ~ N(0, 1) per sequence."""
    xs = torch.randn(batch, points, generator=gen)
    ab = torch.randn(batch, 2, 1, generator=gen)
    return xs, ab[:, 0] * xs + ab[:, 1]


def mse_loss(outputs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(outputs, ys)


def least_squares_predictions(xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """Prediction at x_t of least squares with intercept fitted on the points before t (fp64).

    With m = t - 1 context points, centred sums give slope = Sxy / Sxx and
    y_hat = ybar + slope (x_t - xbar). m = 0: 0. m = 1, or all context x equal: the minimum-norm
    solution of [x, 1] w = y, i.e. y_hat = ybar (xbar x_t + 1) / (xbar^2 + 1).
    """
    x, y = xs.double(), ys.double()
    t = x.shape[-1]
    before = torch.ones(t, t, dtype=torch.bool, device=x.device).tril(-1).double()  # [i, j] = j < i
    m = before.sum(-1)
    safe_m = m.clamp_min(1)
    xbar = (x @ before.T) / safe_m
    ybar = (y @ before.T) / safe_m
    dx = (x[..., None, :] - xbar[..., :, None]) * before  # [.., i, j] = x_j - xbar_i for j < i
    dy = (y[..., None, :] - ybar[..., :, None]) * before
    sxx = (dx * dx).sum(-1)
    sxy = (dx * dy).sum(-1)
    scale = x.abs().amax(-1, keepdim=True).clamp_min(1.0)
    full_rank = (m >= 2) & (sxx > (1e-12 * scale) ** 2 * m)
    slope = sxy / torch.where(full_rank, sxx, 1.0)
    fitted = ybar + slope * (x - xbar)
    min_norm = ybar * (xbar * x + 1) / (xbar * xbar + 1)
    pred = torch.where(full_rank, fitted, min_norm)
    return torch.where(m >= 1, pred, torch.zeros_like(pred))


@dataclass
class LinearConfig(ICLTaskConfig):
    eval_points: tuple[int, ...] = setting((9, 41), ge=1, nonempty=True)
    # standard deviations
    eval_sigma_x: tuple[float, ...] = setting(tuple(float(s) for s in range(1, 11)), gt=0,
                                              nonempty=True)
    eval_sigma: tuple[float, ...] = setting(tuple(float(s) for s in range(1, 11)), gt=0,
                                            nonempty=True)
    eval_functions: int = setting(100, ge=1)
    mse_start: int = setting(3, ge=0)

    def check(self) -> None:
        super().check()
        if 1.0 not in self.eval_sigma_x or 1.0 not in self.eval_sigma or \
                PAPER_POINTS not in self.eval_points or PAPER_POINTS > self.trained_points():
            raise ConfigError("the headlines need the paper's in-distribution cell: eval_sigma_x "
                              f"and eval_sigma must contain 1, eval_points must contain "
                              f"T={PAPER_POINTS}, and training must reach {PAPER_POINTS} points "
                              f"(it ends at {self.trained_points()}: raise curriculum_end or "
                              "train_steps)")
        if min(self.eval_points) <= self.mse_start:
            raise ConfigError(f"mse_start={self.mse_start} must be below every eval point "
                              f"{self.eval_points}", "mse_start")
        self.check_points("eval_points", self.eval_points)


METRICS = {
    "mse_T9_id": Metric("lower", True, "raw MSE at T = 9, sigma_x = sigma = 1 (the paper's cell, in "
                                       "distribution), indices >= mse_start; least squares scores 0, "
                                       "the zero predictor 2 in expectation", ceiling=0.0),
    "mse_T9_shifted": Metric("lower", True, "raw MSE at T = 9, mean over the grid cells with sigma_x > 1 "
                                            "or sigma > 1 (the paper's grid); the zero predictor scores "
                                            "the mean of sigma^2 (sigma_x^2 + 1)", ceiling=0.0),
    "mse_T41_sigma1": Metric("lower", False, "raw MSE at T = 41, sigma_x = sigma = 1 (a length shift when "
                                             "training ends below 41 points)", ceiling=0.0),
    "mse_T41_shifted": Metric("lower", False, "raw MSE at T = 41, mean over the cells with sigma_x > 1 "
                                              "or sigma > 1", ceiling=0.0),
    "mse_over_zero_id": Metric("lower", False, "MSE / zero-predictor MSE at sigma_x = sigma = 1 and "
                                               "T <= the last training length, pooled over those lengths",
                               floor=1.0, ceiling=0.0),
    "mse_over_zero_shifted": Metric("lower", False, "MSE / zero-predictor MSE, mean over every grid cell "
                                                    "outside training (sigma_x > 1, sigma > 1 or T above "
                                                    "the last training length); 1 = no better than "
                                                    "predicting 0", floor=1.0, ceiling=0.0),
    "mse_over_zero_input_shift": Metric("lower", False, "MSE / zero-predictor MSE at sigma_x > 1, "
                                                        "sigma = 1, every length", floor=1.0, ceiling=0.0),
    "mse_over_zero_function_shift": Metric("lower", False, "MSE / zero-predictor MSE at sigma_x = 1, "
                                                           "sigma > 1, every length", floor=1.0,
                                           ceiling=0.0),
    "mse_over_zero_joint_shift": Metric("lower", False, "MSE / zero-predictor MSE at sigma_x > 1 and "
                                                        "sigma > 1, every length", floor=1.0, ceiling=0.0),
}
RAW = {PAPER_POINTS: ("mse_T9_id", "mse_T9_shifted"), LONG_POINTS: ("mse_T41_sigma1", "mse_T41_shifted")}


@register_task("icl_linear")
class ICLLinear(Task):
    """f(x) = a x + b in context; MSE on the sigma_x x sigma grid with least-squares and zero baselines; docs/tasks.md#icl_linear."""

    version = 7
    track = "icl"
    supports_accumulation = True
    Config = LinearConfig
    metrics = METRICS
    validation = Validation("val_mse", "lower", "MSE over every position of fresh "
                            "training-distribution sequences at the last training length")

    def run(self, scorer: str, scorer_kwargs: dict, seed: int, config: LinearConfig,
            ctx: RunContext) -> TaskResult:
        cfg = config
        total = cfg.train_steps + 1
        model = build_model(cfg, scorer, scorer_kwargs, seed, ctx.device, ctx)
        val = validation_data(cfg, seed)
        log = train(model, cfg, sample_linear, mse_loss, generator(seed, "icl_linear", "train"), ctx,
                    progress_total=total, validation=val, direction=self.validation.direction,
                    resume=resume_path(ctx.workdir, "icl_linear"))
        grids: dict = {}
        groups, baselines, anchors = (({}, {}, {}) if not evaluated(cfg, ctx) else
                                      evaluate(model, cfg, seed, log.final_points, grids))
        items = {k: v for k, v in groups.items() if v}
        metrics = {k: mean_of(v) for k, v in items.items()}
        extra = {
            "mse_start": cfg.mse_start, "eval_sequences": cfg.eval_sequences,
            "eval_functions": cfg.eval_functions, "dtype": training_dtype(cfg.precision == "bf16"),
            "eval_dtype": "float32", "baselines": baselines, "anchors": anchors,
            "validation": self.validation.block(log.validation, len(val.xs), log.curve),
            "train": {"steps": log.steps, "final_points": log.final_points,
                      "first_loss": log.first_loss, "last_loss": log.last_loss,
                      "loss_curve": log.loss_curve, "parameters": model.num_parameters(),
                      **stopping_of(log)},
            "scorer_parameters": scorer_parameter_values(model),
        }
        checkpoint = save_checkpoint(model, ctx, "icl_linear")
        if checkpoint:
            extra["checkpoint"] = checkpoint
        ctx.report(total, total)
        return TaskResult(metrics=metrics, grids=grids, items=items, extra=extra, step=log.steps)


def validation_data(cfg: LinearConfig, seed: int) -> ValidationData:
    xs, ys = sample_linear(generator(seed, "icl_linear", "validation"), VALIDATION_SEQUENCES,
                           cfg.trained_points())
    return ValidationData(xs, ys, lambda model, x, y: (predict(model, x, y, cfg.eval_batch_tokens)
                                                       - y).pow(2).mean(-1))


def evaluate(model, cfg: LinearConfig, seed: int, trained_points: int,
             grids: dict) -> tuple[dict[str, list], dict, dict]:
    """Fill the per-T grids; return per-function items of each metric (raw MSE per function, and
    per-function MSE over the cell's zero-predictor MSE, so a cell's mean is the cell's value), a
    summary of the baselines, and the raw-MSE metrics' anchors (floor = the zero predictor's MSE
    on the same cells, ceiling 0)."""
    a0, b0 = torch.randn(2, cfg.eval_functions, generator=generator(seed, "icl_linear", "functions"))
    n, nf = cfg.eval_sequences, cfg.eval_functions
    groups = {k: [] for k in METRICS}
    zeros = {k: [] for k in METRICS}
    baselines = {"least_squares_max_mse": 0.0, "zero_mse_id": {}, "zero_mse_expected_id": 2.0}
    sx, sf = list(cfg.eval_sigma_x), list(cfg.eval_sigma)
    for t in cfg.eval_points:
        z = torch.randn(n, t, generator=generator(seed, "icl_linear", "eval", t))
        tables = {k: [[0.0] * len(sf) for _ in sx] for k in ("mse", "ratio", "lsq_mse", "zero_mse")}
        for i, s_x in enumerate(sx):
            xs = (s_x * z).repeat(nf, 1)  # (F * N, T), function-major
            for j, s in enumerate(sf):
                a = (s * a0).repeat_interleave(n)[:, None]
                b = (s * b0).repeat_interleave(n)[:, None]
                ys = a * xs + b
                out = predict(model, xs, ys, cfg.eval_batch_tokens)
                lsq = torch.cat([least_squares_predictions(xs[k:k + 1024], ys[k:k + 1024])
                                 for k in range(0, xs.shape[0], 1024)])
                scored = slice(cfg.mse_start, None)
                per_function = ((out - ys) ** 2)[:, scored].double().view(nf, -1).mean(1)
                zero = float((ys.double()[:, scored] ** 2).mean())
                tables["mse"][i][j] = float(per_function.mean())
                tables["ratio"][i][j] = tables["mse"][i][j] / zero
                tables["lsq_mse"][i][j] = float(((lsq - ys.double()) ** 2)[:, scored].mean())
                tables["zero_mse"][i][j] = zero
                baselines["least_squares_max_mse"] = max(baselines["least_squares_max_mse"],
                                                         tables["lsq_mse"][i][j])
                if s_x == 1.0 and s == 1.0:
                    baselines["zero_mse_id"][f"T{t}"] = zero
                ratios = (per_function / zero).tolist()
                long, in_shift, f_shift = t > trained_points, s_x != 1.0, s != 1.0
                if t in RAW:
                    raw = RAW[t][1 if in_shift or f_shift else 0]
                    groups[raw] += per_function.tolist()
                    zeros[raw].append(zero)
                if not (long or in_shift or f_shift):
                    groups["mse_over_zero_id"] += ratios
                else:
                    groups["mse_over_zero_shifted"] += ratios
                if in_shift and not f_shift:
                    groups["mse_over_zero_input_shift"] += ratios
                if f_shift and not in_shift:
                    groups["mse_over_zero_function_shift"] += ratios
                if in_shift and f_shift:
                    groups["mse_over_zero_joint_shift"] += ratios
        for name, values in tables.items():
            grids[f"{name}_T{t}"] = grid("sigma_x", sx, "sigma", sf, values)
    anchors = {k: {"floor": sum(v) / len(v), "ceiling": 0.0} for k, v in zeros.items() if v}
    return groups, baselines, anchors
