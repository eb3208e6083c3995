"""The training contract every training task shares: seeds, precision, the accumulated step, the
divergence rule, the scorers' fast paths, and the learned scorer parameters of the record.

Seeding: every random stream of a cell is seeded with ``derive_seed(cell seed, *labels)`` (sha256
of the labels), so the data, the evaluation items and the initial weights depend only on the cell
seed, never on the scorer, the worker or the order of cells.

Divergence (one rule for every task, :class:`Divergence`): a non-finite loss or gradient norm ends
training with status ``nan``; the smoothed loss ``m_t = 0.98 m_{t-1} + 0.02 x_t`` (``m_0 = x_0``)
above ``factor x reference`` ends it with status ``diverged``, where ``reference`` is the loss of a
trivial predictor: ``ln V`` for a language model over V tokens, the first step's loss otherwise.
``TrainingFailure.step`` is the number of optimizer steps completed before the bad loss.
"""
from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import math
from collections.abc import Callable

import torch

from scorers.fast import FAST_MODES, accelerate

from .base import RunContext, TrainingFailure, micro_batches
from .registry import TaskError

def derive_seed(seed: int, *labels) -> int:
    """A 63-bit seed for the stream named ``labels`` of the cell seeded with ``seed``."""
    digest = hashlib.sha256(json.dumps([int(seed), *labels]).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def generator(seed: int, *labels) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(seed, *labels))


def autocast(device: torch.device, bf16: bool):
    """bf16 autocast on ``device`` when ``bf16``; full fp32 otherwise. The task decides (the
    language models on CUDA only, the ICL tasks by their ``precision`` key)."""
    if bf16:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def training_dtype(bf16: bool) -> str:
    """What the record's provenance calls the precision :func:`autocast` gives."""
    return "bfloat16" if bf16 else "float32"


def row_share(part: slice, rows: int) -> float:
    """The share of a batch of ``rows`` rows that the micro-batch ``part`` holds."""
    return (part.stop - part.start) / rows


def accumulated_backward(rows: int, accumulation: int,
                         part_loss: Callable[[slice], torch.Tensor]) -> torch.Tensor:
    """Backward through a batch of ``rows`` rows in ``accumulation`` micro-batches.

    ``part_loss(part)`` is the micro-batch's share of the batch loss (e.g. its mean loss times
    :func:`row_share`), so the gradients sum to those of the whole batch. Returns the batch loss,
    detached; the caller zeroes the gradients before and steps the optimizer after."""
    loss = None
    for part in micro_batches(rows, accumulation):
        value = part_loss(part)
        value.backward()
        loss = value.detach() if loss is None else loss + value.detach()
    return loss


class Divergence:
    """The one divergence rule (see the module doc). ``reference=None`` takes the first loss."""

    SMOOTHING = 0.98

    def __init__(self, factor: float, reference: float | None = None,
                 reference_name: str = "ln V", context: str = ""):
        if not factor > 0:
            raise TaskError(f"diverge_factor must be > 0, got {factor}")
        self.factor = float(factor)
        self.reference = reference
        self.reference_name = reference_name if reference is not None else "the first loss"
        self.context = f" ({context})" if context else ""
        self.smoothed: float | None = None

    def check(self, step: int, loss: float, grad_norm: float | None = None) -> None:
        """Raise :class:`TrainingFailure` when the loss of ``step`` (optimizer steps done before
        it) breaks the rule."""
        if not math.isfinite(loss):
            raise TrainingFailure("nan", step, f"training loss became {loss} at step "
                                               f"{step}{self.context}")
        if grad_norm is not None and not math.isfinite(grad_norm):
            raise TrainingFailure("nan", step, f"gradient norm became {grad_norm} at step "
                                               f"{step}{self.context}")
        if self.reference is None:
            self.reference = max(loss, 1e-8)
        a = self.SMOOTHING
        self.smoothed = loss if self.smoothed is None else a * self.smoothed + (1 - a) * loss
        limit = self.factor * self.reference
        if self.smoothed > limit:
            raise TrainingFailure(
                "diverged", step, f"smoothed training loss {self.smoothed:.4g} at step {step} "
                f"exceeds {self.factor:g} x {self.reference_name} = {limit:.4g}{self.context}")


