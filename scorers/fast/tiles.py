"""The tiles of the blocked forms with recompute (blocked.py, blocked_sparse.py, blocked_rows.py,
blocked_stick.py): query blocks of ``block_size`` rows (by default :data:`BLOCK_ROWS`) that stop
at the last key some row of theirs sees (as planning.py's), their keys cut into key blocks so
that one (B, H, rows, keys) tile of logits stays below :data:`TILE_ELEMENTS`, and whether the
backward makes the tiles again or keeps their weights.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .planning import NEG_INF, is_plain_causal

# Entries of one (B, H, rows, keys) tile: 2 MiB in fp32, an Intel Xeon core's L2. The query
# block's keys are cut into blocks so that a tile stays below it. The best size depends on the
# host's caches; 4 MiB was chosen on a 2-core AMD EPYC. On the Intel Xeon (2 threads, median of 5
# to 7, ratio to SDPA at (1, 8, 2048, 64)), 4 / 2 / 1 MiB tiles ran ssa 1.16 / 1.09 / 1.05,
# sparsemax 1.29 / 1.19 / 1.68 (its tiles no longer cached across the threshold's passes),
# entmax15 1.55-1.66 / 1.46 / 2.13 and sigmoid 0.80 / 0.77 / 0.73; a later sitting, 4 / 2 MiB:
# ssa 1.09 / 0.94, stablemax 1.03 / 0.93, sparsemax 1.32 / 1.29, entmax15 1.56 / 1.51,
# temperature_softmax 0.76 / 0.76, and at (4, 8, 512, 64) within noise of each other.
TILE_ELEMENTS = 1 << 19
# Keys from which the weights are recomputed in the backward instead of kept, per device type.
# Measured on the 2-core CPU (forward + backward, causal, fp32, one thread, best of 5, ratio to
# SDPA): at (4, 8, 512, 64) recomputing cost ssa 1.28 against 0.99 kept and stablemax 1.21
# against 0.90 (the kept weights: 3.6x SDPA's memory); at (1, 8, 2048, 64) it cost ssa 1.02
# and stablemax 0.86, where kept weights would take 6x SDPA's memory. So short rows keep them.
RECOMPUTE_FROM_KEYS: dict[str, int] = {"cpu": 1024, "cuda": 0}
# Query rows per block where the weights are kept / recomputed. Measured on the 2-core CPU
# (forward + backward, causal, fp32, 2 threads, median of 5, ratio to SDPA), 64 / 128 rows: at
# (1, 8, 2048, 64) ssa 1.03 / 0.89, sigmoid 0.79 / 0.75, entmax15 1.31 / 1.25 and
# temperature_softmax 0.73 / 0.66 (larger matmuls, half the Python steps); at (8, 8, 128, 32) 128
# rows ran 10-40% slower (the diagonal tile's masked half), at (4, 8, 512, 64) within 5%. Tiles
# of 8 MiB ran ssa 0.88 at 2,048 keys but took 1.9x SDPA's memory.
BLOCK_ROWS: dict[bool, int] = {False: 64, True: 128}
# Below the recompute length, the tile state the forward keeps for the backward stays within
# this many times the entries of q, k, v and the output together (``state`` matrices per entry,
# the first query blocks first); the later blocks' tiles are made again in the backward. Kept
# whole at (4, 8, 512, 64), stick_breaking's two matrices per entry took 3.41x SDPA's peak
# memory, sa_softmax's two 2.98x, softpick's one 2.13x and entmax_bisect's 2.15x; within the
# budget every blocked form took 1.48-1.91x there.
KEEP_BUDGET = 1.0
# ... from this many keys: shorter rows keep every block's state, as a recompute there cost more
# time than the memory it saved was worth (stick_breaking at (8, 4, 128, 16) ran 4.4x SDPA with
# one block of two kept against 3.4x with both), and the memory is not held to 2x there.
KEEP_ALL_BELOW = 512
# A causal tile's masked part starts at a multiple of this many keys from the tile's first: on
# the 2-core CPU a row maximum over 63 keys took 170 us against 23 over 64 ((8, 4, 64, k) tiles;
# the reduction's vector loop takes 32 entries at a time, a remainder runs scalar).
MASK_ALIGN = 32


class BlockedError(ValueError):
    """The blocked form cannot run these inputs; the message says why."""


class Hidden:
    """The masked entries of one tile: among its keys from ``c`` on, where the boolean ``tile``
    (broadcastable to (…, rows, keys - c)) is True. :func:`hide` fills them through the float
    forms made here once per tile: on the 2-core CPU a boolean ``masked_fill_`` of an
    (8, 4, 64, 63) tile slice took 190 us against 30 for a multiply by a float 0/1 mask."""

    def __init__(self, c: int, tile: torch.Tensor):
        self.c, self.tile = c, tile
        self._forms: dict = {}

    def part(self, t: torch.Tensor) -> torch.Tensor:
        """The keys of tile ``t`` that the mask covers."""
        return t[..., self.c:] if self.c else t

    def keep(self, dtype) -> torch.Tensor:
        """1 where visible, 0 where masked."""
        return self._form(dtype, 1.0)

    def filled(self, dtype, value: float) -> torch.Tensor:
        """``value`` where masked, 0 where visible."""
        return self._form(dtype, value)

    def _form(self, dtype, value: float) -> torch.Tensor:
        form = self._forms.get((dtype, value))
        if form is None:
            if value == 1.0:
                form = (~self.tile).to(dtype)
            else:
                form = torch.zeros(self.tile.shape, dtype=dtype, device=self.tile.device)
                form.masked_fill_(self.tile, value)
            self._forms[(dtype, value)] = form
        return form


@dataclass(frozen=True)
class Tiling:
    """Query blocks ``(i, j, e)``: rows ``[i, j)`` that see keys ``[0, e)``, cut into key blocks
    of ``key_block``. ``causal``: the mask is the plain lower triangle (tiles below the diagonal
    need none). ``mask``: the boolean mask as a (B, H, Lq, Lk) view, or None; ``visible``: the
    same mask in its own broadcastable 4-d shape, whose tiles stay as small as it is.
    ``empty_rows``: some query sees no key. ``recompute``: the rows are long enough that the
    backward makes every tile again (128-row blocks). ``kept``: the first rows of the query
    blocks whose tile state the forward keeps instead (:meth:`keeps`)."""

    blocks: tuple[tuple[int, int, int], ...]
    key_block: int
    causal: bool
    mask: torch.Tensor | None
    empty_rows: bool
    recompute: bool
    visible: torch.Tensor | None = None
    kept: frozenset[int] = frozenset()
    made: dict = field(default_factory=dict, compare=False, repr=False)

    def keeps(self, i: int) -> bool:
        """Whether the query block of rows from ``i`` keeps its tiles' state for the backward."""
        return i in self.kept

    def tiles(self, i: int, j: int, e: int) -> list:
        """``(a, b, hidden)`` key blocks of query rows ``[i, j)``; ``hidden`` is the
        :class:`Hidden` entries of the block's keys, or None where every entry is visible.
        Under a plain causal mask only the keys from row i on can be masked. Where the mask's
        tiles are small (causal, or the same for every query), they are made once per call, for
        the forward and the backward."""
        found = self.made.get((i, j, e))
        if found is None:
            found = list(self._tiles(i, j, e))
            if self.visible is None or self.visible.shape[-2] == 1:
                self.made[(i, j, e)] = found
        return found

    def _tiles(self, i: int, j: int, e: int):
        for a in range(0, e, self.key_block):
            b, hidden = min(a + self.key_block, e), None
            if self.causal:
                if b - 1 > i:
                    c = a + (max(a, i + 1) - a) // MASK_ALIGN * MASK_ALIGN
                    qi = torch.arange(i, j, device=self.device)[:, None]
                    hidden = Hidden(c - a, torch.arange(c, b, device=self.device)[None, :] > qi)
            elif self.visible is not None:
                m = self.visible
                rows = m[..., i:j, :] if m.shape[-2] > 1 else m
                hidden = Hidden(0, ~(rows[..., a:b] if m.shape[-1] > 1 else rows))
            yield a, b, hidden

    @property
    def device(self):
        return self.mask.device if self.mask is not None else torch.device("cpu")


