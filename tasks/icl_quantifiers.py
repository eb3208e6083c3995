"""``icl_quantifiers``: learn "every" / "some" in context, then measure length, scale and outlier shift.

Data (docs/tasks.md#icl_quantifiers): x_t ~ N(0, 1); labels at every prefix, strict positivity:

    every: y_t = +1 if x_1..x_t are all > 0 else -1
    some:  y_t = +1 if any of x_1..x_t is > 0 else -1

The model reads (x_1, y_1, ..., x_T, y_T) and predicts y_t at the x_t token; loss = BCE between
sigmoid(out_t) and (y_t + 1) / 2, mean over batch and positions. A prediction is +1 iff out_t > 0.

Evaluation, per quantifier (the quantifiers a cell trains are set by ``quantifier``; "both" trains one
model per quantifier, same seed streams, and the unprefixed metrics are their mean):
- OOD grid: T in ``eval_points`` x sigma in ``eval_sigmas``; x = sigma * z, z ~ N(0, 1) drawn once per
  (sequence, position) from a generator seeded by (cell seed, T) and reused for every sigma. A sequence
  is wrong if any prediction at 0-based index >= 3 differs from its label.
  In distribution = sigma 1 and T <= the curriculum length at the last training step; every other grid
  cell is shifted (longer, scaled, or both).
- Deviant-value test: ``eval_sequences`` N(0, 1) sequences of ``deviant_points`` points; point p (1-based,
  p in {4, T//2, T}) replaced by D in ``deviant_values``, labels recomputed. Reported: sequence error,
  accuracy of the predictions at points t >= p (those whose context holds the deviant), and from the last
  layer, at the x tokens of points t >= p: the weight |w| on the deviant key (mean over heads and
  queries) and the row entropy of |w| / sum |w| (nats). The same statistics with no value replaced
  ("none") are in the grids as a control. ``deviant_points`` must be within the training lengths, so
  the test shifts nothing but the one value.
- The paper's deviant protocols (omyokun/SSA ``scratch/src/testcross.py``), beside ours:
  ``paper_fixed_*``: the one sequence [1, -1, -2, 1000] (T = 4, the deviant last; its labels do not
  depend on it), whether its 4th prediction is wrong, and the last layer's |w| on the deviant key from
  its own x token (mean over heads; the mean-over-heads matrix is the ``*_paper_fixed_attention`` grid);
  ``paper_variant_error``: sequences sigma * z of ``deviant_points`` points with -70 at point 6 and
  70000 at point 8 (0-based indices 5 and 7 in the original), labels recomputed, sequence error over
  sigma in ``eval_sigmas``.

Validation (tasks/validation.py): ``val_bce``, the training loss (BCE over every position) on fresh
training-distribution sequences at the last training length, from the stream (cell seed,
"icl_quantifiers", quantifier, "validation"), mean over the quantifiers' models (sequence error in
distribution is 0 for every scorer at small sizes, so it cannot rank points). Sweep cells skip the
reported evaluation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from .base import Metric, RunContext, Task, TaskResult
from .config import ConfigError, setting
from .icl_training import (
    VALIDATION_SEQUENCES,
    ICLTaskConfig,
    ValidationData,
    attention,
    build_model,
    finite_or_none,
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
from .validation import Curve, Validation

QUANTIFIERS = ("every", "some")
IGNORED_PREDICTIONS = 3
PAPER_FIXED = (1.0, -1.0, -2.0, 1000.0)  # testcross.py: x_j = -j, then x[0] = 1 and x[3] = 1000
PAPER_VARIANT = {6: -70.0, 8: 70000.0}  # 1-based point -> value (xs[:, 5] = -70, xs[:, 7] = 70000)


def labels_every(xs: torch.Tensor) -> torch.Tensor:
    """+1 where every x so far is > 0, else -1 (last dim is the sequence)."""
    return torch.where(torch.cummin(xs, dim=-1).values > 0, 1.0, -1.0).to(xs.dtype)


def labels_some(xs: torch.Tensor) -> torch.Tensor:
    """+1 where some x so far is > 0, else -1."""
    return torch.where(torch.cummax(xs, dim=-1).values > 0, 1.0, -1.0).to(xs.dtype)


LABELS = {"every": labels_every, "some": labels_some}


def predicted_labels(outputs: torch.Tensor) -> torch.Tensor:
    """+1 where out > 0; an output of exactly 0 counts as -1."""
    return torch.where(outputs > 0, 1.0, -1.0)


def sequence_wrong(outputs: torch.Tensor, labels: torch.Tensor,
                   ignore_first: int = IGNORED_PREDICTIONS) -> torch.Tensor:
    """(B,) bool: some prediction at 0-based index >= ``ignore_first`` differs from its label."""
    return (predicted_labels(outputs) != labels)[..., ignore_first:].any(dim=-1)


def bce_loss(outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(outputs, (labels + 1) / 2)


def sample_sequences(quantifier: str):
    label = LABELS[quantifier]

    def sample(gen: torch.Generator, batch: int, points: int):
        xs = torch.randn(batch, points, generator=gen)
        return xs, label(xs)

    return sample


@dataclass
class QuantifiersConfig(ICLTaskConfig):
    quantifier: str = setting("both", choices=(*QUANTIFIERS, "both"))
    # labels depend on signs, so the scales are > 0
    eval_points: tuple[int, ...] = setting(tuple(range(10, 201, 10)), gt=IGNORED_PREDICTIONS,
                                           nonempty=True)
    eval_sigmas: tuple[float, ...] = setting(tuple(float(s) for s in range(1, 30)), gt=0,
                                             nonempty=True)
    deviant_points: int = 41
    deviant_values: tuple[float, ...] = setting(
        (10.0, -10.0, 100.0, -100.0, 1000.0, -1000.0, 1e4, -1e4), nonempty=True)

    def check(self) -> None:
        super().check()
        if 1.0 not in self.eval_sigmas or min(self.eval_points) > self.curriculum_start:
            raise ConfigError("the grid needs an in-distribution cell: eval_sigmas must contain 1 "
                              f"and eval_points a length <= curriculum_start="
                              f"{self.curriculum_start}")
        shortest = max(4, *PAPER_VARIANT)
        if not shortest <= self.deviant_points <= self.trained_points():
            raise ConfigError(f"deviant_points={self.deviant_points} must be between {shortest} "
                              f"(the paper's variant puts a value at point {max(PAPER_VARIANT)}) "
                              f"and the last training length {self.trained_points()}, so the "
                              "deviant test shifts no length; lower deviant_points or train "
                              "longer", "deviant_points")
        self.check_points("eval_points", self.eval_points)
        self.check_points("deviant_points", (self.deviant_points,))

    @property
    def quantifiers(self) -> tuple[str, ...]:
        return QUANTIFIERS if self.quantifier == "both" else (self.quantifier,)

    def deviant_positions(self) -> tuple[int, ...]:
        t = self.deviant_points
        return tuple(sorted({4, t // 2, t}))


# A constant answer (-1 for "every", +1 for "some") gets a sequence wrong exactly when x_1..x_4 share
# the sign that flips the label at index 3: probability 1/16 at any T and sigma.
CONSTANT_ANSWER_ERROR = 1 / 16


def _declare() -> dict[str, Metric]:
    per = {
        "error_id": Metric("lower", False, "sequence error in distribution: sigma = 1 and T <= the last "
                                           "training length"),
        "error_shifted": Metric("lower", False, "sequence error over the grid cells outside training "
                                                "(T above the last training length or sigma > 1)"),
        "error_length": Metric("lower", False, "sequence error at sigma = 1, T above the last training "
                                               "length"),
        "error_scale": Metric("lower", False, "sequence error at T within training, sigma > 1"),
        "deviant_error": Metric("lower", False, "sequence error with one deviant value D inserted, mean "
                                                "over D and position p"),
        "deviant_accuracy": Metric("higher", False, "per-prediction accuracy at points t >= p (context "
                                                    "holds the deviant)"),
        "deviant_weight": Metric("lower", False, "last layer: mean |attention weight| on the deviant key "
                                                 "from the x tokens of points t >= p (collapse onto the "
                                                 "outlier; the saturation probe's trained-model number)"),
        "deviant_entropy": Metric("higher", False, "last layer: mean row entropy (nats) of |w| / sum |w| "
                                                   "at the x tokens of points t >= p"),
        "paper_fixed_error": Metric("lower", False, "the paper's sequence [1, -1, -2, 1000]: 1 if its "
                                                    "4th prediction is wrong"),
        "paper_fixed_weight": Metric("lower", False, "the paper's sequence [1, -1, -2, 1000]: last layer "
                                                     "|w| on the deviant key from its x token, mean over "
                                                     "heads"),
        "paper_variant_error": Metric("lower", False, "the paper's variant: sigma * N(0, 1) sequences of "
                                                      "deviant_points points with -70 at point 6 and "
                                                      "70000 at point 8, sequence error over sigma in "
                                                      "eval_sigmas"),
    }
    metrics = {}
    for name, m in per.items():
        headline = name in ("error_id", "error_shifted")
        anchors = {"floor": CONSTANT_ANSWER_ERROR, "ceiling": 0.0} if headline else {}
        metrics[name] = Metric(m.direction, headline, m.description + "; mean over the cell's quantifiers",
                               **anchors)
        for q in QUANTIFIERS:
            metrics[f"{q}_{name}"] = Metric(m.direction, False, f"{q}: {m.description}")
    return metrics


@register_task("icl_quantifiers")
class ICLQuantifiers(Task):
    """"every" / "some" in context; sequence error under length and magnitude shift; docs/tasks.md#icl_quantifiers."""

    version = 4
    track = "icl"
    supports_accumulation = True
    Config = QuantifiersConfig
    metrics = _declare()
    validation = Validation("val_bce", "lower", "BCE over every position of fresh "
                            "training-distribution sequences at the last training length, mean "
                            "over the quantifiers")

    def run(self, scorer: str, scorer_kwargs: dict, seed: int, config: QuantifiersConfig,
            ctx: RunContext) -> TaskResult:
        cfg = config
        per_model = cfg.train_steps + 1
        total = per_model * len(cfg.quantifiers)
        metrics, grids, items = {}, {}, {}
        extra = {"quantifiers": list(cfg.quantifiers), "ignored_predictions": IGNORED_PREDICTIONS,
                 "eval_sequences": cfg.eval_sequences,
                 "deviant_positions": list(cfg.deviant_positions()),
                 "dtype": training_dtype(cfg.precision == "bf16"), "eval_dtype": "float32",
                 "paper_fixed_sequence": list(PAPER_FIXED),
                 "paper_variant_values": {str(k): v for k, v in PAPER_VARIANT.items()},
                 "train": {}, "scorer_parameters": {}, "checkpoints": {}}
        curves, values, val_items, steps = [], [], 0, 0
        for i, q in enumerate(cfg.quantifiers):
            model = build_model(cfg, scorer, scorer_kwargs, seed, ctx.device, ctx)
            val = validation_data(cfg, q, seed)
            log = train(model, cfg, sample_sequences(q), bce_loss,
                        generator(seed, "icl_quantifiers", q, "train"), ctx,
                        progress_offset=i * per_model, progress_total=total, validation=val,
                        direction=self.validation.direction,
                        resume=resume_path(ctx.workdir, f"icl_quantifiers_{i}"))
            curves.append(log.curve)
            steps = max(steps, log.steps)
            values.append(log.validation)
            val_items += len(val.xs)
            extra["train"][q] = {"steps": log.steps, "final_points": log.final_points,
                                 "first_loss": log.first_loss, "last_loss": log.last_loss,
                                 "loss_curve": log.loss_curve, "parameters": model.num_parameters(),
                                 **stopping_of(log)}
            extra["scorer_parameters"].update(scorer_parameter_values(model, prefix=f"{q}."))
            checkpoint = save_checkpoint(model, ctx, f"icl_quantifiers_{q}")
            if checkpoint:
                extra["checkpoints"][q] = checkpoint
            if not evaluated(cfg, ctx):
                ctx.report((i + 1) * per_model, total)
                continue
            for name, (value, its) in evaluate_grid(model, q, cfg, seed, log.final_points, grids).items():
                metrics[f"{q}_{name}"], items[f"{q}_{name}"] = value, its
            for evaluation in (evaluate_deviant, evaluate_paper_fixed, evaluate_paper_variant):
                for name, (value, its) in evaluation(model, q, cfg, seed, grids).items():
                    metrics[f"{q}_{name}"], items[f"{q}_{name}"] = value, its
            ctx.report((i + 1) * per_model, total)
        for name in ("error_id", "error_shifted", "error_length", "error_scale", "deviant_error",
                     "deviant_accuracy", "deviant_weight", "deviant_entropy", "paper_fixed_error",
                     "paper_fixed_weight", "paper_variant_error"):
            keys = [f"{q}_{name}" for q in cfg.quantifiers if f"{q}_{name}" in items]
            if keys:
                items[name] = [v for k in keys for v in items[k]]
                metrics[name] = mean_of(items[name])
        value = None if any(v is None for v in values) else sum(values) / len(values)
        extra["validation"] = self.validation.block(value, val_items, Curve.mean(curves))
        undefined_entropy_is_not_applicable(metrics, items, extra)
        return TaskResult(metrics=metrics, grids=grids, items=items, extra=extra, step=steps)


