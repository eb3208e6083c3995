"""Fast forms: other ways to compute a scorer's attention, each equal to its ``reference_attend``.

A scorer class declares what a form needs beside its formula (``Scorer.fast_forms()`` lists the
forms that apply):

- ``fast_attend(q, k, v, mask)``: its own path, run when no form is set (``native_form`` names it:
  ``"sdpa"``, ``"linear"``);
- ``flex_spec(q, k, mask) -> FlexSpec``: a FlexAttention ``score_mod`` (and a rescaling of the
  softmax output by the log-sum-exp, for scorers that are not a softmax of transformed logits);
- ``fused_ssa_parameters(dtype, device) -> (n, b)``: the weights are softmax(n sgn(s) log1p(b|s|))
  with 1-element tensors n and b, so the SSA kernels apply;
- ``topk_normalizer``: an ``entmax``-style function ``fn(s, dim=-1, k=None)`` equal to
  ``weights`` on -inf-masked logits, for the partial-sort form;
- ``pivot_normalizer``: a sort-free function ``fn(s, dim=-1)`` equal to ``weights`` on
  -inf-masked logits (scorers/pivot.py), for the pivot form;
- ``blocked_spec(q, k, mask) -> BlockedSpec``: the weights are a softmax of an elementwise logit
  transform (with a sink logit or not, at a query scale that may depend on the row's softmax
  entropy), a pointwise gate, sparsemax or alpha-entmax with alpha in (1, 2], softpick, the
  signed softmax, the self-adjust softmax or sigmoid stick-breaking, so the blocked form with
  recompute (scorers/fast/blocked.py, scorers/fast/blocked_sparse.py,
  scorers/fast/blocked_rows.py, scorers/fast/blocked_stick.py) applies; an instance whose
  settings it cannot run says so with ``blocked_available = False`` (entmax_bisect at a fixed
  alpha > 2);
- ``compilable = True``: ``weights`` can go through ``torch.compile`` (every logits-kind scorer).

A form is a :class:`FastForm` subclass registered by name (``@register_form``); the built-in ones
live in ``scorers/fast/``, one module per kernel family, and ``scorers.fast.accelerate`` stores an
instance on each scorer (``scorer.fast_form``), which ``Scorer.attend`` then calls.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, ClassVar

import torch

from registry import Registry

DEFAULT_BLOCK = 64
LOG2E = 1.0 / math.log(2.0)


class FastPathError(RuntimeError):
    """A fast path cannot run here; the message names the path and what to use instead."""


def check_block_size(block_size: int | None) -> None:
    if block_size is not None and block_size < 1:
        raise FastPathError(f"block_size must be >= 1 (or None: each form's own), got "
                            f"{block_size}")


@dataclass
class FlexSpec:
    """A scorer as FlexAttention: ``score_mod(score, b, h, q_idx, kv_idx)`` (None = plain softmax)
    and ``post(out, lse)`` turning the softmax output into the scorer's output (None = identity)."""

    score_mod: Callable | None = None
    post: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None


class LogitTransform:
    """An elementwise, nondecreasing t = f(s; params) declared by a scorer beside its formula,
    for the blocked form's softmax (scorers/fast/blocked.py). The form exponentiates in base 2,
    so it asks for t log2 e; and since f is nondecreasing, a row's largest t is f of its largest
    s, which the form finds before it makes t, so the shift by the running maximum rides on the
    same pass.

    ``params``: the tensors f depends on (autograd inputs of the blocked node).
    ``exponent(s, shift, *params, keep)``: (t log2 e - shift, kept), ``shift`` None (zero) or a
    tensor broadcastable to s; it may overwrite s. ``kept``, when ``keep``, is what ``grad``
    needs of the tile, and is not overwritten by the caller. ``grad(kept, dt, *params, needs)``:
    (ds, then one gradient per param; None where ``needs``, the params' requires-grad flags, says
    it is not needed) from dt = dL/dt, zero at masked entries (whose s is finite)."""

    params: tuple[torch.Tensor, ...] = ()

    def exponent(self, s, shift, *params, keep=False):
        return (s.mul_(LOG2E) if shift is None else torch.add(-shift, s, alpha=LOG2E, out=s)), None

    def grad(self, kept, dt, *params, needs=()):
        return (dt,)


IDENTITY = LogitTransform()


@dataclass
class BlockedSpec:
    """A scorer's blocked form for given inputs (``Scorer.blocked_spec(q, k, mask)``).

    ``kind``: "softmax" (``softmax_attend`` of scorers/fast/blocked.py: ``transform``, ``sink``,
    ``entropy_scale``), a gate, "sigmoid", "relu" or "relu2" (``gate_attend``: ``bias``),
    "sparsemax", "entmax15" or "entmax_alpha" (scorers/fast/blocked_sparse.py: ``alpha`` in
    (1, 2], a float or a (1, H, 1, 1) tensor), "softpick" (``eps``), "signed_softmax",
    "self_adjust" or "self_adjust_plain" (scorers/fast/blocked_rows.py), or "stick_breaking"
    (the remainder to the current key) or "stick_breaking_past" (scorers/fast/blocked_stick.py).
    ``query_scale``: multiplies q before ``q k^T`` (default 1/sqrt(d)). ``entropy_scale``: a
    function of each row's softmax entropy H_i at ``query_scale`` that multiplies that row's
    query scale too (adaptive temperature's beta(H), detached or not): the entropy is a
    statistic of the whole row, found by one more pass over the key tiles before the softmax
    (and one more in the backward where a gradient goes through it)."""

    kind: str
    query_scale: object = None
    transform: LogitTransform = IDENTITY
    sink: torch.Tensor | None = None
    bias: float = 0.0
    alpha: object = None
    eps: float = 0.0
    entropy_scale: Callable[[torch.Tensor], torch.Tensor] | None = None


