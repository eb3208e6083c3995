"""Evaluation of causal LMs as lm-evaluation-harness 0.4 does it: batched log-likelihood
scoring, perplexity protocols and the zero-shot / k-shot multiple-choice benchmarks."""
from .benchmarks import BENCHMARKS, Benchmark, Doc, get_benchmark
from .perplexity import PerplexityResult, perplexity
from .scoring import LogLikelihoodScorer, get_rolling_token_windows, make_disjoint_window
from .zeroshot import BenchmarkResult, run_benchmark

__all__ = ["BENCHMARKS", "Benchmark", "BenchmarkResult", "Doc", "LogLikelihoodScorer",
           "PerplexityResult", "get_benchmark", "get_rolling_token_windows",
           "make_disjoint_window", "perplexity", "run_benchmark"]