def validation_data(cfg: QuantifiersConfig, quantifier: str, seed: int) -> ValidationData:
    xs, ys = sample_sequences(quantifier)(
        generator(seed, "icl_quantifiers", quantifier, "validation"), VALIDATION_SEQUENCES,
        cfg.trained_points())
    return ValidationData(xs, ys, lambda model, x, y: F.binary_cross_entropy_with_logits(
        predict(model, x, y, cfg.eval_batch_tokens), (y + 1) / 2, reduction="none").mean(-1))


def undefined_entropy_is_not_applicable(metrics: dict, items: dict, extra: dict) -> None:
    """A deviant-entropy metric with a sequence whose rows after the deviant carry no attention
    mass (a scorer whose weights can all be zero, e.g. relu) is n/a for the cell: dropped from
    ``metrics`` and ``items``, with the reason once in ``extra["not_applicable"]``."""
    for name in [k for k, its in items.items() if k.endswith("deviant_entropy") and None in its]:
        extra.setdefault("not_applicable", {})[name] = (
            f"{items[name].count(None)} of {len(items[name])} deviant sequences leave no "
            "attention mass on the rows after the deviant (all weights zero), where the entropy "
            "of |w| / sum |w| is undefined")
        del metrics[name], items[name]


def evaluate_grid(model, quantifier: str, cfg: QuantifiersConfig, seed: int, trained_points: int,
                  grids: dict) -> dict[str, tuple[float | None, list]]:
    """The T x sigma sequence-error grid; returns {metric: (value, per-sequence 0/1 items)}."""
    label = LABELS[quantifier]
    sigmas = list(cfg.eval_sigmas)
    n = cfg.eval_sequences
    errors = []
    groups = {"error_id": [], "error_shifted": [], "error_length": [], "error_scale": []}
    for t in cfg.eval_points:
        z = torch.randn(n, t, generator=generator(seed, "icl_quantifiers", "ood", t))
        labels = label(z)
        xs = torch.cat([s * z for s in sigmas])
        ys = labels.repeat(len(sigmas), 1)
        wrong = sequence_wrong(predict(model, xs, ys, cfg.eval_batch_tokens), ys).view(len(sigmas), n)
        errors.append(wrong.float().mean(dim=1).tolist())
        for j, s in enumerate(sigmas):
            outcome = wrong[j].int().tolist()
            long, scaled = t > trained_points, s != 1.0
            if not long and not scaled:
                groups["error_id"] += outcome
            else:
                groups["error_shifted"] += outcome
            if long and not scaled:
                groups["error_length"] += outcome
            if scaled and not long:
                groups["error_scale"] += outcome
    grids[f"{quantifier}_error"] = grid("T", cfg.eval_points, "sigma", sigmas, errors)
    return {k: (mean_of(v), v) for k, v in groups.items() if v}


