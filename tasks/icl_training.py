"""What both ICL tasks share: the config fields, the curriculum, the training loop, evaluation
helpers and grid records. Seeds, precision, the accumulated step, the divergence rule and the
scorer parameters of the record come from :mod:`tasks.training`.
"""
from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch

from .base import RunContext
from .config import ConfigError, TaskConfig, setting
from .models.icl import ICLModel, ICLModelConfig
from .stopping import CONVERGED, STEPS, STOP_MODES, Plateau, due
from .training import (Divergence, accumulated_backward, autocast, derive_seed, prepare_model,
                       row_share)
from . import resume as checkpoints
from .validation import Curve

# Validation data (tasks/validation.py): this many sequences drawn from the training distribution
# at the final training length; the learning curve scores every CURVE_STRIDE-th of them.
VALIDATION_SEQUENCES = 512
CURVE_STRIDE = 4
PRECISIONS = ("fp32", "bf16")
# Under stop = "converged", the cap is at least this many times softmax's convergence step, so a
# scorer up to that much slower than softmax reads "slower", not "not learned".
CAP_MULTIPLE = 4


@dataclass
class ICLTaskConfig(TaskConfig):
    """Fields shared by the ICL tasks; defaults are the paper's setting (docs/tasks.md#paper-sizes)."""

    # backbone
    n_layer: int = setting(12, ge=1)
    n_head: int = setting(8, ge=1)
    n_embd: int = setting(256, ge=1)
    n_positions: int = setting(256, ge=1)
    mlp: bool = True
    # training: Adam, no weight decay, constant learning rate, fresh samples every step;
    # train_steps steps, or at most that many under stop = "converged" (tasks/stopping.py), where
    # the cap is at least CAP_MULTIPLE x softmax_converged_at, the step at which softmax converges
    # under the same rule (a measurement the profile states; it changes nothing that runs)
    train_steps: int = setting(500_001, ge=1, role="steps")
    stop: str = setting(STEPS, choices=STOP_MODES)
    patience: int = setting(5, ge=1)
    patience_fraction: float = setting(0.0, ge=0, lt=1, off_at_default=True)
    tolerance: float = setting(0.0, ge=0)
    eval_every: int = setting(100, ge=1)
    learned_at: float | None = setting(None)    # the validation level past which patience counts
    target: float | None = setting(None)        # the validation level a run's speed is timed to
    softmax_converged_at: int | None = setting(None, ge=1)
    batch_size: int = setting(64, ge=1)
    lr: float = setting(1e-4, gt=0, tunable=True, role="rate")
    # curriculum: T = min(curriculum_end, curriculum_start + curriculum_increment * (step // curriculum_every))
    curriculum_start: int = setting(11, ge=1)
    curriculum_end: int = setting(41, ge=1)
    curriculum_increment: int = setting(2, ge=0)
    curriculum_every: int = setting(2000, ge=1)
    # failure rule (tasks.training.Divergence): a non-finite loss is "nan"; the smoothed loss above
    # diverge_factor x the first loss is "diverged"
    diverge_factor: float = setting(1e4, gt=1)
    # evaluation
    eval_sequences: int = setting(64, ge=1)
    eval_batch_tokens: int = setting(32768, ge=1)
    loss_log_points: int = setting(100, ge=1)
    # training precision: "fp32" (the paper's) or "bf16" (autocast); evaluation is always fp32
    precision: str = setting("fp32", choices=PRECISIONS)
    # non-empty: the headline metrics in this setting instead of the declared ones (Task.metric_specs)
    headline_metrics: tuple[str, ...] = ()

    # the validation metric's range (Task.validation), for learned_at and target
    validation_range: ClassVar[tuple[float, float]] = (0.0, math.inf)

    def check(self) -> None:
        if self.n_embd % self.n_head:
            raise ConfigError(f"n_embd={self.n_embd} must be a multiple of n_head={self.n_head}")
        if self.curriculum_end < self.curriculum_start:
            raise ConfigError(f"curriculum_end={self.curriculum_end} is below curriculum_start="
                              f"{self.curriculum_start}; set curriculum_end >= curriculum_start")
        if self.curriculum_end > self.n_positions:
            raise ConfigError(f"curriculum_end={self.curriculum_end} exceeds n_positions="
                              f"{self.n_positions}; raise n_positions")
        if self.stop == CONVERGED:
            self.check_converged()

    def check_converged(self) -> None:
        if self.train_steps < self.eval_every:
            raise ConfigError(f"config key 'train_steps' (the cap under stop = {CONVERGED!r}) must "
                              f"be >= eval_every={self.eval_every}, got {self.train_steps}",
                              "train_steps")
        if self.softmax_converged_at is not None and \
                self.train_steps < CAP_MULTIPLE * self.softmax_converged_at:
            raise ConfigError(
                f"config key 'train_steps' (the cap under stop = {CONVERGED!r}) must be >= "
                f"{CAP_MULTIPLE} x softmax_converged_at = "
                f"{CAP_MULTIPLE * self.softmax_converged_at}, got {self.train_steps}; raise the "
                f"cap or measure softmax's convergence again", "train_steps")
        low, high = self.validation_range
        for key in ("learned_at", "target"):
            value = getattr(self, key)
            if value is not None and not low <= value <= high:
                raise ConfigError(f"config key {key!r} must lie in the validation metric's range "
                                  f"[{low:g}, {high:g}], got {value!r}", key)

    def inert(self) -> tuple[str, ...]:
        unused = ("softmax_converged_at",)
        if self.stop == STEPS:
            unused += ("stop", "patience", "patience_fraction", "tolerance", "eval_every",
                       "learned_at", "target")
        return super().inert() + unused

    def model_config(self, scorer: str, scorer_kwargs: dict) -> ICLModelConfig:
        return ICLModelConfig(n_layer=self.n_layer, n_head=self.n_head, n_embd=self.n_embd,
                              n_positions=self.n_positions, mlp=self.mlp, scorer=scorer,
                              scorer_kwargs=dict(scorer_kwargs))

    def trained_points(self) -> int:
        """The sequence length of the last training step."""
        return self.curriculum().points(self.train_steps - 1)

    def curriculum(self) -> Curriculum:
        return Curriculum(self.curriculum_start, self.curriculum_end, self.curriculum_increment,
                          self.curriculum_every)

    def check_points(self, name: str, values) -> None:
        """Evaluation lengths must fit the position table."""
        too_long = [t for t in values if t > self.n_positions]
        if too_long:
            raise ConfigError(f"{name} has lengths {too_long} above n_positions="
                              f"{self.n_positions}; raise n_positions or shorten the grid", name)


