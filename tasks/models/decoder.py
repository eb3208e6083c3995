"""A Nemotron-style causal decoder (the paper's 114M "baby_luciole") with a pluggable scorer.

    embed   h = E[x]                                             (no positions: RoPE in attention)
    layer   h = h + W_o Attn(LN1(h))                              (pre-norm, no linear biases)
            h = h + W_2 relu(W_1 LN2(h))^2                        (squared-ReLU MLP)
    head    logits = LN_f(h) E^T                                  (tied embeddings)

LayerNorm is ``layernorm1p`` when ``zero_centered_gamma``: y = norm(x) (1 + γ) + β with γ
stored zero-centred (initialized to 0), as Megatron/NeMo. Attention is grouped-query
(``n_kv_head`` key/value heads shared by ``n_head`` query heads) through ``scorers.Attention``,
with rotary position embeddings on the first ``rotary_fraction`` of each head's dimensions
(Megatron's ``rotary_percent``, non-interleaved halves):

    x_rot = x_rot cos(t θ) + rotate_half(x_rot) sin(t θ),  θ_i = base^(-2i / d_rot)

Initialization (Megatron): every linear and embedding weight ~ N(0, init_std²), the two output
projections of each layer (W_o, W_2) ~ N(0, init_std² / (2 n_layer)); norms γ = 0 (1p) or 1,
β = 0. All shared parameters are drawn from one generator in a fixed order; scorer parameters
are left as the scorer made them, so one seed gives every scorer the same shared initial values.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from scorers import Attention, causal_mask


@dataclass
class DecoderConfig:
    vocab_size: int = 50256
    max_len: int = 1024
    n_layer: int = 12
    dim: int = 768
    n_head: int = 24
    n_kv_head: int = 8
    ffn_dim: int = 3072
    rotary_fraction: float = 0.5
    rope_base: float = 10000.0
    zero_centered_gamma: bool = True
    norm_eps: float = 1e-5
    init_std: float = 0.0134
    scorer: str = "softmax"
    scorer_kwargs: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.dim % self.n_head:
            raise ValueError(f"dim={self.dim} is not a multiple of n_head={self.n_head}")
        if self.n_head % self.n_kv_head:
            raise ValueError(f"n_head={self.n_head} is not a multiple of n_kv_head={self.n_kv_head}")
        if not 0.0 <= self.rotary_fraction <= 1.0:
            raise ValueError(f"rotary_fraction={self.rotary_fraction} must be in [0, 1]")
        if self.rotary_dim % 2:
            raise ValueError(f"rotary_fraction={self.rotary_fraction} of head_dim={self.head_dim} "
                             f"gives an odd number of rotary dimensions ({self.rotary_dim})")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_head

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.rotary_fraction)


class LayerNorm(nn.Module):
    """LayerNorm with bias; ``zero_centered_gamma`` stores γ - 1 (Megatron's layernorm1p)."""

    def __init__(self, dim: int, eps: float, zero_centered_gamma: bool):
        super().__init__()
        self.zero_centered_gamma = zero_centered_gamma
        self.weight = nn.Parameter(torch.zeros(dim) if zero_centered_gamma else torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gamma = self.weight + 1 if self.zero_centered_gamma else self.weight
        return F.layer_norm(x, (x.shape[-1],), gamma, self.bias, self.eps)


class Rotary(nn.Module):
    """Rotary embeddings on the first ``rotary_dim`` dimensions of q and k (B, H, T, D)."""

    def __init__(self, rotary_dim: int, max_len: int, base: float):
        super().__init__()
        self.rotary_dim = rotary_dim
        inv_freq = 1.0 / base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
        angles = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    @staticmethod
    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([-x2, x1], dim=-1)

    def rotate(self, x: torch.Tensor) -> torch.Tensor:
        r = self.rotary_dim
        if r == 0:
            return x
        t = x.shape[-2]
        cos, sin = self.cos[:t].to(x.dtype), self.sin[:t].to(x.dtype)
        rot, rest = x[..., :r], x[..., r:]
        return torch.cat([rot * cos + self.rotate_half(rot) * sin, rest], dim=-1)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.rotate(q), self.rotate(k)


class Block(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.ln1 = LayerNorm(cfg.dim, cfg.norm_eps, cfg.zero_centered_gamma)
        self.attn = Attention(cfg.dim, cfg.n_head, cfg.scorer, num_kv_heads=cfg.n_kv_head,
                              bias=False, max_len=cfg.max_len, scorer_kwargs=cfg.scorer_kwargs)
        self.ln2 = LayerNorm(cfg.dim, cfg.norm_eps, cfg.zero_centered_gamma)
        self.fc1 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.fc2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)

    def forward(self, h: torch.Tensor, mask: torch.Tensor, rotary: Rotary) -> torch.Tensor:
        h = h + self.attn(self.ln1(h), mask, rotary)
        return h + self.fc2(F.relu(self.fc1(self.ln2(h))).square())


class Decoder(nn.Module):
    """``forward(ids)`` -> logits (B, T, V); ``loss(ids, targets)`` -> mean cross-entropy."""

    def __init__(self, cfg: DecoderConfig, *, seed: int | None = 0):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim,
                                  _weight=torch.empty(cfg.vocab_size, cfg.dim))
        self.rotary = Rotary(cfg.rotary_dim, cfg.max_len, cfg.rope_base)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = LayerNorm(cfg.dim, cfg.norm_eps, cfg.zero_centered_gamma)
        self.context = cfg.max_len
        if seed is not None:  # None: the weights are about to be loaded from a checkpoint
            self.init_weights(seed)

    @torch.no_grad()
    def init_weights(self, seed: int) -> None:
        """Draw every shared weight from ``torch.Generator().manual_seed(seed)``; scorer
        parameters are left as their scorer made them."""
        gen = torch.Generator().manual_seed(seed)
        std, out_std = self.cfg.init_std, self.cfg.init_std / math.sqrt(2 * self.cfg.n_layer)
        for name, p in self.named_parameters():
            if ".scorer." in name:
                continue
            if name.endswith(("attn.o_proj.weight", "fc2.weight")):
                p.copy_(torch.randn(p.shape, generator=gen) * out_std)
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) * std)
            elif name.endswith("weight") and not self.cfg.zero_centered_gamma:
                p.fill_(1.0)
            else:
                p.zero_()

    def extend_context(self, length: int) -> None:
        """Accept inputs of up to ``length`` tokens: the rotary table is extended with the same
        frequencies (no scaling); the scorers keep the constants they were built with for
        ``max_len`` (a scorer defined only up to its ``max_len`` raises beyond it)."""
        if length > self.rotary.cos.shape[0]:
            device = self.embed.weight.device
            self.rotary = Rotary(self.cfg.rotary_dim, length, self.cfg.rope_base).to(device)
        self.context = max(length, self.cfg.max_len)

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        if t > self.context:
            raise ValueError(f"input of {t} tokens exceeds the model context "
                             f"{self.context} (max_len={self.cfg.max_len}; extend_context raises it)")
        mask = causal_mask(t, device=ids.device)
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h, mask, self.rotary)
        return self.ln_f(h)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.linear(self.hidden(ids), self.embed.weight)

    def loss(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self(ids)
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def parameter_counts(model: Decoder) -> dict[str, int]:
    """Parameters by group: embedding (tied, counted once), per layer, final norm, scorers."""
    counts = {"embedding": model.embed.weight.numel(),
              "per_layer": sum(p.numel() for n, p in model.blocks[0].named_parameters()
                               if ".scorer." not in f".{n}"),
              "final_norm": sum(p.numel() for p in model.ln_f.parameters()),
              "scorers": sum(p.numel() for n, p in model.named_parameters() if ".scorer." in n)}
    counts["total"] = sum(p.numel() for p in model.parameters())
    return counts
