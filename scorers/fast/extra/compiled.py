"""compile: ``torch.compile`` (dynamic shapes) of the scorer's own ``weights`` + ``P @ v``, run on
query blocks of ``block_size`` rows that only see the keys some row of the block can see (so a
causal mask costs about half the dense work). Every logits-kind scorer.
"""
from __future__ import annotations

import types
from typing import Callable

import torch

from ...base import LogitsScorer, Scorer
from ...forms import DEFAULT_BLOCK, FastForm, FastPathError, register_form
from ..planning import causal_block_mask, plan_blocks


def _block_reference(scorer, q, k, v, mask):
    return scorer.reference_attend(q, k, v, mask)


def _block_reference_causal(scorer, q, k, v, offset):
    return scorer.reference_attend(q, k, v, causal_block_mask(q.shape[-2], k.shape[-2], offset,
                                                              q.device))


_COMPILED: dict[tuple[type, str], Callable] = {}


def _compiled_for(cls: type, kind: str) -> Callable:
    """One compiled function per (scorer class, mask kind). Dynamo counts recompilations per code
    object, so each class gets its own copy of the code: classes never evict each other."""
    key = (cls, kind)
    if key not in _COMPILED:
        fn = _block_reference_causal if kind == "causal" else _block_reference
        name = f"{fn.__name__}_{cls.__name__}"
        code = fn.__code__.replace(co_name=name)
        copy = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
        _COMPILED[key] = torch.compile(copy, dynamic=True)
    return _COMPILED[key]


def compiled_attend(scorer: Scorer, q, k, v, mask=None, *, block_size: int = DEFAULT_BLOCK,
                    compiled: bool = True):
    """``scorer.reference_attend`` under ``torch.compile``, on query blocks with key truncation
    (``compiled=False``: the same blocks, eagerly)."""
    if not CompileForm.applies_to(scorer):
        raise FastPathError(f"the compile path covers the logits-kind scorers; {scorer.name!r} "
                            f"is {scorer.kind}-kind and keeps its own attend")
    plan = plan_blocks(q, k, mask, block_size, aligned_last=scorer.causal_only)
    base = type(scorer)
    outs = []
    for i, j, e in plan.blocks:
        qb, kb, vb = q[..., i:j, :], k[..., :e, :], v[..., :e, :]
        if plan.causal:
            fn = _compiled_for(base, "causal") if compiled else _block_reference_causal
            outs.append(fn(scorer, qb, kb, vb, i))
        else:
            mb = None if plan.mask is None else plan.mask[..., i:j, :e]
            fn = _compiled_for(base, "mask") if compiled else _block_reference
            outs.append(fn(scorer, qb, kb, vb, mb))
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=-2)


@register_form("compile")
class CompileForm(FastForm):
    """:func:`compiled_attend`. Preparing it compiles once per scorer class and mask kind (dynamic
    shapes): 100-230 s per scorer on a 2-core CPU."""

    opt_in = True
    compiles = True

    @classmethod
    def applies_to(cls, scorer) -> bool:
        return isinstance(scorer, LogitsScorer)

    def attend(self, scorer, q, k, v, mask):
        return compiled_attend(scorer, q, k, v, mask, block_size=self.block_size,
                               compiled=self.compiled)