@dataclass(frozen=True)
class Curriculum:
    """Points per sequence at a step: T starts at ``start``, grows by ``increment`` every ``every``
    optimizer steps (T changes when ``step % every == 0``), capped at ``end``."""

    start: int = 11
    end: int = 41
    increment: int = 2
    every: int = 2000

    def points(self, step: int) -> int:
        return min(self.end, self.start + self.increment * (step // self.every))

    def last_growth(self) -> int:
        """The first step at ``end`` points (0 when the curriculum never grows)."""
        if self.increment == 0 or self.end <= self.start:
            return 0
        return -(-(self.end - self.start) // self.increment) * self.every


def build_model(cfg: ICLTaskConfig, scorer: str, scorer_kwargs: dict, seed: int,
                device: torch.device, ctx: RunContext | None = None) -> ICLModel:
    """The backbone for ``scorer``; shared parameters depend only on ``seed``. With ``ctx``, its
    scorers get the fast paths of ``ctx.fast`` (:func:`tasks.training.prepare_model`)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "scorer-construction"))
        model = ICLModel(cfg.model_config(scorer, scorer_kwargs), seed=derive_seed(seed, "init"))
    model = model.to(device)
    if ctx is not None:
        prepare_model(model, ctx)
    return model




@dataclass
class ValidationData:
    """A task's validation sequences and its per-sequence score ``score(model, xs, ys) -> (B,)``;
    the metric is the mean score (over every sequence, or every ``CURVE_STRIDE``-th for the
    learning curve). Scoring never touches the training streams (the global generator is forked)."""

    xs: torch.Tensor
    ys: torch.Tensor
    score: Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]

    def subset_size(self) -> int:
        return len(self.xs[::CURVE_STRIDE])

    def value(self, model: torch.nn.Module, subset: bool = False) -> float:
        xs, ys = (self.xs[::CURVE_STRIDE], self.ys[::CURVE_STRIDE]) if subset else (self.xs, self.ys)
        was_training = model.training
        model.eval()
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                return float(self.score(model, xs, ys).double().mean())
        finally:
            model.train(was_training)


@dataclass
class TrainLog:
    steps: int                          # optimizer steps taken
    final_points: int
    loss_curve: dict  # {"step": [...], "loss": [...], "points": [...]} window means
    first_loss: float
    last_loss: float
    curve: Curve | None = None          # the validation metric during training
    validation: float | None = None     # the validation metric at the end, every sequence
    stopping: dict | None = None        # stop = "converged": Plateau.block (tasks/stopping.py)


class LossLog:
    """The training losses: checked by the divergence rule every ``check_every`` steps (one host
    sync each) and at ``last_step``, logged as means over windows of ``log_every`` steps."""

    def __init__(self, cfg: ICLTaskConfig, check_every: int):
        self.rule = Divergence(cfg.diverge_factor, context=f"lr={cfg.lr:g}")
        self.lr = cfg.lr
        self.check_every = check_every
        self.log_every = max(1, cfg.train_steps // cfg.loss_log_points)
        self.last_step = cfg.train_steps - 1
        self.curve = {"step": [], "loss": [], "points": []}
        self.window: list[float] = []
        self.pending: list[tuple[int, int, torch.Tensor]] = []
        self.first = None
        self.last = math.nan

    def add(self, step: int, points: int, loss: torch.Tensor) -> None:
        self.pending.append((step, points, loss))
        if len(self.pending) == self.check_every or step == self.last_step:
            self.flush()

    def flush(self) -> None:
        values = torch.stack([p[2] for p in self.pending]).float().cpu().tolist() \
            if self.pending else []
        for (s, t, _), value in zip(self.pending, values):
            if self.first is None:
                self.first = value
            self.rule.context = f" (T={t}, lr={self.lr:g})"
            self.rule.check(s, value)
            self.window.append(value)
            self.last = value
            if len(self.window) == self.log_every or s == self.last_step:
                self.close_window(s, t)
        self.pending = []

    def close_window(self, step: int, points: int) -> None:
        self.curve["step"].append(step + 1)
        self.curve["loss"].append(sum(self.window) / len(self.window))
        self.curve["points"].append(points)
        self.window = []

    def end(self, step: int, points: int) -> None:
        """Check and log what training that stopped after ``step`` left pending."""
        self.flush()
        if self.window:
            self.close_window(step, points)


class BestState:
    """Converged mode: the validation metric every ``eval_every`` steps on every validation
    sequence, the rule of :class:`tasks.stopping.Plateau`, and a copy of the model state at its
    best value. Training never stops before it has run a step at the curriculum's last length
    (the validation sequences' length)."""

    def __init__(self, cfg: ICLTaskConfig, validation: ValidationData, direction: str):
        self.cfg, self.validation = cfg, validation
        self.plateau = Plateau.of(cfg, direction)
        self.grown = cfg.curriculum().last_growth() + 1
        self.state: dict[str, torch.Tensor] | None = None

    def stop_after(self, steps_done: int, model: torch.nn.Module) -> bool:
        """Evaluate when due; whether training stops here."""
        if not due(steps_done, self.cfg.eval_every, self.cfg.train_steps):
            return False
        if self.plateau.observe(steps_done, self.validation.value(model)):
            self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        return self.plateau.done() and steps_done >= self.grown

    def restore(self, model: torch.nn.Module) -> None:
        if self.state is not None:
            model.load_state_dict(self.state)

    def block(self) -> dict:
        return self.plateau.block(self.cfg.train_steps, self.cfg.eval_every,
                                  len(self.validation.xs))


def best_state(cfg: ICLTaskConfig, validation: ValidationData | None,
               direction: str | None) -> BestState | None:
    """The converged mode's tracker, or None under ``stop = "steps"``."""
    if cfg.stop != CONVERGED:
        return None
    if validation is None or direction not in ("higher", "lower"):
        raise ValueError(f"stop = {CONVERGED!r} needs validation data and the metric's direction")
    return BestState(cfg, validation, direction)


def train(model: ICLModel, cfg: ICLTaskConfig, sample: Callable, loss_fn: Callable,
          gen: torch.Generator, ctx: RunContext, progress_offset: int = 0,
          progress_total: int | None = None,
          validation: ValidationData | None = None, direction: str | None = None,
          resume: Path | None = None) -> TrainLog:
    """Adam on fresh batches ``sample(gen, batch_size, T) -> (xs, ys)``; raises TrainingFailure
    by the rule of :class:`tasks.training.Divergence` (reference: the first step's loss). With
    ``validation``, the learning curve (on its subset) and the final validation metric. Under
    ``stop = "converged"`` (``validation`` and its metric's ``direction`` needed), training stops
    by the rule of :mod:`tasks.stopping` and ends in the state of the best validation value.
    With ``resume`` (:func:`tasks.resume.resume_path`), a checkpoint there is resumed, and one is
    written about every ``SAVE_EVERY_S`` seconds and when training ends."""
    device = next(model.parameters()).device
    curriculum = cfg.curriculum()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    check_every = 1 if device.type == "cpu" else 50  # a host sync per step costs little on CPU only
    report_every = max(1, cfg.train_steps // 200)
    total = progress_total if progress_total is not None else cfg.train_steps
    losses = LossLog(cfg, check_every)
    curve = None if validation is None else Curve(cfg.train_steps, validation.subset_size())
    best = best_state(cfg, validation, direction)
    run = Run(model, opt, gen, losses, curve, best,
              checkpoints.numerics(ctx.fast, ctx.accumulation, ctx.hardware))
    start, finished = run.restore(resume) or (0, False)
    if start or finished:
        for key, seconds in run.clock.before.items():
            ctx.resumed[key] = ctx.resumed.get(key, 0.0) + seconds
    model.train()
    step, saved = start - 1, time.monotonic()
    for step in range(start, cfg.train_steps if not finished else start):
        points = curriculum.points(step)
        xs, ys = sample(gen, cfg.batch_size, points)
        xs, ys = xs.to(device), ys.to(device)
        opt.zero_grad(set_to_none=True)

        def part_loss(part, xs=xs, ys=ys):
            with autocast(device, cfg.precision == "bf16"):
                pred = model(xs[part], ys[part])
            return loss_fn(pred.float(), ys[part]) * row_share(part, len(xs))

        losses.add(step, points, accumulated_backward(len(xs), ctx.accumulation, part_loss))
        opt.step()
        if curve is not None:
            curve.maybe(step + 1, lambda: validation.value(model, subset=True))
        if (step + 1) % report_every == 0 or step == cfg.train_steps - 1:
            ctx.report(progress_offset + step + 1, total)
        if best is not None and best.stop_after(step + 1, model):
            break
        if resume is not None and time.monotonic() - saved >= checkpoints.SAVE_EVERY_S:
            run.save(resume, step + 1, finished=False)
            saved = time.monotonic()
    if resume is not None and not finished:
        run.save(resume, step + 1, finished=True)
    losses.end(step, curriculum.points(step))
    if best is not None:
        best.restore(model)
    model.eval()
    return TrainLog(steps=step + 1, final_points=curriculum.points(step),
                    loss_curve=losses.curve, first_loss=losses.first, last_loss=losses.last,
                    curve=curve, validation=None if validation is None else validation.value(model),
                    stopping=None if best is None else best.block())


@dataclass
class Run:
    """The state of a training run that a checkpoint keeps (:mod:`tasks.resume`)."""

    model: torch.nn.Module
    opt: torch.optim.Optimizer
    gen: torch.Generator
    losses: LossLog
    curve: Curve | None
    best: BestState | None
    numerics: dict
    clock: checkpoints.Clock = dataclasses.field(default_factory=checkpoints.Clock)

    def save(self, path: Path, steps_done: int, finished: bool) -> None:
        """Checkpoint the run after ``steps_done`` steps (``finished``: training has ended)."""
        self.losses.flush()
        opt_tensors, opt_state = checkpoints.optimizer_parts(self.opt)
        tensors = {**checkpoints.prefixed("model.", self.model.state_dict()), **opt_tensors,
                   "gen": self.gen.get_state(), "rng": torch.get_rng_state()}
        if self.best is not None and self.best.state is not None:
            tensors.update(checkpoints.prefixed("best.", self.best.state))
        losses = self.losses
        checkpoints.save(path, tensors, {
            "numerics": self.numerics, "step": steps_done, "finished": finished,
            "spent": self.clock.spent(),
            "optimizer": opt_state,
            "losses": {"curve": losses.curve, "window": losses.window, "first": losses.first,
                       "last": losses.last, "reference": losses.rule.reference,
                       "smoothed": losses.rule.smoothed},
            "curve": None if self.curve is None else self.curve.as_dict(),
            "plateau": None if self.best is None else dataclasses.asdict(self.best.plateau)})

    def restore(self, path: Path | None) -> tuple[int, bool] | None:
        """Load the checkpoint at ``path`` when there is a usable one: (the step to go on from,
        whether training had ended); None when there is none."""
        found = checkpoints.load(path, self.numerics)
        if found is None:
            return None
        tensors, state = found
        self.clock = checkpoints.Clock(state["spent"])
        self.model.load_state_dict(checkpoints.unprefixed("model.", tensors))
        checkpoints.restore_optimizer(self.opt, tensors, state["optimizer"])
        self.gen.set_state(tensors["gen"])
        torch.set_rng_state(tensors["rng"])
        saved = state["losses"]
        self.losses.curve, self.losses.window = saved["curve"], saved["window"]
        self.losses.first, self.losses.last = saved["first"], saved["last"]
        self.losses.rule.reference, self.losses.rule.smoothed = saved["reference"], saved["smoothed"]
        if self.curve is not None:
            self.curve.step, self.curve.value = state["curve"]["step"], state["curve"]["value"]
        if self.best is not None:
            self.best.plateau = Plateau(**state["plateau"])
            best = checkpoints.unprefixed("best.", tensors)
            self.best.state = best or None
        return int(state["step"]), bool(state["finished"])


def evaluated(cfg: ICLTaskConfig, ctx: RunContext) -> bool:
    """Whether the cell runs the reported evaluation: every reporting cell, and under stop =
    "converged" the sweep cells too, so that a release can check a verdict at the rates next to
    the chosen one (leaderboard/neighbours.py)."""
    return not ctx.sweep or cfg.stop == CONVERGED


def stopping_of(log: TrainLog) -> dict:
    """The ``stopping`` entry of a model's ``extra["train"]`` block (none under ``stop = "steps"``)."""
    return {} if log.stopping is None else {"stopping": log.stopping}


@torch.no_grad()
def predict(model: ICLModel, xs: torch.Tensor, ys: torch.Tensor, batch_tokens: int) -> torch.Tensor:
    """Predictions (B, T) in fp32 on the CPU, computed in chunks of about ``batch_tokens`` tokens."""
    device = next(model.parameters()).device
    chunk = max(1, batch_tokens // (2 * xs.shape[1]))
    outs = [model(xs[i:i + chunk].to(device), ys[i:i + chunk].to(device)).float().cpu()
            for i in range(0, xs.shape[0], chunk)]
    return torch.cat(outs)


@torch.no_grad()
def attention(model: ICLModel, xs: torch.Tensor, ys: torch.Tensor, batch_tokens: int,
              reduce: Callable[[torch.Tensor, slice], torch.Tensor]) -> torch.Tensor:
    """``reduce(weights, rows)`` over the last layer's (b, H, 2T, 2T) weights, chunk by chunk."""
    device = next(model.parameters()).device
    chunk = max(1, batch_tokens // (2 * xs.shape[1]))
    outs = []
    for i in range(0, xs.shape[0], chunk):
        w = model.attention_weights(xs[i:i + chunk].to(device), ys[i:i + chunk].to(device))
        outs.append(reduce(w.float(), slice(i, i + chunk)).cpu())
    return torch.cat(outs)


def grid(rows_name: str, rows, cols_name: str, cols, values) -> dict:
    """A 2-D result in the record's grid format; NaN/inf become null."""
    return {"rows_name": rows_name, "cols_name": cols_name, "rows": list(rows), "cols": list(cols),
            "values": [[finite_or_none(v) for v in row] for row in values]}


def finite_or_none(value):
    value = float(value)
    return value if math.isfinite(value) else None


def mean_of(items: list) -> float | None:
    """The mean of the non-null items (None when there is none)."""
    kept = [v for v in items if v is not None]
    return sum(kept) / len(kept) if kept else None


def save_checkpoint(model: ICLModel, ctx: RunContext, name: str) -> str | None:
    """Save the trained weights as safetensors in the cell's workdir, when it has one (a sweep
    cell of the tuning protocol keeps none: nothing evaluates it later)."""
    if ctx.workdir is None or ctx.sweep:
        return None
    from safetensors.torch import save_file

    ctx.workdir.mkdir(parents=True, exist_ok=True)
    path = ctx.workdir / f"{name}.safetensors"
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, str(path))
    return str(path)
