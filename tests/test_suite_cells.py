"""Cells: the canonical JSON and cell_id, and the expansion of a profile into cells."""
from __future__ import annotations

import dataclasses

import pytest
from suite_support import TASK, plugin_tasks, profile_file, sha16

from suite.cells import Cell, config_object, expand
from suite.profiles import ProfileError, load_profile
from leaderboard.loading.schema import canonical_json, cell_id

CELL = dict(task="icl_linear", task_version=1, track="icl", scorer="ssa", scorer_version=2,
            scorer_kwargs={}, profile="cpu", seed=0, config={"n_layer": 2, "lr": 0.0001})


def test_cell_id_is_sha256_of_sorted_compact_json():
    by_hand = ('{"config":{"lr":0.0001,"n_layer":2},"profile":"cpu","scorer":"ssa",'
               '"scorer_kwargs":{},"scorer_version":2,"seed":0,"task":"icl_linear",'
               '"task_version":1,"track":"icl"}')
    assert canonical_json(CELL) == by_hand
    assert cell_id(CELL) == sha16(by_hand)
    assert Cell(**CELL).id == sha16(by_hand)
    reordered = dict(reversed(list(CELL.items())))
    reordered["config"] = {"lr": 0.0001, "n_layer": 2}
    assert cell_id(reordered) == cell_id(CELL)


@pytest.mark.parametrize("field, value", [
    ("task", "icl_quantifiers"), ("task_version", 2), ("track", "probe"), ("scorer", "softmax"),
    ("scorer_version", 3), ("scorer_kwargs", {"tau": 1.0}), ("profile", "smoke"), ("seed", 1),
    ("config", {"n_layer": 3, "lr": 0.0001}), ("config", {"n_layer": 2, "lr": 0.001}),
])
def test_cell_id_changes_with_every_field(field, value):
    assert cell_id({**CELL, field: value}) != cell_id(CELL)


def test_cell_round_trips_through_a_dict():
    cell = Cell(**CELL)
    assert Cell.from_dict(cell.to_dict()) == cell
    with pytest.raises(ValueError, match="unknown field"):
        Cell.from_dict({**cell.to_dict(), "extra": 1})


def test_expansion_order_configs_and_skips(tmp_path):
    with plugin_tasks():
        prof = load_profile(profile_file(tmp_path / "p.toml", seeds=[3, 5],
                                         scorers="softmax,suite_test_unsupported"))
        planned = expand(prof)
    assert [(p.cell.seed, p.cell.scorer) for p in planned] == [
        (3, "softmax"), (3, "suite_test_unsupported"), (5, "softmax"),
        (5, "suite_test_unsupported")]
    assert [p.skip_reason for p in planned] == [
        None, "suite_test_draws does not run suite_test_unsupported"] * 2


def test_expansion_resolves_the_full_config_and_coerces_numbers(tmp_path):
    with plugin_tasks():
        from tasks import create_task

        task = create_task(TASK)
        defaults = dataclasses.asdict(task.Config())
        planned = expand(load_profile(profile_file(tmp_path / "p.toml", seeds=2, n=4, scale=2)))
        (tmp_path / "q").mkdir()
        as_float = expand(load_profile(profile_file(tmp_path / "q" / "p.toml", seeds=2, n=4,
                                                    scale=2.0)))
        cfg = config_object(task, planned[0].cell.config)
    assert [p.cell.seed for p in planned] == [0, 1]
    cell = planned[0].cell
    assert cell.task == TASK and cell.task_version == 3 and cell.track == "probe"
    assert cell.scorer == "softmax" and cell.profile == "p"
    assert cell.config == {**defaults, "n": 4, "scale": 2.0, "sigmas": [1, 2]}
    assert isinstance(cell.config["scale"], float)
    # `scale = 2` and `scale = 2.0` are the same config, hence the same cell.
    assert [p.cell.id for p in planned] == [p.cell.id for p in as_float]
    assert cfg.sigmas == (1, 2) and cfg.scale == 2.0


def test_command_line_selection_replaces_the_profile(tmp_path):
    with plugin_tasks():
        prof = load_profile(profile_file(tmp_path / "p.toml", seeds=3))
        planned = expand(prof, tasks=TASK, scorers="softmax", seeds=[7])
    assert [(p.cell.task, p.cell.seed) for p in planned] == [(TASK, 7)]


@pytest.mark.parametrize("overrides, match", [
    ({"nn": 3}, r"\[tasks.suite_test_draws\] unknown key 'nn' \(did you mean 'n'\?\)"),
    ({"n": "three"}, r"\[tasks.suite_test_draws\] config key 'n' must be an integer, got "
                     r"'three'"),
    ({"n": 2.5}, "'n' must be an integer"),
    ({"log": 1}, "'log' must be a string"),
    ({"sigmas": 3}, "'sigmas' must be a list"),
])
def test_bad_task_keys_name_the_key_and_file(tmp_path, overrides, match):
    path = profile_file(tmp_path / "p.toml", **overrides)
    with plugin_tasks(), pytest.raises(ProfileError, match=match) as e:
        expand(load_profile(path))
    assert str(path.resolve()) in str(e.value)


def test_section_for_an_unknown_task_is_an_error(tmp_path):
    path = profile_file(tmp_path / "p.toml")
    path.write_text(path.read_text() + "[tasks.suite_test_drawz]\nn = 1\n")
    with plugin_tasks(), pytest.raises(ProfileError, match="Did you mean: suite_test_draws"):
        expand(load_profile(path))


def test_scorer_kwargs_are_checked_against_the_scorer(tmp_path):
    path = profile_file(tmp_path / "p.toml")
    path.write_text(path.read_text() + "[scorer_kwargs.softmax]\ntemperature = 2.0\n")
    with plugin_tasks(), pytest.raises(ProfileError, match="unknown key.*'temperature'"):
        expand(load_profile(path))
