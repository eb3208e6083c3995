"""``topk``: the scorer's ``topk`` kernel (an ``entmax``-style normalizer: sparsemax, entmax15)
on query blocks that see only their visible keys, through the ``entmax`` package's partial sort
(``k=``, exact: rows whose support reaches k are solved again with 2k).
"""
from __future__ import annotations

from typing import Callable

import torch

from ...base import Scorer
from ...forms import DEFAULT_BLOCK, FastForm, FastPathError, register_form
from ..planning import NEG_INF, causal_block_mask, plan_blocks


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
    """The scorer's ``topk`` kernel on query blocks with key truncation and a partial sort."""
    fn = scorer.kernels().topk
    if fn is None:
        raise FastPathError(f"the topk path covers scorers that declare a topk kernel "
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
            w = topk_weights(fn, s, mb.expand(s.shape), top)
        outs.append((w @ vb.to(w.dtype)).to(v.dtype))
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=-2)


@register_form("topk")
class TopkForm(FastForm):
    """:func:`topk_attend`; compiles nothing. Not chosen by ``auto``: the partial sort trains
    slower than the reference on a CPU, and on an H200 its query blocks ran 3-4x slower than the
    dense reference at L = 1024-2048."""

    opt_in = True
    kernel = "topk"

    def attend(self, scorer, q, k, v, mask):
        return topk_attend(scorer, q, k, v, mask, block_size=self.block_size)
