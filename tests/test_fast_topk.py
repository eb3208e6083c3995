"""The topk path: sparsemax and entmax15 through the entmax package's partial sort (``k=``) on
query blocks with key truncation equal their references, including rows whose support is larger
than k (the package solves those again with 2k)."""
from __future__ import annotations

import entmax
import pytest
import torch

from scorers.fast import FastPathError
from scorers.fast.extra import topk_attend, topk_weights
from scorer_checks import make_scorer

from fast_support import assert_close, inputs, masks, run


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
@pytest.mark.parametrize("top", [2, 64])
def test_topk_equals_reference(name, top):
    scorer = make_scorer(name)
    q, k, v, g = inputs()
    for mask_name, mask in masks().items():
        ref = run(scorer.reference_attend, scorer, q, k, v, g, mask)
        got = run(lambda a, b, c, m: topk_attend(scorer, a, b, c, m, block_size=5, top=top),
                  scorer, q, k, v, g, mask)
        assert_close(ref, got, f"{name} {mask_name} k={top}")


def test_rows_with_support_beyond_k_are_solved_exactly():
    s = torch.zeros(1, 1, 3, 12)                    # uniform rows: support 12 > k = 2
    mask = torch.ones(1, 1, 3, 12, dtype=torch.bool)
    mask[0, 0, 2] = False                           # and a fully-masked row
    w = topk_weights(entmax.entmax15, s, mask, 2)
    assert torch.allclose(w[0, 0, :2], torch.full((2, 12), 1 / 12))
    assert w[0, 0, 2].abs().max().item() == 0.0


def test_other_scorers_are_refused():
    with pytest.raises(FastPathError, match="topk path"):
        topk_attend(make_scorer("softmax"), *inputs()[:3])
