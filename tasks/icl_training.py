"""What both ICL tasks share: the config fields, seeding, the curriculum, the training loop, evaluation
helpers and grid records.

Seeding: every random stream of a cell is a ``torch.Generator`` seeded with
``derive_seed(cell seed, *labels)`` (sha256 of the labels), so the data, the evaluation items and the
initial weights depend only on the cell seed, never on the scorer, the worker or the order of cells.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import json
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .base import RunContext, TrainingFailure, micro_batches
from .models.icl import ICLModel, ICLModelConfig
from .registry import TaskError


def derive_seed(seed: int, *labels) -> int:
    """A 63-bit seed for the stream named ``labels`` of the cell seeded with ``seed``."""
    digest = hashlib.sha256(json.dumps([int(seed), *labels]).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def generator(seed: int, *labels) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(seed, *labels))


@dataclass
class ICLTaskConfig:
    """Fields shared by the ICL tasks; defaults are the paper's setting (TASKS.md (a), (c))."""

    # backbone
    n_layer: int = 12
    n_head: int = 8
    n_embd: int = 256
    n_positions: int = 256
    mlp: bool = True
    # training: Adam, no weight decay, constant learning rate, fresh samples every step
    train_steps: int = 500_001
    batch_size: int = 64
    lr: float = 1e-4
    # curriculum: T = min(curriculum_end, curriculum_start + curriculum_increment * (step // curriculum_every))
    curriculum_start: int = 11
    curriculum_end: int = 41
    curriculum_increment: int = 2
    curriculum_every: int = 2000
    # failure rule: a non-finite loss is "nan"; a loss above diverge_factor x the first loss is "diverged"
    diverge_factor: float = 1e4
    # evaluation
    eval_sequences: int = 64
    eval_batch_tokens: int = 32768
    loss_log_points: int = 100
    # training precision: "fp32" (the paper's) or "bf16" (autocast); evaluation is always fp32
    precision: str = "fp32"
    # declared headline metrics that are not headlines in this setting (Task.metric_specs)
    demote_headlines: tuple[str, ...] = ()

    def __post_init__(self):
        coerce_field_types(self)
        positive = ("n_layer", "n_head", "n_embd", "n_positions", "train_steps", "batch_size",
                    "curriculum_start", "curriculum_end", "curriculum_every", "eval_sequences",
                    "eval_batch_tokens", "loss_log_points")
        for name in positive:
            if getattr(self, name) < 1:
                raise TaskError(f"config key {name!r} must be >= 1, got {getattr(self, name)}")
        if self.n_embd % self.n_head:
            raise TaskError(f"n_embd={self.n_embd} must be a multiple of n_head={self.n_head}")
        if not self.lr > 0:
            raise TaskError(f"config key 'lr' must be > 0, got {self.lr}")
        if self.curriculum_increment < 0:
            raise TaskError(f"curriculum_increment must be >= 0, got {self.curriculum_increment}")
        if self.curriculum_end < self.curriculum_start:
            raise TaskError(f"curriculum_end={self.curriculum_end} is below curriculum_start="
                            f"{self.curriculum_start}; set curriculum_end >= curriculum_start")
        if self.curriculum_end > self.n_positions:
            raise TaskError(f"curriculum_end={self.curriculum_end} exceeds n_positions={self.n_positions}; "
                            "raise n_positions")
        if not self.diverge_factor > 1:
            raise TaskError(f"diverge_factor must be > 1, got {self.diverge_factor}")
        if self.precision not in PRECISIONS:
            raise TaskError(f"precision must be one of {sorted(PRECISIONS)}, got {self.precision!r}")

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
            raise TaskError(f"{name} has lengths {too_long} above n_positions={self.n_positions}; "
                            "raise n_positions or shorten the grid")


def coerce_field_types(cfg) -> None:
    """Check and normalize a config dataclass's values (TOML lists -> tuples, ints -> floats)."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        try:
            if kind.startswith("tuple"):
                if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                    raise TypeError
                inner = kind[kind.index("[") + 1:].split(",")[0].strip()
                value = tuple(_scalar(v, inner) for v in value)
            else:
                value = _scalar(value, kind)
        except (TypeError, ValueError):
            raise TaskError(f"config key {f.name!r} must be of type {kind}, got {value!r}") from None
        setattr(cfg, f.name, value)


def _scalar(value, kind: str):
    if kind == "bool":
        if not isinstance(value, bool):
            raise TypeError
        return value
    if isinstance(value, bool):
        raise TypeError
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if not isinstance(value, int):
            raise TypeError
        return value
    if kind == "float":
        if not isinstance(value, (int, float)):
            raise TypeError
        return float(value)
    if kind == "str":
        if not isinstance(value, str):
            raise TypeError
        return value
    return value


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


def build_model(cfg: ICLTaskConfig, scorer: str, scorer_kwargs: dict, seed: int,
                device: torch.device) -> ICLModel:
    """The backbone for ``scorer``; shared parameters depend only on ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "scorer-construction"))
        model = ICLModel(cfg.model_config(scorer, scorer_kwargs), seed=derive_seed(seed, "init"))
    return model.to(device)


PRECISIONS = {"fp32": "float32", "bf16": "bfloat16"}


