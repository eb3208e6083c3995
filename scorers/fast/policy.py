"""Which form each scorer runs: the modes, ``auto``, and :func:`accelerate`, which stores the chosen
form on each scorer once (as nanoGPT's attention picks its path at construction); ``Scorer.attend``
then calls it.

Modes: ``"off"`` (every scorer as shipped: its ``fast_attend`` when it has one, else its
reference), ``"auto"`` (below), or the name of a registered form (the scorers it applies to run
it, the others stay as shipped). A run chooses between :data:`FAST_MODES` (``[run] fast`` of a
profile, ``scorebench run --fast``); ``scorebench bench`` and :func:`accelerate` take every mode.

``auto``: a scorer gets the first registered form that applies to it, runs on the device and lists
the device's type in its ``auto``; a scorer with its own ``fast_attend`` keeps it unless that form
also lists the device in ``auto_over_native``. A form that lists the device in ``auto_below`` runs
only the shorter rows, the next form the longer ones (:class:`~scorers.forms.ByLength`). Measured
with ``scorebench bench train`` (forward, backward and optimizer step, compilation included;
README "Speed") and ``bench scorers`` (README "Speed", with the length sweep): on a CPU only the
forms that compile nothing (a first compilation takes 25-300 s per scorer on a 2-core machine):
``blocked`` for every scorer declaring ``blocked_spec``, the SDPA ones included (CPU SDPA ran
1.0-1.1x itself at 2,048 keys where ``blocked`` ran 0.8-0.9x), with ``dense`` below 1,024 keys for
the SSA family; on CUDA FlexAttention, and SDPA where a scorer has it.
"""
from __future__ import annotations

import torch

from registry.modes import FAST_MODES

from ..base import Scorer
from ..forms import (ByLength, FastForm, FastPathError, ReferenceForm, check_block_size,
                     form_names, get_form)
from ..registry import get_scorer_class, list_scorers
from .planning import module_device


def modes() -> tuple[str, ...]:
    """Every mode :func:`accelerate` takes: auto, off and the registered forms."""
    return (*FAST_MODES, *form_names())


def check_mode(mode: str) -> None:
    if mode not in modes():
        raise FastPathError(f"unknown fast-path mode {mode!r}; choose one of {modes()}")


def shipped_path(scorer: Scorer) -> str:
    """What ``attend`` runs without a form: the scorer's ``native_form`` or the reference."""
    return scorer.native_form if scorer.has_fast_path else ReferenceForm.name


def choose_form(scorer: Scorer, device: torch.device | str, mode: str, *,
                block_size: int | None = None, compiled: bool = True) -> FastForm | None:
    """The form ``mode`` gives this scorer on ``device``, built with the options; None: as
    shipped."""
    check_mode(mode)
    if mode == "off":
        return None
    options = dict(block_size=block_size, compiled=compiled)
    if mode != "auto":
        form = get_form(mode)
        return form(**options) if form.applies_to(scorer) else None
    device = torch.device(device)
    found = [form for form in map(get_form, form_names())
             if device.type in form.auto and form.applies_to(scorer) and form.available(device)
             and (not scorer.has_fast_path or device.type in form.auto_over_native)]
    short = next((f for f in found if device.type in f.auto_below), None)
    long = next((f for f in found if device.type not in f.auto_below), None)
    if short is None or long is None:
        form = long or short
        return None if form is None else form(**options)
    return ByLength(short(**options), long(**options), short.auto_below[device.type])


def choose_path(scorer: Scorer, device: torch.device | str, mode: str) -> str:
    """The path ``mode`` gives this scorer on ``device``: a form's name (a registered form, or
    two by length, e.g. dense<1024|blocked), its native form (e.g. sdpa) or reference."""
    form = choose_form(scorer, device, mode)
    return shipped_path(scorer) if form is None else form.name


def accelerate(module: torch.nn.Module, mode: str = "auto", *, block_size: int | None = None,
               compiled: bool = True, device=None) -> dict[str, str]:
    """Set the form every scorer in ``module`` (or ``module`` itself) runs, and return
    ``{scorer name: path}`` (blocked, fused, dense, flex, topk, pivot, compile, sdpa, linear or
    reference), e.g. for a record's provenance. Call it after moving the model to its device
    (``device`` defaults to the module's).

    ``mode``: see the module doc. ``block_size``: query rows per block (default: each form's
    own; 64 for the planned forms, and the blocked form's tiling picks its own by row length).
    ``compiled=False`` runs the forms that compile eagerly (same numbers; for tests).
    Parameters, buffers, state-dict keys and classes are unchanged; :func:`restore` undoes it."""
    check_mode(mode)
    check_block_size(block_size)
    device = module_device(module) if device is None else torch.device(device)
    found: dict[str, set[str]] = {}
    for m in module.modules():
        if isinstance(m, Scorer):
            restore(m)
            form = choose_form(m, device, mode, block_size=block_size, compiled=compiled)
            if form is not None:
                m.fast_form = form
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
