"""The sparse normalizers' forms, for scorers that declare them (sparsemax, entmax15):

- ``topk``: ``topk_normalizer`` on query blocks that see only their visible keys, through the
  ``entmax`` package's partial sort (``k=``, exact: rows whose support reaches k are solved again
  with 2k).
- ``pivot``: the dense reference with the sort-free threshold of scorers/pivot.py
  (``pivot_normalizer``) in place of the package's sort (exact; no compilation).
"""
from __future__ import annotations

from typing import Callable

import torch

from ..base import Scorer, has_empty_rows
from ..forms import DEFAULT_BLOCK, FastForm, FastPathError, register_form, scorer_class
from .planning import NEG_INF, causal_block_mask, plan_blocks


DEFAULT_TOPK = 32


def topk_weights(fn: Callable, s: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """A partial-sort normalizer ``fn`` (``entmax.sparsemax``, ``entmax.entmax15``) over visible
    keys with ``k=``: the package partial-sorts the k largest logits and, for rows whose support
    reaches k, solves again with 2k (exact). Masking and the fully-masked-row guard are those of
    ``LogitsScorer``."""
    row_valid = mask.any(-1, keepdim=True)
    safe = s.float().masked_fill(~row_valid, 0.0).masked_fill(~(mask | ~row_valid), NEG_INF)
    w = fn(safe, dim=-1, k=k) if k < s.shape[-1] else fn(safe, dim=-1)
    return w.masked_fill(~mask, 0.0)


def topk_attend(scorer: Scorer, q, k, v, mask=None, *, block_size: int = DEFAULT_BLOCK,
                top: int = DEFAULT_TOPK) -> torch.Tensor:
    """The scorer's ``topk_normalizer`` on query blocks with key truncation and a partial sort."""
    if scorer.topk_normalizer is None:
        raise FastPathError(f"the topk path covers scorers that declare a topk_normalizer "
                            f"(sparsemax, entmax15), not {scorer.name!r}")
    plan = plan_blocks(q, k, mask, block_size)
    outs = []
    for i, j, e in plan.blocks:
        qb, kb, vb = q[..., i:j, :], k[..., :e, :], v[..., :e, :]
        if plan.causal:
            mb = causal_block_mask(j - i, e, i, q.device)
        elif plan.mask is None:
            mb = torch.ones(1, 1, j - i, e, dtype=torch.bool, device=q.device)
        else:
            mb = plan.mask[..., i:j, :e]
        with torch.autocast(q.device.type, enabled=False):
            s = scorer.logits(qb, kb)
            w = topk_weights(scorer.topk_normalizer, s, mb.expand(s.shape), top)
        outs.append((w @ vb.to(w.dtype)).to(v.dtype))
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=-2)


def pivot_attend(scorer: Scorer, q, k, v, mask=None) -> torch.Tensor:
    """The reference attention with the scorer's ``pivot_normalizer`` as its weights."""
    fn = scorer.pivot_normalizer
    if fn is None:
        raise FastPathError(f"the pivot path covers scorers that declare a pivot_normalizer "
                            f"(sparsemax, entmax15), not {scorer.name!r}")

    def weights(s, m):
        return fn(s.float().masked_fill(~m, NEG_INF), dim=-1)

    with torch.autocast(q.device.type, enabled=False):
        s = scorer.logits(q, k)
        if mask is None:
            w = fn(s.float(), dim=-1)
        elif has_empty_rows(mask):
            w = scorer.weights_from_logits(s, mask, weights)
        else:  # -inf keys get exact zeros: no guard, no second pass over the mask
            w = weights(s, mask)
    return (w @ v.to(w.dtype)).to(v.dtype)


@register_form("topk")
class TopkForm(FastForm):
    """:func:`topk_attend`; compiles nothing. Not chosen by ``auto``: the partial sort trains
    slower than the reference on a CPU, and on an H200 its query blocks ran 3-4x slower than the
    dense reference at L = 1024-2048."""

    @classmethod
    def applies_to(cls, scorer) -> bool:
        return scorer_class(scorer).topk_normalizer is not None

    def attend(self, scorer, q, k, v, mask):
        return topk_attend(scorer, q, k, v, mask, block_size=self.block_size)


@register_form("pivot")
class PivotForm(FastForm):
    """:func:`pivot_attend`; compiles nothing. ``auto`` on a CPU, where the package's sort is most
    of a sparsemax or entmax15 training step."""

    auto = ("cpu",)

    @classmethod
    def applies_to(cls, scorer) -> bool:
        return scorer_class(scorer).pivot_normalizer is not None

    def attend(self, scorer, q, k, v, mask):
        return pivot_attend(scorer, q, k, v, mask)
