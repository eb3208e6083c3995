"""flex: FlexAttention with the score_mod of the scorer's ``flex`` kernel; scorers that are not a
softmax of transformed logits (sigmoid, softmax_plus_one, learned_sink) rescale the output with the
log-sum-exp. FlexAttention has no backward on CPU (torch 2.13): there it serves inference.
"""
from __future__ import annotations

import warnings

import torch

from ..base import Scorer
from ..forms import FastForm, FastPathError, register_form, spec_for
from .planning import is_plain_causal
from .policy import scorers_with


_FLEX_COMPILED = None
# Every scorer, shape and mask kind is one more compiled variant of flex_attention; past dynamo's
# default recompile_limit (8) the call silently falls back to the unfused eager kernel.
FLEX_RECOMPILE_LIMIT = 256


def _flex_function(compiled: bool):
    global _FLEX_COMPILED
    from torch.nn.attention.flex_attention import flex_attention

    if not compiled:
        return flex_attention
    if _FLEX_COMPILED is None:
        _FLEX_COMPILED = torch.compile(flex_attention, dynamic=False)
    return _FLEX_COMPILED


def flex_block_mask(q, k, mask):
    """A FlexAttention BlockMask for a boolean mask (None: no mask)."""
    from torch.nn.attention.flex_attention import create_block_mask

    if mask is None:
        return None
    b, h, lq = q.shape[:3]
    lk = k.shape[-2]
    if is_plain_causal(mask, lq, lk):
        return create_block_mask(lambda bb, hh, qi, ki: qi >= ki, None, None, lq, lk,
                                 device=q.device)
    full = mask.expand(b, h, lq, lk)
    if full.stride(0) == 0 and full.stride(1) == 0:
        grid = full[0, 0]
        return create_block_mask(lambda bb, hh, qi, ki: grid[qi, ki], None, None, lq, lk,
                                 device=q.device)
    return create_block_mask(lambda bb, hh, qi, ki: full[bb, hh, qi, ki], b, h, lq, lk,
                             device=q.device)


def flex_attend(scorer: Scorer, q, k, v, mask=None, *, compiled: bool | None = None):
    """The scorer through FlexAttention with the score_mod of its ``flex`` kernel.

    ``compiled``: use ``torch.compile(flex_attention)`` on CUDA (default; False runs the unfused
    implementation there too). On CPU it always runs uncompiled, forward only (for tests and
    inference)."""
    if not FlexForm.applies_to(scorer):
        raise FastPathError(f"scorer {scorer.name!r} has no FlexAttention score_mod (return "
                            f"Kernels(flex=...) from its kernels(): a FlexSpec, or (q, k, mask) "
                            f"-> FlexSpec); scorers with one: {scorers_with(FlexForm.name)}")
    if q.device.type == "cpu" and torch.is_grad_enabled() and any(
            t.requires_grad for t in (q, k, v, *scorer.parameters())):
        raise FastPathError("FlexAttention has no backward on CPU (torch 2.13): use mode "
                            "'auto' or 'blocked' for CPU training, or run under torch.no_grad()")
    from torch.nn.attention.flex_attention import AuxRequest

    # On CPU, inductor's flex_attention (torch 2.13) returns wrong values at some lengths (40 and
    # 200 of those tried, NaN at times) and cannot return the log-sum-exp: CPU runs uncompiled.
    compiled = q.device.type == "cuda" and compiled is not False
    spec = spec_for(scorer.kernels().flex, q, k, mask)
    block_mask = flex_block_mask(q, k, mask)
    fn = _flex_function(compiled)
    kwargs = dict(score_mod=spec.score_mod, block_mask=block_mask)
    import torch._dynamo as dynamo

    limit = max(dynamo.config.recompile_limit, FLEX_RECOMPILE_LIMIT)
    with warnings.catch_warnings(), dynamo.config.patch(recompile_limit=limit):
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile")
        if spec.post is None:
            out = fn(q, k, v, **kwargs)
        else:
            out, aux = fn(q, k, v, return_aux=AuxRequest(lse=True), **kwargs)
            out = spec.post(out.float(), aux.lse.float().unsqueeze(-1)).to(v.dtype)
    if mask is not None:
        out = out.masked_fill(~mask.expand(*q.shape[:3], k.shape[-2]).any(-1, keepdim=True), 0.0)
    return out


def flex_available(device: torch.device) -> bool:
    if device.type != "cuda":
        return False
    try:
        from torch.nn.attention.flex_attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


@register_form("flex")
class FlexForm(FastForm):
    """:func:`flex_attend`. Preparing it compiles ``flex_attention`` on CUDA once per scorer,
    shape and mask kind. ``auto`` on CUDA: on an H200 the query-block forms launch too many small
    kernels (topk ran 3-4x and compile 2-3x slower than the dense reference at L = 1024-2048)."""

    kernel = "flex"
    compiles = True

    @classmethod
    def available(cls, device: torch.device) -> bool:
        return flex_available(device)

    def attend(self, scorer, q, k, v, mask):
        return flex_attend(scorer, q, k, v, mask)
