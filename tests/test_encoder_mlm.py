"""The encoder task: holistic scoring, masking objectives, schedule, failures, skips, a full cell."""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

REPO_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if not os.environ.get("SCOREBENCH_DATA") and REPO_DATA.is_dir():
    os.environ["SCOREBENCH_DATA"] = str(REPO_DATA)

from tasks import RunContext, TaskError, TrainingFailure, create_task  # noqa: E402
from tasks import encoder_mlm as em  # noqa: E402
from tasks.data import mlm_data as md  # noqa: E402
from tasks.lmeval import mlm as ev  # noqa: E402
from tasks.data import zorro  # noqa: E402


# --------------------------------------------------------------------------- holistic scoring

class UnigramToy(torch.nn.Module):
    """p(predicted | input token t) = P[t]: the logits at a position depend on its own token only."""

    def __init__(self, probs):
        super().__init__()
        self.log_p = torch.log(torch.tensor(probs, dtype=torch.float32))

    def forward(self, ids, valid=None):
        return torch.nn.functional.one_hot(ids, self.log_p.shape[0]).float()

    def logits(self, hidden):
        return hidden @ self.log_p


def toy_probs():
    # vocab of 8: ids 0-4 special, 5-7 words. Row t: the distribution predicted at a position holding t.
    p = np.full((8, 8), 1e-3)
    p[3, 3], p[4, 4] = 0.5, 0.25          # <s>, </s>
    p[5, 5], p[6, 6], p[7, 7] = 0.8, 0.1, 0.4
    return (p / p.sum(1, keepdims=True)).tolist(), p / p.sum(1, keepdims=True)


def test_holistic_cross_entropy_hand_worked():
    probs, p = toy_probs()
    model = UnigramToy(probs)
    seqs = [np.array([5, 6]), np.array([7]), np.array([5, 5, 7]), np.array([6, 5]), np.array([5, 6])]
    ce = ev.holistic_cross_entropy(model, seqs, torch.device("cpu"), batch_size=2)
    by_hand = [
        -(math.log(p[3, 3]) + math.log(p[5, 5]) + math.log(p[6, 6]) + math.log(p[4, 4])) / 4,
        -(math.log(p[3, 3]) + math.log(p[7, 7]) + math.log(p[4, 4])) / 3,
        -(math.log(p[3, 3]) + 2 * math.log(p[5, 5]) + math.log(p[7, 7]) + math.log(p[4, 4])) / 5,
        -(math.log(p[3, 3]) + math.log(p[6, 6]) + math.log(p[5, 5]) + math.log(p[4, 4])) / 4,
    ]
    np.testing.assert_allclose(ce[:4], by_hand, rtol=1e-5)
    assert by_hand[1] < by_hand[0] and by_hand[2] < by_hand[3]
    # pairs (grammatical, ungrammatical): ("7", "5 6") right, ("6 5", "5 5 7") wrong,
    # ("5 6", "5 6") a tie, counted wrong
    correct, ties = zorro.pair_outcomes([ce[1], ce[3], ce[0]], [ce[0], ce[2], ce[4]])
    assert correct.tolist() == [True, False, False] and ties == 1


def test_holistic_scores_do_not_depend_on_batching():
    torch.manual_seed(0)
    from tasks.models.encoder import Encoder, EncoderConfig

    model = Encoder(EncoderConfig(n_layer=1, n_head=2, n_embd=16, ffn_dim=32, vocab_size=30,
                                  max_position_embeddings=20))
    model.init_weights(torch.Generator().manual_seed(1))
    rng = np.random.default_rng(0)
    seqs = [rng.integers(6, 30, size=n) for n in rng.integers(1, 9, size=40)]
    a = ev.holistic_cross_entropy(model, seqs, torch.device("cpu"), batch_size=3)
    b = np.array([ev.holistic_cross_entropy(model, [s], torch.device("cpu"))[0] for s in seqs])
    np.testing.assert_allclose(a, b, rtol=1e-5)


# ------------------------------------------------------------------------------------ masking

def batch_of(n_rows=4000, length=10, vocab=8192, seed=0):
    rng = np.random.default_rng(seed)
    seqs = [rng.integers(6, vocab, size=length) for _ in range(n_rows)]
    return md.pad_batch(seqs)


def within(observed, expected, n):
    """|observed - expected| within 5 binomial standard errors of a proportion over n trials."""
    return abs(observed - expected) <= 5 * math.sqrt(expected * (1 - expected) / n)


