"""Run a benchmark of :mod:`tasks.lmeval.benchmarks` with a :class:`LogLikelihoodScorer`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .benchmarks import (Benchmark, aggregate, build_requests, fewshot_prefixes, get_benchmark,
                         majority_baseline, score_item, select_items)
from .scoring import LogLikelihoodScorer


@dataclass
class BenchmarkResult:
    """``metrics`` (acc, acc_norm, perplexity), ``items`` per metric (per-item outcomes), the
    sanity ``baseline`` (best constant-position accuracy on the evaluated items) and counts."""

    name: str
    metrics: dict[str, float]
    items: dict[str, list[float]]
    baseline: float | None
    n_items: int
    n_requests: int
    extra: dict = field(default_factory=dict)


def run_benchmark(llm: LogLikelihoodScorer, name: str, *, n_shot: int = 0,
                  limit: int | None = None,
                  progress: Callable[[int, int], None] | None = None) -> BenchmarkResult:
    bench: Benchmark = get_benchmark(name)
    docs = bench.docs()
    indices = select_items(bench, limit)
    prefixes = fewshot_prefixes(bench.kind, docs, indices, n_shot)
    requests, spans = [], []
    for i, prefix in zip(indices, prefixes):
        reqs = build_requests(bench.kind, docs[i], prefix)
        spans.append((len(requests), len(requests) + len(reqs)))
        requests.extend(reqs)
    results = llm.loglikelihood(requests, progress)
    items: dict[str, list[float]] = {}
    for i, (a, b) in zip(indices, spans):
        for key, value in score_item(bench.kind, docs[i], results[a:b]).items():
            items.setdefault(key, []).append(value)
    return BenchmarkResult(name, aggregate(bench, items), items,
                           majority_baseline(bench, [docs[i] for i in indices]),
                           len(indices), len(requests))