class FastForm:
    """One way to run a scorer's attention, equal to its reference.

    A subclass says which scorers it covers (:meth:`applies_to`, from what the scorer class
    declares), runs them (:meth:`attend`) and says what it costs to prepare: ``compiles`` (the
    first call per scorer class and shape pays a ``torch.compile``, seconds to minutes on a CPU).
    ``auto``: the device types on which ``accelerate(mode="auto")`` gives it to the scorers it
    covers (scorers/fast/policy.py). An instance carries its options: ``block_size`` (query rows
    per block; None: ``default_block``, which None leaves to the form) and ``compiled`` (False:
    the same kernels, eagerly)."""

    name: ClassVar[str] = "?"            # set by @register_form
    compiles: ClassVar[bool] = False
    auto: ClassVar[tuple[str, ...]] = ()
    # Per device type of ``auto``: the form runs only calls with fewer keys than this, and the
    # next form ``auto`` finds runs the longer ones (:class:`ByLength`).
    auto_below: ClassVar[dict[str, int]] = {}
    # Device types on which ``auto`` gives the form even to a scorer with its own ``fast_attend``.
    auto_over_native: ClassVar[tuple[str, ...]] = ()
    default_block: ClassVar[int | None] = DEFAULT_BLOCK

    def __init__(self, *, block_size: int | None = None, compiled: bool = True):
        check_block_size(block_size)
        self.block_size = self.default_block if block_size is None else int(block_size)
        self.compiled = bool(compiled)

    @classmethod
    def applies_to(cls, scorer) -> bool:
        """True when the scorer (class or instance) declares what this form needs."""
        raise NotImplementedError

    @classmethod
    def available(cls, device: torch.device) -> bool:
        """Whether the form can run on ``device`` at all (``auto`` skips it elsewhere)."""
        return True

    def attend(self, scorer, q, k, v, mask):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(block_size={self.block_size}, compiled={self.compiled})"


class ByLength(FastForm):
    """``short`` for calls with fewer than ``keys`` keys, ``long`` from there: ``auto``'s choice
    where one form is faster on short rows and another keeps long rows' memory down. Its name
    says both, e.g. ``"dense<1024|blocked"``."""

    def __init__(self, short: FastForm, long: FastForm, keys: int):
        super().__init__(block_size=long.block_size, compiled=long.compiled)
        self.short, self.long, self.keys = short, long, int(keys)
        self.name = f"{short.name}<{self.keys}|{long.name}"
        self.compiles = short.compiles or long.compiles

    def attend(self, scorer, q, k, v, mask):
        form = self.short if k.shape[-2] < self.keys else self.long
        return form.attend(scorer, q, k, v, mask)


class ReferenceForm(FastForm):
    """The scorer's own formula, ``reference_attend``, even when it ships a faster path."""

    name = "reference"

    @classmethod
    def applies_to(cls, scorer) -> bool:
        return True

    def attend(self, scorer, q, k, v, mask):
        return scorer.reference_attend(q, k, v, mask)


FORMS: Registry[type[FastForm]] = Registry("fast form", error=FastPathError,
                                           listing="Forms: {names}.")


def register_form(name: str):
    """Class decorator registering a :class:`FastForm` subclass under ``name``."""

    def decorator(cls: type[FastForm]) -> type[FastForm]:
        if not (isinstance(cls, type) and issubclass(cls, FastForm)):
            raise TypeError(f"@register_form({name!r}) decorates FastForm subclasses, got {cls!r}")
        if name in ("auto", "off", "reference"):
            raise FastPathError(f"{name!r} is a mode of scorers.fast.accelerate, not a form name")
        FORMS.register(name, cls)
        cls.name = name
        return cls

    return decorator


def form_names() -> tuple[str, ...]:
    """Registered forms, in registration order (the built-in ones first)."""
    return tuple(FORMS)


def get_form(name: str) -> type[FastForm]:
    return FORMS.get(name)


def forms_for(scorer) -> tuple[str, ...]:
    """The registered forms that apply to ``scorer`` (class or instance), in registration order."""
    return tuple(name for name, form in FORMS.items() if form.applies_to(scorer))


def scorer_class(scorer) -> type:
    return scorer if isinstance(scorer, type) else type(scorer)


def scoped():
    """Forms registered inside the block are unregistered when it ends (for tests)."""
    return FORMS.scoped()