def test_babyberta_masking_statistics():
    ids, valid = batch_of()
    ids[:5, 6:] = md.PAD_ID       # a few shorter rows
    valid[:5, 6:] = False
    ids[:5, 5] = md.EOS_ID
    inputs, sel = md.corrupt(ids, valid, "babyberta", np.random.default_rng(1), 8192, 0.15)
    maskable = md.maskable_positions(ids, valid)
    assert not (sel & ~maskable).any()                        # never <s>, </s> or padding
    assert sel.any(1).all()                                   # re-drawn until something is selected
    full = slice(5, None)
    n = maskable[full].sum()
    # per row of 10 tokens, selection conditional on non-empty: 0.15 / (1 - 0.85^10)
    assert within(sel[full].sum() / n, 0.15 / (1 - 0.85 ** 10), n)
    chosen = sel.sum()
    as_mask = (inputs[sel] == md.MASK_ID).mean()
    assert within(as_mask, 0.9, chosen)
    replaced = inputs[sel & (inputs != md.MASK_ID)]
    assert (replaced >= md.FIRST_RANDOM_ID).all() and (replaced < 8192).all()
    unchanged = (inputs[sel] == ids[sel]).mean()
    assert unchanged < 0.001                                  # only by a random draw hitting itself
    assert (inputs[~sel] == ids[~sel]).all()


def test_hf_masking_statistics():
    ids, valid = batch_of()
    inputs, sel = md.corrupt(ids, valid, "hf", np.random.default_rng(2), 8192, 0.15)
    maskable = md.maskable_positions(ids, valid)
    assert not (sel & ~maskable).any()
    n = maskable.sum()
    assert within(sel.sum() / n, 0.15, n)
    chosen = sel.sum()
    assert within((inputs[sel] == md.MASK_ID).mean(), 0.8, chosen)
    assert within((inputs[sel] == ids[sel]).mean(), 0.1 + 0.1 / 8192, chosen)
    other = (inputs[sel] != md.MASK_ID) & (inputs[sel] != ids[sel])
    assert within(other.mean(), 0.1 * (1 - 2 / 8192), chosen)
    assert (inputs[~sel] == ids[~sel]).all()


def test_training_items_one_pass():
    items = md.training_items(7, 10, "shuffled", np.random.default_rng(0))
    assert np.bincount(items).tolist() == [10] * 7 and not np.array_equal(items, np.sort(items))
    ordered = md.training_items(3, 2, "age_ordered", np.random.default_rng(0))
    assert ordered.tolist() == [0, 0, 1, 1, 2, 2]


def test_linear_schedule():
    f = em.linear_warmup_decay(10, 110)
    assert [f(0), f(5), f(10), f(60), f(110), f(200)] == [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]


# ------------------------------------------------------------------------------ task contract

def test_registered_with_metrics():
    task = create_task("encoder_mlm")
    assert task.track == "encoder"
    assert task.metrics["zorro_overall"].direction == "higher" and task.metrics["zorro_overall"].headline
    assert task.metrics["val_mlm_loss"].direction == "lower"
    assert sum(k.startswith("zorro.") for k in task.metrics) == 23


def test_config_errors():
    task = create_task("encoder_mlm")
    with pytest.raises(TaskError, match="n_layers"):
        task.config({"n_layers": 2})
    with pytest.raises(TaskError, match="objective"):
        task.config({"objective": "electra"})
    with pytest.raises(TaskError, match="multiple"):
        task.config({"n_embd": 30, "n_head": 4})
    with pytest.raises(TaskError, match="zorro_pairs"):
        task.config({"zorro_pairs": 2001})
    assert task.config({"lr": 1}).lr == 1.0


def test_skip_reason_for_causal_only(monkeypatch):
    import scorers

    task = create_task("encoder_mlm")
    assert task.skip_reason("softmax") is None

    class CausalOnly:
        causal_only = True

    monkeypatch.setattr(scorers, "get_scorer_class", lambda name: CausalOnly)
    assert "causal-only" in task.skip_reason("anything")


class FakeData:
    """A few random sentences in place of AO-CHILDES, for the training loop."""

    def __init__(self, vocab=64, n=50, seed=0):
        rng = np.random.default_rng(seed)
        self.train = [rng.integers(6, vocab, size=k).astype(np.int32) for k in rng.integers(2, 9, size=n)]
        self.vocab_size = vocab