def evaluate_deviant(model, quantifier: str, cfg: QuantifiersConfig, seed: int,
                     grids: dict) -> dict[str, tuple[float | None, list]]:
    """The deviant-value test; returns {metric: (value, per (p, D, sequence) items)}."""
    label = LABELS[quantifier]
    t, n = cfg.deviant_points, cfg.eval_sequences
    positions = cfg.deviant_positions()
    values: list = [None, *cfg.deviant_values]  # None = control, nothing replaced
    z = torch.randn(n, t, generator=generator(seed, "icl_quantifiers", "deviant"))
    xs, first = [], []
    for p in positions:
        for d in values:
            x = z.clone()
            if d is not None:
                x[:, p - 1] = d
            xs.append(x)
            first.append(p)
    xs = torch.cat(xs)
    ys = label(xs)
    start = torch.tensor(first).repeat_interleave(n)  # 1-based p per sequence
    out = predict(model, xs, ys, cfg.eval_batch_tokens)
    wrong = sequence_wrong(out, ys).float()
    after = torch.arange(1, t + 1)[None, :] >= start[:, None]  # points t >= p
    correct = (predicted_labels(out) == ys).float()
    accuracy = (correct * after).sum(1) / after.sum(1)

    def reduce(w: torch.Tensor, rows: slice) -> torch.Tensor:
        w = w.abs()
        p = start[rows].to(w.device)
        key = 2 * (p - 1)
        query_after = (torch.arange(t, device=w.device)[None, :] >= (p - 1)[:, None])  # (b, T)
        wx = w[:, :, 0::2, :]  # rows at the x tokens: (b, H, T, 2T)
        on_key = wx.gather(3, key.view(-1, 1, 1, 1).expand(-1, wx.shape[1], t, 1))[..., 0]
        total = wx.sum(-1)
        prob = wx / total.clamp_min(torch.finfo(wx.dtype).tiny).unsqueeze(-1)
        entropy = -torch.special.xlogy(prob, prob).sum(-1)
        entropy = torch.where(total > 0, entropy, torch.nan)
        mask = query_after[:, None, :].expand_as(on_key)
        weight = (on_key * mask).sum((1, 2)) / mask.sum((1, 2))
        ent = torch.where(mask, entropy, 0.0).nansum((1, 2)) / (mask & ~entropy.isnan()).sum((1, 2))
        return torch.stack([weight, ent], dim=1)

    att = attention(model, xs, ys, cfg.eval_batch_tokens, reduce)
    per_seq = {"deviant_error": wrong, "deviant_accuracy": accuracy,
               "deviant_weight": att[:, 0], "deviant_entropy": att[:, 1]}
    shape = (len(positions), len(values), n)
    results = {}
    for name, v in per_seq.items():
        v = v.view(shape)
        cell_means = [[_nanmean(v[i, j]) for j in range(len(values))] for i in range(len(positions))]
        grids[f"{quantifier}_{name}"] = grid("p", positions, "D", ["none", *cfg.deviant_values],
                                             cell_means)
        kept = v[:, 1:].reshape(-1).tolist()
        its = [x if math.isfinite(x) else None for x in kept]
        results[name] = (mean_of(its), its)
    return results


