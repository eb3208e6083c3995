"""The scorer checks (docs/scorers.md#scorer-checks, items 1-10; :mod:`scorers.checks`) as the
tests run them: on the built-in scorers' non-default configurations too (``VARIANTS``), and with
the built-in scorers' float64 references (``scorer_references``) for check 8.
"""
from __future__ import annotations

import pytest
import torch

import scorers
from scorers import checks
from scorers.checks import (  # noqa: F401  (the tests' names for the package's checks)
    B, D, FP64_TOLERANCE, H, L, MAX_LEN, WEIGHT_BOUNDS, both_paths, check_bounds,
    check_call_counter, check_exact_zeros, check_fast_path, check_fp32_vs_fp64,
    check_fully_masked_rows, check_gradients, check_masked_key_invariance,
    check_padding_and_prefix, empty_rows, has_fast_path, inputs, make_scorer, masks, pad_length,
    run_attend, set_fast, valid_tokens)

import scorer_references as refs

# Non-default configurations of built-in scorers that the parametrized checks also cover.
VARIANTS = {
    "temperature_softmax": [{"tau": 0.5}, {"learnable": True}],
    "entmax_bisect": [{"learn_alpha": True}, {"alpha": 1.3, "n_iter": 30}],
    "ssa": [{"learn_b": True}, {"learn_n": False, "n": 2.0}],
    "sa_softmax": [{"variant": "plain"}],
    "relu": [{"length": "fixed"}],
    "relu2": [{"length": "fixed"}],
    "adaptive_temperature": [{"beta_grad": True}],
    "stick_breaking": [{"attend_current": False}],
}


def configs(pattern: str = "*") -> list[tuple[str, dict]]:
    names = scorers.list_scorers(pattern)
    out = [(n, {}) for n in names]
    out += [(n, kw) for n in names for kw in VARIANTS.get(n, [])]
    return out


def config_id(config) -> str:
    name, kwargs = config
    return name + ("[" + ",".join(f"{k}={v}" for k, v in kwargs.items()) + "]" if kwargs else "")


def builtin_reference(name):
    if not refs.has_reference(name):
        return None

    def reference(scorer, q, k, mask):
        return refs.matrix_reference(name, scorer, q.double().numpy(), k.double().numpy(),
                                     mask.numpy())

    return reference


@pytest.fixture(autouse=True, scope="module")
def single_thread():
    """Tiny tensors: one intra-op thread avoids thread contention on shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# 8. Output equals an independent float64 reference of the formula (a built-in scorer's own by
# default).
def check_reference(name, kwargs=None, reference=None):
    checks.check_reference(name, kwargs, reference or builtin_reference(name))


ALL_CHECKS = tuple(check_reference if c is checks.check_reference else c
                   for c in checks.ALL_CHECKS)


def run_all_checks(name, kwargs=None, reference=None) -> list[str]:
    """Run every applicable check; returns the names of those that ran."""
    ran = []
    for check in ALL_CHECKS:
        if check is check_fast_path and not has_fast_path(name):
            continue
        check(name, kwargs, reference)
        ran.append(check.__name__)
    return ran
