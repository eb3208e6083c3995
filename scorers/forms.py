"""Fast forms: other ways to compute a scorer's attention, each equal to its reference.

A scorer gets fast forms through two hooks: its reference (``weights(s, mask)`` for a
logits-kind scorer, ``reference_attend`` for a module-kind one) and ``kernels()``, which returns
a :class:`Kernels`: what the forms need, declared as data beside the formula. Each form names
the field it runs (``FastForm.kernel``), so a form applies to a scorer exactly when that field is
set; :func:`forms_of` lists them.

A form is a :class:`FastForm` subclass registered by name (``@register_form``); the built-in ones
live in ``scorers/fast/``, one module per kernel family, and ``scorers.fast.accelerate`` stores an
instance on each scorer (``scorer.form``), which ``Scorer.attend`` then calls.
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
    kept_tiles: int = 0             # tile-sized tensors in what ``exponent`` keeps

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


@dataclass(frozen=True)
class Kernels:
    """What a scorer's fast forms need, declared beside its formula (``Scorer.kernels()``); None:
    the scorer has no such kernel. A spec that depends on the inputs is a function of
    ``(q, k, mask)``, one that does not may be the spec itself.

    - ``native``: ``(name, attend(q, k, v, mask))``, the scorer's own path, run when no form is
      set (``"sdpa"``, ``"linear"``);
    - ``blocked``: a :class:`BlockedSpec`, for the blocked form with recompute
      (scorers/fast/blocked.py): a softmax of an elementwise logit transform (with a sink logit or
      not, at a query scale that may depend on the row's softmax entropy), a pointwise gate,
      sparsemax or alpha-entmax with alpha in (1, 2], softpick, the signed softmax, the
      self-adjust softmax or sigmoid stick-breaking;
    - ``flex``: a :class:`FlexSpec`, a FlexAttention ``score_mod`` (and a rescaling of the
      softmax output by the log-sum-exp, for scorers that are not a softmax of transformed
      logits);
    - ``ssa``: ``(dtype, device) -> (n, b)``, 1-element tensors: the weights are
      softmax(n sgn(s) log1p(b|s|)), so the SSA kernels apply (scorers/fast/ssa.py);
    - ``pivot``: a sort-free normalizer ``fn(s, dim=-1)`` equal to ``weights`` on -inf-masked
      logits (scorers/pivot.py);
    - ``topk``: an ``entmax``-style normalizer ``fn(s, dim=-1, k=None)`` equal to ``weights`` on
      -inf-masked logits, for the partial sort (scorers/fast/extra/topk.py)."""

    native: tuple[str, Callable] | None = None
    blocked: BlockedSpec | Callable[..., BlockedSpec] | None = None
    flex: FlexSpec | Callable[..., FlexSpec] | None = None
    ssa: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None
    pivot: Callable | None = None
    topk: Callable | None = None


def spec_for(kernel, q, k, mask):
    """A declared spec for these inputs: ``kernel(q, k, mask)`` when it is a function."""
    return kernel(q, k, mask) if callable(kernel) else kernel


NO_KERNELS = Kernels()


class FastForm:
    """One way to run a scorer's attention, equal to its reference.

    A subclass names the :class:`Kernels` field it runs (``kernel``: it applies to the scorers
    that set it; a form that needs something else overrides :meth:`applies_to`), runs them
    (:meth:`attend`) and says what it costs to prepare: ``compiles`` (the first call per scorer
    class and shape pays a ``torch.compile``, seconds to minutes on a CPU). Where ``auto`` gives
    the built-in forms is one table, ``scorers.fast.policy.AUTO``; a plugin's form lists in
    ``auto`` the device types where ``auto`` may give it after those. An instance carries its
    options: ``block_size`` (query rows per block; None: ``default_block``, which None leaves to
    the form) and ``compiled`` (False: the same kernels, eagerly). ``opt_in``: a form outside the
    default path (scorers/fast/extra/), which :func:`forms_of` leaves out unless asked."""

    name: ClassVar[str] = "?"            # set by @register_form
    kernel: ClassVar[str | None] = None
    opt_in: ClassVar[bool] = False
    compiles: ClassVar[bool] = False
    auto: ClassVar[tuple[str, ...]] = ()
    default_block: ClassVar[int | None] = DEFAULT_BLOCK

    def __init__(self, *, block_size: int | None = None, compiled: bool = True):
        check_block_size(block_size)
        self.block_size = self.default_block if block_size is None else int(block_size)
        self.compiled = bool(compiled)

    @classmethod
    def applies_to(cls, scorer) -> bool:
        """True when the scorer declares the kernel this form runs."""
        return cls.kernel is not None and getattr(scorer.kernels(), cls.kernel) is not None

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


class NativeForm(FastForm):
    """The scorer's own path, ``Kernels.native`` (e.g. SDPA): what it runs as shipped."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def attend(self, scorer, q, k, v, mask):
        return scorer.kernels().native[1](q, k, v, mask)


def shipped_form(scorer) -> FastForm:
    """What ``attend`` runs when no form is set: the scorer's native path, else its reference."""
    native = scorer.kernels().native
    return ReferenceForm() if native is None else NativeForm(native[0])


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


def forms_of(scorer, *, opt_in: bool = False) -> tuple[str, ...]:
    """The paths a scorer instance declares: its native one, then the registered forms that
    apply to it, in registration order; ``opt_in``: the opt-in forms too, where registered."""
    native = scorer.kernels().native
    return ((native[0],) if native else ()) + tuple(
        name for name, form in FORMS.items()
        if (opt_in or not form.opt_in) and form.applies_to(scorer))


def scoped():
    """Forms registered inside the block are unregistered when it ends (for tests)."""
    return FORMS.scoped()
