"""Profiles: how big a run is, as TOML data. Shipped ones live in ``suite/profiles/<name>.toml``.

A profile file holds::

    description = "..."          # optional, shown by `scorebench ls profiles`
    name = "mine"                # optional; a user file defaults to its file name without .toml
    extends = "cpu"              # optional; a profile name or a path relative to this file
    [run]
    tasks = ["icl_linear"]       # names or wildcards (a list, or one comma-separated string)
    scorers = "*"                # names, aliases or wildcards
    seeds = 3                    # a count (seeds 0..n-1) or a list of seeds
    time_limit_s = 1800          # per cell; 0 means no limit
    fast = "auto"                # the scorers' fast paths in training: "auto" (default) or "off"
    [tasks.icl_linear]           # overrides of that task's Config dataclass
    n_layer = 2
    [scorer_kwargs.ssa]          # keyword arguments of a scorer, for every cell that runs it
    ...
    [tuning]                     # optional: the tuning protocol (suite/tuning.py), e.g.
    seeds = 2                    #   tuning seeds 1000, 1001 (disjoint from [run] seeds)
    [tuning.grid.icl_linear]     #   a grid per task: config key -> values
    lr = [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]
    [estimate]                   # optional: the expected seconds per cell on the profile's device,
    device = "1x H100 (assumed)" # shown by a dry run on another device when no record has them
    seconds_per_cell = {icl_linear = 36.0}

A user's file extends ``cpu`` unless it says otherwise (``extends = ""`` starts from nothing) and
may override any key; tables merge key by key, everything else is replaced. Every table is a
declared dataclass (:mod:`suite.tables`; ``[tasks.<name>]``: the task's ``Config``) built with
:func:`registry.settings.build`, so an unknown key, a wrong type, a value out of range or not among
the choices is one form of error: ``<file>: [<table>] <what is wrong>``, naming the file that set
the key, in an ``extends`` chain too.
"""
from __future__ import annotations

import dataclasses
import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from registry.settings import build

from .tables import EstimateSettings, ProfileFile, RunSettings, TuningSettings

PROFILE_DIR = Path(__file__).parent / "profiles"
DEFAULT_PROFILE = "cpu"



class ProfileError(ValueError):
    """A profile cannot be found or is malformed; the message names the key and the file."""


@dataclass
class Profile:
    """A resolved profile: the ``[run]`` settings and the per-task / per-scorer overrides.

    ``origins`` maps a dotted key (``tasks.icl_linear.n_layer``) to the file that set it, so an
    error found later (an unknown task config key) can name the file.
    """

    name: str
    description: str
    files: list[str]
    tasks: list[str] | str
    scorers: list[str] | str
    seeds: list[int]
    time_limit_s: float | None
    task_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    scorer_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    estimate: dict[str, Any] = field(default_factory=dict)
    tuning: TuningSettings | None = None   # suite.tuning resolves it
    # Not part of a cell's identity: a fast path computes the scorer's own formula (tests hold it
    # to the reference), like the device or the micro-batching; provenance.fast_paths says which.
    fast: str = "auto"

    def origin(self, dotted_key: str) -> str:
        return self.origins.get(dotted_key, self.files[-1])


def list_profiles() -> dict[str, str]:
    """Shipped profile names and their descriptions."""
    out = {}
    for path in sorted(PROFILE_DIR.glob("*.toml")):
        try:
            out[path.stem] = str(_read_toml(path).get("description", ""))
        except ProfileError as e:
            out[path.stem] = f"(unreadable: {e})"
    return out


def _is_path(spec: str) -> bool:
    return spec.endswith(".toml") or "/" in spec or "\\" in spec or Path(spec).is_file()


def _shipped_path(name: str) -> Path:
    path = PROFILE_DIR / f"{name}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise ProfileError(f"unknown profile {name!r}.{hint} Shipped profiles: "
                           f"{', '.join(known)}; or pass the path of a .toml file.")
    return path


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ProfileError(f"profile file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"profile file {path}: not valid TOML: {e}") from None


def _validate_file(data: dict, path: Path) -> None:
    build(ProfileFile, data, table="", origin=lambda key: str(path), error=ProfileError)


def _merge(base: dict, data: dict, path: Path, origins: dict[str, str], prefix: str = "") -> dict:
    out = dict(base)
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            out[key] = _merge(out.get(key, {}), value, path, origins, f"{dotted}.")
        else:
            out[key] = value
        origins[dotted] = str(path)
    return out


def _load_chain(path: Path, is_user: bool, seen: list[Path]) -> tuple[dict, list[str], dict]:
    path = path.resolve()
    if path in seen:
        chain = " -> ".join(str(p) for p in [*seen, path])
        raise ProfileError(f"profile files extend each other in a cycle: {chain}")
    data = _read_toml(path)
    _validate_file(data, path)
    parent = data.get("extends", DEFAULT_PROFILE if is_user else None)
    if parent:
        parent_path = ((path.parent / parent) if _is_path(parent) else _shipped_path(parent))
        base, files, origins = _load_chain(parent_path, _is_path(parent), [*seen, path])
    else:
        base, files, origins = {}, [], {}
    merged = _merge(base, {k: v for k, v in data.items() if k not in ("extends", "name")},
                    path, origins)
    return merged, [*files, str(path)], origins


def table(cls: type, merged: dict, name: str, origins: dict[str, str], where: str):
    """The profile's table ``[name]`` built as ``cls``; an error names the file of the key."""
    return build(cls, merged.get(name, {}), table=name, error=ProfileError,
                 origin=lambda key: origins.get(f"{name}.{key}", where) if key else where)


def load_profile(spec: str | Path | None = None) -> Profile:
    """Load a shipped profile by name, or a user's TOML file by path (default: ``cpu``)."""
    spec = str(spec) if spec is not None else DEFAULT_PROFILE
    if _is_path(spec):
        path, is_user = Path(spec), True
        if not path.is_file():
            raise ProfileError(f"profile file {spec!r} does not exist; give a shipped profile "
                               f"name ({', '.join(list_profiles())}) or the path of a .toml file")
        data = _read_toml(path)
        name = data.get("name", path.stem) if isinstance(data.get("name", ""), str) else path.stem
    else:
        path, is_user, name = _shipped_path(spec), False, spec
    merged, files, origins = _load_chain(path, is_user, [])
    where = files[-1]
    run = table(RunSettings, merged, "run", origins, where)
    estimate = table(EstimateSettings, merged, "estimate", origins, where) \
        if merged.get("estimate") else None
    tuning = table(TuningSettings, merged, "tuning", origins, where) \
        if merged.get("tuning") else None
    return Profile(
        name=name,
        description=str(merged.get("description", "")),
        files=files,
        tasks=_names(run.tasks),
        scorers=_names(run.scorers),
        seeds=run.seed_list,
        time_limit_s=run.time_limit_s or None,
        task_overrides=merged.get("tasks", {}),
        scorer_kwargs=merged.get("scorer_kwargs", {}),
        origins=origins,
        estimate=dataclasses.asdict(estimate) if estimate else {},
        fast=run.fast,
        tuning=tuning,
    )


def _names(value: str | tuple[str, ...]) -> list[str] | str:
    return value if isinstance(value, str) else list(value)
