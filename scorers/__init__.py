"""Attention scoring functions: a registry, a common interface and an Attention layer.

    import scorers
    scorers.list_scorers("entmax*")
    scorer = scorers.create_scorer("ssa", num_heads=8)
    out = scorer.attend(q, k, v, mask)     # (B, H, L, D), mask True = visible
"""
from .base import LogitsScorer, ModuleScorer, Scorer, causal_mask, padding_mask
from .plugins import PLUGIN_FAILURES, load_entry_points, load_plugin
from .registry import (
    ScorerError,
    canonical_name,
    create_scorer,
    get_scorer_class,
    list_scorers,
    register_scorer,
    resolve_scorers,
    scorer_info,
    scorer_parameters,
)
from . import gates, linear, sinks, softmax, sparse, ssa  # noqa: F401  (registers the built-in scorers)
from . import fast  # noqa: F401  (registers the built-in fast forms)
from .attention import Attention

load_entry_points()

__all__ = [
    "Attention", "LogitsScorer", "ModuleScorer", "PLUGIN_FAILURES", "Scorer", "ScorerError",
    "canonical_name", "causal_mask", "create_scorer", "get_scorer_class", "list_scorers",
    "load_entry_points", "load_plugin", "padding_mask", "register_scorer", "resolve_scorers",
    "scorer_info", "scorer_parameters",
]
