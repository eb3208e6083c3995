"""Length generalization of the decoder: rolling windows of m x L cover the same tokens as the
1x evaluation, the extended model keeps its trained positions, the unigram anchor, and the
headline_metrics config key."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from leaderboard.loading.records import parse_record
from leaderboard.loading.schema import validate_record
from tasks import TaskError, create_task
from tasks.decoder_lm import context_metrics
from tasks.lmeval.perplexity import context_perplexities, unigram_perplexity
from tasks.lmeval.scoring import rolling_requests
from tasks.models.decoder import Decoder, DecoderConfig

from decoder_support import BigramModel, GreedyTokenizer, bigram_table
from leaderboard_fakes import make_record
from test_decoder_lmeval import ALPHABET, toy_documents


class ExtendableBigram(BigramModel):
    """A bigram model that records the contexts it is asked to accept and the lengths it reads."""

    def __init__(self, P):
        super().__init__(P)
        self.contexts: list[int] = []

    def extend_context(self, length: int) -> None:
        self.contexts.append(length)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 31, 64, 100])
def test_windows_of_every_multiple_predict_each_token_once(n):
    tokens = list(range(1, n + 1))
    L = 8
    for m in (1, 2, 4):
        reqs = rolling_requests(tokens, 0, m * L)
        predicted = [t for _, cont in reqs for t in cont]
        assert predicted == tokens
        assert all(len(ctx) + len(cont) - 1 <= m * L for ctx, cont in reqs)
    longest = max(len(c) + len(x) - 1 for c, x in rolling_requests(tokens, 0, 4 * L))
    assert longest == min(n, 4 * L)


def test_context_perplexities_score_the_same_tokens_at_every_multiple():
    tok = GreedyTokenizer(ALPHABET)
    model = ExtendableBigram(bigram_table(tok, {}, seed=3))
    texts = ["the quick brown fox jumps over the lazy dog " * 3, "a b c", "z" * 40]
    docs = toy_documents(tok, texts)
    out = context_perplexities(model, tok, docs, 8, (1, 2, 4))
    # a bigram model's log-likelihood of a token does not depend on the context beyond the
    # previous token, so identical token sets give identical perplexities
    ll = 0.0
    for t in texts:
        ids = [tok.eot_id] + tok.encode(t)
        ll += sum(model.logp(a, b) for a, b in zip(ids[:-1], ids[1:]))
    n_tok = sum(len(tok.encode(t)) for t in texts)
    for m in (1, 2, 4):
        assert out[m].n_tokens == n_tok
        assert out[m].metrics["perplexity"] == pytest.approx(math.exp(-ll / n_tok), rel=1e-5)
    assert model.contexts == [8, 16, 32, 8]
    assert max(len(row) for batch in model.inputs for row in batch) == 32


def tiny_decoder(scorer="softmax", max_len=8, vocab=40):
    cfg = DecoderConfig(vocab_size=vocab, max_len=max_len, n_layer=1, dim=16, n_head=2,
                        n_kv_head=1, ffn_dim=32, scorer=scorer)
    return Decoder(cfg, seed=0).eval()


def test_extend_context_keeps_the_trained_positions_and_reads_longer_inputs():
    model = tiny_decoder()
    ids = torch.randint(0, 40, (2, 32), generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="exceeds the model context"):
        model(ids)
    with torch.no_grad():
        before = model(ids[:, :8])
        model.extend_context(32)
        after = model(ids[:, :8])
        longer = model(ids)
    torch.testing.assert_close(after, before, rtol=0, atol=0)
    torch.testing.assert_close(longer[:, :8], before, rtol=1e-5, atol=1e-6)  # causal
    inv = 1.0 / 10000.0 ** (torch.arange(0, 4, 2, dtype=torch.float64) / 4)
    angle = 31 * inv
    expected = torch.cat([angle, angle]).cos().float()
    torch.testing.assert_close(model.rotary.cos[31], expected)  # same frequencies, no scaling


def test_a_scorer_defined_only_up_to_max_len_is_not_applicable_past_it_with_the_reason():
    tok = GreedyTokenizer(ALPHABET)
    model = tiny_decoder("cosformer", vocab=tok.vocab_size)
    docs = toy_documents(tok, ["the quick brown fox jumps over the lazy dog"])
    out = context_perplexities(model, tok, docs, 8, (1, 2))
    assert math.isfinite(out[1].metrics["perplexity"])
    assert isinstance(out[2], str) and "max_len" in out[2]
    metrics, items, extra = {}, {}, {}
    context_metrics(out, 50.0, metrics, items, extra)
    assert set(metrics) == {"heldout_perplexity_1x", "heldout_bits_per_byte_1x"}
    assert extra["not_applicable"] == {"heldout_perplexity_2x": out[2],
                                       "heldout_bits_per_byte_2x": out[2]}
    assert extra["anchors"] == {"heldout_perplexity_1x": {"floor": 50.0, "ceiling": 1.0}}
    task = create_task("decoder_lm")
    record = make_record("decoder_lm", "cosformer", 0, metrics, track="decoder",
                         specs=task.metric_specs(task.config({})), items=items)
    record["extra"] = extra
    parsed, problems = parse_record(validate_record(record), "cosformer.json")
    assert not problems and parsed.not_applicable == extra["not_applicable"]


def test_unigram_perplexity_matches_a_hand_count():
    tok = GreedyTokenizer("abc")
    docs = toy_documents(tok, ["a", "c"])  # ids: a=1, c=3
    train = np.array([1, 1, 2, 0])  # counts [1, 2, 1, 0] + 1 over 4 + 4 tokens
    expected = math.exp(-(math.log(3 / 8) + math.log(1 / 8)) / 2)
    assert unigram_perplexity(train, docs, 4) == pytest.approx(expected, rel=1e-12)


def test_headline_metrics_replace_the_declared_headline_set():
    task = create_task("decoder_lm")
    chosen = ["heldout_perplexity_1x", "heldout_perplexity_4x"]
    declared = task.metric_specs(task.config({"headline_metrics": chosen}))
    assert sorted(n for n, m in declared.items() if m["headline"]) == chosen
    assert declared["heldout_perplexity_4x"]["log_scale"] and declared["heldout_perplexity_4x"]["ceiling"] == 1
    default = task.metric_specs(task.config({}))
    assert default["heldout_perplexity"]["headline"] and not default["heldout_perplexity_4x"]["headline"]
    with pytest.raises(TaskError, match="heldout_perplexity_3x"):
        task.config({"headline_metrics": ["heldout_perplexity_3x"]})
    with pytest.raises(TaskError, match="context_multiples"):
        task.config({"context_multiples": [1, 3]})
