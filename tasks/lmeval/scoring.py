"""Batched log-likelihood scoring of a causal LM, as lm-evaluation-harness 0.4 (HFLM) does it.

A request is ``(context, continuation)``:

- trailing whitespace of the context moves to the continuation; the continuation tokens are
  ``tok(context + continuation)[len(tok(context)):]``; an empty context becomes the
  end-of-text token; ``add_bos`` (default off) prefixes the end-of-text token to every context;
- the model reads ``(context + continuation)[-(L+1):][:-1]`` (left truncation to the context
  length ``L``) and the last ``len(continuation)`` positions are scored:
  ``ll = sum log p(cont_t | prefix)``, ``is_greedy = all(argmax == cont_t)``.

Requests are sorted by decreasing length, packed into batches of at most ``batch_tokens``
tokens and right-padded: under a causal mask, padding after a sequence cannot change it.
Rolling log-likelihood (perplexity) uses the same path on lm-eval's disjoint windows.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, Iterator, Protocol, Sequence

import numpy as np
import torch
import torch.nn.functional as F

TokenRequest = tuple[list[int], list[int]]


class Tokenizer(Protocol):
    eot_id: int

    def encode(self, text: str) -> list[int]: ...


def get_rolling_token_windows(token_list: Sequence[int], prefix_token: int, max_seq_len: int,
                              context_len: int = 1) -> Iterator[TokenRequest]:
    """lm-eval ``utils.get_rolling_token_windows``: (input tokens, predicted tokens) pairs.

    The first window reads ``[prefix] + tokens[:L-1]`` and predicts ``tokens[:L]``; each next
    window predicts the following ``L - context_len + 1`` tokens from the ``L`` tokens before
    them, the last one left-extended with tokens already scored.
    """
    if not 1 <= context_len <= max_seq_len:
        raise ValueError(f"context_len={context_len} must be in [1, max_seq_len={max_seq_len}]")
    tokens = list(token_list)
    if not tokens:
        return
    pred_len = max_seq_len - context_len + 1
    first = min(max_seq_len, len(tokens))
    yield [prefix_token] + tokens[:first - 1], tokens[:first]
    predicted = first
    while predicted < len(tokens):
        window_pred_len = min(len(tokens) - predicted, pred_len)
        end = predicted + window_pred_len
        yield tokens[max(end - max_seq_len - 1, 0):end - 1], tokens[end - window_pred_len:end]
        predicted += window_pred_len


def make_disjoint_window(pair: TokenRequest) -> TokenRequest:
    """lm-eval ``utils.make_disjoint_window``: the context stops where the prediction starts."""
    a, b = pair
    return a[:len(a) - (len(b) - 1)], b


def rolling_requests(tokens: Sequence[int], prefix_token: int, max_len: int) -> list[TokenRequest]:
    """The disjoint (context, continuation) token requests that score every token exactly once."""
    return [make_disjoint_window(w)
            for w in get_rolling_token_windows(tokens, prefix_token, max_len, context_len=1)]


def split_long_continuation(context: list[int], continuation: list[int],
                            max_len: int) -> list[TokenRequest]:
    """``[(context, continuation)]``, or, for a continuation longer than ``max_len`` (where lm-eval
    stops with an assertion), consecutive pieces of at most ``max_len`` tokens, each scored after
    everything before it (left-truncated like any request); the summed ll is the continuation's."""
    if len(continuation) <= max_len:
        return [(context, continuation)]
    tokens = context + continuation
    start = len(context)
    return [(tokens[:a], tokens[a:a + max_len]) for a in range(start, len(tokens), max_len)]


