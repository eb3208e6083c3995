"""Every table of a profile is a declaration that one loader builds: a misspelt key in [run],
[estimate], [tuning], [tasks.X] or a cost task's table is the same error, naming the file, the
table and the closest key; and loading a profile imports no torch."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from suite.cells import expand
from suite.profiles import ProfileError, load_profile

ROOT = Path(__file__).resolve().parents[1]

TYPOS = [
    ("run", "[run]\nseedz = 3\n", "seedz", "seeds"),
    ("estimate", "[estimate]\ndevice = 'x'\nsecond_per_cell = {icl_mqar = 1.0}\n",
     "second_per_cell", "seconds_per_cell"),
    ("tuning", "[tuning]\nmax_extension = 1\n", "max_extension", "max_extensions"),
    ("tasks.icl_mqar", "[tasks.icl_mqar]\ntrain_step = 10\n", "train_step", "train_steps"),
    ("tasks.bench_scorers", "[tasks.bench_scorers]\nrepeat = 3\n", "repeat", "repeats"),
]


def load(path: Path):
    """What every command does with a profile: load it, then expand its cells (which builds
    each [tasks.X] table with the task's Config)."""
    return expand(load_profile(path))


@pytest.mark.parametrize("table, text, key, close", TYPOS, ids=[t[0] for t in TYPOS])
@pytest.mark.parametrize("chain", [False, True], ids=["own file", "extended file"])
def test_a_misspelt_key_in_any_table_is_one_form_of_error(tmp_path, table, text, key, close,
                                                          chain):
    written = tmp_path / "base.toml"
    written.write_text(text)
    path = written
    if chain:
        path = tmp_path / "user.toml"
        path.write_text('extends = "base.toml"\n')
    with pytest.raises(ProfileError) as e:
        load(path)
    form = (rf"{re.escape(str(written.resolve()))}: \[{re.escape(table)}\] unknown key "
            rf"'{key}' \(did you mean '{close}'\?\); allowed keys: .*\b{close}\b.*")
    assert re.fullmatch(form, str(e.value)), str(e.value)


@pytest.mark.parametrize("table, text, key, words", [
    ("run", "[run]\ntime_limit_s = 'long'\n", "time_limit_s", "must be a number"),
    ("run", "[run]\nfast = 'fused'\n", "fast", "must be one of"),
    ("estimate", "[estimate]\ndevice = 'x'\nseconds_per_cell = {icl_mqar = -1.0}\n",
     "seconds_per_cell", "must be > 0"),
    ("tuning", "[tuning]\nseeds = 0\n", "seeds", "must be a count >= 1"),
    ("tasks.icl_mqar", "[tasks.icl_mqar]\nlr = 0.0\n", "lr", "must be > 0"),
    ("tasks.bench_train", "[tasks.bench_train]\nsize = 'huge'\n", "size", "must be one of"),
])
def test_a_value_its_declaration_does_not_allow_is_the_same_form(tmp_path, table, text, key,
                                                                 words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ProfileError) as e:
        load(path)
    assert str(e.value).startswith(f"{path.resolve()}: [{table}] config key '{key}' {words}"), \
        str(e.value)


def test_loading_a_profile_imports_no_torch():
    code = ("import sys\nimport suite.profiles\nfor name in ('cpu', 'gpu', 'paper', 'smoke'):\n"
            "    suite.profiles.load_profile(name)\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH",
                                                                                   "")])}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                            text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_an_empty_optional_table_is_as_if_absent(tmp_path):
    path = tmp_path / "empty.toml"
    path.write_text("extends = ''\n[run]\ntasks = 'a'\nscorers = 'b'\nseeds = 1\n[estimate]\n"
                    "[tuning]\n")
    profile = load_profile(path)
    assert profile.estimate == {} and profile.tuning is None
