"""The checks of docs/scorers.md#scorer-checks, over every registered scorer (plugins included)."""
import pytest

import scorer_checks as sc
import scorer_references as refs
from scorer_checks import single_thread  # noqa: F401  (autouse fixture)
from scorers.registry import get_scorer_class

CONFIGS = sc.configs()
IDS = [sc.config_id(c) for c in CONFIGS]
FAST = [c for c in CONFIGS if sc.has_fast_path(c[0])]
WITH_REFERENCE = [c for c in CONFIGS if refs.has_reference(c[0])]

GENERIC = (sc.check_exact_zeros, sc.check_masked_key_invariance, sc.check_bounds,
           sc.check_gradients, sc.check_fully_masked_rows, sc.check_fp32_vs_fp64,
           sc.check_padding_and_prefix, sc.check_call_counter)


@pytest.mark.parametrize("check", GENERIC, ids=[c.__name__[6:] for c in GENERIC])
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_property(config, check):
    name, kwargs = config
    check(name, kwargs)


@pytest.mark.parametrize("config", FAST, ids=[sc.config_id(c) for c in FAST])
def test_fast_path_equals_reference(config):
    sc.check_fast_path(*config)


@pytest.mark.parametrize("config", WITH_REFERENCE, ids=[sc.config_id(c) for c in WITH_REFERENCE])
def test_float64_formula_reference(config):
    sc.check_reference(*config)


@pytest.mark.parametrize("name", [c[0] for c in CONFIGS if not c[1]])
def test_builtin_scorers_have_a_reference(name):
    if get_scorer_class(name).__module__.startswith("scorers."):
        assert refs.has_reference(name), f"built-in scorer {name} needs a float64 reference"
