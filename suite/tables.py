"""The tables of a profile, declared: each is a :class:`registry.settings.Settings` dataclass
whose declaration is its validation (``[tasks.<name>]`` is the task's own ``Config``).
:func:`suite.profiles.load_profile` builds every one of them from the merged files."""
from __future__ import annotations

from dataclasses import dataclass

from registry.modes import FAST_MODES
from registry.settings import Settings, SettingError, setting

MIN_BIMODAL_SEEDS = 2
FIRST_TUNING_SEED = 1000


def _distinct_seeds(key: str, seeds: int | tuple[int, ...]) -> None:
    if isinstance(seeds, int) and seeds < 1:
        raise SettingError(f"config key {key!r} must be a count >= 1 or a list of seeds, got "
                           f"{seeds}", key)
    if isinstance(seeds, tuple) and len(set(seeds)) != len(seeds):
        raise SettingError(f"config key {key!r} has repeated seeds: {list(seeds)}", key)


@dataclass
class ProfileFile(Settings):
    """The top level of one profile file (the tables are checked after the files merge)."""

    description: str = ""
    name: str = ""
    extends: str | None = None   # a profile name or a path; "" starts from nothing
    run: dict = setting(default_factory=dict)
    tasks: dict[str, dict] = setting(default_factory=dict)
    scorer_kwargs: dict[str, dict] = setting(default_factory=dict)
    estimate: dict = setting(default_factory=dict)
    tuning: dict = setting(default_factory=dict)


@dataclass
class RunSettings(Settings):
    """``[run]``: what a run runs."""

    tasks: str | tuple[str, ...] = setting(nonempty=True)      # names or wildcards
    scorers: str | tuple[str, ...] = setting(nonempty=True)    # names, aliases or wildcards
    seeds: int | tuple[int, ...] = setting(ge=0, nonempty=True)  # a count (0..n-1) or the seeds
    time_limit_s: float = setting(0.0, ge=0)                   # per cell; 0: no limit
    fast: str = setting("auto", choices=FAST_MODES)            # the scorers' fast paths

    def check(self) -> None:
        _distinct_seeds("seeds", self.seeds)

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)


@dataclass
class EstimateSettings(Settings):
    """``[estimate]``: the expected seconds per cell on the profile's device, for a dry run on
    another device when no record has them."""

    device: str = setting()
    seconds_per_cell: dict[str, float] = setting(default_factory=dict, gt=0)   # task -> seconds


@dataclass
class TuningSettings(Settings):
    """``[tuning]``: the tuning protocol (:mod:`suite.tuning`); ``grid`` maps a task to its axes
    (config key -> values), checked against the task's declaration when the cells expand."""

    enabled: bool = True
    seeds: int | tuple[int, ...] = setting(2, ge=0, nonempty=True)   # a count from 1000, or seeds
    max_extensions: int = setting(2, ge=0)
    grid: dict[str, dict] = setting(default_factory=dict)
    # tasks whose outcome is bimodal (a seed leaves its plateau or not): tuned on bimodal_seeds,
    # judged by the fraction of seeds reaching the task's target (leaderboard/choice.py)
    bimodal: tuple[str, ...] = ()
    bimodal_seeds: int | tuple[int, ...] = setting(4, ge=0, nonempty=True)
    # screen every rate of a bimodal task on its first bimodal_screen seeds; the rate the screen
    # chooses (and any screened better than it turns out) runs the rest (0: every seed everywhere)
    bimodal_screen: int = setting(0, ge=0)
    ties: dict[str, float] = setting(default_factory=dict, ge=0)    # task -> tie tolerance
    # the edge past which a bimodal task's rate axes grow when no tuning seed reaches its target
    # at any rate of the grid (unset: such a grid stays as it is)
    unlearned_grows: str | None = setting(None, choices=("low", "high"))
    unlearned_extensions: int | None = setting(None, ge=1)   # its steps (unset: max_extensions)

    def check(self) -> None:
        _distinct_seeds("seeds", self.seeds)
        _distinct_seeds("bimodal_seeds", self.bimodal_seeds)
        if self.bimodal and len(seed_list(self.bimodal_seeds)) < MIN_BIMODAL_SEEDS:
            raise SettingError(f"config key 'bimodal_seeds' must give at least "
                               f"{MIN_BIMODAL_SEEDS} tuning seeds for the bimodal tasks "
                               f"{list(self.bimodal)} (a fraction of seeds reaching the target "
                               f"needs them), got {self.bimodal_seeds!r}", "bimodal_seeds")
        count = len(seed_list(self.bimodal_seeds))
        if self.bimodal_screen and not 2 <= self.bimodal_screen < count:
            raise SettingError(f"config key 'bimodal_screen' must be 0 (no screen) or from 2 to "
                               f"{count - 1} (fewer than the {count} bimodal_seeds), got "
                               f"{self.bimodal_screen}", "bimodal_screen")
        if self.unlearned_extensions is not None and self.unlearned_grows is None:
            raise SettingError("config key 'unlearned_extensions' counts the steps of "
                               "'unlearned_grows', which is not set; set unlearned_grows = "
                               "\"low\" or \"high\", or remove unlearned_extensions",
                               "unlearned_extensions")
        for key, tasks in (("bimodal", self.bimodal), ("ties", tuple(self.ties))):
            unknown = [t for t in tasks if t not in self.grid]
            if unknown:
                raise SettingError(f"config key {key!r} names {unknown}, which have no "
                                   f"[tuning.grid.<task>]; tuned tasks: {sorted(self.grid)}", key)

    @property
    def seed_list(self) -> list[int]:
        return seed_list(self.seeds)

    def seeds_for(self, task: str) -> list[int]:
        return seed_list(self.bimodal_seeds if task in self.bimodal else self.seeds)


def seed_list(seeds: int | tuple[int, ...]) -> list[int]:
    """Tuning seeds: a count n means FIRST_TUNING_SEED .. FIRST_TUNING_SEED + n - 1."""
    if isinstance(seeds, int):
        return list(range(FIRST_TUNING_SEED, FIRST_TUNING_SEED + seeds))
    return list(seeds)
