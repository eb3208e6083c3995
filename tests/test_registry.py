"""registry.Registry, the one registry class of scorers, tasks, executors and fast forms."""
from __future__ import annotations

import importlib.util
import inspect
import sys

import pytest

from registry import Registry


class Taken(ValueError):
    pass


class Alpha:
    pass


class Beta:
    pass


def make() -> Registry:
    reg = Registry("widget", error=Taken, listing="{count} widgets: {names}.")
    reg.register("alpha", Alpha, aliases=("first",))
    reg.register("beta", Beta)
    return reg


def test_lookup_aliases_and_order():
    reg = make()
    assert reg.get("alpha") is Alpha and reg.get("first") is Alpha
    assert reg.canonical("first") == "alpha"
    assert list(reg) == ["alpha", "beta"] and len(reg) == 2
    assert "first" in reg and "gamma" not in reg
    assert reg.names("a*") == ["alpha"] and reg.names("b*, a*") == ["alpha", "beta"]


def test_unknown_name_suggests_the_closest_and_lists_them():
    with pytest.raises(Taken, match=r"unknown widget 'alpah'\. Did you mean: alpha\? "
                                    r"2 widgets: alpha, beta\."):
        make().get("alpah")
    with pytest.raises(Taken, match=r"unknown widget 'zzz'\. 2 widgets"):
        make().get("zzz")


def test_a_taken_name_names_both_definitions_and_the_same_definition_may_return():
    reg = make()
    with pytest.raises(Taken, match=r"widget name 'first' is already registered by "
                                    r".*Alpha \(.*test_registry.py:\d+\); cannot register it "
                                    r"again for .*Beta"):
        reg.register("first", Beta)
    # the same file imported under a second module name (a plugin loaded twice) replaces it
    spec = importlib.util.spec_from_file_location("registry_test_copy", __file__)
    copy = importlib.util.module_from_spec(spec)
    sys.modules["registry_test_copy"] = copy
    try:
        spec.loader.exec_module(copy)
        assert reg.register("alpha", copy.Alpha) is copy.Alpha
    finally:
        del sys.modules["registry_test_copy"]
    assert reg.get("alpha") is copy.Alpha


def test_origin_is_where_the_object_is_defined():
    line = inspect.getsourcelines(Beta)[1]
    assert make().origin("beta") == f"{__name__}.Beta ({__file__}:{line})"


def test_freeze_and_scoped():
    reg = make()
    with reg.scoped():
        reg.register("gamma", Alpha)
        reg.freeze()
        with pytest.raises(Taken, match="frozen"):
            reg.register("delta", Beta)
        assert reg.get("alpha") is Alpha
    assert "gamma" not in reg and not reg.frozen
    reg.register("delta", Beta)
    assert reg.get("delta") is Beta


def test_scorers_tasks_executors_and_forms_share_it():
    from scorers.forms import FORMS
    from scorers.registry import SCORERS
    from suite.executors import EXECUTORS
    from tasks.registry import TASKS

    for reg in (SCORERS, TASKS, EXECUTORS, FORMS):
        assert isinstance(reg, Registry)
    assert "softmax" in SCORERS and "decoder_lm" in TASKS and "local" in EXECUTORS
    assert "dense" in FORMS
    assert SCORERS.origin("ssa").startswith("scorers.ssa.SSA (")
