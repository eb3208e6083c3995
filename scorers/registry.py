"""The scorer registry, in the style of timm's ``register_model`` / ``create_model``.

    @register_scorer("ssa", family="ssa", kind="logits", paper="arXiv:2508.14685")
    class SSA(LogitsScorer): ...

    create_scorer("ssa", num_heads=8)
    list_scorers("entmax*")
"""
from __future__ import annotations

import contextlib
import difflib
import fnmatch
import importlib.util
import inspect
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENTRY_POINT_GROUP = "scorebench.scorers"

KINDS = ("logits", "module")
NORMALIZATIONS = ("normalized", "subnormalized", "unnormalized", "signed")

# Keyword arguments every scorer accepts: the context the Attention layer passes on.
CONTEXT_KWARGS = ("num_heads", "max_len")

_REGISTRY: dict[str, type] = {}
_ALIASES: dict[str, str] = {}


class ScorerError(ValueError):
    """A scorer name, keyword or definition is wrong; the message says how to fix it."""


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that did not import: ``reason`` in one line, and ``traceback`` the frames of the
    code that raised (empty when there was no code to run: a missing or unreadable file)."""

    source: str
    reason: str
    traceback: str = ""


PLUGIN_FAILURES: list[PluginFailure] = []


def _definition(cls: type) -> str:
    try:
        file = inspect.getsourcefile(cls) or "?"
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        file, line = getattr(sys.modules.get(cls.__module__), "__file__", "?"), 0
    return f"{cls.__module__}.{cls.__qualname__} ({file}:{line})"


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
        for key in (name, *aliases):
            owner = _REGISTRY.get(_ALIASES.get(key, key))
            if owner is not None and _definition(owner) != _definition(cls):
                raise ScorerError(
                    f"scorer name {key!r} is already registered by {_definition(owner)}; "
                    f"cannot register it again for {_definition(cls)}. Pick another name."
                )
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
        _REGISTRY[name] = cls
        for alias in aliases:
            _ALIASES[alias] = name
        return cls

    return decorator


def canonical_name(name: str) -> str:
    """Resolve an alias; raise a "did you mean" error for unknown names."""
    if name in _REGISTRY:
        return name
    if name in _ALIASES:
        return _ALIASES[name]
    known = sorted([*_REGISTRY, *_ALIASES])
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise ScorerError(
        f"unknown scorer {name!r}.{hint} `scorebench ls scorers` lists all {len(_REGISTRY)} scorers."
    )


def get_scorer_class(name: str) -> type:
    return _REGISTRY[canonical_name(name)]


def scorer_parameters(name: str) -> dict[str, Any]:
    """The keyword arguments a scorer accepts, with their defaults."""
    cls = get_scorer_class(name)
    params: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if "__init__" not in vars(klass):
            continue
        for p in inspect.signature(klass.__init__).parameters.values():
            if p.name != "self" and p.kind is p.KEYWORD_ONLY:
                params[p.name] = p.default
    return params


def create_scorer(name: str, **kwargs):
    """Instantiate a registered scorer; unknown keywords are an error naming the accepted ones."""
    cls = get_scorer_class(name)
    accepted = scorer_parameters(name)
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        own = sorted(set(accepted) - set(CONTEXT_KWARGS))
        raise ScorerError(
            f"scorer {cls.name!r} got unknown parameter(s) {unknown}; it accepts "
            f"{own or 'no parameters of its own'} (plus the context {list(CONTEXT_KWARGS)})."
        )
    return cls(**kwargs)


def list_scorers(pattern: str = "*") -> list[str]:
    """Registered scorer names matching an fnmatch pattern (comma-separated patterns allowed)."""
    patterns = [p.strip() for p in pattern.split(",") if p.strip()]
    return sorted(n for n in _REGISTRY if any(fnmatch.fnmatchcase(n, p) for p in patterns))


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
        "fast_path": instance.has_fast_path,
        "fast_forms": list(cls.fast_forms()),
        "paper": cls.paper,
        "version": cls.version,
        "description": cls.description,
        "defined_in": _definition(cls),
    }


@contextlib.contextmanager
def scoped():
    """Registrations, aliases and plugin failures made inside the block are undone when it ends
    (for tests and one-off plugin imports)::

        with scorers.registry.scoped():
            scorers.load_plugin("my_scorer.py")
            ...
    """
    saved = (dict(_REGISTRY), dict(_ALIASES), list(PLUGIN_FAILURES))
    try:
        yield
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(saved[0])
        _ALIASES.clear()
        _ALIASES.update(saved[1])
        PLUGIN_FAILURES[:] = saved[2]


def load_plugin(path: str | Path, *, report: bool = True) -> bool:
    """Import a Python file that registers scorers. A failure is recorded in ``PLUGIN_FAILURES``
    (and printed unless ``report`` is false), not raised: a file that cannot be imported at all
    in one line, a plugin whose code raised with the frames from its own code on."""
    path = Path(path)
    module_name = f"scorebench_plugin_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path) if path.is_file() else None
    if spec is None:
        failure = PluginFailure(str(path), _not_a_plugin_file(path))
    else:
        try:
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
            return True
        except Exception as exc:
            sys.modules.pop(module_name, None)
            failure = _plugin_failure(path, exc)
    PLUGIN_FAILURES.append(failure)
    if report:
        said = f":\n{failure.traceback}" if failure.traceback else f": {failure.reason}\n"
        print(f"scorebench: plugin {path} failed to import; other scorers are unaffected{said}",
              end="", file=sys.stderr)
    return False


def _not_a_plugin_file(path: Path) -> str:
    if not path.exists():
        where = "" if path.is_absolute() else f" (looked for {path.absolute()})"
        return f"plugin file {str(path)!r} does not exist{where}"
    if path.is_dir():
        return f"plugin file {str(path)!r} is a directory, not a Python file"
    return f"plugin file {str(path)!r} is not a Python source file (name it *.py)"


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _plugin_failure(path: Path, exc: BaseException) -> PluginFailure:
    """The failure of a plugin's import, its traceback cut to the frames from the plugin file's
    first one on (the loader's frames above it say nothing about the plugin)."""
    plugin = os.path.realpath(path)
    report = traceback.TracebackException.from_exception(exc)
    reason = _one_line(exc)
    first = next((i for i, frame in enumerate(report.stack)
                  if os.path.realpath(frame.filename) == plugin), None)
    if first is not None:
        report.stack = traceback.StackSummary.from_list(report.stack[first:])
    elif isinstance(exc, SyntaxError) and exc.filename and os.path.realpath(exc.filename) == plugin:
        report.stack = traceback.StackSummary()  # the file, line and caret say it all
    else:
        return PluginFailure(str(path), f"cannot read plugin file {str(path)!r}: {reason}")
    return PluginFailure(str(path), reason, "".join(report.format()))


def load_entry_points() -> None:
    """Import the scorers that installed packages declare in the `scorebench.scorers` group."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as exc:
            PLUGIN_FAILURES.append(PluginFailure(
                f"entry point {ep.name} = {ep.value}",
                _one_line(exc), traceback.format_exc()))
            print(f"scorebench: entry point {ep.value!r} failed to import; other scorers are "
                  f"unaffected:\n{PLUGIN_FAILURES[-1].traceback}", file=sys.stderr)