def small_config(**kw):
    base = dict(n_layer=1, n_head=2, n_embd=16, ffn_dim=32, max_position_embeddings=20, max_steps=6,
                warmup_steps=2, batch_size=4, log_every=2)
    return em.EncoderMLMConfig(**{**base, **kw})


def test_nan_and_divergence_become_training_failures():
    data = FakeData()
    cfg = small_config(init_std=1e30)
    model = em.build_model(cfg, "softmax", {}, 0, data.vocab_size, torch.device("cpu"))
    with pytest.raises(TrainingFailure) as err:
        em.train(model, data, cfg, 0, RunContext(), 10)
    assert err.value.status == "nan" and err.value.step == 0
    cfg = small_config(diverge_factor=0.5)  # the first loss, about ln(64), is above 0.5 ln(64)
    model = em.build_model(cfg, "softmax", {}, 0, data.vocab_size, torch.device("cpu"))
    with pytest.raises(TrainingFailure) as err:
        em.train(model, data, cfg, 0, RunContext(), 10)
    assert err.value.status == "diverged" and err.value.step == 0


def test_same_seed_same_stream_for_every_scorer():
    data = FakeData()
    cfg = small_config(dropout=0.0)
    logs = []
    for scorer, kwargs in (("softmax", {}), ("temperature_softmax", {"tau": 1.0})):
        model = em.build_model(cfg, scorer, kwargs, 3, data.vocab_size, torch.device("cpu"))
        logs.append(em.train(model, data, cfg, 3, RunContext(), 10)["loss_curve"])
    np.testing.assert_allclose(logs[0], logs[1], rtol=1e-5)
    other_seed = em.build_model(cfg, "softmax", {}, 4, data.vocab_size, torch.device("cpu"))
    assert em.train(other_seed, data, cfg, 4, RunContext(), 10)["loss_curve"] != logs[0]


# ------------------------------------------------------------------------- a full (tiny) cell

@pytest.mark.slow
def test_full_cell_records_every_metric():
    task = create_task("encoder_mlm")
    cfg = task.config(dict(n_layer=1, n_head=2, n_embd=16, ffn_dim=32, max_steps=5, warmup_steps=1,
                           zorro_pairs=4, val_sentences=50))
    result = task.run("softmax", {}, 0, cfg, RunContext())
    assert set(result.metrics) == set(task.metrics)
    for name in zorro.paradigms():
        outcomes = result.items[f"zorro.{name}"]
        assert len(outcomes) == 4 and set(outcomes) <= {0, 100}
        assert result.metrics[f"zorro.{name}"] == pytest.approx(np.mean(outcomes))
    assert result.metrics["zorro_overall"] == pytest.approx(np.mean(result.items["zorro_overall"]))
    assert result.metrics["zorro_overall"] == pytest.approx(
        np.mean([result.metrics[f"zorro.{p}"] for p in zorro.paradigms()]))
    assert 0 < result.metrics["val_mlm_loss"] < 2 * math.log(8192)
    info = result.extra["data"]
    assert info["tokens"]["train_unk"] == 0 and info["tokens"]["zorro_unk"] == 0
    assert info["tokens"]["train_max_len"] <= 128
    assert result.step == 5 and result.extra["parameters"] > 0
    again = task.run("softmax", {}, 0, cfg, RunContext())
    assert again.metrics == result.metrics and again.items == result.items
    val = result.extra["validation"]
    assert val["metric"] == "val_mlm_loss_tuning" and val["direction"] == "lower"
    assert val["items"] == 2000 and val["curve"]["step"][-1] == 5 and val["curve"]["items"] == 500
    assert 0 < val["value"] < 2 * math.log(8192)
    sweep = task.run("softmax", {}, 0, cfg, RunContext(sweep=True))   # no Zorro, same training
    assert sweep.metrics == {} and sweep.extra["validation"] == val


def test_validation_sentences_are_never_reported():
    from tasks.lmeval.mlm import VALIDATION_SENTENCES, masked_validation

    reported = masked_validation("babyberta", 0.15, 0, 0, 8192)
    held = masked_validation("babyberta", 0.15, 0, 0, 8192, "validation")
    assert len(held) == VALIDATION_SENTENCES
    val = md.load_data().val
    assert len(reported) + len(held) == len(val)       # the held-out sentences, split by position
    assert all(np.array_equal(m[2], v) for m, v in zip(reported, val[:len(reported)]))
    assert all(np.array_equal(m[2], v) for m, v in zip(held, val[len(reported):]))
