"""``saturation_probe``: how much attention a scorer leaves on the other tokens as logits saturate.

No training. The paper's mechanism (arXiv 2508.14685, Theorems 1 and 2) measured per scorer, in float64:

1. Scaled logits: every logit of a row multiplied by lambda (``lambdas``). Softmax tends to one-hot on the
   top key; SSA tends to a power law max(s, 0)^n / sum max(s, 0)^n.
2. One dominant logit: key 0's logit set to X (``dominant_logits``), the others fixed. Softmax leaves
   about e^-X on the others; SSA about X^-n.

The statistic is the share of the row's absolute weight on the other tokens,
``sum_{j != top} |w_j| / sum_j |w_j|`` (= 1 - w_top for normalized scorers; |w| for signed ones; a row
whose weights are all zero has no share and is left out). "top" is the key with the largest logit
(mode 1) or the dominant key (mode 2).

Rows: the last query of a causal attention problem over ``n_keys`` keys (so causal-only scorers are
measured as they run), ``rows`` random rows per cell with q, k ~ N(0, I) in ``head_dim`` dimensions.
Scaling the logits by lambda is done by scaling q, and the dominant logit by moving key 0 along q; both
go through the scorer's ``weights_from_qk``, so logits-kind and module-kind scorers (cosformer,
linear_elu) are treated alike. For logits-kind scorers, the fixed example row
``example_logits`` = [1, 0.5, -0.3, 0.2] (docs/scorers.md#ssa-limits) is also measured through
``weights_from_logits``; it is not applicable to module-kind scorers, whose weights are not a function
of the logits. Scorer parameters are at their initial values.

Trained models: the collapse of trained attention onto an outlier is measured by ``icl_quantifiers``'s
deviant-value test (``deviant_weight``, ``deviant_entropy`` and the ``*_deviant_*`` grids in those
records), from the last layer of each trained model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

import scorers
from scorers import causal_mask

from .base import Metric, RunContext, Task, TaskResult
from .config import ConfigError, TaskConfig, setting
from .icl_training import grid, mean_of
from .registry import register_task
from .training import generator, scorer_parameter_values


@dataclass
class ProbeConfig(TaskConfig):
    lambdas: tuple[float, ...] = setting((0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0,
                                          1e4), gt=0, nonempty=True)
    dominant_logits: tuple[float, ...] = setting((1.0, 10.0, 100.0, 1000.0, 1e4, 1e5),
                                                 nonempty=True)
    headline_lambda: float = 10.0
    headline_dominant: float = 100.0
    rows: int = setting(256, ge=1)
    n_keys: int = setting(16, ge=2)
    head_dim: int = setting(16, ge=1)
    scorer_max_len: int = setting(1024, ge=1)
    example_logits: tuple[float, ...] = (1.0, 0.5, -0.3, 0.2)

    def check(self) -> None:
        if self.headline_lambda not in self.lambdas:
            raise ConfigError(f"headline_lambda={self.headline_lambda} must be one of lambdas "
                              f"{self.lambdas}", "headline_lambda")
        if self.headline_dominant not in self.dominant_logits:
            raise ConfigError(f"headline_dominant={self.headline_dominant} must be one of "
                              f"dominant_logits {self.dominant_logits}", "headline_dominant")
        if len(self.example_logits) < 2:
            raise ConfigError("example_logits needs at least 2 logits", "example_logits")
        if self.n_keys > self.scorer_max_len:
            raise ConfigError(f"n_keys={self.n_keys} exceeds scorer_max_len="
                              f"{self.scorer_max_len}", "n_keys")


TRAINED = " Trained-model attention: icl_quantifiers deviant_weight / deviant_entropy."

METRICS = {
    "other_mass_scaled": Metric("higher", True, "share of |w| off the top key after all logits are "
                                                "multiplied by headline_lambda (default 10); mean over "
                                                "random rows." + TRAINED),
    "other_mass_dominant": Metric("higher", True, "share of |w| off a key whose logit is "
                                                  "headline_dominant (default 100), the others ~N(0, 1); "
                                                  "mean over random rows." + TRAINED),
    "other_mass_scaled_example": Metric("higher", False, "as other_mass_scaled on the logits "
                                                         "[1, 0.5, -0.3, 0.2] (logits-kind scorers)"),
    "other_mass_dominant_example": Metric("higher", False, "as other_mass_dominant with logits "
                                                           "[X, 0.5, -0.3, 0.2] (logits-kind scorers)"),
}


def other_share(w: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """sum_{j != top} |w_j| / sum_j |w_j| per row; NaN where the row is all zeros."""
    w = w.abs()
    total = w.sum(-1)
    others = w.scatter(-1, top[..., None], 0.0).sum(-1)  # summed directly: 1 - w_top would round to 0
    return torch.where(total > 0, others / total, torch.nan)


@register_task("saturation_probe")
class SaturationProbe(Task):
    """No training: weight left on the other tokens as logits scale or one logit grows (Theorems 1 and 2)."""

    version = 1
    track = "probe"
    Config = ProbeConfig
    metrics = METRICS

    def run(self, scorer: str, scorer_kwargs: dict, seed: int, config: ProbeConfig,
            ctx: RunContext) -> TaskResult:
        cfg = config
        module = _float64_scorer(scorer, scorer_kwargs, cfg.scorer_max_len)
        module.eval()
        metrics, items, grids = {}, {}, {}
        extra = {"kind": module.kind, "normalization": module.normalization, "dtype": "float64",
                 "n_keys": cfg.n_keys, "rows": cfg.rows, "head_dim": cfg.head_dim,
                 "scorer_parameters": scorer_parameter_values(module)}
        random_scaled, random_dominant = self.random_rows(module, cfg, seed)
        example_scaled, example_dominant = [], []
        if module.kind == "logits":
            example_scaled, example_dominant = self.example_row(module, cfg)
        else:
            extra["example"] = "not applicable: a module-kind scorer's weights are not a function of " \
                               "the logits alone"
        i = cfg.lambdas.index(cfg.headline_lambda)
        j = cfg.dominant_logits.index(cfg.headline_dominant)
        items["other_mass_scaled"] = _items(random_scaled[i])
        items["other_mass_dominant"] = _items(random_dominant[j])
        if example_scaled:
            items["other_mass_scaled_example"] = _items(example_scaled[i:i + 1])
            items["other_mass_dominant_example"] = _items(example_dominant[j:j + 1])
        metrics = {k: mean_of(v) for k, v in items.items()}
        rows = ["random_mean"] + (["example"] if example_scaled else [])
        grids["scaled"] = grid("rows", rows, "lambda", cfg.lambdas,
                               [[_nanmean(v) for v in random_scaled]]
                               + ([list(example_scaled)] if example_scaled else []))
        grids["dominant"] = grid("rows", rows, "X", cfg.dominant_logits,
                                 [[_nanmean(v) for v in random_dominant]]
                                 + ([list(example_dominant)] if example_dominant else []))
        ctx.report(1, 1)
        return TaskResult(metrics=metrics, grids=grids, items=items, extra=extra, step=None)

    @staticmethod
    @torch.no_grad()
    def random_rows(module, cfg: ProbeConfig, seed: int):
        """Per lambda and per X: the other-token share of each random row (lists of tensors)."""
        gen = generator(seed, "saturation_probe")
        r, length, d = cfg.rows, cfg.n_keys, cfg.head_dim
        q = torch.randn(r, 1, length, d, generator=gen, dtype=torch.float64)
        k = torch.randn(r, 1, length, d, generator=gen, dtype=torch.float64)
        mask = causal_mask(length)
        last_q = q[..., -1, :]  # (r, 1, d): the query that sees every key
        logits = (last_q[..., None, :] @ k.transpose(-1, -2))[..., 0, :] / math.sqrt(d)
        top = logits.argmax(-1)
        scaled = []
        for lam in cfg.lambdas:
            w = module.weights_from_qk(lam * q, k, mask)[..., -1, :]
            scaled.append(other_share(w, top)[:, 0])
        dominant = []
        direction = math.sqrt(d) * last_q / (last_q * last_q).sum(-1, keepdim=True)
        zero = torch.zeros_like(top)
        for x in cfg.dominant_logits:
            moved = k.clone()
            moved[..., 0, :] = k[..., 0, :] + (x - logits[..., 0:1]) * direction
            w = module.weights_from_qk(q, moved, mask)[..., -1, :]
            dominant.append(other_share(w, zero)[:, 0])
        return scaled, dominant

    @staticmethod
    @torch.no_grad()
    def example_row(module, cfg: ProbeConfig):
        """The fixed example as the last row of a causal logits matrix (logits-kind scorers)."""
        example = torch.tensor(cfg.example_logits, dtype=torch.float64)
        length = example.numel()
        mask = causal_mask(length)

        def share(row: torch.Tensor, top: int) -> float:
            s = torch.zeros(1, 1, length, length, dtype=torch.float64)
            s[..., -1, :] = row
            w = module.weights_from_logits(s, mask)[..., -1, :]
            return float(other_share(w, torch.tensor([[top]]))[0, 0])

        scaled = [share(lam * example, int(example.argmax())) for lam in cfg.lambdas]
        dominant = []
        for x in cfg.dominant_logits:
            row = example.clone()
            row[0] = x
            dominant.append(share(row, 0))
        return scaled, dominant


def _float64_scorer(name: str, kwargs: dict, max_len: int):
    """The scorer built with float64 as the default dtype, so that its constants (SSA's n = 1.5,
    b = 0.8) are exact rather than float32-rounded."""
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return scorers.create_scorer(name, num_heads=1, max_len=max_len, **kwargs).double()
    finally:
        torch.set_default_dtype(previous)


def _items(values) -> list:
    return [float(v) if math.isfinite(float(v)) else None for v in values]


def _nanmean(v) -> float:
    v = torch.as_tensor(v, dtype=torch.float64)
    keep = v[~v.isnan()]
    return float(keep.mean()) if keep.numel() else math.nan