def autocast(device: torch.device, precision: str = "fp32"):
    """bf16 autocast for ``precision="bf16"``; full fp32 for ``"fp32"``."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def training_dtype(precision: str) -> str:
    """What the record's provenance calls the training precision."""
    return PRECISIONS[precision]


@dataclass
class TrainLog:
    steps: int
    final_points: int
    loss_curve: dict  # {"step": [...], "loss": [...], "points": [...]} window means
    first_loss: float
    last_loss: float


def train(model: ICLModel, cfg: ICLTaskConfig, sample: Callable, loss_fn: Callable,
          gen: torch.Generator, ctx: RunContext, progress_offset: int = 0,
          progress_total: int | None = None) -> TrainLog:
    """Adam on fresh batches ``sample(gen, batch_size, T) -> (xs, ys)``; raises TrainingFailure.

    A loss that is NaN/inf ends training with status ``nan``; a loss above
    ``diverge_factor`` x the first step's loss ends it with status ``diverged``. ``step`` in the
    failure is the number of optimizer steps completed before the bad loss.
    """
    device = next(model.parameters()).device
    curriculum = cfg.curriculum()
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    check_every = 1 if device.type == "cpu" else 50  # a host sync per step costs little on CPU only
    log_every = max(1, cfg.train_steps // cfg.loss_log_points)
    report_every = max(1, cfg.train_steps // 200)
    total = progress_total if progress_total is not None else cfg.train_steps
    curve = {"step": [], "loss": [], "points": []}
    window: list[float] = []
    pending: list[tuple[int, int, torch.Tensor]] = []
    first_loss = None
    last_loss = math.nan
    model.train()
    for step in range(cfg.train_steps):
        points = curriculum.points(step)
        xs, ys = sample(gen, cfg.batch_size, points)
        xs, ys = xs.to(device), ys.to(device)
        opt.zero_grad(set_to_none=True)
        loss = 0.0
        for part in micro_batches(len(xs), ctx.accumulation):
            with autocast(device, cfg.precision):
                pred = model(xs[part], ys[part])
            part_loss = loss_fn(pred.float(), ys[part]) * ((part.stop - part.start) / len(xs))
            part_loss.backward()
            loss = loss + part_loss.detach()
        pending.append((step, points, loss.detach()))
        if len(pending) == check_every or step == cfg.train_steps - 1:
            values = torch.stack([p[2] for p in pending]).float().cpu().tolist()
            for (s, t, _), value in zip(pending, values):
                if first_loss is None:
                    first_loss = value
                _check_loss(value, first_loss, s, t, cfg)
                window.append(value)
                last_loss = value
                if len(window) == log_every or s == cfg.train_steps - 1:
                    curve["step"].append(s + 1)
                    curve["loss"].append(sum(window) / len(window))
                    curve["points"].append(t)
                    window = []
            pending = []
        opt.step()
        if (step + 1) % report_every == 0 or step == cfg.train_steps - 1:
            ctx.report(progress_offset + step + 1, total)
    model.eval()
    return TrainLog(steps=cfg.train_steps, final_points=curriculum.points(cfg.train_steps - 1),
                    loss_curve=curve, first_loss=first_loss, last_loss=last_loss)


def _check_loss(value: float, first: float, step: int, points: int, cfg: ICLTaskConfig) -> None:
    if not math.isfinite(value):
        raise TrainingFailure("nan", step, f"training loss became {value} at step {step} "
                              f"(T={points}, lr={cfg.lr:g})")
    if value > cfg.diverge_factor * max(first, 1e-8):
        raise TrainingFailure("diverged", step, f"training loss {value:.4g} at step {step} exceeds "
                              f"{cfg.diverge_factor:g} x the first loss {first:.4g} (T={points}, "
                              f"lr={cfg.lr:g})")


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


def scorer_parameter_values(model: ICLModel) -> dict[str, list[float]]:
    """The scorers' own parameters per layer, e.g. ``{"layer0.rho": [1.31], "layer0.n": [1.52]}``:
    the raw parameters, plus the value of every ``<name>_value()`` method a scorer offers that
    takes no argument (e.g. SSA's n = softplus(rho))."""
    values = {}
    for i, scorer in enumerate(model.scorer_modules()):
        params = dict(scorer.named_parameters())
        for name, p in params.items():
            values[f"layer{i}.{name}"] = _floats(p)
        if not params:
            continue
        for attr in dir(type(scorer)):
            method = getattr(scorer, attr, None)
            if not attr.endswith("_value") or not callable(method):
                continue
            required = [p for p in inspect.signature(method).parameters.values()
                        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            if not required:
                with torch.no_grad():
                    values[f"layer{i}.{attr[:-len('_value')]}"] = _floats(torch.as_tensor(method()))
    return values


def _floats(t: torch.Tensor) -> list[float]:
    return [float(v) for v in t.detach().float().cpu().flatten()]


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
    """Save the trained weights as safetensors in the cell's workdir, when it has one."""
    if ctx.workdir is None:
        return None
    from safetensors.torch import save_file

    ctx.workdir.mkdir(parents=True, exist_ok=True)
    path = ctx.workdir / f"{name}.safetensors"
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, str(path))
    return str(path)