def paper_fixed_sequence() -> torch.Tensor:
    """(1, 4): the paper's attention probe [1, -1, -2, 1000]."""
    return torch.tensor([PAPER_FIXED])


def evaluate_paper_fixed(model, quantifier: str, cfg: QuantifiersConfig, seed: int,
                         grids: dict) -> dict[str, tuple[float | None, list]]:
    """The paper's one-sequence probe: 4th prediction wrong?, and the last layer's |w| (mean over
    heads) on the deviant key from the deviant's own x token; the whole mean-over-heads matrix
    goes to the grids."""
    xs = paper_fixed_sequence()
    ys = LABELS[quantifier](xs)
    out = predict(model, xs, ys, cfg.eval_batch_tokens)
    wrong = float(sequence_wrong(out, ys)[0])
    key = 2 * (len(PAPER_FIXED) - 1)  # the x token of the last point

    def reduce(w: torch.Tensor, rows: slice) -> torch.Tensor:
        return w.abs().mean(1)  # (b, 2T, 2T)

    mean_w = attention(model, xs, ys, cfg.eval_batch_tokens, reduce)[0]
    tokens = [f"{kind}{i + 1}" for i in range(len(PAPER_FIXED)) for kind in ("x", "y")]
    grids[f"{quantifier}_paper_fixed_attention"] = grid("query", tokens, "key", tokens, mean_w.tolist())
    weight = finite_or_none(mean_w[key, key])
    return {"paper_fixed_error": (wrong, [wrong]), "paper_fixed_weight": (weight, [weight])}


