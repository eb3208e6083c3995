"""The practical size of a verdict: the smallest difference from the baseline that the board names
better or worse, per (task, metric pattern) (fnmatch, first match wins), in the metric's units.

A significant difference smaller than this reads *within resolution*, not better or worse. The
sizes are stated, not fitted to the results:

- perplexities: 2% of the baseline's (one factor-2 step of the tuning grid's learning rate moves
  softmax's validation perplexity by about 3.9% at the cpu profile, so half a grid step); the
  metrics that are logarithms of a perplexity take the same 2% in their own units: ln 1.02 nats
  for a cross-entropy or loss, log2 1.02 bits for bits per byte;
- accuracies and sequence errors (fractions): 0.02, one item in fifty; Zorro (percent): 2 points;
- raw MSE: 5% of the baseline's; MSE over the zero predictor's: 0.02 (its span is 0 to 1);
- attention weight on a deviant: 10% of the baseline's; its entropy: 0.05 nats.

A record's own declared ``min_effect`` (relative to the baseline's mean) applies where it is
larger. A metric with no rule keeps the record's.
"""
from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass

PERPLEXITY_STEP = 0.02


@dataclass(frozen=True)
class Resolution:
    """``absolute`` in the metric's units, or ``relative`` times the baseline's mean."""

    absolute: float | None = None
    relative: float | None = None
    what: str = ""

    def size(self, baseline_mean: float) -> float:
        if self.absolute is not None:
            return self.absolute
        if self.relative is not None and math.isfinite(baseline_mean):
            return self.relative * abs(baseline_mean)
        return 0.0


_PPL = Resolution(relative=PERPLEXITY_STEP, what="2% perplexity (half a tuning-grid step)")
_NATS = Resolution(absolute=math.log1p(PERPLEXITY_STEP), what="ln 1.02 nats (2% perplexity)")
_BITS = Resolution(absolute=math.log2(1 + PERPLEXITY_STEP), what="log2 1.02 bits (2% perplexity)")
_FRACTION = Resolution(absolute=0.02, what="0.02 (one item in fifty)")

RULES: tuple[tuple[str, str, Resolution], ...] = (
    ("icl_mqar", "accuracy*", _FRACTION),
    ("icl_linear", "mse_over_zero_*", Resolution(absolute=0.02,
                                                  what="0.02 of the zero predictor's MSE")),
    ("icl_linear", "mse_*", Resolution(relative=0.05, what="5% of the baseline's MSE")),
    ("icl_quantifiers", "*error*", _FRACTION),
    ("icl_quantifiers", "*accuracy*", _FRACTION),
    ("icl_quantifiers", "*weight*", Resolution(relative=0.10,
                                               what="10% of the baseline's weight")),
    ("icl_quantifiers", "*entropy*", Resolution(absolute=0.05, what="0.05 nats")),
    ("decoder_lm", "*perplexity*", _PPL),
    ("decoder_lm", "*bits_per_byte*", _BITS),
    ("decoder_lm", "*cross_entropy*", _NATS),
    ("decoder_lm", "*_nll", _NATS),
    ("decoder_lm", "train_loss", _NATS),
    ("decoder_lm", "*acc*", _FRACTION),
    ("encoder_mlm", "zorro*", Resolution(absolute=2.0, what="2 accuracy points")),
    ("encoder_mlm", "*loss", _NATS),
)


def rule_for(task: str, metric: str) -> Resolution | None:
    for t, pattern, rule in RULES:
        if t == task and fnmatch.fnmatchcase(metric, pattern):
            return rule
    return None


def min_effect(task: str, metric: str, declared_relative: float,
               baseline_mean: float) -> tuple[float, str]:
    """The metric's minimum effect in its units and what it is: the larger of the rule's size and
    the record's declared ``min_effect`` (relative to the baseline's mean, absolute when that mean
    is 0 or unknown)."""
    if math.isnan(baseline_mean) or baseline_mean == 0:
        declared = declared_relative
    else:
        declared = declared_relative * abs(baseline_mean)
    rule = rule_for(task, metric)
    if rule is None or rule.size(baseline_mean) <= declared:
        return declared, "the task's declared minimum effect"
    return rule.size(baseline_mean), rule.what
