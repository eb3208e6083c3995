"""Which form each scorer runs: the modes, ``auto``, and :func:`accelerate`, which stores the chosen
form on each scorer once (as nanoGPT's attention picks its path at construction); ``Scorer.attend``
then calls it.

Modes: ``"off"`` (every scorer as shipped: its ``fast_attend`` when it has one, else its
reference), ``"auto"`` (below), or the name of a registered form (the scorers it applies to run
it, the others stay as shipped). A run chooses between :data:`FAST_MODES` (``[run] fast`` of a
profile, ``scorebench run --fast``); ``scorebench bench`` and :func:`accelerate` take every mode.

``auto``: a scorer with its own ``fast_attend`` keeps it; another gets the first registered form
that applies to it, runs on the device, and lists the device's type in its ``auto``. Measured with
``scorebench bench train`` (forward, backward and optimizer step, compilation included; README
"Speed") and ``bench scorers``: on a CPU the forms that compile nothing (a first compilation
takes 25-300 s per scorer on a 2-core machine), ``blocked`` first (registered before the others:
every scorer declaring ``blocked_spec``), then ``dense`` for the SSA family and ``pivot`` for
sparsemax and entmax15; on CUDA FlexAttention.
"""
from __future__ import annotations

import torch

from ..base import Scorer
from ..forms import DEFAULT_BLOCK, FastForm, FastPathError, ReferenceForm, form_names, get_form
from ..registry import get_scorer_class, list_scorers
from .planning import module_device

# What a run may ask for (a profile's [run] fast, `scorebench run --fast`).
FAST_MODES = ("auto", "off")


def modes() -> tuple[str, ...]:
    """Every mode :func:`accelerate` takes: auto, off and the registered forms."""
    return ("auto", "off", *form_names())


def check_mode(mode: str) -> None:
    if mode not in modes():
        raise FastPathError(f"unknown fast-path mode {mode!r}; choose one of {modes()}")


def shipped_path(scorer: Scorer) -> str:
    """What ``attend`` runs without a form: the scorer's ``native_form`` or the reference."""
    return scorer.native_form if scorer.has_fast_path else ReferenceForm.name


def choose_form(scorer: Scorer, device: torch.device | str, mode: str) -> type[FastForm] | None:
    """The form class ``mode`` gives this scorer on ``device``; None: as shipped."""
    check_mode(mode)
    if mode == "off":
        return None
    if mode != "auto":
        form = get_form(mode)
        return form if form.applies_to(scorer) else None
    if scorer.has_fast_path:
        return None
    device = torch.device(device)
    for name in form_names():
        form = get_form(name)
        if device.type in form.auto and form.applies_to(scorer) and form.available(device):
            return form
    return None


def choose_path(scorer: Scorer, device: torch.device | str, mode: str) -> str:
    """The path ``mode`` gives this scorer on ``device``: a registered form's name, its native
    form (e.g. sdpa) or reference."""
    form = choose_form(scorer, device, mode)
    return shipped_path(scorer) if form is None else form.name


def accelerate(module: torch.nn.Module, mode: str = "auto", *, block_size: int = DEFAULT_BLOCK,
               compiled: bool = True, device=None) -> dict[str, str]:
    """Set the form every scorer in ``module`` (or ``module`` itself) runs, and return
    ``{scorer name: path}`` (blocked, fused, dense, flex, topk, pivot, compile, sdpa, linear or
    reference), e.g. for a record's provenance. Call it after moving the model to its device
    (``device`` defaults to the module's).

    ``mode``: see the module doc. ``block_size``: query rows per block of the blocked forms.
    ``compiled=False`` runs the forms that compile eagerly (same numbers; for tests).
    Parameters, buffers, state-dict keys and classes are unchanged; :func:`restore` undoes it."""
    check_mode(mode)
    if block_size < 1:
        raise FastPathError(f"block_size must be >= 1, got {block_size}")
    device = module_device(module) if device is None else torch.device(device)
    found: dict[str, set[str]] = {}
    for m in module.modules():
        if isinstance(m, Scorer):
            restore(m)
            form = choose_form(m, device, mode)
            if form is not None:
                m.fast_form = form(block_size=block_size, compiled=compiled)
            found.setdefault(m.name, set()).add(scorer_path(m))
    return {name: "+".join(sorted(paths)) for name, paths in found.items()}


def restore(module: torch.nn.Module) -> torch.nn.Module:
    """Undo :func:`accelerate`: every scorer runs as shipped again."""
    for m in module.modules():
        if isinstance(m, Scorer):
            m.__dict__.pop("fast_form", None)
    return module


def use_reference(module: torch.nn.Module) -> torch.nn.Module:
    """Every scorer in ``module`` runs its ``reference_attend``, even one that ships a faster
    path (for tests and probes; :func:`restore` undoes it)."""
    for m in module.modules():
        if isinstance(m, Scorer):
            m.fast_form = ReferenceForm()
    return module


def scorer_path(scorer: Scorer) -> str:
    """The path the scorer's ``attend`` runs now."""
    form = scorer.fast_form
    return shipped_path(scorer) if form is None else form.name


def fast_paths(module: torch.nn.Module) -> dict[str, str]:
    """{scorer module name: the path its ``attend`` runs} for every scorer in ``module``."""
    return {name or "<root>": scorer_path(m) for name, m in module.named_modules()
            if isinstance(m, Scorer)}


def scorers_with(form: str) -> list[str]:
    """Registered scorers that declare ``form`` (a registered form or a native form)."""
    return [n for n in list_scorers() if form in get_scorer_class(n).fast_forms()]