def paper_variant_sequences(z: torch.Tensor, sigmas) -> torch.Tensor:
    """(len(sigmas) * B, T): sigma * z for each sigma, then PAPER_VARIANT's values at their points."""
    xs = torch.cat([s * z for s in sigmas])
    for point, value in PAPER_VARIANT.items():
        xs[:, point - 1] = value
    return xs


def evaluate_paper_variant(model, quantifier: str, cfg: QuantifiersConfig, seed: int,
                           grids: dict) -> dict[str, tuple[float | None, list]]:
    """The paper's -70 / 70000 variant: sequence error per sigma, per-(sigma, sequence) items."""
    sigmas, n, t = list(cfg.eval_sigmas), cfg.eval_sequences, cfg.deviant_points
    z = torch.randn(n, t, generator=generator(seed, "icl_quantifiers", "paper_variant"))
    xs = paper_variant_sequences(z, sigmas)
    ys = LABELS[quantifier](xs)
    wrong = sequence_wrong(predict(model, xs, ys, cfg.eval_batch_tokens), ys).float()
    per_sigma = wrong.view(len(sigmas), n).mean(1).tolist()
    grids[f"{quantifier}_paper_variant_error"] = grid("T", [t], "sigma", sigmas, [per_sigma])
    its = wrong.tolist()
    return {"paper_variant_error": (mean_of(its), its)}


def _nanmean(v: torch.Tensor) -> float:
    keep = v[~v.isnan()]
    return float(keep.mean()) if keep.numel() else math.nan
