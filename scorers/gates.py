"""Scorers that weigh each key on its own (sigmoid, ReLU) or by sigmoid stick-breaking."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .base import LogitsScorer, row_count, visible_keys
from .forms import BlockedSpec, FlexSpec, Kernels
from .registry import ScorerError, register_scorer


@register_scorer("sigmoid", family="gate", normalization="unnormalized", paper="arXiv:2409.04431")
class Sigmoid(LogitsScorer):
    """w_ij = sigmoid(s_ij + beta), beta = -ln(max_len) unless ``bias`` is given; 0 <= w <= 1."""

    def __init__(self, *, bias: float | None = None, **context):
        super().__init__(**context)
        if bias is None:
            if self.max_len < 1:
                raise ScorerError(f"scorer 'sigmoid': max_len must be >= 1, got {self.max_len}")
            bias = -math.log(self.max_len)
        self.bias = float(bias)

    def weights(self, s, mask):
        return torch.sigmoid(s + self.bias)

    def kernels(self):
        return Kernels(blocked=BlockedSpec("sigmoid", bias=self.bias), flex=self.flex_spec)

    def flex_spec(self, q, k, mask):
        """softmax of logsigmoid(s + beta) times exp(lse) = sum_j sigmoid(s_ij + beta) v_j."""
        bias = torch.tensor([self.bias], device=q.device)
        return FlexSpec(lambda score, b, h, qi, ki: F.logsigmoid(score + bias[0]),
                        lambda out, lse: out * torch.exp(lse))


class _ReLULength(LogitsScorer):
    LENGTHS = ("visible", "fixed")
    power = 1

    def __init__(self, *, length: str = "visible", **context):
        super().__init__(**context)
        if length not in self.LENGTHS:
            raise ScorerError(f"scorer {self.name!r}: length must be one of {self.LENGTHS} "
                              f"(visible = n_i keys of the row, fixed = max_len), got {length!r}")
        self.length = length

    def weights(self, s, mask):
        length = row_count(mask).to(s.dtype) if self.length == "visible" else float(self.max_len)
        return torch.relu(s.masked_fill(~mask, 0.0)) ** self.power / length

    def kernels(self):
        return Kernels(blocked=self.blocked_spec)

    def blocked_spec(self, q, k, mask):
        """relu(s)^p / L = relu(s / L^(1/p))^p: L^(-1/p) / sqrt(d) scales the queries."""
        if self.length == "visible":
            length = visible_keys(q, k, mask)                             # (B, H, Lq, 1)
        else:
            length = torch.tensor(float(self.max_len), dtype=torch.float64)
        scale = length.pow(-1.0 / self.power) / math.sqrt(q.shape[-1])
        return BlockedSpec("relu" if self.power == 1 else "relu2", query_scale=scale)


@register_scorer("relu", aliases=("relu_len",), family="gate", normalization="unnormalized",
                 paper="arXiv:2309.08586")
class ReLU(_ReLULength):
    """w_ij = relu(s_ij) / L, L = n_i (``length="visible"``) or max_len (``"fixed"``); w >= 0."""


@register_scorer("relu2", aliases=("relu2_len",), family="gate", normalization="unnormalized",
                 paper="arXiv:2309.08586; arXiv:2202.10447")
class ReLU2(_ReLULength):
    """w_ij = relu(s_ij)^2 / L, L = n_i (``length="visible"``) or max_len (``"fixed"``); w >= 0."""

    power = 2


@register_scorer("stick_breaking", family="gate", normalization="subnormalized",
                 paper="arXiv:2410.17980", causal_only=True)
class StickBreaking(LogitsScorer):
    """beta_ij = sigmoid(s_ij); for visible j < i: A_ij = beta_ij prod_{j<k<i} (1 - beta_ik), i.e.
    log A_ij = logsigmoid(s_ij) + sum_{j<k<i} logsigmoid(-s_ik) (a reverse cumulative sum, O(N^2)).
    With ``attend_current=True`` (default) the remainder prod_{j<i} (1 - beta_ij) = 1 - sum_j A_ij
    goes to the current token (the diagonal), so rows whose own key is visible sum to 1.
    Causal only: keys after the query get no weight. Queries are aligned to the last keys."""

    def __init__(self, *, attend_current: bool = True, **context):
        super().__init__(**context)
        self.attend_current = bool(attend_current)

    def weights(self, s, mask):
        lq, lk = s.shape[-2:]
        offset = lk - lq
        grid = torch.ones(lq, lk, dtype=torch.bool, device=s.device)
        past = grid.tril(offset - 1) & mask
        log_beta = F.logsigmoid(s).masked_fill(~past, float("-inf"))
        log_rest = F.logsigmoid(-s).masked_fill(~past, 0.0)
        after = log_rest.flip(-1).cumsum(-1).flip(-1)           # sum_{k >= j}
        after = F.pad(after[..., 1:], (0, 1))                   # sum_{k > j}
        w = torch.exp(log_beta + after)
        if self.attend_current:
            current = (grid.tril(offset) & ~grid.tril(offset - 1)) & mask
            w = w + current * torch.exp(log_rest.sum(-1, keepdim=True))
        return w

    def kernels(self):
        return Kernels(blocked=BlockedSpec("stick_breaking" if self.attend_current
                                           else "stick_breaking_past"))