class LogLikelihoodScorer:
    """lm-eval's ``loglikelihood`` / ``loglikelihood_rolling`` over ``model(ids) -> logits``.

    ``model`` maps a LongTensor (B, T) to logits (B, T, V) under a causal mask; ``tokenizer``
    has ``encode(text)`` and ``eot_id``; ``max_length`` is the model's context ``L``.
    """

    def __init__(self, model: Callable[[torch.Tensor], torch.Tensor], tokenizer: Tokenizer, *,
                 max_length: int, batch_tokens: int = 8192, device: torch.device | str = "cpu",
                 add_bos: bool = False, autocast_dtype: torch.dtype | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.batch_tokens = max(batch_tokens, max_length)
        self.device = torch.device(device)
        self.add_bos = add_bos
        self.autocast_dtype = autocast_dtype
        self.prefix_token_id = tokenizer.eot_id
        self.split_requests = 0  # continuations longer than max_length, scored in pieces

    def encode_pair(self, context: str, continuation: str) -> TokenRequest:
        if context == "":
            return [self.prefix_token_id], self.tokenizer.encode(continuation)
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces > 0:
            continuation = context[-n_spaces:] + continuation
            context = context[:-n_spaces]
        whole = self.tokenizer.encode(context + continuation)
        context_enc = self.tokenizer.encode(context)
        continuation_enc = whole[len(context_enc):]
        if self.add_bos:
            context_enc = [self.prefix_token_id] + context_enc
        return context_enc, continuation_enc

    def loglikelihood(self, requests: Sequence[tuple[str, str]],
                      progress: Callable[[int, int], None] | None = None) -> list[tuple[float, bool]]:
        """``(sum log p(continuation | context), is_greedy)`` for each (context, continuation)."""
        return self.loglikelihood_tokens([self.encode_pair(c, x) for c, x in requests], progress)

    def loglikelihood_rolling(self, token_lists: Sequence[Sequence[int]],
                              progress: Callable[[int, int], None] | None = None) -> list[float]:
        """Total log-likelihood of each token list, every token predicted once (rolling windows)."""
        windows, owner = [], []
        for i, tokens in enumerate(token_lists):
            for req in rolling_requests(tokens, self.prefix_token_id, self.max_length):
                windows.append(req)
                owner.append(i)
        totals = [0.0] * len(token_lists)
        for i, (ll, _) in zip(owner, self.loglikelihood_tokens(windows, progress)):
            totals[i] += ll
        return totals

    def loglikelihood_tokens(self, requests: Sequence[TokenRequest],
                             progress: Callable[[int, int], None] | None = None
                             ) -> list[tuple[float, bool]]:
        """Score token requests in length-sorted batches; results in the order of ``requests``."""
        L = self.max_length
        prepared, owner = [], []
        for i, (ctx, cont) in enumerate(requests):
            if not ctx or not cont:
                raise ValueError(f"request {i} has an empty {'context' if not ctx else 'continuation'}"
                                 f" after tokenization; every request needs both")
            for part_ctx, part in split_long_continuation(list(ctx), list(cont), L):
                inp = (part_ctx + part)[-(L + 1):][:-1]
                prepared.append((len(owner), inp, part))
                owner.append(i)
        self.split_requests += len(owner) - len(requests)
        prepared.sort(key=lambda r: (-len(r[1]), tuple(r[1])))
        parts: list[tuple[float, bool] | None] = [None] * len(owner)
        done = 0
        for batch in self._batches(prepared):
            width = len(batch[0][1])
            ids = torch.zeros(len(batch), width, dtype=torch.long)
            for row, (_, inp, _) in enumerate(batch):
                ids[row, :len(inp)] = torch.tensor(inp, dtype=torch.long)
            rows = [row for row, (_, _, cont) in enumerate(batch) for _ in cont]
            cols = [p for _, inp, cont in batch for p in range(len(inp) - len(cont), len(inp))]
            target = torch.tensor([t for _, _, cont in batch for t in cont], device=self.device)
            with torch.no_grad(), self._autocast():
                logits = self.model(ids.to(self.device))
            with torch.no_grad():
                logp = F.log_softmax(logits[rows, cols].float(), dim=-1)
                token_ll = logp.gather(-1, target[:, None])[:, 0].double().cpu().numpy()
                hit = (logp.argmax(-1) == target).cpu().numpy()
            lengths = np.array([len(cont) for _, _, cont in batch])
            ends = np.cumsum(lengths)
            for (i, _, _), a, b in zip(batch, ends - lengths, ends):
                parts[i] = (float(token_ll[a:b].sum()), bool(hit[a:b].all()))
            done += len(batch)
            if progress is not None:
                progress(done, len(prepared))
        results = [(0.0, True) for _ in requests]
        for i, (ll, greedy) in zip(owner, parts):
            results[i] = (results[i][0] + ll, results[i][1] and greedy)
        return results

    def _batches(self, prepared):
        batch: list = []
        for item in prepared:
            width = len(batch[0][1]) if batch else len(item[1])
            if batch and (len(batch) + 1) * width > self.batch_tokens:
                yield batch
                batch = []
            batch.append(item)
        if batch:
            yield batch

    def _autocast(self):
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)
