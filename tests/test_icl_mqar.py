"""icl_mqar: the generator (layout, labels only at queries, the power law over gaps, seeding),
the grid, and a tiny model that learns recall at 4 pairs."""
from __future__ import annotations

import math

import pytest
import torch

from tasks import RunContext, TaskError, create_task
from tasks import icl_mqar
from tasks.icl_mqar import IGNORE, power_law, sample_mqar
from tasks.training import generator


pytestmark = pytest.mark.usefixtures("one_thread")


def test_layout_keys_values_and_labels_only_at_the_queries():
    V, L, n = 64, 40, 5
    inputs, labels = sample_mqar(generator(0, "t"), 200, L, n, V, 0.1)
    assert inputs.shape == labels.shape == (200, L)
    half = V // 2
    for x, y in zip(inputs.tolist(), labels.tolist()):
        keys, values = x[0:2 * n:2], x[1:2 * n:2]
        assert all(1 <= k < half for k in keys) and len(set(keys)) == n
        assert all(half <= v < V for v in values) and len(set(values)) == n
        queries = [i for i, lab in enumerate(y) if lab != IGNORE]
        assert len(queries) == n
        assert all(i >= 2 * n and (i - 2 * n) % 2 == 0 for i in queries)
        value_of = dict(zip(keys, values))
        assert sorted(x[i] for i in queries) == sorted(keys)  # every key queried once
        assert all(y[i] == value_of[x[i]] for i in queries)   # the label is the key's value
        assert all(0 <= t < V for t in x)


def test_power_law_is_the_normalized_formula():
    p = power_law(3, 0.5)
    w = [1.0, 2 ** -0.5, 3 ** -0.5]
    assert p.tolist() == pytest.approx([v / sum(w) for v in w], rel=1e-12)
    assert power_law(5, 1.0).tolist() == pytest.approx([0.2] * 5)


def test_query_gaps_follow_the_power_law():
    V, L, a, batch = 32, 24, 0.3, 40_000
    _, labels = sample_mqar(generator(1, "t"), batch, L, 1, V, a)
    gap = ((labels != IGNORE).int().argmax(1) - 2) // 2  # one pair: its query at 2 + 2 g
    space = (L - 2) // 2
    freq = torch.bincount(gap, minlength=space).double() / batch
    p = power_law(space, a)
    se = (p * (1 - p) / batch).sqrt()
    assert ((freq - p).abs() <= 5 * se).all(), (freq, p)
    assert freq[0] > 3 * freq[-1]  # queries mostly near the pairs at a small power_a


def test_bad_shapes_say_what_to_change():
    with pytest.raises(TaskError, match="do not fit"):
        sample_mqar(generator(0), 2, 16, 5, 64, 0.1)
    with pytest.raises(TaskError, match="raise vocab_size"):
        sample_mqar(generator(0), 2, 64, 8, 16, 0.1)
    task = create_task("icl_mqar")
    with pytest.raises(TaskError, match="train_len"):
        task.config({"train_len": 64, "train_pairs": [4], "eval_lengths": [128, 256],
                     "n_positions": 256})


TINY = dict(n_layer=2, n_head=2, n_embd=32, n_positions=64, train_steps=3, batch_size=8,
            vocab_size=64, train_len=16, train_pairs=[2, 4], eval_lengths=[16, 32, 64],
            eval_pairs=[2, 4, 8, 16], eval_sequences=8)


def test_every_scorer_sees_the_same_sequences_at_a_seed(monkeypatch):
    seen: dict[str, list] = {}
    current = []
    real = icl_mqar.sample_mqar

    def recording(*args, **kwargs):
        out = real(*args, **kwargs)
        current.append(out[0].clone())
        return out

    monkeypatch.setattr(icl_mqar, "sample_mqar", recording)
    task = create_task("icl_mqar")
    cfg = task.config(TINY)
    for scorer in ("softmax", "ssa", "cosformer"):
        current.clear()
        result = task.run(scorer, {}, 3, cfg, RunContext())
        seen[scorer] = list(current)
        grid = result.grids["accuracy"]
        assert grid["rows"] == [2, 4, 8, 16] and grid["cols"] == [16, 32, 64]
        assert grid["values"][3][0] is None and grid["values"][3][2] is not None  # 16 pairs need L >= 64
        assert len(result.items["accuracy_id"]) == 2 * 8
        assert result.metrics["accuracy_id"] == pytest.approx(
            sum(result.items["accuracy_id"]) / 16)
        assert result.extra["anchors"]["accuracy_id"]["floor"] == pytest.approx((1 / 2 + 1 / 4) / 2)
        assert result.extra["anchors"]["accuracy_longest"]["floor"] == pytest.approx(
            (1 / 2 + 1 / 4 + 1 / 8 + 1 / 16) / 4)
    # the validation draws (one per training pair count), the training batches, then the 9 grid
    # cells that fit
    assert len(seen["softmax"]) == 2 + 3 + 9
    for scorer in ("ssa", "cosformer"):
        assert all(torch.equal(a, b) for a, b in zip(seen["softmax"], seen[scorer]))
    other = task.run("softmax", {}, 4, cfg, RunContext())
    assert other.metrics is not None
    current.clear()
    task.run("softmax", {}, 4, cfg, RunContext())
    assert not torch.equal(current[0], seen["softmax"][0])


LEARN = dict(n_layer=2, n_head=2, n_embd=32, n_positions=32, train_steps=400, batch_size=32,
             lr=3e-3, vocab_size=32, train_len=16, train_pairs=[4], eval_lengths=[16, 32],
             eval_pairs=[4], eval_sequences=128)


def test_a_tiny_softmax_model_learns_to_answer_with_the_contexts_values():
    """400 steps take the query loss from ln(16 values) to about ln(4 pairs): the model answers
    with one of the four values of its context (the first phase of MQAR learning; the binding of
    each key to its value takes longer than a unit test at this size)."""
    torch.manual_seed(0)
    task = create_task("icl_mqar")
    result = task.run("softmax", {}, 0, task.config(LEARN), RunContext())
    train = result.extra["train"]
    assert train["first_loss"] > math.log(16)
    assert train["last_loss"] < math.log(16) - 0.8
    assert result.metrics["accuracy_id"] > 3 / 16  # uniform over the 16 values scores 1/16


@pytest.mark.slow
def test_the_cpu_profile_learns_the_key_value_binding():
    """The cpu profile's training setting takes softmax past the plateau of answering with one of
    the context's values (accuracy about 1/pairs): at 4 and 8 pairs it finds each key's value.
    A fixed patience of 2 (no wait in proportion to the run) stops it soon after its validation
    accuracy passes learned_at, and the reported evaluation is of the best validation state."""
    from suite.profiles import load_profile

    cpu = load_profile("cpu").task_overrides["icl_mqar"]
    task = create_task("icl_mqar")
    cfg = task.config({**cpu, "patience": 2, "patience_fraction": 0.0,
                       "eval_lengths": [cpu["train_len"]],
                       "eval_pairs": [4, 8], "eval_sequences": 128})
    result = task.run("softmax", {}, 0, cfg, RunContext())
    stopping = result.extra["train"]["stopping"]
    assert stopping["reason"] == "converged" and stopping["best_value"] > cpu["learned_at"]
    row = dict(zip(result.grids["accuracy"]["rows"], result.grids["accuracy"]["values"]))
    assert row[4][0] > 0.45 and row[8][0] > 0.25, row  # the plateau: 0.25 and 0.125
