"""Perplexity protocols over tokenized documents (docs/tasks.md#decoder_lm).

``rolling`` (default; lm-eval ``loglikelihood_rolling``): every token of every document is
predicted exactly once, in disjoint windows of the model context ``L``, the first token
conditioned on ``<|endoftext|>``. With ``ll`` the summed log-likelihood::

    token perplexity = exp(-Σll / Σtokens)      word perplexity = exp(-Σll / Σwords)
    byte perplexity  = exp(-Σll / Σbytes)       bits per byte   = -Σll / (Σbytes · ln 2)

``windows`` (the paper's protocol): N = min(1000, eligible) documents with at least L + 1
tokens, drawn with ``numpy.random.default_rng(42)``, one random window of L tokens each;
perplexity = exp(mean cross-entropy over the L - 1 predicted tokens of all windows).

Length extrapolation (``context_perplexities``): the ``rolling`` protocol on the same documents
with windows of m · L tokens for each multiple m, so every m predicts the same tokens, once
each, and only the contexts grow beyond the training length (RoPE as trained, no scaling). The
anchor of a perplexity's normalized score is the add-one unigram perplexity of the training
stream on the same tokens (``unigram_perplexity``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from scorers import ScorerError

from ..data.lm_data import TokenizedDocuments
from .scoring import LogLikelihoodScorer

PROTOCOLS = ("rolling", "windows")
WINDOWS_SEED = 42
WINDOWS_MAX_DOCS = 1000


@dataclass
class PerplexityResult:
    """Corpus metrics, and per-document contributions to ``bits_per_byte`` in ``items`` (their
    mean is the metric: ``item_i = n_docs · (-ll_i) / (Σbytes · ln 2)``)."""

    name: str
    protocol: str
    metrics: dict[str, float]
    items: dict[str, list[float]]
    n_docs: int
    n_tokens: int
    windows: list[tuple[int, int]] | None = None  # windows protocol: (document, start) pairs


def rolling_perplexity(llm: LogLikelihoodScorer, docs: TokenizedDocuments,
                       progress: Callable[[int, int], None] | None = None) -> PerplexityResult:
    lls = np.array(llm.loglikelihood_rolling([t.tolist() for t in docs.tokens], progress))
    n_tokens = int(sum(len(t) for t in docs.tokens))
    nll = -float(lls.sum())
    total_bytes = float(docs.bytes.sum())
    metrics = {"perplexity": math.exp(nll / n_tokens),
               "word_perplexity": math.exp(nll / float(docs.words.sum())),
               "byte_perplexity": math.exp(nll / total_bytes),
               "bits_per_byte": nll / (total_bytes * math.log(2))}
    contributions = (len(lls) * -lls / (total_bytes * math.log(2))).tolist()
    return PerplexityResult(docs.name, "rolling", metrics, {"bits_per_byte": contributions},
                            len(lls), n_tokens)


def windows_perplexity(llm: LogLikelihoodScorer, docs: TokenizedDocuments, *,
                       max_docs: int = WINDOWS_MAX_DOCS, seed: int = WINDOWS_SEED,
                       progress: Callable[[int, int], None] | None = None) -> PerplexityResult:
    L = llm.max_length
    eligible = [i for i, t in enumerate(docs.tokens) if len(t) >= L + 1]
    if not eligible:
        raise ValueError(f"no document of {docs.name} has {L + 1} tokens; the 'windows' protocol "
                         f"needs some (use ppl_protocol='rolling')")
    rng = np.random.default_rng(seed)
    n = min(max_docs, len(eligible))
    chosen = rng.choice(np.array(eligible), size=n, replace=False)
    requests, windows = [], []
    for i in chosen:
        tokens = docs.tokens[int(i)]
        start = int(rng.integers(0, len(tokens) - L + 1))
        window = tokens[start:start + L].tolist()
        requests.append((window[:1], window[1:]))
        windows.append((int(i), start))
    lls = np.array([ll for ll, _ in llm.loglikelihood_tokens(requests, progress)])
    mean_ce = -float(lls.sum()) / (n * (L - 1))
    per_window = (-lls / (L - 1)).tolist()
    return PerplexityResult(docs.name, "windows", {"perplexity": math.exp(mean_ce),
                                                   "mean_cross_entropy": mean_ce},
                            {"mean_cross_entropy": per_window}, n, n * (L - 1), windows)


def perplexity(llm: LogLikelihoodScorer, docs: TokenizedDocuments, protocol: str = "rolling",
               progress: Callable[[int, int], None] | None = None) -> PerplexityResult:
    if protocol == "rolling":
        return rolling_perplexity(llm, docs, progress)
    if protocol == "windows":
        return windows_perplexity(llm, docs, progress=progress)
    raise ValueError(f"unknown perplexity protocol {protocol!r}; use one of {', '.join(PROTOCOLS)}")


def context_perplexities(model: torch.nn.Module, tokenizer, docs: TokenizedDocuments, context: int,
                         multiples, **scorer_kwargs) -> dict[int, PerplexityResult | str]:
    """Rolling perplexity of ``docs`` in windows of ``m * context`` tokens for each ``m``.

    ``model.extend_context(n)`` must let it read ``n`` tokens; ``scorer_kwargs`` go to
    :class:`LogLikelihoodScorer`. A multiple whose length the model's scorers cannot read (a
    scorer defined only up to its ``max_len``) maps to the scorer's error message.
    """
    out: dict[int, PerplexityResult | str] = {}
    for m in multiples:
        length = int(m) * context
        model.extend_context(length)
        llm = LogLikelihoodScorer(model, tokenizer, max_length=length, **scorer_kwargs)
        try:
            out[int(m)] = rolling_perplexity(llm, docs)
        except ScorerError as e:
            out[int(m)] = str(e)
    model.extend_context(context)
    return out


def unigram_perplexity(train_tokens: np.ndarray, docs: TokenizedDocuments, vocab_size: int) -> float:
    """exp(-mean log p(t)) over every token of ``docs``, p the add-one unigram distribution of
    ``train_tokens``: the perplexity of a model that ignores the context."""
    counts = np.bincount(np.asarray(train_tokens, dtype=np.int64), minlength=vocab_size)[:vocab_size]
    logp = np.log(counts + 1.0) - math.log(counts.sum() + vocab_size)
    tokens = np.concatenate([np.asarray(t, dtype=np.int64) for t in docs.tokens])
    return math.exp(-float(logp[tokens].mean()))
