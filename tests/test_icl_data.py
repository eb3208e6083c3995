"""ICL data generators, the sequence-error rule, baselines and the curriculum against hand-worked
examples and independent references (docs/tasks.md#icl_quantifiers and docs/tasks.md#icl_linear)."""
import math

import numpy as np
import pytest
import torch

from tasks.icl_linear import least_squares_predictions, sample_linear
from tasks.icl_quantifiers import (
    labels_every,
    labels_some,
    sample_sequences,
    sequence_wrong,
)
from tasks.icl_training import Curriculum
from tasks.training import derive_seed, generator


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("x, every, some", [
    ([0.5, 1.2, -0.3, 2.0], [1, 1, -1, -1], [1, 1, 1, 1]),
    ([-1, -2, 0.4, -0.1], [-1, -1, -1, -1], [-1, -1, 1, 1]),
    ([0.0, 1.0, 2.0], [-1, -1, -1], [-1, 1, 1]),  # strict positivity: 0 is not > 0
])
def test_quantifier_labels_hand_examples(x, every, some):
    xs = torch.tensor([x])
    assert labels_every(xs)[0].tolist() == every
    assert labels_some(xs)[0].tolist() == some


def test_sampled_labels_match_a_loop_reference():
    xs, ys = sample_sequences("every")(torch.Generator().manual_seed(3), 50, 13)
    _, ys_some = sample_sequences("some")(torch.Generator().manual_seed(3), 50, 13)
    for row, lab, lab_some in zip(xs.tolist(), ys.tolist(), ys_some.tolist()):
        for t in range(13):
            assert lab[t] == (1.0 if all(v > 0 for v in row[:t + 1]) else -1.0)
            assert lab_some[t] == (1.0 if any(v > 0 for v in row[:t + 1]) else -1.0)


def test_sequence_error_rule_ignores_the_first_three_predictions():
    labels = torch.tensor([[1.0, 1, -1, -1, -1, -1]] * 5)
    outputs = torch.tensor([
        [2.0, 3, -1, -4, -2, -1],     # all correct
        [-2.0, -3, 1, -4, -2, -1],    # wrong only at 0-based indices 0, 1, 2: ignored
        [2.0, 3, -1, 4, -2, -1],      # wrong at index 3
        [2.0, 3, -1, -4, -2, 0.5],    # wrong at the last index
        [2.0, 3, -1, -4, 0.0, -1],    # an output of exactly 0 counts as -1: correct
    ])
    assert sequence_wrong(outputs, labels).tolist() == [False, False, True, True, False]
    zero_on_positive = torch.tensor([[1.0, 1, 1, 1]])
    assert sequence_wrong(torch.tensor([[1.0, 1, 1, 0.0]]), zero_on_positive).tolist() == [True]


@pytest.mark.parametrize("quantifier, constant", [("every", -1.0), ("some", 1.0)])
def test_exact_rule_scores_zero_and_constant_predictor_one_sixteenth(quantifier, constant):
    n = 40_000
    z = torch.randn(n, 30, generator=torch.Generator().manual_seed(0))
    label = {"every": labels_every, "some": labels_some}[quantifier]
    for sigma in (1.0, 17.0):
        labels = label(sigma * z)
        assert not sequence_wrong(labels, labels).any()
        error = sequence_wrong(torch.full_like(labels, constant), labels).float().mean().item()
        # fails only when x_1..x_4 are all > 0 (every) or all <= 0 (some): p = 1/16
        assert abs(error - 1 / 16) < 5 * math.sqrt(1 / 16 * 15 / 16 / n)


def test_linear_sequences_are_noise_free_lines():
    xs, ys = sample_linear(torch.Generator().manual_seed(1), 64, 9)
    slopes = (ys[:, 1:] - ys[:, :1]) / (xs[:, 1:] - xs[:, :1])
    intercepts = ys - slopes[:, :1] * xs
    assert torch.allclose(slopes, slopes[:, :1].expand_as(slopes), atol=1e-3, rtol=1e-3)
    assert torch.allclose(intercepts, intercepts[:, :1].expand_as(intercepts), atol=1e-3, rtol=1e-3)
    assert slopes[:, 0].std() > 0.5 and intercepts[:, 0].std() > 0.5  # a, b ~ N(0, 1)


def test_least_squares_is_exact_on_noise_free_data_in_fp64():
    gen = torch.Generator().manual_seed(5)
    for sigma_x, sigma in ((1.0, 1.0), (10.0, 10.0), (0.1, 3.0)):
        xs = sigma_x * torch.randn(200, 41, generator=gen, dtype=torch.float64)
        a, b = sigma * torch.randn(2, 200, 1, generator=gen, dtype=torch.float64)
        ys = a * xs + b
        pred = least_squares_predictions(xs, ys)
        assert (pred[:, 2:] - ys[:, 2:]).abs().max() <= 1e-10 * max(1.0, sigma * sigma_x)
        assert torch.equal(pred[:, 0], torch.zeros(200, dtype=torch.float64))


def test_least_squares_matches_numpy_min_norm_lstsq():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(20, 12))
    ys = rng.normal(size=(20, 12))  # noisy: the fit is not exact
    xs[0, :4] = 0.7  # repeated context points: rank-deficient design
    pred = least_squares_predictions(torch.from_numpy(xs), torch.from_numpy(ys)).numpy()
    for i in range(20):
        for t in range(1, 12):
            design = np.stack([xs[i, :t], np.ones(t)], axis=1)
            w = np.linalg.lstsq(design, ys[i, :t], rcond=None)[0]  # minimum-norm solution
            assert abs(pred[i, t] - (w[0] * xs[i, t] + w[1])) <= 1e-10


def test_zero_predictor_expected_mse():
    gen = torch.Generator().manual_seed(2)
    n = 400_000
    for sigma_x, sigma in ((1.0, 1.0), (3.0, 2.0), (10.0, 10.0)):
        x = sigma_x * torch.randn(n, generator=gen, dtype=torch.float64)
        a, b = sigma * torch.randn(2, n, generator=gen, dtype=torch.float64)
        mse = ((a * x + b) ** 2).mean().item()
        expected = sigma ** 2 * (sigma_x ** 2 + 1)
        # Var(y^2) = sigma^4 (9 sigma_x^4 + 2 sigma_x^2 + 3) - expected^2 for y = a x + b
        sd = math.sqrt((sigma ** 4 * (9 * sigma_x ** 4 + 2 * sigma_x ** 2 + 3) - expected ** 2) / n)
        assert abs(mse - expected) < 5 * sd


def test_paper_curriculum_schedule():
    c = Curriculum()
    assert [c.points(s) for s in (0, 1999, 2000, 3999, 4000, 29_999, 30_000, 500_000)] == \
        [11, 11, 13, 13, 15, 39, 41, 41]
    small = Curriculum(start=5, end=9, increment=2, every=10)
    assert [small.points(s) for s in range(0, 40, 5)] == [5, 5, 7, 7, 9, 9, 9, 9]


def test_seed_streams_are_stable_and_distinct():
    assert derive_seed(0, "a", 3) == derive_seed(0, "a", 3)
    assert len({derive_seed(s, "a", t) for s in range(3) for t in range(3)}) == 9
    assert torch.equal(torch.randn(4, generator=generator(1, "x")),
                       torch.randn(4, generator=generator(1, "x")))
