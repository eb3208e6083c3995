"""Query blocks and the keys they see: how the blocked fast forms cut a (Lq, Lk) attention.

Masked keys get exactly zero weight in every scorer, so a block of query rows can drop the keys
none of its rows sees: under a causal mask the blocked forms do about half the dense work.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.weak import WeakIdKeyDictionary

from ..forms import DEFAULT_BLOCK, FastPathError

NEG_INF = float("-inf")


@dataclass(frozen=True)
class BlockPlan:
    """How a (Lq, Lk) attention is cut into query blocks ``[i, j)`` that see keys ``[0, e)``.

    ``causal``: the mask is the plain lower triangle (built from indices inside the kernels).
    ``mask``: the boolean mask expanded to (B, H, Lq, Lk), or None (no mask, or causal).
    ``empty_rows``: some query sees no key (the fully-masked-row guard must run).
    """

    blocks: tuple[tuple[int, int, int], ...]
    causal: bool
    mask: torch.Tensor | None
    empty_rows: bool


# mask -> (its version counter when checked, whether it was the lower triangle); a model passes
# one mask object to every layer, so each (L, L) comparison runs once, not once per layer and call.
_CAUSAL_CHECKED = WeakIdKeyDictionary()


def is_plain_causal(mask: torch.Tensor | None, lq: int, lk: int) -> bool:
    """True when ``mask`` is the (…, L, L) lower triangle broadcast over batch and heads."""
    if mask is None or lq != lk or mask.shape[-2:] != (lq, lk) or mask.numel() != lq * lk:
        return False
    checked = _CAUSAL_CHECKED.get(mask)
    if checked is not None and checked[0] == mask._version:
        return checked[1]
    tril = torch.ones(lq, lk, dtype=torch.bool, device=mask.device).tril()
    causal = bool(torch.equal(mask.reshape(lq, lk), tril))
    _CAUSAL_CHECKED[mask] = (mask._version, causal)
    return causal


def plan_blocks(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None,
                block: int = DEFAULT_BLOCK, *, aligned_last: bool = False) -> BlockPlan:
    """Query blocks of ``block`` rows, each truncated to the keys some of its rows can see.

    Masked keys get exactly zero weight in every scorer, so dropping keys that no row of a block
    sees changes nothing. ``aligned_last``: the scorer aligns queries to the last keys (causal-only
    scorers), so a block ``[i, j)`` keeps ``j + Lk - Lq`` keys.
    """
    if block < 1:
        raise FastPathError(f"block_size must be >= 1, got {block}")
    b, h, lq = q.shape[:3]
    lk = k.shape[-2]
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"attention mask must be boolean (True = visible), got {mask.dtype}")
    causal = is_plain_causal(mask, lq, lk)
    if mask is None:
        return BlockPlan(((0, lq, lk),), False, None, False)
    full = mask.expand(b, h, lq, lk)
    if causal:
        ends = list(range(1, lq + 1))
        empty = False
    else:
        seen = full.any(0).any(0)                                             # (Lq, Lk)
        idx = torch.arange(1, lk + 1, device=mask.device)
        ends = (seen * idx).amax(-1).tolist()                                # last seen key + 1
        empty = not bool(full.any(-1).all())
    blocks = []
    for i, j in block_bounds(lq, block):
        e = max(ends[i:j])
        if aligned_last:
            e = max(e, j + lk - lq)
        blocks.append((i, j, min(max(e, 1), lk)))
    return BlockPlan(tuple(blocks), causal, None if causal else full, empty)


def block_bounds(length: int, block: int) -> list[tuple[int, int]]:
    """``[i, j)`` query blocks of ``block`` rows; a last block of one row joins the one before
    (compiled kernels specialize on size-1 dimensions, so this saves a recompilation)."""
    bounds = [(i, min(i + block, length)) for i in range(0, length, block)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] == 1:
        bounds[-2:] = [(bounds[-2][0], length)]
    return bounds


def causal_block_mask(rows: int, keys: int, offset: int, device) -> torch.Tensor:
    """(1, 1, rows, keys) mask of query rows ``offset..offset+rows`` under the lower triangle."""
    qi = torch.arange(rows, device=device)[:, None] + offset
    ki = torch.arange(keys, device=device)[None, :]
    return (ki <= qi)[None, None]


def module_device(module: torch.nn.Module) -> torch.device:
    """The device of the module's first parameter or buffer (CPU when it has none)."""
    for t in (*module.parameters(), *module.buffers()):
        return t.device
    return torch.device("cpu")
