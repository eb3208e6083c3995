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
may override any key; tables merge key by key, everything else is replaced. An unknown key
anywhere is an error naming the key and the file.
"""
from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from scorers.fast.policy import FAST_MODES

PROFILE_DIR = Path(__file__).parent / "profiles"
DEFAULT_PROFILE = "cpu"

TOP_LEVEL_KEYS = ("name", "description", "extends", "run", "tasks", "scorer_kwargs", "estimate",
                  "tuning")
ESTIMATE_KEYS = ("device", "seconds_per_cell")
RUN_KEYS = ("tasks", "scorers", "seeds", "time_limit_s", "fast")
REQUIRED_RUN_KEYS = ("tasks", "scorers", "seeds")


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
    tuning: dict[str, Any] = field(default_factory=dict)  # raw [tuning]; suite.tuning parses it
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


def _check_keys(table: dict, allowed, where: str, path: Path) -> None:
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ProfileError(f"{path}: unknown key {key!r} in {where}{hint}; "
                               f"allowed keys: {', '.join(allowed)}")


def _check_table(value, where: str, path: Path) -> dict:
    if not isinstance(value, dict):
        raise ProfileError(f"{path}: {where} must be a table, got {type(value).__name__}")
    return value


def _validate_file(data: dict, path: Path) -> None:
    _check_keys(data, TOP_LEVEL_KEYS, "the top level", path)
    for key in ("name", "description", "extends"):
        if key in data and not isinstance(data[key], str):
            raise ProfileError(f"{path}: {key!r} must be a string")
    _check_keys(_check_table(data.get("run", {}), "[run]", path), RUN_KEYS, "[run]", path)
    _check_table(data.get("tuning", {}), "[tuning]", path)
    for section in ("tasks", "scorer_kwargs"):
        for name, table in _check_table(data.get(section, {}), f"[{section}]", path).items():
            _check_table(table, f"[{section}.{name}]", path)


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


def _seeds(value, path: str) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ProfileError(f"{path}: [run] seeds = {value}; give a count >= 1 or a list")
        return list(range(value))
    if (isinstance(value, list) and value
            and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value)):
        if len(set(value)) != len(value):
            raise ProfileError(f"{path}: [run] seeds {value} has repeated seeds")
        return list(value)
    raise ProfileError(f"{path}: [run] seeds must be a count (e.g. 3) or a list of seeds >= 0 "
                       f"(e.g. [0, 1, 2]), got {value!r}")


def _names(value, key: str, path: str) -> list[str] | str:
    if isinstance(value, str) or (isinstance(value, list) and value
                                  and all(isinstance(v, str) for v in value)):
        return value
    raise ProfileError(f"{path}: [run] {key} must be a string of names/wildcards or a list of "
                       f"names, got {value!r}")


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
    run = merged.get("run", {})
    where = files[-1]
    missing = [k for k in REQUIRED_RUN_KEYS if k not in run]
    if missing:
        raise ProfileError(f"{where}: [run] is missing {missing} (and nothing it extends sets it)")
    limit = run.get("time_limit_s", 0)
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit < 0:
        raise ProfileError(f"{origins.get('run.time_limit_s', where)}: [run] time_limit_s must "
                           f"be a number of seconds >= 0 (0 = no limit), got {limit!r}")
    fast = run.get("fast", "auto")
    if fast not in FAST_MODES:
        raise ProfileError(f"{origins.get('run.fast', where)}: [run] fast must be one of "
                           f"{', '.join(repr(m) for m in FAST_MODES)}, got {fast!r}")
    return Profile(
        name=name,
        description=str(merged.get("description", "")),
        files=files,
        tasks=_names(run["tasks"], "tasks", origins.get("run.tasks", where)),
        scorers=_names(run["scorers"], "scorers", origins.get("run.scorers", where)),
        seeds=_seeds(run["seeds"], origins.get("run.seeds", where)),
        time_limit_s=float(limit) or None,
        task_overrides=merged.get("tasks", {}),
        scorer_kwargs=merged.get("scorer_kwargs", {}),
        origins=origins,
        estimate=_estimate(merged.get("estimate", {}), origins.get("estimate.device", where)),
        fast=fast,
        tuning=merged.get("tuning", {}),
    )


def _estimate(table: dict, where: str) -> dict[str, Any]:
    """``[estimate]``: ``device`` (text) and ``seconds_per_cell`` (task -> seconds > 0)."""
    if not table:
        return {}
    unknown = sorted(set(table) - set(ESTIMATE_KEYS))
    seconds = table.get("seconds_per_cell", {})
    if unknown or not isinstance(table.get("device"), str) or not isinstance(seconds, dict) or \
            not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                    for v in seconds.values()):
        raise ProfileError(f"{where}: [estimate] takes device = \"text\" and seconds_per_cell = "
                           f"{{task = seconds > 0, ...}}; got {table!r}")
    return {"device": table["device"], "seconds_per_cell": dict(seconds)}