class AdamW(torch.optim.Optimizer):
    """AdamW without bias correction: ``transformers.AdamW(correct_bias=False)``, which BabyBERTa
    trains with (torch's AdamW always corrects). Per parameter, at every step::

        m <- beta1 m + (1 - beta1) g
        v <- beta2 v + (1 - beta2) g^2
        p <- p - lr m / (sqrt(v) + eps)
        p <- p - lr wd p                      (decoupled decay, after the update, as transformers)
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.0):
        if not lr > 0 or not eps >= 0 or not weight_decay >= 0:
            raise ValueError(f"AdamW: lr > 0, eps >= 0 and weight_decay >= 0 are needed, got "
                             f"lr={lr}, eps={eps}, weight_decay={weight_decay}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"AdamW: betas must lie in [0, 1), got {betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, decay = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
                p.addcdiv_(m, v.sqrt().add_(eps), value=-lr)
                if decay > 0:
                    p.add_(p, alpha=-lr * decay)
        return loss


def scorer_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """(module name, scorer) of every scorer inside ``model`` (``model`` itself may be one), in
    order, outermost only."""
    from scorers import Scorer

    found = []
    for name, module in model.named_modules():
        if isinstance(module, Scorer) and not any(name.startswith(f"{n}.") for n, _ in found
                                                  if n):
            found.append((name, module))
    return found


def scorer_parameter_values(model: torch.nn.Module, prefix: str = "") -> dict[str, list[float]]:
    """The learned scorer parameters of ``model`` in the record's one format
    (``extra["scorer_parameters"]``): ``{"layer0.rho": [1.31], "layer0.n": [1.52], ...}``, layer
    ``i`` being the i-th scorer inside the model, plus the value of every ``<name>_value()`` method
    a scorer with parameters offers that takes no argument (e.g. SSA's n = softplus(rho)).
    ``prefix`` (e.g. ``"some."``) names the model when a cell trains several."""
    values = {}
    for i, (_, scorer) in enumerate(scorer_modules(model)):
        params = dict(scorer.named_parameters())
        for name, p in params.items():
            values[f"{prefix}layer{i}.{name}"] = _floats(p)
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
                    values[f"{prefix}layer{i}.{attr[:-len('_value')]}"] = _floats(
                        torch.as_tensor(method()))
    return values


def _floats(t: torch.Tensor) -> list[float]:
    return [float(v) for v in t.detach().float().cpu().flatten()]


def prepare_model(model: torch.nn.Module, ctx: RunContext) -> dict[str, str]:
    """Give the scorers inside ``model`` the fast paths of ``ctx.fast`` (``[run] fast`` of the
    profile) through ``scorers.fast.accelerate`` and note, in ``ctx.fast_paths``, the path each
    scorer runs (``{"ssa": "fused"}``; several paths of one scorer joined by commas); the harness
    writes that into the record's ``provenance["fast_paths"]``. ``fast = "off"``: every scorer keeps
    its own ``attend`` (SDPA for softmax, the reference formula otherwise); ``"auto"`` as
    :func:`scorers.fast.choose_path` decides per device. Returns the paths."""
    if ctx.fast not in FAST_MODES:
        raise TaskError(f"[run] fast = {ctx.fast!r}; choose one of {FAST_MODES}")
    out = accelerate(model, ctx.fast, device=ctx.device)
    for scorer, path in out.items():
        previous = ctx.fast_paths.get(scorer)
        ctx.fast_paths[scorer] = path if previous in (None, path) else f"{previous},{path}"
    return out
