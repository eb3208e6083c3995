"""Profiles: shipped files, user files that extend and override, and errors naming key and file."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from suite.profiles import PROFILE_DIR, ProfileError, list_profiles, load_profile

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_shipped_profiles_load_and_cpu_is_default():
    assert {"smoke", "cpu", "paper"} <= set(list_profiles())
    for name in ("smoke", "cpu", "paper"):
        p = load_profile(name)
        raw = tomllib.loads((PROFILE_DIR / f"{name}.toml").read_text())
        assert p.name == name
        assert p.files == [str((PROFILE_DIR / f"{name}.toml").resolve())]
        seeds = raw["run"]["seeds"]
        assert p.seeds == (list(range(seeds)) if isinstance(seeds, int) else seeds)
        assert p.task_overrides == raw.get("tasks", {})
    assert load_profile().name == load_profile(None).name == "cpu"


def test_user_file_extends_cpu_by_default_and_overrides_keys(tmp_path):
    cpu_raw = tomllib.loads((PROFILE_DIR / "cpu.toml").read_text())
    user = write(tmp_path / "mine.toml", """
[run]
seeds = [4, 9]
[tasks.some_task]
width = 8
""")
    p = load_profile(str(user))
    assert p.name == "mine"
    assert p.seeds == [4, 9]
    assert p.tasks == cpu_raw["run"]["tasks"]          # inherited
    assert p.scorers == cpu_raw["run"]["scorers"]
    assert p.task_overrides["some_task"] == {"width": 8}
    for task, section in cpu_raw.get("tasks", {}).items():  # cpu's own sections survive
        if task != "some_task":
            assert p.task_overrides[task] == section
    assert p.origin("tasks.some_task.width") == str(user.resolve())
    assert p.files == [str((PROFILE_DIR / "cpu.toml").resolve()), str(user.resolve())]


def test_tables_merge_key_by_key_across_a_chain_of_files(tmp_path):
    write(tmp_path / "base.toml", """
extends = ""
description = "base"
[run]
tasks = ["a"]
scorers = "softmax"
seeds = 2
time_limit_s = 30
[tasks.a]
x = 1
y = 2
""")
    child = write(tmp_path / "child.toml", """
extends = "base.toml"
name = "renamed"
[run]
seeds = 1
[tasks.a]
y = 5
""")
    p = load_profile(child)
    assert p.name == "renamed"
    assert p.description == "base"
    assert p.tasks == ["a"] and p.scorers == "softmax" and p.seeds == [0]
    assert p.time_limit_s == 30.0
    assert p.task_overrides == {"a": {"x": 1, "y": 5}}
    assert p.origin("tasks.a.x").endswith("base.toml")
    assert p.origin("tasks.a.y").endswith("child.toml")


@pytest.mark.parametrize("text, key, where", [
    ("bogus = 1\n[run]\nseeds = 1\n", "bogus", "the top level"),
    ("[run]\nseedz = 3\n", "seedz", "[run]"),
    ("[runn]\nseeds = 3\n", "runn", "the top level"),
])
def test_unknown_key_is_an_error_naming_key_and_file(tmp_path, text, key, where):
    user = write(tmp_path / "bad.toml", text)
    with pytest.raises(ProfileError) as e:
        load_profile(user)
    msg = str(e.value)
    assert repr(key) in msg and str(user.resolve()) in msg and where in msg


def test_unknown_key_in_an_extended_file_names_that_file(tmp_path):
    base = write(tmp_path / "base.toml", "extends = ''\n[run]\ntasks='a'\nscorers='b'\nseeds=1\n"
                                          "typo_key = 2\n")
    user = write(tmp_path / "user.toml", "extends = 'base.toml'\n")
    with pytest.raises(ProfileError, match="typo_key") as e:
        load_profile(user)
    assert str(base.resolve()) in str(e.value)


def test_unknown_profile_name_suggests_the_closest():
    with pytest.raises(ProfileError, match="unknown profile 'smok'.*Did you mean: smoke"):
        load_profile("smok")


@pytest.mark.parametrize("text, match", [
    ("[run]\nseeds = 0\n", r"\[run\] config key 'seeds' must be a count >= 1 or a list"),
    ("[run]\nseeds = [1, 1]\n", r"\[run\] config key 'seeds' has repeated seeds"),
    ("[run]\nseeds = 'three'\n", r"\[run\] config key 'seeds' must be an integer or a list of "
                                 r"integers, got 'three'"),
    ("[run]\ntime_limit_s = -1\n", r"\[run\] config key 'time_limit_s' must be >= 0"),
    ("[run]\nfast = 'fused'\n", r"\[run\] config key 'fast' must be one of \['auto', 'off'\]"),
    ("[run]\nscorers = 3\n", r"\[run\] config key 'scorers' must be a string or a list of "
                             r"strings"),
    ("[estimate]\ndevice = 3\n", r"\[estimate\] config key 'device' must be a string"),
    ("[estimate]\ndevice = 'x'\nseconds_per_cell = {a = 0}\n",
     r"\[estimate\] config key 'seconds_per_cell' must be > 0, got 0"),
    ("[estimate]\nseconds_per_cell = {a = 1}\n", r"\[estimate\] is missing \['device'\]"),
    ("[tuning]\nenabled = 1\n", r"\[tuning\] config key 'enabled' must be true or false"),
    ("[tuning]\nmax_extensions = -1\n", r"\[tuning\] config key 'max_extensions' must be >= 0"),
    ("[tuning]\nseeds = [1000, 1000]\n", r"\[tuning\] config key 'seeds' has repeated seeds"),
    ("[run\n", "not valid TOML"),
    ("extends = 'nope'\n", "unknown profile 'nope'"),
])
def test_bad_values_are_errors(tmp_path, text, match):
    with pytest.raises(ProfileError, match=match):
        load_profile(write(tmp_path / "bad.toml", text))


def test_fast_paths_key(tmp_path):
    assert load_profile("cpu").fast == load_profile("paper").fast == "auto"
    assert load_profile("smoke").fast == "auto"
    assert load_profile(write(tmp_path / "mine.toml", "[run]\nfast = 'off'\n")).fast == "off"
    assert load_profile(write(tmp_path / "inherit.toml", "[run]\nseeds = 1\n")).fast == "auto"


def test_missing_required_run_keys_and_cycles(tmp_path):
    with pytest.raises(ProfileError, match=r"missing \['scorers', 'seeds'\]"):
        load_profile(write(tmp_path / "alone.toml", "extends = ''\n[run]\ntasks = 'a'\n"))
    write(tmp_path / "x.toml", "extends = 'y.toml'\n")
    write(tmp_path / "y.toml", "extends = 'x.toml'\n")
    with pytest.raises(ProfileError, match="cycle"):
        load_profile(tmp_path / "x.toml")
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile(tmp_path / "missing.toml")
