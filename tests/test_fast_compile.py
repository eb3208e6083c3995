"""The compile path (scorers.fast.extra.compiled_attend): every logits-kind scorer's own weights under
torch.compile, on query blocks that only see the keys their rows can see, equals its reference.

The block plan is checked for every scorer without compiling (``compiled=False`` runs the same
blocks eagerly); compiling is slow on small CPUs, so one configuration of each kind of computation
compiles under ``-m slow``, each for one of the masks in turn."""
from __future__ import annotations

import pytest

import scorers
from scorers.base import LogitsScorer
from scorers.fast import FastPathError
from scorers.fast.extra import compiled_attend
from scorer_checks import configs, make_scorer

from fast_support import assert_close, inputs, masks, run

LOGITS = [c for c in configs() if issubclass(scorers.get_scorer_class(c[0]), LogitsScorer)]
# torch.compile unrolls entmax_bisect's loop, about 2 s of compiling per bisection step on a
# 2-core CPU, every step the same kernels; compiled, it runs this many steps (the reference
# alike). Blocks bracket tau over their own keys, the reference over the whole row, so the two
# agree to about 2^-n_iter: 20 steps keep that under the tolerance. The eager blocks above run
# each configuration's own n_iter.
COMPILED_BISECTION_STEPS = 20
# Compiled: one configuration per kind of computation a weights function is made of (an exp
# normalizer, a power transform with a learned exponent, a piecewise transform, a sort threshold,
# a bisection loop with a learned alpha, a log-space cumulative sum, weights of weights, a
# rectified normalizer, a signed one, an elementwise map over a length, a learned temperature's
# gradient, a length scale, a sink); the other configurations differ from one of these by a
# constant and compile the same operations. Every configuration runs the same blocks eagerly above.
COMPILED = [c for c in LOGITS if c in [
    ("softmax", {}), ("ssa", {}), ("stablemax", {}), ("sparsemax", {}), ("entmax15", {}),
    ("entmax_bisect", {"learn_alpha": True}), ("stick_breaking", {}), ("sa_softmax", {}),
    ("softpick", {}), ("cog_signed", {}), ("relu", {"length": "fixed"}),
    ("adaptive_temperature", {"beta_grad": True}), ("ssmax", {}), ("learned_sink", {})]]


def blocked(scorer, block, compiled):
    return lambda q, k, v, mask: compiled_attend(scorer, q, k, v, mask, block_size=block,
                                                 compiled=compiled)


def causal_only_mask(name, mask_name, mask):
    return scorers.get_scorer_class(name).causal_only and mask_name in ("none",
                                                                        "random_empty_rows")


@pytest.mark.parametrize("name,kwargs", LOGITS, ids=lambda x: str(x))
def test_blocks_equal_reference_for_every_logits_scorer(name, kwargs):
    """The causal index mask and a padded mask with truncated keys, for every scorer; no mask and
    fully-masked rows for the scorers that allow them (``test_blocks_other_masks``)."""
    scorer = make_scorer(name, kwargs)
    q, k, v, g = inputs()
    for mask_name in ("causal", "padded_causal"):
        mask = masks()[mask_name]
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        got = run(blocked(scorer, 5, compiled=False), scorer, q, k, v, g, mask)
        assert_close(ref, got, f"{name}{kwargs} {mask_name}")


@pytest.mark.parametrize("name", ["softmax", "entmax15", "sa_softmax", "softpick", "relu"])
def test_blocks_other_masks(name):
    scorer = make_scorer(name)
    q, k, v, g = inputs(lq=9, lk=13)
    for mask_name, mask in masks(9, 13).items():
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        got = run(blocked(scorer, 4, compiled=False), scorer, q, k, v, g, mask)
        assert_close(ref, got, f"{name} {mask_name} (9 queries, 13 keys)")


def test_module_kind_scorers_are_refused():
    q, k, v, _ = inputs()
    with pytest.raises(FastPathError, match="logits-kind"):
        compiled_attend(make_scorer("cosformer"), q, k, v, None)


def compiled_mask_for(index: int, name: str) -> str:
    """One mask per compiled scorer, taken in turn, so every mask is compiled for several scorers
    while each scorer compiles once (every mask of every scorer runs the same blocks eagerly in
    the tests above)."""
    names = [m for m, mask in masks().items() if not causal_only_mask(name, m, mask)]
    return names[index % len(names)]


@pytest.mark.slow
@pytest.mark.parametrize("index,name,kwargs", [(i, *c) for i, c in enumerate(COMPILED)],
                         ids=lambda x: str(x))
def test_compiled_equals_reference_for_every_logits_scorer(index, name, kwargs):
    if name == "entmax_bisect":
        kwargs = {**kwargs, "n_iter": min(kwargs.get("n_iter", 50), COMPILED_BISECTION_STEPS)}
    scorer = make_scorer(name, kwargs)
    q, k, v, g = inputs()
    mask_name = compiled_mask_for(index, name)
    mask = masks()[mask_name]
    ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
    got = run(blocked(scorer, 8, compiled=True), scorer, q, k, v, g, mask)
    assert_close(ref, got, f"{name}{kwargs} compiled {mask_name}")


def test_the_compiled_tests_cover_every_mask_and_every_kind():
    covered = {compiled_mask_for(i, name) for i, (name, _) in enumerate(COMPILED)}
    assert covered == set(masks())
    assert len(COMPILED) == 14          # a configuration renamed in scorer_checks drops out here
