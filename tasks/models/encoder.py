"""A RoBERTa-style masked language model (BabyBERTa) with a pluggable attention scorer.

Mirrors Hugging Face ``RobertaForMaskedLM`` (no pooler):

    positions  p_i = 2 + (number of real tokens before i) for real tokens, 1 (= pad id) for pads
    embed      h = LayerNorm(E_tok[x] + E_pos[p] + E_type[0]);  dropout
    layer      h = LayerNorm(h + dropout(W_o Attn(h)))                 (post-LN)
               h = LayerNorm(h + dropout(W_2 GELU(W_1 h)))
    MLM head   logits = E_tok · LayerNorm(GELU(W_d h))ᵀ + b            (decoder tied to E_tok)

Attention is bidirectional: the only mask hides padding keys. Every linear and embedding weight
is drawn from N(0, init_std²) (the pad rows of the embeddings zeroed), biases are zero, LayerNorm
is (1, 0), as ``RobertaPreTrainedModel._init_weights`` does. The attention-probability dropout of
HF RoBERTa is not applied: scorers return attention outputs, not weights.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from scorers import Attention, padding_mask


@dataclass
class EncoderConfig:
    vocab_size: int = 8192
    max_position_embeddings: int = 130  # max input 128 tokens + 2 (RoBERTa offsets positions by pad_id + 1)
    n_layer: int = 8
    n_head: int = 8
    n_embd: int = 256
    ffn_dim: int = 1024
    dropout: float = 0.1
    layer_norm_eps: float = 1e-5
    init_std: float = 0.02
    pad_token_id: int = 1
    type_vocab_size: int = 2  # HF RobertaConfig default; only type 0 is ever used
    scorer: str = "softmax"
    scorer_kwargs: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} is not a multiple of n_head={self.n_head}")
        if self.max_position_embeddings < self.pad_token_id + 2:
            raise ValueError(f"max_position_embeddings={self.max_position_embeddings} leaves no "
                             f"position for tokens (positions start at pad_token_id + 1)")

    @property
    def max_tokens(self) -> int:
        """The longest input (``<s>`` and ``</s>`` included) the position table can hold."""
        return self.max_position_embeddings - self.pad_token_id - 1


class EncoderLayer(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.attn = Attention(cfg.n_embd, cfg.n_head, cfg.scorer, bias=True,
                              max_len=cfg.max_tokens, scorer_kwargs=cfg.scorer_kwargs)
        self.ln_attn = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.fc_in = nn.Linear(cfg.n_embd, cfg.ffn_dim)
        self.fc_out = nn.Linear(cfg.ffn_dim, cfg.n_embd)
        self.ln_ffn = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln_attn(h + self.drop(self.attn(h, mask)))
        return self.ln_ffn(h + self.drop(self.fc_out(F.gelu(self.fc_in(h)))))


class Encoder(nn.Module):
    """``forward(ids, valid=None) -> hidden (B, L, n_embd)``; ``logits(hidden)`` is the MLM head."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd, padding_idx=cfg.pad_token_id)
        self.pos_emb = nn.Embedding(cfg.max_position_embeddings, cfg.n_embd,
                                    padding_idx=cfg.pad_token_id)
        self.type_emb = nn.Embedding(cfg.type_vocab_size, cfg.n_embd)
        self.ln_emb = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_layer))
        self.head_dense = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.head_ln = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)
        self.head_bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def backbone_modules(self):
        """Every submodule except the scorers: the parameters all scorers share."""
        scorers = {id(m) for layer in self.layers for m in layer.attn.scorer.modules()}
        return [m for m in self.modules() if id(m) not in scorers]

    @torch.no_grad()
    def init_weights(self, generator: torch.Generator | None = None) -> None:
        """HF RoBERTa's initialization of the shared parameters, drawn from ``generator`` only,
        so the same seed gives every scorer the same backbone; scorer parameters are untouched."""
        std = self.cfg.init_std
        for module in self.backbone_modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                module.weight.normal_(0.0, std, generator=generator)
                if isinstance(module, nn.Linear) and module.bias is not None:
                    module.bias.zero_()
                if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
        self.head_bias.zero_()

    def positions(self, valid: torch.Tensor) -> torch.Tensor:
        """RoBERTa position ids: pad_id + 1, pad_id + 2, ... on real tokens, pad_id on pads."""
        pad = self.cfg.pad_token_id
        return (torch.cumsum(valid, dim=1) * valid + pad).long()

    def forward(self, ids: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        if valid is None:
            valid = ids != self.cfg.pad_token_id
        if ids.shape[1] > self.cfg.max_tokens:
            raise ValueError(f"input of {ids.shape[1]} tokens exceeds max_tokens="
                             f"{self.cfg.max_tokens} (max_position_embeddings - pad_token_id - 1)")
        h = self.tok_emb(ids) + self.pos_emb(self.positions(valid)) + self.type_emb.weight[0]
        h = self.drop(self.ln_emb(h))
        mask = padding_mask(valid)
        for layer in self.layers:
            h = layer(h, mask)
        return h

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """MLM logits over the vocabulary for hidden states of any leading shape."""
        x = self.head_ln(F.gelu(self.head_dense(hidden)))
        return F.linear(x, self.tok_emb.weight, self.head_bias)

    def num_parameters(self, include_scorers: bool = True) -> int:
        """Distinct trainable parameters (the tied decoder counted once, as HF does)."""
        params = self.parameters() if include_scorers else (
            p for m in self.backbone_modules() for p in m.parameters(recurse=False))
        return sum(p.numel() for p in params)
