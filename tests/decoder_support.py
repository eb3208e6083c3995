"""Toy tokenizers and deterministic "models" for the decoder tests: every log-likelihood they
produce can be worked out by hand (log of a chosen probability)."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

needs_data = pytest.mark.skipif(not os.environ.get("SCOREBENCH_DATA"),
                                reason="set SCOREBENCH_DATA to the shared data directory")

EOT = "\x00"


class GreedyTokenizer:
    """Greedy longest-match over a fixed vocabulary (multi-character entries act as merges).

    Id 0 is the end-of-text token; the vocabulary always contains every single character of
    ``alphabet``.
    """

    def __init__(self, alphabet: str, merges: tuple[str, ...] = ()):
        self.vocab = [EOT] + sorted(set(alphabet)) + [m for m in merges if len(m) > 1]
        self.ids = {t: i for i, t in enumerate(self.vocab)}
        self.eot_id = 0
        self.longest = max(len(t) for t in self.vocab)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        out, i = [], 0
        while i < len(text):
            for n in range(min(self.longest, len(text) - i), 0, -1):
                if text[i:i + n] in self.ids:
                    out.append(self.ids[text[i:i + n]])
                    i += n
                    break
            else:
                raise KeyError(f"character {text[i]!r} not in the toy vocabulary")
        return out

    def encode_batch(self, texts):
        return [self.encode(t) for t in texts]

    def decode(self, ids) -> str:
        return "".join(self.vocab[i] for i in ids)


class BigramModel(torch.nn.Module):
    """logits[b, t] = log P[ids[b, t]]: p(next | prefix) = P[last token, next] exactly."""

    def __init__(self, P: np.ndarray):
        super().__init__()
        if not np.allclose(P.sum(1), 1.0):
            raise ValueError("rows of P must sum to 1")
        self.P = P
        self.table = torch.tensor(np.log(P), dtype=torch.float32)
        self.inputs: list[list[list[int]]] = []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        self.inputs.append(ids.tolist())
        return self.table[ids]

    def logp(self, prev: int, nxt: int) -> float:
        return math.log(self.P[prev, nxt])


class FirstTokenModel(torch.nn.Module):
    """logits[b, t] = log P[ids[b, 0]]: every prediction depends on the first token read, so
    what was truncated away is visible in the scores."""

    def __init__(self, P: np.ndarray):
        super().__init__()
        self.P = P
        self.table = torch.tensor(np.log(P), dtype=torch.float32)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table[ids[:, :1]].expand(-1, ids.shape[1], -1)


def bigram_table(tok: GreedyTokenizer, chosen: dict[tuple[str, str], float],
                 seed: int = 0) -> np.ndarray:
    """Row-stochastic P with ``P[a, b] = p`` for each ``(a, b): p`` in ``chosen``; the rest of
    each row is spread over the other tokens with random (seeded) positive weights."""
    rng = np.random.default_rng(seed)
    V = tok.vocab_size
    P = np.zeros((V, V))
    for a in range(V):
        fixed = {tok.ids[b]: p for (x, b), p in chosen.items() if tok.ids[x] == a}
        rest = [j for j in range(V) if j not in fixed]
        w = rng.uniform(0.5, 1.5, size=len(rest))
        P[a, rest] = w / w.sum() * (1.0 - sum(fixed.values()))
        for j, p in fixed.items():
            P[a, j] = p
    return P
