"""The in-context-learning backbone: GPT-2 blocks over a sequence of scalars, any scorer.

Garg et al. 2022 (dtsip/in-context-learning) as used by the SSA paper (arXiv 2508.14685):

    z = (x_1, y_1, x_2, y_2, ..., x_T, y_T)          each element a 1-vector
    h_0 = read_in(z) + wpe[0 : 2T]                   read_in: Linear(1 -> d), wpe: 2 * n_positions slots
    h_l = h_{l-1} + attn(ln_1(h_{l-1}))              causal attention through the scorer under test
    h_l = h_l + mlp(ln_2(h_l))                       GELU MLP d -> 4d -> d (optional)
    out = read_out(ln_f(h_L))                        read_out: Linear(d -> 1)
    prediction for y_t = out at the x_t token (0-based index 2t - 2)

Initialization follows Hugging Face ``GPT2Model`` (normal std 0.02, residual output projections
std 0.02 / sqrt(2 n_layer), zero biases, unit LayerNorm) and PyTorch defaults for the read-in and
read-out maps. Every parameter outside the scorers is drawn from one generator in a fixed order, so
the same seed gives every scorer the same initial values for everything they share.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from scorers import Attention, causal_mask


@dataclass
class ICLModelConfig:
    n_layer: int = 12
    n_head: int = 8
    n_embd: int = 256
    n_positions: int = 256  # the longest sequence of points; 2 * n_positions position slots
    mlp: bool = True
    scorer: str = "softmax"
    scorer_kwargs: dict = field(default_factory=dict)
    init_std: float = 0.02

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} must be a multiple of n_head={self.n_head}")
        for name in ("n_layer", "n_head", "n_embd", "n_positions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


class MLP(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg: ICLModelConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = Attention(cfg.n_embd, cfg.n_head, cfg.scorer, max_len=2 * cfg.n_positions,
                              scorer_kwargs=cfg.scorer_kwargs)
        self.ln_2 = nn.LayerNorm(cfg.n_embd) if cfg.mlp else None
        self.mlp = MLP(cfg.n_embd) if cfg.mlp else None

    def forward(self, x, mask):
        x = x + self.attn(self.ln_1(x), mask)
        if self.mlp is not None:
            x = x + self.mlp(self.ln_2(x))
        return x


class ICLModel(nn.Module):
    """GPT-2 over interleaved (x, y) scalars; ``forward(xs, ys)`` returns the prediction per point."""

    def __init__(self, cfg: ICLModelConfig, *, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        self.read_in = nn.Linear(1, cfg.n_embd)
        self.wpe = nn.Embedding(2 * cfg.n_positions, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.read_out = nn.Linear(cfg.n_embd, 1)
        self.reset_parameters(seed)

    def shared_parameters(self):
        """(name, parameter) of everything but the scorers' own parameters, in a fixed order."""
        return [(n, p) for n, p in self.named_parameters() if ".scorer." not in f".{n}"]

    def scorer_modules(self):
        return [block.attn.scorer for block in self.blocks]

    @torch.no_grad()
    def reset_parameters(self, seed: int) -> None:
        """Draw every shared parameter from a generator seeded with ``seed`` (scorers untouched)."""
        gen = torch.Generator().manual_seed(seed)
        std = self.cfg.init_std
        residual_std = std / math.sqrt(2 * self.cfg.n_layer)
        for name, p in self.shared_parameters():
            target = torch.empty(p.shape, dtype=torch.float32)
            if name.startswith(("read_in.", "read_out.")):
                if name.endswith("weight"):  # nn.Linear's default initialization
                    nn.init.kaiming_uniform_(target, a=math.sqrt(5), generator=gen)
                else:
                    bound = 1 / math.sqrt(self.get_submodule(name.split(".")[0]).in_features)
                    nn.init.uniform_(target, -bound, bound, generator=gen)
            elif name.startswith("ln") or ".ln_" in name:
                target.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                target.zero_()
            elif name.endswith(("o_proj.weight", "c_proj.weight")):
                nn.init.normal_(target, 0.0, residual_std, generator=gen)
            else:
                nn.init.normal_(target, 0.0, std, generator=gen)
            p.copy_(target)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def embed(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """Interleave (B, T) xs and ys into (B, 2T, 1) and map to (B, 2T, d) with positions."""
        b, t = xs.shape
        if t > self.cfg.n_positions:
            raise ValueError(f"{t} points exceed n_positions={self.cfg.n_positions}; raise n_positions "
                             "in the task config")
        zs = torch.stack((xs, ys), dim=2).reshape(b, 2 * t, 1)
        pos = torch.arange(2 * t, device=xs.device)
        return self.read_in(zs) + self.wpe(pos)

    def forward(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """(B, T) predictions: the read-out at every x token."""
        h = self.embed(xs, ys)
        mask = causal_mask(h.shape[1], device=h.device)
        for block in self.blocks:
            h = block(h, mask)
        return self.read_out(self.ln_f(h))[:, ::2, 0]

    @torch.no_grad()
    def attention_weights(self, xs: torch.Tensor, ys: torch.Tensor, layer: int = -1) -> torch.Tensor:
        """Dense weights (B, H, 2T, 2T) of one layer's scorer (default: the last layer)."""
        layer = range(len(self.blocks))[layer]
        h = self.embed(xs, ys)
        mask = causal_mask(h.shape[1], device=h.device)
        for block in self.blocks[:layer]:
            h = block(h, mask)
        block = self.blocks[layer]
        return block.attn.attention_weights(block.ln_1(h), mask)
