"""Which form each scorer runs: the modes, ``auto``, and :func:`accelerate`, which stores the chosen
form on each scorer once (as nanoGPT's attention picks its path at construction); ``Scorer.attend``
then calls it.

Modes: ``"off"`` (every scorer as shipped: its native kernel when it has one, else its
reference), ``"auto"`` (:data:`AUTO`), or the name of a registered form (the scorers it applies
to run it, the others stay as shipped); a name of an opt-in form (scorers/fast/extra/) imports
them. A run chooses between :data:`FAST_MODES` (``[run] fast`` of a profile, ``scorebench run
--fast``); ``scorebench bench`` and :func:`accelerate` take every mode.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

import torch

from registry.modes import FAST_MODES

from ..base import Scorer
from ..forms import (FORMS, ByLength, FastForm, FastPathError, ReferenceForm, check_block_size,
                     form_names, forms_of, get_form, shipped_form)
from ..registry import create_scorer, list_scorers
from .planning import module_device
from .tiles import RECOMPUTE_FROM_KEYS

OPT_IN = "scorers.fast.extra"


@dataclass(frozen=True)
class Choice:
    """One entry of :data:`AUTO`: ``form``, given even to a scorer with its own native kernel
    when ``over_native``; with ``below``, only to calls with fewer keys, the next choice running
    the longer ones (:class:`~scorers.forms.ByLength`)."""

    form: str
    over_native: bool = False
    below: int | None = None


# ``auto``'s precedence per device type: a scorer gets the first choice whose form applies to it
# and runs on the device (then a plugin's forms that list the device in their ``auto``). Measured
# with ``scorebench bench train`` (forward, backward and optimizer step, compilation included;
# README "Speed") and ``bench scorers`` (with the length sweep): on a CPU only the forms that
# compile nothing (a first compilation takes 25-300 s per scorer on a 2-core machine):
# ``blocked`` for every scorer declaring it, the SDPA ones included (CPU SDPA ran 1.0-1.1x
# itself at 2,048 keys where ``blocked`` ran 0.8-0.9x; scorers/fast/blocked.py), with ``dense``
# below 1,024 keys for the SSA family (scorers/fast/ssa.py), then ``pivot``, where the package's
# sort is most of a sparsemax or entmax15 training step; on CUDA FlexAttention, and SDPA where a
# scorer has it (on an H200 the query-block forms launch too many small kernels: topk ran 3-4x
# and compile 2-3x slower than the dense reference at L = 1024-2048).
AUTO: dict[str, tuple[Choice, ...]] = {
    "cpu": (Choice("blocked", over_native=True),
            Choice("dense", below=RECOMPUTE_FROM_KEYS["cpu"]),
            Choice("pivot")),
    "cuda": (Choice("flex"),),
}


def load_opt_in() -> None:
    """Register the opt-in forms (scorers/fast/extra/), again where a scoped registry dropped
    them."""
    for form in importlib.import_module(OPT_IN).OPT_IN_FORMS:
        if form.name not in FORMS:
            FORMS.register(form.name, form)


def modes() -> tuple[str, ...]:
    """Every mode :func:`accelerate` takes: auto, off and the registered forms, the opt-in ones
    included."""
    load_opt_in()
    return (*FAST_MODES, *form_names())


def check_mode(mode: str) -> None:
    if mode not in FAST_MODES and mode not in FORMS:
        load_opt_in()
        if mode not in FORMS:
            raise FastPathError(f"unknown fast-path mode {mode!r}; choose one of {modes()}")


def auto_choices(device_type: str) -> tuple[Choice, ...]:
    """:data:`AUTO`'s choices on this device type, then the plugin forms that list it."""
    built_in = AUTO.get(device_type, ())
    named = {c.form for c in built_in}
    return built_in + tuple(Choice(name) for name, form in FORMS.items()
                            if name not in named and device_type in form.auto)


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
    native = scorer.kernels().native is not None
    found = [c for c in auto_choices(device.type)
             if c.form in FORMS and get_form(c.form).applies_to(scorer)
             and get_form(c.form).available(device) and (not native or c.over_native)]
    short = next((c for c in found if c.below is not None), None)
    long = next((c for c in found if c.below is None), None)
    if short is None or long is None:
        choice = long or short
        return None if choice is None else get_form(choice.form)(**options)
    return ByLength(get_form(short.form)(**options), get_form(long.form)(**options), short.below)


def choose_path(scorer: Scorer, device: torch.device | str, mode: str) -> str:
    """The path ``mode`` gives this scorer on ``device``: a form's name (a registered form, or
    two by length, e.g. dense<1024|blocked), its native kernel's (e.g. sdpa) or reference."""
    return (choose_form(scorer, device, mode) or shipped_form(scorer)).name


def accelerate(module: torch.nn.Module, mode: str = "auto", *, block_size: int | None = None,
               compiled: bool = True, device=None) -> dict[str, str]:
    """Set the form every scorer in ``module`` (or ``module`` itself) runs, and return
    ``{scorer name: path}`` (blocked, dense, flex, pivot, an opt-in form, sdpa, linear or
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
            form = choose_form(m, device, mode, block_size=block_size, compiled=compiled)
            m.form = form or shipped_form(m)
            found.setdefault(m.name, set()).add(m.form.name)
    return {name: "+".join(sorted(paths)) for name, paths in found.items()}


def restore(module: torch.nn.Module) -> torch.nn.Module:
    """Undo :func:`accelerate`: every scorer runs as shipped again."""
    for m in module.modules():
        if isinstance(m, Scorer):
            m.form = shipped_form(m)
    return module


def use_reference(module: torch.nn.Module) -> torch.nn.Module:
    """Every scorer in ``module`` runs its ``reference_attend``, even one that ships a faster
    path (for tests and probes; :func:`restore` undoes it)."""
    for m in module.modules():
        if isinstance(m, Scorer):
            m.form = ReferenceForm()
    return module


def fast_paths(module: torch.nn.Module) -> dict[str, str]:
    """{scorer module name: the path its ``attend`` runs} for every scorer in ``module``."""
    return {name or "<root>": m.form.name for name, m in module.named_modules()
            if isinstance(m, Scorer)}


def scorers_with(form: str) -> list[str]:
    """Registered scorers whose default instance declares ``form`` (a form, the opt-in ones
    included, or a native kernel's path)."""
    load_opt_in()
    return [n for n in list_scorers()
            if form in forms_of(create_scorer(n, num_heads=2, max_len=64), opt_in=True)]
