"""The RoBERTa-style encoder: parameter count, positions, padding, bidirectionality, paired init."""
from __future__ import annotations

import pytest
import torch

from tasks.models.encoder import Encoder, EncoderConfig


def hf_roberta_mlm_parameters(vocab, positions, layers, hidden, ffn, types=2):
    """RobertaForMaskedLM.num_parameters() written out from HF's module layout."""
    embeddings = vocab * hidden + positions * hidden + types * hidden + 2 * hidden
    attention = 4 * (hidden * hidden + hidden) + 2 * hidden
    feed_forward = hidden * ffn + ffn + ffn * hidden + hidden + 2 * hidden
    lm_head = hidden * hidden + hidden + 2 * hidden + vocab  # decoder weight tied to the embedding
    return embeddings + layers * (attention + feed_forward) + lm_head


def test_babyberta_parameter_count():
    model = Encoder(EncoderConfig())  # the paper profile: BabyBERTa, 130 positions
    expected = hf_roberta_mlm_parameters(8192, 130, 8, 256, 1024)
    assert model.num_parameters() == expected == 8_524_032
    assert round(model.num_parameters() / 1e6, 2) == 8.52   # docs/tasks.md#paper-sizes
    hf_script = Encoder(EncoderConfig(max_position_embeddings=514))
    assert round(hf_script.num_parameters() / 1e6, 2) == 8.62  # the SSA paper's HF script
    assert model.logits(torch.zeros(1, 256)).shape == (1, 8192)


def test_positions_follow_roberta():
    model = Encoder(EncoderConfig(n_layer=1, n_head=2, n_embd=8, ffn_dim=16, vocab_size=20))
    valid = torch.tensor([[True, True, True, True, False, False]])
    assert model.positions(valid).tolist() == [[2, 3, 4, 5, 1, 1]]


def tiny(scorer="softmax", **kw):
    cfg = EncoderConfig(n_layer=2, n_head=2, n_embd=16, ffn_dim=32, vocab_size=40, dropout=0.0,
                        max_position_embeddings=20, scorer=scorer, **kw)
    model = Encoder(cfg)
    model.init_weights(torch.Generator().manual_seed(0))
    return model.eval()


def test_padding_does_not_change_real_tokens():
    model = tiny()
    short = torch.tensor([[3, 10, 11, 4]])
    batch = torch.tensor([[3, 10, 11, 4, 1, 1], [3, 12, 13, 14, 15, 4]])
    with torch.no_grad():
        alone = model.logits(model(short))
        padded = model.logits(model(batch))
        pad_changed = batch.clone()
        pad_changed[0, 4:] = 7  # garbage under the padding mask
        masked = model.logits(model(pad_changed, batch != 1))
    torch.testing.assert_close(padded[0, :4], alone[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(masked[0, :4], alone[0], atol=1e-5, rtol=1e-5)


def test_attention_is_bidirectional():
    model = tiny()
    a = torch.tensor([[3, 10, 11, 12, 4]])
    b = a.clone()
    b[0, 3] = 20  # change a later token
    with torch.no_grad():
        ha, hb = model(a), model(b)
    assert not torch.allclose(ha[0, 1], hb[0, 1])  # an earlier position sees it


def test_init_is_shared_across_scorers_and_tied():
    a, b = tiny("softmax"), tiny("temperature_softmax", scorer_kwargs={"tau": 2.0})
    shared = dict(a.named_parameters())
    for name, p in b.named_parameters():
        if ".scorer." not in name:
            assert torch.equal(p, shared[name]), name
    assert a.tok_emb.weight[1].abs().sum() == 0 and a.pos_emb.weight[1].abs().sum() == 0
    std = a.tok_emb.weight[2:].std().item()
    assert 0.018 < std < 0.022  # N(0, 0.02^2)
    ids = torch.tensor([[3, 5, 4]])
    with torch.no_grad():
        h = a(ids)
        x = a.head_ln(torch.nn.functional.gelu(a.head_dense(h)))
        torch.testing.assert_close(a.logits(h), x @ a.tok_emb.weight.T + a.head_bias)


def test_scorer_called_in_every_layer():
    model = tiny()
    with torch.no_grad():
        model(torch.tensor([[3, 5, 6, 4]]))
    assert [layer.attn.scorer.calls for layer in model.layers] == [1, 1]


def test_too_long_input_is_an_error():
    model = tiny()
    with pytest.raises(ValueError, match="max_tokens"):
        model(torch.full((1, 19), 5))


def test_every_bidirectional_scorer_runs_in_the_encoder():
    import scorers

    batch = torch.tensor([[3, 10, 11, 4, 1, 1], [3, 12, 13, 14, 15, 4]])
    for name in scorers.list_scorers():
        if scorers.get_scorer_class(name).causal_only:
            continue
        torch.manual_seed(0)
        model = tiny(name)
        with torch.no_grad():
            alone = model.logits(model(batch[:1, :4]))
            padded = model.logits(model(batch))
        torch.testing.assert_close(padded[0, :4], alone[0], atol=1e-4, rtol=1e-4, msg=name)
        model.train()
        model.logits(model(batch)).logsumexp(-1).mean().backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None), name