def plan_tiles(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, *,
               block_size: int | None = None, key_block: int | None = None,
               recompute: bool | None = None, state: int = 1) -> Tiling:
    """The tiles of an attention of ``q`` (B, H, Lq, D) over ``k`` (B, H, Lk, D) under ``mask``.

    Query blocks have ``block_size`` rows (default: :data:`BLOCK_ROWS` by ``recompute``) and stop
    at the last key some row of theirs sees (masked keys weigh exactly zero in every scorer here);
    ``key_block`` (default: the most keys that keep a tile under :data:`TILE_ELEMENTS`, a multiple
    of 64) cuts their keys. ``recompute`` True: every tile is made again in the backward; False:
    every block keeps its tiles' state; default: from :data:`RECOMPUTE_FROM_KEYS` for the device
    and Lk, and below it every block keeps its state up to :data:`KEEP_ALL_BELOW` keys, and from
    there the first blocks whose ``state`` matrices per entry fit in :data:`KEEP_BUDGET`."""
    if block_size is not None and block_size < 1:
        raise BlockedError(f"block_size must be >= 1, got {block_size}")
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"attention mask must be boolean (True = visible), got {mask.dtype}")
    bsz, heads, lq = q.shape[:3]
    lk = k.shape[-2]
    budget = 0 if recompute else math.inf
    if recompute is None:
        recompute = lk >= RECOMPUTE_FROM_KEYS.get(q.device.type, 0)
        budget = (0 if recompute else math.inf if lk < KEEP_ALL_BELOW
                  else KEEP_BUDGET * 2 * (lq + lk) * q.shape[-1] / max(1, state))
    if block_size is None:
        block_size = BLOCK_ROWS[recompute]
    if key_block is None:
        fit = TILE_ELEMENTS // max(1, bsz * heads * min(block_size, lq))
        key_block = max(64, fit // 64 * 64)
    if key_block < 1:
        raise BlockedError(f"key_block must be >= 1, got {key_block}")
    bounds = [(i, min(i + block_size, lq)) for i in range(0, lq, block_size)]
    if mask is None:
        blocks = tuple((i, j, lk) for i, j in bounds)
        return Tiling(blocks, key_block, False, None, False, recompute, None,
                      _kept(blocks, budget))
    if is_plain_causal(mask, lq, lk):
        blocks = tuple((i, j, j) for i, j in bounds)
        return Tiling(blocks, key_block, True, mask.reshape(1, 1, lq, lk), False, recompute,
                      None, _kept(blocks, budget))
    full = mask.expand(bsz, heads, lq, lk)
    visible = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
    seen = mask.reshape(-1, *mask.shape[-2:]).any(0).expand(lq, lk)         # (Lq, Lk)
    ends = (seen * torch.arange(1, lk + 1, device=mask.device)).amax(-1).tolist()
    empty = not bool(mask.any(-1).all())
    blocks = tuple((i, j, max(1, max(ends[i:j]))) for i, j in bounds)
    return Tiling(blocks, key_block, False, full, empty, recompute, visible,
                  _kept(blocks, budget))


def _kept(blocks, budget: float) -> frozenset[int]:
    """The first rows of the query blocks, in order, whose entries (per (B, H) pair) fit in
    ``budget`` together."""
    kept, used = set(), 0
    for i, j, e in blocks:
        used += (j - i) * e
        if used > budget:
            break
        kept.add(i)
    return frozenset(kept)


def drain(kept: list):
    """The kept tiles' states in order, each let go as it is taken (the backward's peak memory
    then falls as it goes through the blocks)."""
    kept.reverse()
    while kept:
        yield kept.pop()


def hide(t: torch.Tensor, hidden: Hidden | None, value: float) -> torch.Tensor:
    """Fill the masked entries ``hidden`` (from :meth:`Tiling.tiles`) of tile ``t`` in place,
    by float arithmetic: -inf is added (the entries must be below +inf), 0 multiplied in (they
    must be finite), another value written as ``value + 0 t`` (finite)."""
    if hidden is not None:
        part = hidden.part(t)
        if value == NEG_INF:
            part.add_(hidden.filled(t.dtype, NEG_INF))
        elif value == 0.0:
            part.mul_(hidden.keep(t.dtype))
        else:
            torch.addcmul(hidden.filled(t.dtype, value), part, hidden.keep(t.dtype), out=part)
    return t


def tile_logits(qb, k, a, b):
    return torch.matmul(qb, k[..., a:b, :].transpose(-1, -2))


def scale_rows(scale: torch.Tensor, i: int, j: int) -> torch.Tensor:
    """Rows ``[i, j)`` of a query scale broadcastable to (B, H, Lq, 1)."""
    return scale[..., i:j, :] if scale.dim() >= 2 and scale.shape[-2] > 1 else scale


def logit_grads(ds, qb, k, dq, dk, rows: tuple[int, int], keys: tuple[int, int],
                need_q: bool, need_k: bool) -> None:
    """Add a tile's share of the gradients through its logits ``s = qb k[keys]^T``, ``ds`` being
    dL/ds: to dq's rows (of the scaled queries; :func:`scale_grads` turns them into q's) and
    dk's keys."""
    (i, j), (a, b) = rows, keys
    if need_q:
        dq[..., i:j, :] += torch.matmul(ds, k[..., a:b, :])
    if need_k:
        dk[..., a:b, :] += torch.matmul(ds.transpose(-1, -2), qb)


def scale_grads(dq, q, scale, i, j, need_scale, dscale):
    """Turn dq rows [i, j), the gradient of q * scale, into q's; add scale's gradient."""
    sc = scale_rows(scale, i, j)
    if need_scale:
        g = (dq[..., i:j, :] * q[..., i:j, :]).sum(-1, keepdim=True)
        if scale.dim() >= 2 and scale.shape[-2] > 1:
            g = g.sum_to_size(*scale.shape[:-2], j - i, 1)
            dscale[..., i:j, :] += g
        else:
            dscale += g.sum_to_size(scale.shape)
    dq[..., i:j, :] *= sc


def as_scale(scale, q, dtype) -> torch.Tensor:
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    if not isinstance(scale, torch.Tensor):
        return torch.tensor(float(scale), dtype=dtype, device=q.device)
    if scale.dim() > 4 or (scale.dim() >= 1 and scale.shape[-1] != 1):
        raise BlockedError(f"query_scale must broadcast to (B, H, Lq, 1), got "
                           f"{tuple(scale.shape)}")
    return scale.to(dtype)
