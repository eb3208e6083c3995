"""What a scorer may declare beside its formula so that ``scorers.fast`` can run it faster.

A scorer class declares a fast form by defining one of these (``Scorer.fast_forms()`` lists them):

- ``fast_attend(q, k, v, mask)``: its own path (``native_form`` names it: ``"sdpa"``, ``"linear"``);
- ``flex_spec(q, k, mask) -> FlexSpec``: a FlexAttention ``score_mod`` (and a rescaling of the
  softmax output by the log-sum-exp, for scorers that are not a softmax of transformed logits);
- ``fused_ssa_parameters(dtype, device) -> (n, b)``: the weights are softmax(n sgn(s) log1p(b|s|))
  with 1-element tensors n and b, so the fused SSA kernel (``fused``, blocked and compiled) and
  its whole-matrix eager form (``dense``) apply;
- ``topk_normalizer``: an ``entmax``-style function ``fn(s, dim=-1, k=None)`` equal to
  ``weights`` on -inf-masked logits, for the partial-sort path;
- ``pivot_normalizer``: a sort-free function ``fn(s, dim=-1)`` equal to ``weights`` on
  -inf-masked logits (scorers/pivot.py), for the pivot path;
- ``blocked_spec(q, k, mask) -> BlockedSpec``: the weights are a softmax of an elementwise logit
  transform (with a sink logit or not), a pointwise gate, sparsemax or 1.5-entmax, so the blocked
  form with recompute (scorers/blocked.py, scorers/blocked_sparse.py) applies;
- ``compilable = True``: ``weights`` can go through ``torch.compile`` (every logits-kind scorer).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

FORMS = ("blocked", "fused", "dense", "flex", "topk", "pivot", "compile")


@dataclass
class FlexSpec:
    """A scorer as FlexAttention: ``score_mod(score, b, h, q_idx, kv_idx)`` (None = plain softmax)
    and ``post(out, lse)`` turning the softmax output into the scorer's output (None = identity)."""

    score_mod: Callable | None = None
    post: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
