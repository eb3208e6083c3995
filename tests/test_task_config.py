"""tasks.config: a config's declaration is its validation, for a config built from a profile or
directly, and the tuning protocol may sweep only the fields declared tunable."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

import tasks
from tasks.config import ConfigError, TaskConfig, declaration, setting, tunable_keys


@dataclass
class Example(TaskConfig):
    lr: float = setting(1e-3, gt=0, tunable=True)
    steps: int = setting(10, ge=1, le=100)
    mode: str = setting("a", choices=("a", "b"))
    lengths: tuple[int, ...] = setting((4, 8), ge=1, nonempty=True)
    flag: bool = False

    def check(self):
        if self.steps < max(self.lengths):
            raise ConfigError(f"steps={self.steps} is below the longest length")


def test_values_are_normalized_to_their_declared_types():
    cfg = Example(lr=1, steps=20.0, lengths=[4, 16])
    assert cfg.lr == 1.0 and isinstance(cfg.lr, float)
    assert cfg.steps == 20 and isinstance(cfg.steps, int)
    assert cfg.lengths == (4, 16)


@pytest.mark.parametrize("kwargs, key, message", [
    ({"lr": 0.0}, "lr", "config key 'lr' must be > 0, got 0.0"),
    ({"steps": 0}, "steps", "config key 'steps' must be >= 1, got 0"),
    ({"steps": 101}, "steps", "config key 'steps' must be <= 100, got 101"),
    ({"steps": 2.5}, "steps", "config key 'steps' must be an integer, got 2.5"),
    ({"mode": "c"}, "mode", "config key 'mode' must be one of ['a', 'b'], got 'c'"),
    ({"lengths": ()}, "lengths", "config key 'lengths' must not be empty"),
    ({"lengths": (4, 0)}, "lengths", "config key 'lengths' must be >= 1, got 0"),
    ({"lengths": "48"}, "lengths", "config key 'lengths' must be a list of integers"),
    ({"flag": 1}, "flag", "config key 'flag' must be true or false, got 1"),
    ({"lr": True}, "lr", "config key 'lr' must be a number, got True"),
    ({"lengths": (4, 200)}, None, "steps=10 is below the longest length"),
])
def test_a_value_its_declaration_does_not_allow_is_an_error_naming_the_key(kwargs, key, message):
    with pytest.raises(ConfigError) as e:
        Example(**kwargs)
    assert str(e.value).startswith(message) and e.value.key == key


def test_only_declared_fields_are_tunable():
    assert tunable_keys(Example) == ["lr"]
    assert not declaration(dataclasses.fields(Example)[-1]).tunable


def test_every_training_task_declares_its_learning_rate_tunable_and_positive():
    for name in tasks.list_tasks():
        cls = tasks.get_task_class(name)
        keys = tunable_keys(cls.Config)
        if cls.validation is None:
            assert keys == [], name
            continue
        assert "lr" in keys, name
        lr = next(f for f in dataclasses.fields(cls.Config) if f.name == "lr")
        assert declaration(lr).gt == 0, name


@pytest.mark.parametrize("name", ["icl_mqar", "icl_linear", "encoder_mlm", "decoder_lm"])
def test_a_config_built_directly_is_checked_like_one_from_a_profile(name):
    task = tasks.create_task(name)
    with pytest.raises(ConfigError, match="config key 'lr' must be > 0"):
        task.Config(lr=-1e-3)
    with pytest.raises(tasks.TaskError,
                       match=r"cfg.toml: \[tasks\..*\] config key 'lr' must be > 0"):
        task.config({"lr": -1e-3}, source="cfg.toml")
