"""The scorer registry, in the style of timm's ``register_model`` / ``create_model``.

    @register_scorer("ssa", family="ssa", kind="logits", paper="arXiv:2508.14685")
    class SSA(LogitsScorer): ...

    create_scorer("ssa", num_heads=8)
    list_scorers("entmax*")

Names and aliases live in one :class:`registry.Registry`; the keyword arguments a scorer accepts
are read in scorers/arguments.py, plugin files and entry points are loaded by scorers/plugins.py.
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Any

from registry import Registry, definition

from .arguments import CONTEXT_KWARGS, class_parameters, unknown_arguments
from .plugins import PLUGIN_FAILURES

KINDS = ("logits", "module")
NORMALIZATIONS = ("normalized", "subnormalized", "unnormalized", "signed")


class ScorerError(ValueError):
    """A scorer name, keyword or definition is wrong; the message says how to fix it."""


SCORERS: Registry[type] = Registry("scorer", error=ScorerError,
                                   listing="`scorebench ls scorers` lists all {count} scorers.")


def register_scorer(
    name: str,
    *,
    aliases: tuple[str, ...] | list[str] = (),
    family: str,
    kind: str = "logits",
    normalization: str = "normalized",
    paper: str = "",
    version: int = 1,
    causal_only: bool = False,
    description: str = "",
):
    """Class decorator that registers a scorer under ``name`` (and ``aliases``)."""
    if kind not in KINDS:
        raise ScorerError(f"scorer {name!r}: kind must be one of {KINDS}, got {kind!r}")
    if normalization not in NORMALIZATIONS:
        raise ScorerError(
            f"scorer {name!r}: normalization must be one of {NORMALIZATIONS}, got {normalization!r}"
        )

    def decorator(cls: type) -> type:
        SCORERS.register(name, cls, aliases=aliases)
        cls.name = name
        cls.aliases = tuple(aliases)
        cls.family = family
        cls.kind = kind
        cls.normalization = normalization
        cls.paper = paper
        cls.version = int(version)
        cls.causal_only = causal_only
        cls.description = description or " ".join(
            (inspect.getdoc(cls) or "").split("\n\n")[0].split())
        return cls

    return decorator


def canonical_name(name: str) -> str:
    """Resolve an alias; raise a "did you mean" error for unknown names."""
    return SCORERS.canonical(name)


def get_scorer_class(name: str) -> type:
    return SCORERS.get(name)


def scorer_parameters(name: str) -> dict[str, Any]:
    """The keyword arguments a scorer accepts, with their defaults."""
    return class_parameters(get_scorer_class(name))


def create_scorer(name: str, **kwargs):
    """Instantiate a registered scorer; unknown keywords are an error naming the accepted ones."""
    cls = get_scorer_class(name)
    problem = unknown_arguments(cls, kwargs)
    if problem:
        raise ScorerError(problem)
    return cls(**kwargs)


def list_scorers(pattern: str = "*") -> list[str]:
    """Registered scorer names matching an fnmatch pattern (comma-separated patterns allowed)."""
    return SCORERS.names(pattern)


def resolve_scorers(spec: str) -> list[str]:
    """Names from a comma-separated list of names, aliases or wildcards; errors on no match."""
    names: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        found = list_scorers(part) if any(c in part for c in "*?[") else [canonical_name(part)]
        if not found:
            raise ScorerError(f"no scorer matches {part!r}; `scorebench ls scorers` lists them")
        names += [n for n in found if n not in names]
    return names


def scorer_info(name: str) -> dict[str, Any]:
    """Metadata of a scorer, including the trainable parameters of a default instance."""
    from .forms import forms_of

    cls = get_scorer_class(name)
    instance = cls(num_heads=2, max_len=64)
    params = {k: v for k, v in scorer_parameters(name).items() if k not in CONTEXT_KWARGS}
    return {
        "name": cls.name,
        "aliases": list(cls.aliases),
        "family": cls.family,
        "kind": cls.kind,
        "normalization": cls.normalization,
        "causal_only": cls.causal_only,
        "trainable": [n for n, p in instance.named_parameters() if p.requires_grad],
        "parameters": {k: v for k, v in params.items()},
        "fast_path": instance.kernels().native is not None,
        "fast_forms": list(forms_of(instance)),
        "paper": cls.paper,
        "version": cls.version,
        "description": cls.description,
        "defined_in": definition(cls),
    }


@contextlib.contextmanager
def scoped():
    """Registrations, aliases and plugin failures made inside the block are undone when it ends
    (for tests and one-off plugin imports)::

        with scorers.registry.scoped():
            scorers.load_plugin("my_scorer.py")
            ...
    """
    saved = list(PLUGIN_FAILURES)
    try:
        with SCORERS.scoped():
            yield
    finally:
        PLUGIN_FAILURES[:] = saved
