"""``pivot``: the dense reference with a sort-free threshold (scorers/pivot.py), the scorer's
``pivot`` kernel, in place of the ``entmax`` package's sort (exact; no compilation), for the
sparse normalizers (sparsemax, entmax15, entmax_bisect). The partial-sort form ``topk`` is an
opt-in form (scorers/fast/extra/topk.py).
"""
from __future__ import annotations

import torch

from ..base import Scorer, has_empty_rows
from ..forms import FastForm, FastPathError, register_form
from .planning import NEG_INF


def pivot_attend(scorer: Scorer, q, k, v, mask=None) -> torch.Tensor:
    """The reference attention with the scorer's ``pivot`` kernel as its weights."""
    fn = scorer.kernels().pivot
    if fn is None:
        raise FastPathError(f"the pivot path covers scorers that declare a pivot kernel "
                            f"(sparsemax, entmax15, entmax_bisect), not {scorer.name!r}")

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


@register_form("pivot")
class PivotForm(FastForm):
    """:func:`pivot_attend`; compiles nothing. ``auto`` on a CPU, where the package's sort is most
    of a sparsemax or entmax15 training step."""

    kernel = "pivot"

    def attend(self, scorer, q, k, v, mask):
        return pivot_attend(scorer, q, k, v, mask)
